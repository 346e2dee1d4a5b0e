"""The completion gate in the agent's loop: `ledger hook <event>` driven as
Claude Code and Codex drive it, with their payload shapes (tests/vectors/hooks), a real
repository, a real ledger and the real CLI in subprocesses."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    GIT_ENV,
    LEDGER,
    RESIDENT_ENV,
    RUNTIME_ENV,
    contract_bytes,
    flaky_command,
    git,
    make_repo,
    run_cli,
    stop_resident_servers,
)
from ledger import HOOK_EVENTS, folds_case, hook_command, project_relative, run_hook

ROOT = Path(__file__).resolve().parent.parent
VECTORS = Path(__file__).parent / "vectors" / "hooks"
TOOLS = """
protected_paths = ["secrets/*", ".ledger/contracts/*"]
secret_env = ["DEPLOY_TOKEN"]

[tools]
denied = ["WebFetch"]
requires_human = ["Deploy"]

[tools.schemas.Bash]
type = "object"
required = ["command"]
properties = { command = { type = "string", not = { pattern = "rm -rf" } } }
"""
CHECK = '\n[[checks]]\nid = "says-fixed"\ntype = "file_contains"\npath = "app.py"\nliteral = "fixed"\n'


def _fill(value: Any, fill: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in fill:
        return fill[value[1:-1]]
    if isinstance(value, str):
        for k, v in fill.items():
            if isinstance(v, str):
                value = value.replace("{%s}" % k, v)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, fill) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, fill) for v in value]
    return value


def payload(agent: str, event: str, **fill: Any) -> dict[str, Any]:
    doc = json.loads((VECTORS / agent / (event + ".json")).read_text())
    defaults = {"session": "sess-1", "transcript": "/nonexistent/transcript.jsonl", "stop_hook_active": False}
    return dict(_fill(doc, {**defaults, **fill}))


class Box:
    """An agent's working copy: a repository on branch task-1, its ledger, and only the agent's key."""

    def __init__(self, tmp: Path, repair_attempts: int = 3) -> None:
        self.repo = make_repo(tmp / "repo")
        git(self.repo, "checkout", "-qb", "task-1")
        self.env = {"RECEIPT_LEDGER_KEYS": str(tmp / "keys"), **GIT_ENV, "DEPLOY_TOKEN": "tok-8c1f55e0a9d2"}
        contract = contract_bytes(extra=CHECK, top=TOOLS.split("\n[tools]")[0]).replace(
            b"check_timeout_s = 20", b"check_timeout_s = 20\nrepair_attempts = %d" % repair_attempts
        )
        contract = contract.replace(b"\n[budgets]", TOOLS[TOOLS.index("[tools]") :].encode() + b"\n[budgets]", 1)
        for args in (("init",), ("keys", "generate", "agent", "--role", "agent")):
            assert run_cli(*args, cwd=self.repo, env=self.env).returncode == 0
        (self.repo / ".ledger" / "contracts").mkdir()
        (self.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract)

    def hook(
        self, event: str, doc: dict[str, Any] | bytes, run_in: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return self.hook_in(event, doc, run_in, env)

    def hook_in(
        self, event: str, doc: dict[str, Any] | bytes, run_in: Path | None, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        """Run the hook as the harness does: in the project (or ``run_in``), the payload on stdin."""
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        return subprocess.run(
            [*LEDGER, "hook", event],
            input=data.decode("utf-8", "replace"),
            cwd=run_in or self.repo,
            env={**os.environ, **self.env, **env},
            capture_output=True,
            text=True,
            timeout=300,
        )

    def trace(self, session: str = "sess-1") -> list[dict[str, Any]]:
        path = self.repo / ".ledger" / "traces" / (session + ".jsonl")
        lines = path.read_bytes().splitlines()
        prev = "0" * 64
        for raw in lines:  # the chain: each line names the SHA-256 of the one before
            assert json.loads(raw)["prev"] == prev
            prev = hashlib.sha256(raw).hexdigest()
        return [json.loads(raw) for raw in lines]

    def events(self) -> list[dict[str, Any]]:
        log = json.loads(run_cli("log", "--task", "TASK-1", "--json", cwd=self.repo, env=self.env).stdout)
        out = []
        for row in log:
            if row["kind"] == "event":
                shown = json.loads(run_cli("show", row["hash"], "--json", cwd=self.repo, env=self.env).stdout)
                out.append(shown["body"])
        return out


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def _decision(res: subprocess.CompletedProcess[str]) -> tuple[str, str] | None:
    assert res.returncode == 0, res.stderr
    if not res.stdout.strip():
        return None
    out = json.loads(res.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out["permissionDecisionReason"]


def test_pre_tool_use_allows_denies_and_asks_as_the_contract_says(box: Box) -> None:
    cwd = str(box.repo)

    def cc(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return payload("claude-code", "pre-tool-use", cwd=cwd, tool=tool, tool_input=args)

    assert _decision(box.hook("pre-tool-use", cc("Read", {"file_path": cwd + "/app.py"}))) is None
    denied = _decision(box.hook("pre-tool-use", cc("WebFetch", {"url": "https://example.com"})))
    assert denied is not None and denied[0] == "deny" and "tool WebFetch is denied" in denied[1]
    protected = _decision(
        box.hook("pre-tool-use", cc("Write", {"file_path": cwd + "/secrets/key.pem", "content": "x"}))
    )
    assert protected is not None and protected[0] == "deny" and "secrets/key.pem, a protected path" in protected[1]
    contract = _decision(box.hook("pre-tool-use", cc("Edit", {"file_path": cwd + "/.ledger/contracts/TASK-1.toml"})))
    assert contract is not None and contract[0] == "deny"
    asked = _decision(box.hook("pre-tool-use", cc("Deploy", {"target": "prod"})))
    assert asked is not None and asked[0] == "ask" and "needs a human" in asked[1]
    # Codex sends its shell tool as Bash with a command: the argument schema applies.

    def cx(command: str) -> dict[str, Any]:
        return payload("codex", "pre-tool-use", cwd=cwd, command=command)

    assert _decision(box.hook("pre-tool-use", cx("pytest -q"))) is None
    schema = _decision(box.hook("pre-tool-use", cx("rm -rf /")))
    assert schema is not None and schema[0] == "deny" and "arguments fail the Bash schema" in schema[1]
    # Every call that did not simply pass is in the session's trace, in order.
    assert [(r["tool"], r["decision"]) for r in box.trace()] == [
        ("WebFetch", "rejected"),
        ("Write", "rejected"),
        ("Edit", "rejected"),
        ("Deploy", "requires_human"),
        ("Bash", "rejected"),
    ]


def test_post_tool_use_appends_a_redacted_hash_chained_trace(box: Box) -> None:
    cwd = str(box.repo)
    args = {"command": "curl -H 'Authorization: tok-8c1f55e0a9d2' https://deploy.example"}
    for agent in ("claude-code", "codex"):
        doc = payload(agent, "post-tool-use", cwd=cwd, tool="Bash", tool_input=args, command=args["command"])
        res = box.hook("post-tool-use", doc)
        assert res.returncode == 0 and res.stdout == "", res.stderr
    rows = box.trace()
    assert len(rows) == 2 and all(r["event"] == "PostToolUse" and r["decision"] == "executed" for r in rows)
    text = (box.repo / ".ledger" / "traces" / "sess-1.jsonl").read_text()
    assert "tok-8c1f55e0a9d2" not in text and "[REDACTED:env:DEPLOY_TOKEN]" in text
    # the outcome is kept as a digest only
    doc = payload("claude-code", "post-tool-use", cwd=cwd, tool="Bash", tool_input=args)
    response = json.dumps(doc["tool_response"], sort_keys=True, separators=(",", ":"))
    assert rows[0]["output_sha256"] == hashlib.sha256(response.encode()).hexdigest()
    assert "filePath" not in text


def test_the_repair_loop_as_an_agent_drives_it(box: Box) -> None:
    """A script plays the agent: it stops, is told which check fails, fixes only that,
    commits, and stops again. The claims, the trace and the status tell the story."""
    cwd = str(box.repo)
    start = box.hook("session-start", payload("claude-code", "session-start", cwd=cwd))
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert start.returncode == 0 and "task TASK-1" in context
    blocks: list[str] = []
    active = False
    for _turn in range(6):
        edit = {"file_path": cwd + "/app.py", "content": "print('hello, world')\n"}
        if blocks and "says-fixed" in blocks[-1]:
            edit["content"] = "print('fixed')\n"
        pre = box.hook("pre-tool-use", payload("claude-code", "pre-tool-use", cwd=cwd, tool="Write", tool_input=edit))
        assert _decision(pre) is None
        (box.repo / "app.py").write_text(edit["content"])
        git(box.repo, "commit", "-qam", "TASK-1: attempt")
        box.hook("post-tool-use", payload("claude-code", "post-tool-use", cwd=cwd, tool="Write", tool_input=edit))
        res = box.hook("stop", payload("claude-code", "stop", cwd=cwd, stop_hook_active=active))
        assert res.returncode == 0, res.stderr
        if not res.stdout.strip():
            break  # allowed to stop
        answer = json.loads(res.stdout)
        assert answer["decision"] == "block"
        blocks.append(answer["reason"])
        active = True
    assert len(blocks) == 1 and "- says-fixed: no match in app.py" in blocks[0] and "attempt 1 of 3" in blocks[0]
    claims = [e for e in box.events() if e["type"] == "answer_proposed"]
    outcomes = [dict(c["fields"])["outcome"] for c in claims]
    assert outcomes == ["blocked", "stopped"]
    assert (
        dict(claims[-1]["fields"])["advisory"] == "pass" and dict(claims[-1]["fields"])["model"] == "claude-sonnet-4-5"
    )
    assert len(box.trace()) == 2 and all(r["tool"] == "Write" for r in box.trace())
    end = box.hook("session-end", payload("claude-code", "session-end", cwd=cwd))
    assert end.returncode == 0, end.stderr
    assert [e["type"] for e in box.events()][-1] == "model_stopped"
    status = json.loads(run_cli("status", "TASK-1", "--json", cwd=box.repo, env=box.env).stdout)
    # Verifying, not done: the advisory pass in the agent's box is no receipt.
    assert status["tasks"]["TASK-1"]["state"] == "VERIFYING", status
    # The blocked Stop was a repair step, not a claim: only the final one waits for CI.
    assert (status["nudge"]["claims"], status["nudge"]["unverified"]) == (1, 1), status["nudge"]


@pytest.mark.parametrize("sets_the_flag", [True, False])
def test_the_budget_ends_a_loop_that_cannot_pass_and_the_claim_is_unverified(
    tmp_path: Path, sets_the_flag: bool
) -> None:
    """The loop ends after repair_attempts blocks, also under a harness that never sets
    stop_hook_active (within one turn, which Codex names, the count goes on)."""
    box = Box(tmp_path, repair_attempts=2)
    cwd = str(box.repo)
    answers = []
    for i in range(4):
        active = i > 0 and sets_the_flag
        doc = payload("codex", "stop", cwd=cwd, stop_hook_active=active, message="All done, tests pass!")
        res = box.hook("stop", doc)
        assert res.returncode == 0, res.stderr
        answers.append(json.loads(res.stdout)["decision"] if res.stdout.strip() else "stop")
        if answers[-1] == "stop":
            assert "repair budget of 2 spent" in res.stderr
            break
    assert answers == ["block", "block", "stop"]
    claims = [dict(e["fields"]) for e in box.events() if e["type"] == "answer_proposed"]
    assert [c["outcome"] for c in claims] == ["blocked", "blocked", "budget-spent"]
    assert claims[-1]["verified"] == "no" and claims[-1]["model"] == "gpt-5.1-codex"
    status = json.loads(run_cli("status", "--json", cwd=box.repo, env=box.env).stdout)
    assert status["nudge"]["unverified"] >= 1


def test_a_malformed_payload_never_passes_silently_and_never_shows_a_traceback(box: Box) -> None:
    pre = box.hook("pre-tool-use", b"{not json")
    assert _decision(pre) == ("deny", pre and json.loads(pre.stdout)["hookSpecificOutput"]["permissionDecisionReason"])
    assert "cannot evaluate this call" in pre.stdout
    stop = box.hook("stop", b"[1, 2]")
    assert stop.returncode == 0 and json.loads(stop.stdout)["decision"] == "block"
    assert "cannot evaluate" in json.loads(stop.stdout)["reason"]
    post = box.hook("post-tool-use", b"\xff\xfe")
    assert post.returncode == 1 and post.stderr.count("\n") == 1 and post.stdout == ""
    for res in (pre, stop, post):
        assert "Traceback" not in res.stderr
    # A contract that does not parse denies a tool call rather than waving it through.
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_text("version = 1\n[tools\n")
    broken = box.hook(
        "pre-tool-use", payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="Read", tool_input={})
    )
    decided = _decision(broken)
    assert decided is not None and decided[0] == "deny" and "does not parse" in decided[1]


def test_without_a_task_the_hooks_say_so_once_and_do_nothing(box: Box) -> None:
    git(box.repo, "checkout", "-qb", "no-ticket")
    start = box.hook("session-start", payload("claude-code", "session-start", cwd=str(box.repo)))
    assert "no task selected" in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    doc = payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="WebFetch", tool_input={})
    quiet = box.hook("pre-tool-use", doc)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    # `ledger task start` selects one for this working copy, and the policy applies again.
    assert run_cli("task", "start", "TASK-1", cwd=box.repo, env=box.env).returncode == 0
    assert _decision(box.hook("pre-tool-use", doc)) is not None


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_install_then_uninstall_leaves_other_hooks_untouched(agent: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys"), "HOME": str(tmp_path / "home")}
    path = repo / (".claude/settings.json" if agent == "claude-code" else ".codex/hooks.json")
    path.parent.mkdir(parents=True)
    theirs: dict[str, Any] = {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint-bash.sh"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
        }
    }
    if agent == "claude-code":
        theirs["permissions"] = {"allow": ["Bash(npm test:*)"]}
    path.write_text(json.dumps(theirs, indent=2))
    first = run_cli("hook", "install", "--agent", agent, "--json", cwd=repo, env=env)
    assert first.returncode == 0, first.stderr
    added = json.loads(first.stdout)["added"]
    assert "PreToolUse" in added and "Stop" in added and ("SessionEnd" in added) == (agent == "claude-code")
    installed = json.loads(path.read_text())
    assert installed["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert any(h["command"] == hook_command("stop") for g in installed["hooks"]["Stop"] for h in g["hooks"])
    again = run_cli("hook", "install", "--agent", agent, "--json", cwd=repo, env=env)
    assert json.loads(again.stdout)["added"] == [] and json.loads(path.read_text()) == installed
    removed = run_cli("hook", "uninstall", "--agent", agent, "--json", cwd=repo, env=env)
    assert removed.returncode == 0 and json.loads(path.read_text()) == theirs


def test_the_shipped_plugin_calls_the_same_commands_install_writes(tmp_path: Path) -> None:
    from ledger import install_hooks, plugin_dir

    written = tmp_path / "settings.json"
    install_hooks(written, "claude-code")
    shipped = json.loads((plugin_dir() / "hooks" / "hooks.json").read_text())
    # The same events, matchers and time-outs; each command runs through `ledger` on PATH
    # instead of this interpreter's path.
    installed = json.loads(written.read_text())["hooks"]
    assert shipped["hooks"].keys() == installed.keys()
    for name, groups in installed.items():
        event = next(e for e, n in HOOK_EVENTS.items() if n == name)
        for group in groups:
            for handler in group["hooks"]:
                assert handler["command"] == hook_command(event)
                handler["command"] = hook_command(event, runner="ledger")
    assert shipped["hooks"] == installed
    assert json.loads((plugin_dir() / ".claude-plugin" / "plugin.json").read_text())["name"] == "receipt-ledger"


def test_install_warns_when_the_agent_could_read_a_signing_key(box: Box) -> None:
    assert run_cli("keys", "generate", "ci", "--role", "deterministic", cwd=box.repo, env=box.env).returncode == 0
    res = run_cli("hook", "install", "--agent", "claude-code", cwd=box.repo, env=box.env)
    assert res.returncode == 0 and "warning: private key" in res.stderr and "(deterministic)" in res.stderr
    assert "agent" not in res.stderr.split("warning:")[1].split("(")[0]  # the agent's own key is expected there


@pytest.mark.parametrize("path", sorted(VECTORS.glob("*/*.json")), ids=lambda p: "%s-%s" % (p.parent.name, p.stem))
def test_every_payload_fixture_gets_a_well_formed_answer(path: Path, tmp_path: Path) -> None:
    """Each agent's payload for each event, unknown extra field included: the hook answers
    in the agent's format, exits 0 or 1 (never 2, which would block by accident), and
    never prints a traceback."""
    box = Box(tmp_path)
    (box.repo / "app.py").write_text("print('fixed')\n")
    git(box.repo, "commit", "-qam", "TASK-1: fixed")
    doc = payload(
        path.parent.name,
        path.stem,
        cwd=str(box.repo),
        tool="Read",
        tool_input={"file_path": str(box.repo / "app.py")},
        command="pytest -q",
        message="Done: app.py says fixed.",
    )
    res = box.hook(path.stem, doc)
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr
    if res.stdout.strip():
        answer = json.loads(res.stdout)
        assert set(answer) <= {"decision", "reason", "hookSpecificOutput", "systemMessage"}
        if "hookSpecificOutput" in answer:
            assert answer["hookSpecificOutput"]["hookEventName"] == doc["hook_event_name"]
    if path.stem in ("stop", "subagent-stop"):
        assert res.stdout == "" and "claim recorded" in res.stderr  # the checks pass: it may stop


def test_a_claim_that_cannot_be_recorded_is_said_in_one_line_never_as_a_failing_check(tmp_path: Path) -> None:
    # Issue 46: the agent cannot repair where its key lives. The checks pass, so it may stop;
    # the user and the agent are told once that no claim was recorded, and how to fix it.
    box = Box(tmp_path, repair_attempts=1)
    (box.repo / "app.py").write_text("print('fixed')\n")
    git(box.repo, "commit", "-qam", "TASK-1: fixed")
    (box.repo / ".ledger" / "ledger.db").write_bytes(b"not a database")  # a broken ledger
    first = box.hook("stop", payload("claude-code", "stop", cwd=str(box.repo)))
    answer = json.loads(first.stdout)
    assert first.returncode == 0 and set(answer) == {"systemMessage"}, answer  # no "decision": it may stop
    (warning,) = [line for line in first.stderr.splitlines() if "could not be recorded" in line]
    assert answer["systemMessage"] == warning and "LEDGER_AGENT_KEY" in warning
    assert "no claim recorded; the checks pass" in first.stderr and "Traceback" not in first.stderr


def test_a_failing_stop_without_its_key_names_the_checks_and_the_key_apart(tmp_path: Path) -> None:
    box = Box(tmp_path, repair_attempts=2)
    (box.repo / "app.py").write_text("print('not yet')\n")
    git(box.repo, "commit", "-qam", "TASK-1: wip")
    env = {"LEDGER_AGENT_KEY": "nobody-has-this-key"}
    first = box.hook_in("stop", payload("claude-code", "stop", cwd=str(box.repo)), None, env)
    answer = json.loads(first.stdout)
    assert answer["decision"] == "block" and "(hook)" not in answer["reason"], answer
    assert "check(s) of its contract fail" in answer["reason"]
    assert "could not be recorded: no private key 'nobody-has-this-key'" in answer["systemMessage"]


def test_parallel_tool_calls_append_one_unbroken_chain(box: Box) -> None:
    """An agent may run tools in parallel: eight PostToolUse hooks at once still leave one
    chain with eight lines (the append holds a lock on the trace)."""
    docs = [
        payload("claude-code", "post-tool-use", cwd=str(box.repo), tool="Read", tool_input={"file_path": "f%d" % i})
        for i in range(8)
    ]
    procs = [
        subprocess.Popen(
            [*LEDGER, "hook", "post-tool-use"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=box.repo,
            env={**os.environ, **box.env},
        )
        for _ in docs
    ]
    for proc, doc in zip(procs, docs, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(doc).encode())
        proc.stdin.close()
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    rows = box.trace()  # checks every prev link
    assert [r["seq"] for r in rows] == list(range(1, 9))
    assert sorted(r["arguments"]["file_path"] for r in rows) == ["f%d" % i for i in range(8)]


def test_a_contract_without_checks_is_no_advisory_pass(box: Box) -> None:
    """The signed tier fails a code task whose contract declares no checks (§6a): the
    in-loop check must not let its agent stop on an empty table."""
    path = box.repo / ".ledger" / "contracts" / "TASK-1.toml"
    text = path.read_text()
    path.write_text(text[: text.index("[[checks]]")])
    res = box.hook("stop", payload("claude-code", "stop", cwd=str(box.repo)))
    answer = json.loads(res.stdout)
    assert answer["decision"] == "block" and "the contract declares no checks" in answer["reason"]


def _write(box: Box, cwd: str, file_path: Any, run_in: Path | None = None, **env: str) -> tuple[str, str] | None:
    doc = payload("claude-code", "pre-tool-use", cwd=cwd, tool="Write", tool_input={"file_path": file_path})
    return _decision(box.hook("pre-tool-use", doc, run_in, **env))


def test_a_write_to_a_protected_path_by_another_spelling_is_denied(box: Box, tmp_path: Path) -> None:
    """Issue 22, case 6: paths are resolved, not compared as strings."""
    repo = str(box.repo)
    (box.repo / "sub").mkdir()
    link = tmp_path / "linked-repo"
    link.symlink_to(box.repo)
    (box.repo / "docs").symlink_to(box.repo / ".ledger")
    spellings = {
        "relative-from-a-subfolder": (repo + "/sub", "../.ledger/contracts/TASK-1.toml"),
        "dot-dot-inside": (repo, repo + "/sub/../.ledger/contracts/TASK-1.toml"),
        "through-a-symlinked-repository": (str(link), str(link) + "/.ledger/contracts/TASK-1.toml"),
        "through-a-symlink-in-the-repository": (repo, repo + "/docs/contracts/TASK-1.toml"),
        "relative-from-the-root": (repo, ".ledger/contracts/TASK-1.toml"),
    }
    for name, (cwd, path) in spellings.items():
        decided = _write(box, cwd, path)
        assert decided is not None and decided[0] == "deny", (name, decided)
        assert ".ledger/contracts/TASK-1.toml, a protected path" in decided[1], (name, decided)
    assert _write(box, repo + "/sub", "../app.py") is None  # an ordinary file stays allowed


def test_a_payload_whose_cwd_lies_outside_the_project_cannot_steer_a_write(box: Box, tmp_path: Path) -> None:
    """Issue 22, case 6: the project comes from where the hook runs, never from the payload;
    a write from a cwd outside it is denied, and unknown shapes of a write are denied."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = _write(box, str(elsewhere), str(box.repo / ".ledger" / "contracts" / "TASK-1.toml"))
    assert outside is not None and outside[0] == "deny" and "outside the project" in outside[1], outside
    # Relative to that cwd, the write would land outside the project; still denied.
    assert (_write(box, str(elsewhere), "x.py") or ("", ""))[0] == "deny"
    for shape in (None, "", ["a.py"], {"path": "a.py"}):
        odd = _write(box, str(box.repo), shape)
        assert odd is not None and odd[0] == "deny" and "names no file" in odd[1], (shape, odd)
    # The harness's own statement of the project wins over the process's directory: run from
    # outside the project, the hook finds the contract only through CLAUDE_PROJECT_DIR.
    contract = ".ledger/contracts/TASK-1.toml"
    assert _write(box, str(box.repo), contract, run_in=elsewhere) is None  # no project there: nothing checked
    named = _write(box, str(box.repo), contract, run_in=elsewhere, CLAUDE_PROJECT_DIR=str(box.repo))
    assert named is not None and named[0] == "deny", named


def test_case_is_folded_where_the_file_system_folds_it(box: Box) -> None:
    """Issue 22, case 6: on a case-insensitive file system `.LEDGER/Contracts/...` is the
    contract file. This machine's file system is case-sensitive, so the probe says so and
    the folding rule is exercised directly."""
    assert folds_case(box.repo) is False
    repo = box.repo.resolve()
    protected = (".ledger/contracts/*",)
    odd = {"file_path": ".LEDGER/Contracts/TASK-1.toml"}
    args, globs = project_relative(repo, repo, "Write", odd, protected, True)
    assert any(fnmatch.fnmatchcase(args["file_path"], g) for g in globs)
    args, globs = project_relative(repo, repo, "Write", odd, protected, False)
    assert not any(fnmatch.fnmatchcase(args["file_path"], g) for g in globs)


def test_a_task_without_a_contract_is_blocked_and_a_removed_one_is_read_from_main(box: Box) -> None:
    """Issue 43: no contract is not an open door, and deleting one's own contract opens none."""
    cwd = str(box.repo)
    fetch = payload("claude-code", "pre-tool-use", cwd=cwd, tool="WebFetch", tool_input={"url": "https://x.invalid"})
    read = payload("claude-code", "pre-tool-use", cwd=cwd, tool="Read", tool_input={"file_path": cwd + "/app.py"})
    own = box.repo / ".ledger" / "contracts" / "TASK-1.toml"
    text = own.read_bytes()
    own.unlink()
    blocked = _decision(box.hook("pre-tool-use", read))
    assert blocked is not None and blocked[0] == "deny" and "task TASK-1 has no contract" in blocked[1]
    # Committed on main, the contract holds whatever the agent's tree says: WebFetch stays denied.
    git(box.repo, "checkout", "-q", "main")
    own.write_bytes(text)
    git(box.repo, "add", "-f", str(own))
    git(box.repo, "commit", "-qm", "the contract of TASK-1")
    git(box.repo, "checkout", "-q", "task-1")  # a branch of main from before: it holds no contract
    assert not own.exists()
    assert _decision(box.hook("pre-tool-use", read)) is None
    denied = _decision(box.hook("pre-tool-use", fetch))
    assert denied is not None and denied[0] == "deny" and "tool WebFetch is denied" in denied[1]


def test_the_installed_hook_fails_closed_where_ledger_cannot_be_run(box: Box, tmp_path: Path) -> None:
    # An agent treats a hook's exit other than 2 as a non-blocking error: a hook whose
    # `ledger` cannot be found (127) would silently let every tool call through.
    payload = json.dumps(
        {"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Read", "cwd": str(box.repo)}
    )
    off_path = {**box.env, "PATH": str(tmp_path / "empty-bin")}  # `ledger` is not on it

    def run_installed(command: str) -> subprocess.CompletedProcess[str]:
        """The hook command as the agent runs it: through a shell, the payload on stdin."""
        return subprocess.run(
            ["/bin/sh", "-c", command],
            input=payload,
            cwd=box.repo,
            env=off_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    installed = run_installed(hook_command("pre-tool-use"))
    assert installed.returncode == 0, installed.stderr  # the absolute interpreter needs no PATH
    for runner in ("ledger", shlex.quote(str(tmp_path / "gone" / "python")) + " -m ledger"):
        broken = run_installed(hook_command("pre-tool-use", runner=runner))
        assert broken.returncode == 2 and "blocking until it can" in broken.stderr, (runner, broken.stderr)


def test_the_ledgers_files_and_the_agents_settings_are_protected_whatever_the_contract_says(box: Box) -> None:
    # The README's example contract names no protected paths and no tool policy: the agent
    # still cannot write the ledger, its contracts or the hook settings that run the gate.
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract_bytes())
    repo = str(box.repo)
    for path in (
        ".ledger/ledger.db",
        ".ledger/contracts/TASK-1.toml",
        ".ledger/allowed_signers",
        ".claude/settings.json",
        ".codex/hooks.json",
    ):
        decided = _write(box, repo, path)
        assert decided is not None and decided[0] == "deny" and "a protected path" in decided[1], (path, decided)
    assert _write(box, repo, "app.py") is None


def test_a_failing_stop_shows_the_agent_the_failing_tests_own_output(box: Box) -> None:
    # "tests: exit code 1" tells an agent nothing to fix; the test runner's last lines do.
    command = (
        "import sys; print('collected 2 items'); "
        "print('FAILED test_app.py::test_greeting - AssertionError: hi != Hello'); sys.exit(1)"
    )
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract_bytes(command=command))
    res = box.hook("stop", payload("claude-code", "stop", cwd=str(box.repo), stop_hook_active=False))
    reason = json.loads(res.stdout)["reason"]
    assert "- tests: exit code 1; its last output:" in reason, reason
    assert "    FAILED test_app.py::test_greeting - AssertionError: hi != Hello" in reason, reason


def test_the_trace_chains_on_from_its_last_line_however_long(box: Box) -> None:
    # A hook reads only the trace's last line (not the whole session) to chain the next:
    # a line far longer than one read, and the line after it, still chain and count.
    cwd = str(box.repo)
    big = {"file_path": cwd + "/app.py", "content": "x = 1\n" * 20000}
    for _ in range(3):
        res = box.hook("post-tool-use", payload("claude-code", "post-tool-use", cwd=cwd, tool="Write", tool_input=big))
        assert res.returncode == 0, res.stderr
    rows = box.trace()  # checks every line's prev against the SHA-256 of the line before
    assert [row["seq"] for row in rows] == [1, 2, 3] and len(rows) == 3


def test_a_broken_task_pattern_does_not_switch_the_gate_off(box: Box) -> None:
    # The branch task-1 names TASK-1 by the default ids; a config.toml whose task_pattern
    # is not a regular expression must not leave the hooks without a task (doing nothing).
    (box.repo / ".ledger" / "config.toml").write_text('task_pattern = "([unclosed"\n')
    decided = _write(box, str(box.repo), ".ledger/contracts/TASK-1.toml")
    assert decided is not None and decided[0] == "deny", decided


# -- the resident process (ledger/agents/_resident.py) ------------------------------------------


@pytest.fixture
def resident(tmp_path: Path) -> Iterator[Path]:
    """A runtime folder of this test's own for the resident server; stopped at the end."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    yield folder
    stop_resident_servers(folder)


def _listening(folder: Path) -> Path:
    """The server's socket once the server listens (it is renamed into place only then)."""
    for _ in range(2400):  # a bound for a broken build, not a timing: a server is up in well under a second
        found = sorted(folder.glob("hooks-*.sock"))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no resident hook server came up in %s" % folder)


def _started(box: Box, folder: Path) -> None:
    """Start the server as the first hook of a session does: it answers in its own process,
    then starts one (a PreToolUse writes nothing, so the box is as it was)."""
    first = box.hook_in(
        "pre-tool-use",
        payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="Read", tool_input={"file_path": "x"}),
        None,
        {RUNTIME_ENV: str(folder)},
    )
    assert first.returncode == 0 and first.stdout == "", first.stderr
    _listening(folder)


def test_the_resident_process_answers_every_event_as_the_hook_itself_would(tmp_path: Path, resident: Path) -> None:
    # Two agents' boxes, the same day: one's hooks do their own work, the other's must be
    # answered by the resident server (`require`: a hook it cannot answer fails closed).
    boxes = {mode: Box(tmp_path / ("box-" + mode)) for mode in ("0", "require")}
    _started(boxes["require"], resident)

    def both(event: str, **fill: Any) -> str:
        seen = []
        for mode, box in boxes.items():
            doc = payload("claude-code", event, cwd=str(box.repo), **fill)
            res = box.hook_in(event, doc, None, {RESIDENT_ENV: mode, RUNTIME_ENV: str(resident)})
            seen.append((res.returncode, res.stdout.replace(str(box.repo), "<repo>"), res.stderr))
        assert seen[0] == seen[1], (event, seen)
        return seen[0][1] + seen[0][2]

    assert "task TASK-1" in both("session-start")
    assert both("pre-tool-use", tool="Read", tool_input={"file_path": "app.py"}) == ""
    assert "is denied" in both("pre-tool-use", tool="WebFetch", tool_input={"url": "https://example.com"})
    assert "protected" in both("pre-tool-use", tool="Write", tool_input={"file_path": ".ledger/ledger.db"})
    both("post-tool-use", tool="Bash", tool_input={"command": "echo $DEPLOY_TOKEN"})
    assert "says-fixed: no match in app.py" in both("stop")
    for box in boxes.values():
        (box.repo / "app.py").write_text("print('fixed')\n")
        git(box.repo, "commit", "-qam", "TASK-1: fixed")
    assert "claim recorded; the checks pass" in both("stop", stop_hook_active=True)
    assert "stored as evidence" in both("session-end")
    # What each did to its box is the same: the trace, with the secret redacted, and the claims.
    traces = [box.trace() for box in boxes.values()]
    assert [[row.get("tool") for row in t] for t in traces] == [[row.get("tool") for row in traces[0]]] * 2
    assert any(row.get("tool") == "Bash" for row in traces[0]) and "tok-8c1f55e0a9d2" not in json.dumps(traces)
    kinds = [[(e["type"], dict(e["fields"]).get("outcome")) for e in box.events()] for box in boxes.values()]
    assert (
        kinds[0]
        == kinds[1]
        == [("answer_proposed", "blocked"), ("answer_proposed", "stopped"), ("model_stopped", None)]
    )


def _budgeted(box: Box, budget: int, tests_command: str, tests_fast: bool) -> None:
    """The box's contract with a Stop budget: its `tests` check runs ``tests_command``
    (marked fast or not) beside the fast file check `says-fixed`."""
    contract = contract_bytes(command=tests_command, extra=CHECK + "fast = true\n")
    contract = contract.replace(
        b"check_timeout_s = 20\ntotal_timeout_s = 60", b"check_timeout_s = 300\ntotal_timeout_s = 600"
    )
    marked = b"fast = true\n" if tests_fast else b""
    contract = contract.replace(b'type = "test_passes"\n', b'type = "test_passes"\n' + marked)
    contract += b"\n[hooks]\nstop_budget_s = %d\n" % budget
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract)


def test_a_stop_with_a_time_budget_runs_the_fast_checks_and_leaves_the_rest_to_ci(box: Box) -> None:
    # A 120-second suite and a 30-second budget: the Stop runs the fast check only, and the
    # agent is told what waits for CI instead of being held for two minutes.
    started = box.repo.parent / "suite-started"
    suite = "import pathlib, time; pathlib.Path(%r).write_text('x'); time.sleep(120)" % str(started)
    _budgeted(box, 30, suite, tests_fast=False)
    doc = payload("claude-code", "stop", cwd=str(box.repo))
    failing = box.hook("stop", doc)
    reason = json.loads(failing.stdout)["reason"]  # the fast check fails: a repair step, as ever
    assert "says-fixed: no match in app.py" in reason and "Deferred to CI: tests (not marked fast)." in reason
    (box.repo / "app.py").write_text("print('fixed')\n")
    git(box.repo, "commit", "-qam", "TASK-1: fixed")
    stopped = box.hook("stop", {**doc, "stop_hook_active": True})
    assert stopped.returncode == 0 and stopped.stdout == "", stopped.stdout  # not blocked
    assert stopped.stderr == (
        "receipt-ledger: claim recorded; the 1 check(s) run pass (advisory). Deferred to CI: tests (not marked fast).\n"
    )
    assert not started.exists()  # the slow suite never ran in the agent's loop
    claim = dict([e for e in box.events() if e["type"] == "answer_proposed"][-1]["fields"])
    assert (claim["advisory"], claim["deferred"], claim["outcome"], claim["verified"]) == (
        "deferred",
        "1",
        "stopped",
        "no",  # a deferred check is not an advisory pass
    )
    # A check marked fast that outlives the budget is stopped at it and deferred, not failed.
    _budgeted(box, 2, "import time; time.sleep(3600)", tests_fast=True)
    cut = box.hook("stop", doc)
    assert cut.returncode == 0 and cut.stdout == "", cut.stdout
    assert cut.stderr == (
        "receipt-ledger: claim recorded; the 1 check(s) run pass (advisory)."
        " Deferred to CI: tests (did not finish within the Stop's budget of 2 s).\n"
    )


def test_a_check_declared_flaky_does_not_block_the_loop_on_one_failure(box: Box) -> None:
    counter = box.repo.parent / "runs"
    contract = contract_bytes(command=flaky_command(counter, failing_run=1), extra="runs = 3\nmin_passes = 2\n")
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract)
    doc = payload("claude-code", "stop", cwd=str(box.repo))
    stopped = box.hook("stop", doc)
    assert stopped.returncode == 0 and stopped.stdout == "", stopped.stdout  # one failure in three: not blocked
    assert counter.read_text() == "3"
    # Where every run must pass, the first failure decides: no need to run the rest.
    counter.unlink()
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(
        contract_bytes(command=flaky_command(counter, failing_run=1), extra="runs = 3\n")
    )
    blocked = json.loads(box.hook("stop", {**doc, "stop_hook_active": True}).stdout)
    assert blocked["decision"] == "block" and "- tests: run 1 of 3: exit code 1" in blocked["reason"]
    assert counter.read_text() == "1"


def test_a_stop_answers_once_its_claim_is_committed_and_closes_the_ledger_after(
    box: Box, resident: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent waits for the answer, not for the ledger's close; but the close must still
    # happen, whoever answered. SQLite's last close checkpoints the write-ahead log and
    # removes it: the log's file is there exactly while a writer has the ledger open.
    wal = box.repo / ".ledger" / "ledger.db-wal"

    def claims() -> int:
        return len([e for e in box.events() if e["type"] == "answer_proposed"])

    doc = payload("claude-code", "stop", cwd=str(box.repo))
    own = box.hook_in("stop", doc, None, {RESIDENT_ENV: "0"})
    assert json.loads(own.stdout)["decision"] == "block"
    assert not wal.exists()  # the hook's own process closed it before it exited
    assert claims() == 1
    _started(box, resident)
    answered = box.hook_in("stop", doc, None, {RUNTIME_ENV: str(resident), RESIDENT_ENV: "require"})
    assert json.loads(answered.stdout)["decision"] == "block"
    # The hook has left with the answer; the server's child closes the ledger after it
    # (the watch that kills a child whose client left must spare one that has answered).
    for _ in range(2400):  # a bound for a broken build, not a timing
        if not wal.exists():
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the resident child answered and never closed the ledger")
    assert claims() == 2
    # The library's call returns with all of its work done.
    for name, value in box.env.items():
        monkeypatch.setenv(name, value)
    answer = run_hook("stop", json.dumps(doc).encode(), os.environ, box.repo)
    assert json.loads(answer.stdout)["decision"] == "block" and answer.then is None
    assert not wal.exists() and claims() == 3


def test_a_request_the_resident_process_took_and_never_answered_fails_closed(box: Box, resident: Path) -> None:
    # The check kills the process answering the hook: the server's child, after it said it
    # had taken the request. The hook must not do the work again, nor let the agent stop.
    killer = "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract_bytes(command=killer))
    _started(box, resident)
    res = box.hook_in("stop", payload("claude-code", "stop", cwd=str(box.repo)), None, {RUNTIME_ENV: str(resident)})
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["decision"] == "block"
    assert "could not evaluate Stop: the resident hook process ended without an answer" in answer["reason"]
    assert [e for e in box.events() if e["type"] == "answer_proposed"] == []  # not done twice
    denied = box.hook_in(
        "pre-tool-use",
        payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="Read", tool_input={"file_path": "x"}),
        None,
        {RUNTIME_ENV: str(resident), RESIDENT_ENV: "require"},
    )
    assert _decision(denied) is None  # the server itself lives on: one child died


def test_the_work_of_a_hook_dies_with_the_hook(box: Box, resident: Path) -> None:
    # The agent kills a hook that runs too long: the server's child and the check it
    # started must go with it, not finish later and record a claim nobody waited for.
    pid_file = box.repo.parent / "check.pid"
    sleeper = "import os, pathlib, time; pathlib.Path(%r).write_text(str(os.getpid())); time.sleep(3600)" % str(
        pid_file
    )
    contract = contract_bytes(command=sleeper).replace(b"check_timeout_s = 20", b"check_timeout_s = 3600")
    (box.repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract.replace(b"= 60\n", b"= 7200\n", 1))
    _started(box, resident)
    hook = subprocess.Popen(
        [*LEDGER, "hook", "stop"],
        stdin=subprocess.PIPE,
        cwd=box.repo,
        env={**os.environ, **box.env, RUNTIME_ENV: str(resident), RESIDENT_ENV: "require"},
    )
    assert hook.stdin is not None
    hook.stdin.write(json.dumps(payload("claude-code", "stop", cwd=str(box.repo))).encode())
    hook.stdin.close()
    for _ in range(2400):  # until the check runs (a bound, not a timing)
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    check = int(pid_file.read_text())
    hook.kill()
    hook.wait()
    for _ in range(2400):  # until the check is gone; without the watch it sleeps an hour
        if not Path("/proc/%d" % check).exists() or "Z" in Path("/proc/%d/stat" % check).read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the check outlived the hook that started it")
    assert [e for e in box.events() if e["type"] == "answer_proposed"] == []


def test_where_the_resident_process_cannot_be_trusted_the_hook_does_its_own_work(box: Box, tmp_path: Path) -> None:
    doc = payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="WebFetch", tool_input={"url": "u"})
    # A runtime folder others may write: nobody's socket in it is believed.
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    here = box.hook_in("pre-tool-use", doc, None, {RUNTIME_ENV: str(open_folder)})
    assert _decision(here) == ("deny", "receipt-ledger: tool WebFetch is denied")
    assert list(open_folder.iterdir()) == []  # and no server was started there
    required = box.hook_in("pre-tool-use", doc, None, {RUNTIME_ENV: str(open_folder), RESIDENT_ENV: "require"})
    assert _decision(required) == (
        "deny",
        "receipt-ledger: could not evaluate PreToolUse: no resident hook process answered (RECEIPT_LEDGER_RESIDENT=require)",
    )
    # Switched off: no server, ever.
    off = tmp_path / "off"
    off.mkdir(mode=0o700)
    switched_off = _decision(box.hook_in("pre-tool-use", doc, None, {RUNTIME_ENV: str(off), RESIDENT_ENV: "0"}))
    assert switched_off is not None and switched_off[0] == "deny"
    assert list(off.iterdir()) == []


def test_a_resident_process_started_from_other_code_answers_nobody_else(box: Box, resident: Path) -> None:
    _started(box, resident)
    doc = payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="WebFetch", tool_input={"url": "u"})
    # Another PYTHONPATH could import another `ledger`: the server declines, the hook works alone.
    other = {RUNTIME_ENV: str(resident), "PYTHONPATH": os.pathsep.join([str(box.repo), *sys.path[1:]])}
    assert _decision(box.hook_in("pre-tool-use", doc, None, other)) == (
        "deny",
        "receipt-ledger: tool WebFetch is denied",
    )
    refused = _decision(box.hook_in("pre-tool-use", doc, None, {**other, RESIDENT_ENV: "require"}))
    assert refused is not None and "no resident hook process answered" in refused[1]
    same = _decision(box.hook_in("pre-tool-use", doc, None, {RUNTIME_ENV: str(resident), RESIDENT_ENV: "require"}))
    assert same == ("deny", "receipt-ledger: tool WebFetch is denied")


def test_a_resident_process_whose_code_changed_steps_aside_for_a_new_one(
    box: Box, resident: Path, tmp_path: Path
) -> None:
    # An upgrade replaces the package's files under a running server: it must not answer
    # with the old code. A copy of the packages stands for the installation here.
    src = tmp_path / "src"
    for package in ("ledger", "receipts", "verify"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {RUNTIME_ENV: str(resident), "PYTHONPATH": str(src)}
    doc = payload("claude-code", "pre-tool-use", cwd=str(box.repo), tool="WebFetch", tool_input={"url": "u"})
    denied = ("deny", "receipt-ledger: tool WebFetch is denied")
    assert _decision(box.hook_in("pre-tool-use", doc, None, env)) == denied  # starts the server
    _listening(resident)
    assert _decision(box.hook_in("pre-tool-use", doc, None, {**env, RESIDENT_ENV: "require"})) == denied
    old = int(next(resident.glob("*.sock.lock")).read_text())
    changed = src / "ledger" / "agents" / "_hooks.py"
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    # The server declines, the hook answers itself and starts a new server.
    assert _decision(box.hook_in("pre-tool-use", doc, None, env)) == denied
    for _ in range(2400):  # until the new server listens (a bound, not a timing)
        text = next(resident.glob("*.sock.lock")).read_text().strip()
        if text.isdigit() and int(text) != old and list(resident.glob("hooks-*.sock")):
            break
        time.sleep(0.05)
    assert not Path("/proc/%d" % old).exists() or "Z" in Path("/proc/%d/stat" % old).read_text().split()[2]
    assert _decision(box.hook_in("pre-tool-use", doc, None, {**env, RESIDENT_ENV: "require"})) == denied
