"""The GitHub Action: `ledger ci github` under a simulated Actions environment.

Git, the ledger and the keys are real; the runner's files (the event payload, the step
summary, the outputs) are real files; only the GitHub REST API is a local server on
127.0.0.1, which records every request so that the test checks exactly what would be sent."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github_api import FakeGithub, serve

from conftest import GIT_ENV, LEDGER, PROBE_TRY, contract_bytes, fresh_clone, git, ok, run_cli
from ledger import Ledger

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def github() -> Iterator[FakeGithub]:
    with serve() as state:
        yield state


def _pull_request_event(path: Path, number: int, head_sha: str, head_ref: str, title: str) -> Path:
    """A pull_request event in the shape GitHub sends (the fields the action reads, and some it does not)."""
    path.write_text(
        json.dumps(
            {
                "action": "synchronize",
                "number": number,
                "pull_request": {
                    "number": number,
                    "title": title,
                    "state": "open",
                    "head": {"ref": head_ref, "sha": head_sha, "repo": {"full_name": "acme/app"}},
                    "base": {"ref": "main", "sha": "0" * 40, "repo": {"full_name": "acme/app"}},
                    "user": {"login": "agent-bot"},
                },
                "repository": {"full_name": "acme/app", "default_branch": "main"},
                "sender": {"login": "agent-bot"},
            }
        )
    )
    return path


def _actions_env(top: Path, github: FakeGithub, event: Path, **inputs: str) -> dict[str, str]:
    runner = top / "runner"
    runner.mkdir(exist_ok=True)
    return {
        **GIT_ENV,
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(runner / "summary.md"),
        "GITHUB_OUTPUT": str(runner / "output"),
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": "acme/app",
        "GITHUB_TOKEN": "ghs_test-token",
        "RUNNER_TEMP": str(runner),
        # A self-hosted runner's persistent ledger (docs/ci.md); a team uses its shared store.
        "LEDGER_DIR": str(top / "dev" / ".ledger"),
        "RECEIPT_LEDGER_KEYS": "/nonexistent",
        **inputs,
    }


def _keys(top: Path) -> dict[str, str]:
    keys = top / "keys"
    return {
        "LEDGER_DETERMINISTIC_KEY": (keys / "ci").read_text(),
        "LEDGER_JUDGE_KEY": (keys / "judge").read_text(),
        "LEDGER_SEAL_KEY": (keys / "sealer").read_text(),
    }


def _action(workspace: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [*LEDGER, "ci", "github"], cwd=workspace, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )


def _checkout(top: Path, name: str, branch: str) -> tuple[Path, str]:
    """What actions/checkout leaves: the head commit, detached, without notes or receipt refs."""
    workspace = fresh_clone(top, name, branch=branch)
    head = git(workspace, "rev-parse", "HEAD")
    git(workspace, "checkout", "-q", "--detach", head)
    return workspace, head


def test_the_action_runs_the_ladder_summarises_comments_once_and_gates(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    top, _, _ = world
    workspace, head = _checkout(top, "workspace", "task-1")
    event = _pull_request_event(top / "event.json", 7, head, "task-1", "Greet the receipts")
    # Someone else's comment that carries the marker: never to be edited by the action.
    github.comments.append(
        {"id": 1, "issue": 7, "body": "<!-- receipt-ledger:comment --> fake PASS", "user": {"login": "mallory"}}
    )
    env = _actions_env(top, github, event, LEDGER_RUN="all", LEDGER_TASK="", **_keys(top))
    first = _action(workspace, env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.startswith("GATE PASS: %s" % head[:12])
    # The log is not silent while the ladder runs: each tier says it started and how it ended.
    for step in ("check", "judge", "seal"):
        assert "receipt-ledger: %s TASK-1 on %s ..." % (step, head[:12]) in first.stderr, first.stderr
        assert "receipt-ledger: %s exited 0" % step in first.stderr, first.stderr
    assert "merge_eligible=true" in first.stderr

    outputs = dict(line.split("=", 1) for line in (top / "runner" / "output").read_text().splitlines())
    receipt = outputs["receipt"]
    assert receipt.startswith("blake3:") and outputs["decision"] == "pass" and outputs["merge-eligible"] == "true"
    summary = (top / "runner" / "summary.md").read_text()
    # The gate's decision heads it; the receipt it rests on follows under its own heading.
    assert summary.startswith(
        "<!-- receipt-ledger:comment -->\n### receipt-ledger: TASK-1 **GATE PASS: %s " % head[:12]
    )
    assert "#### The receipt: TASK-1 **merge-eligible**" in summary and "| deterministic | yes | ✅ pass |" in summary
    # What a reviewer reads: the goal, each check with its reason, who approved, and the
    # command to re-check this very commit (not a placeholder).
    assert "**Goal:** a test task" in summary and "| tests | ✅ pass | exit code 0 |" in summary, summary
    assert "ledger verify --commit %s" % head in summary and "warning:" not in summary.split("**GATE")[0]
    _one_verdict(top)
    assert "**Judge:** pass: accepted at confidence" in summary, summary  # its reasoning, in a line
    # The gate's decision is recorded in the ledger (signed with the seal key), where the
    # population of changes shows it.
    events = [
        json.loads(ok("--dir", str(top / "dev" / ".ledger"), "show", row["hash"], "--json", cwd=top, env=GIT_ENV))[
            "body"
        ]
        for row in json.loads(ok("--dir", str(top / "dev" / ".ledger"), "log", "--json", cwd=top, env=GIT_ENV))
        if row["kind"] == "event"
    ]
    decided = [e for e in events if e["type"] == "gate_decision"]
    assert decided and dict(decided[-1]["fields"])["decision"] == "pass", events
    # The keys were written for the run and removed after it.
    assert not list((top / "runner").glob("receipt-ledger-keys-*"))
    # The receipt went to the remote. A fresh clone verifies it, but no auditing witness has
    # cosigned the checkpoint the run signed, so only a gate that audits the store passes it.
    auditor = fresh_clone(top, "auditor")
    ok("receipts", "fetch", cwd=auditor, env=GIT_ENV)
    unproven = run_cli("gate", head, "--json", cwd=auditor, env=GIT_ENV)
    assert unproven.returncode == 1 and "completeness of task TASK-1" in unproven.stdout, unproven.stdout
    store = ("--dir", str(top / "dev" / ".ledger"))
    audited = ok(*store, "gate", head, "--json", "--audit-state", str(top / "audit.json"), cwd=auditor, env=GIT_ENV)
    assert json.loads(audited)["receipt"] == receipt

    api = [(m, p) for m, p, _, _ in github.requests]
    assert api == [
        ("GET", "/repos/acme/app/issues/7/comments?per_page=100&page=1"),
        ("POST", "/repos/acme/app/issues/7/comments"),
    ]
    for _, _, headers, _ in github.requests:
        assert headers["authorization"] == "Bearer ghs_test-token"
        assert headers["accept"] == "application/vnd.github+json" and headers["x-github-api-version"] == "2022-11-28"
    assert github.requests[1][3] == {"body": summary}

    # A second run (the gate only, as a required check would rerun) updates that one comment.
    (top / "runner" / "summary.md").unlink()
    second = _action(workspace, _actions_env(top, github, event, LEDGER_RUN="gate"))
    assert second.returncode == 0, second.stderr
    bot = [c for c in github.comments if c["user"]["login"] == "github-actions[bot]"]
    assert len(bot) == 1 and bot[0]["body"] == (top / "runner" / "summary.md").read_text()
    assert [(m, p) for m, p, _, _ in github.requests[2:]] == [
        ("GET", "/repos/acme/app/issues/7/comments?per_page=100&page=1"),
        ("PATCH", "/repos/acme/app/issues/comments/%d" % bot[0]["id"]),
    ]
    assert github.comments[0]["body"] == "<!-- receipt-ledger:comment --> fake PASS"


def test_a_forked_pull_request_without_secrets_only_gates(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    top, _, _ = world
    workspace, head = _checkout(top, "fork", "task-1")
    event = _pull_request_event(top / "event.json", 8, head, "task-1", "TASK-1: from a fork")
    # No key inputs: GitHub gives no secrets to a forked pull request's workflow, and its
    # token may read but not write.
    github.refuse_writes = True
    res = _action(workspace, _actions_env(top, github, event, LEDGER_RUN="all"))
    assert res.returncode == 0, res.stderr  # the receipt dev attached and pushed lets it through
    assert "check skipped: no deterministic key" in res.stderr and "seal skipped: no seal key" in res.stderr
    assert "the pull-request comment was not written: GitHub API POST" in res.stderr and "403" in res.stderr
    assert [m for m, _, _, _ in github.requests] == ["GET", "POST"] and github.comments == []


def _task_pushed(dev: Path, task: str, extra: str, app: str) -> None:
    """``task``'s contract pushed to main before the work (the contract in force is never the
    candidate's), then the work on branch ``task-N``, pushed."""
    git(dev, "checkout", "-q", "main")
    (dev / ".ledger" / "contracts" / (task + ".toml")).write_bytes(contract_bytes(task=task, extra=extra))
    git(dev, "add", ".ledger/contracts/%s.toml" % task)
    git(dev, "commit", "-qm", "the contract of " + task)
    git(dev, "push", "-q", "origin", "main")
    branch = task.lower()
    git(dev, "checkout", "-qb", branch, "main")
    (dev / "app.py").write_text(app)
    git(dev, "commit", "-qam", "%s: the work" % task)
    git(dev, "push", "-q", "origin", branch)


def test_failing_file_checks_become_annotations_and_the_gate_blocks(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    top, env, _ = world
    dev = top / "dev"
    extra = '\n[[checks]]\nid = "says-goodbye"\ntype = "file_contains"\npath = "app.py"\nliteral = "goodbye"\n'
    _task_pushed(dev, "TASK-2", extra, "print('hello only')\n")
    workspace, head = _checkout(top, "ws2", "task-2")
    event = _pull_request_event(top / "event.json", 9, head, "task-2", "Goodbye")
    env = _actions_env(top, github, event, LEDGER_RUN="check,gate", LEDGER_ATTEST="svr", **_keys(top))
    res = _action(workspace, env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "::error file=app.py,line=1,title=receipt-ledger check says-goodbye::no match in app.py" in res.stdout
    assert "GATE FAIL: %s" % head[:12] in res.stdout
    outputs = (top / "runner" / "output").read_text()
    assert "decision=block" in outputs
    # Attestation asked for, but no receipt of this candidate was sealed: nothing to attest, said so.
    assert "attest-predicate=\n" in outputs and "attest-subject=\n" in outputs
    assert "no attestation: no receipt was verified from its bundle" in (top / "runner" / "summary.md").read_text()


PROBE = (
    "import glob, json, os\n"
    + PROBE_TRY
    + """

def _keys():
    found = glob.glob(os.path.join(RUNNER_TEMP, "receipt-ledger-keys-*", "*"))
    return [open(f).read()[:12] for f in found] or 1 / 0


def test_probe():
    said = [
        _try("key files under RUNNER_TEMP", _keys),
        _try("runner temp", lambda: os.listdir(RUNNER_TEMP)),
        _try("key variables", lambda: [k for k in os.environ if k.endswith("_KEY") or k == "PGPASSWORD"] or 1 / 0),
        _try("GitHub token", lambda: os.environ["GITHUB_TOKEN"]),
        _try("ledger", lambda: os.listdir(LEDGER_DIR)),
        _try("workspace", lambda: os.listdir(WORKSPACE)),
        _try("parent environ", lambda: open("/proc/%d/environ" % os.getppid(), "rb").read()[:40]),
    ]
    print("\\nPROBE " + json.dumps(said))
"""
)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by .ci/run")
def test_in_the_actions_own_step_a_candidates_test_reaches_no_key(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    """Issue 43: the action holds the three signing keys while `check` runs the candidate's
    tests; from inside them, no key file, key variable, token, ledger or checkout is there."""
    top, _, _ = world
    dev = top / "dev"
    git(dev, "checkout", "-q", "main")
    pytest_argv = json.dumps([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests"])
    contract = (
        'version = 2\ntask = "TASK-3"\nowned_files = ["tests/test_probe.py"]\ntest_files = ["tests/*"]\n\n'
        '[policy]\nrequired_tiers = ["deterministic"]\n\n'
        '[[checks]]\nid = "tests"\ntype = "test_passes"\ncommand = %s\n' % pytest_argv
    )
    (dev / ".ledger" / "contracts" / "TASK-3.toml").write_text(contract)
    git(dev, "add", ".ledger/contracts/TASK-3.toml")
    git(dev, "commit", "-qm", "the contract of TASK-3")
    git(dev, "push", "-q", "origin", "main")
    git(dev, "checkout", "-qb", "task-3", "main")
    (dev / "tests").mkdir(exist_ok=True)
    runner, ledger_dir = top / "runner", top / "dev" / ".ledger"
    workspace = top / "ws-probe"
    places = "RUNNER_TEMP, LEDGER_DIR, WORKSPACE = %r, %r, %r\n" % (str(runner), str(ledger_dir), str(workspace))
    (dev / "tests" / "test_probe.py").write_text(places + PROBE)
    git(dev, "add", "tests/test_probe.py")
    git(dev, "commit", "-qm", "TASK-3: a test that looks around")
    git(dev, "push", "-q", "origin", "task-3")
    workspace, head = _checkout(top, "ws-probe", "task-3")
    event = _pull_request_event(top / "event-probe.json", 11, head, "task-3", "TASK-3: probe")
    keys = _keys(top)
    res = _action(workspace, _actions_env(top, github, event, LEDGER_RUN="check", PGPASSWORD="hunter2", **keys))
    assert "receipt-ledger: check exited 0" in res.stderr, res.stderr
    ledger = Ledger.open(ledger_dir)
    try:
        (row,) = [row for row in ledger.records_for("TASK-3") if row.record.tier.value == "deterministic"]
        ref = next(e for e in row.record.evidence if e.check_id == "check:tests:stdout")
        out = ledger.blob_path(ref.digest).read_text()
    finally:
        ledger.close()
    said = json.loads(next(line for line in out.splitlines() if line.startswith("PROBE "))[6:])
    assert len(said) == 7 and [line for line in said if "REACHED" in line] == [], said
    # Nor any secret in what the check stored: a key's base64 body, the password, the token.
    for secret in ("hunter2", "ghs_test-token", *(pem.strip().splitlines()[1] for pem in keys.values())):
        assert secret not in out


def test_bad_input_is_one_line_and_exit_2(world: tuple[Path, dict[str, str], str], github: FakeGithub) -> None:
    top, _, _ = world
    workspace, head = _checkout(top, "ws3", "task-1")
    (top / "push.json").write_text(json.dumps({"ref": "refs/heads/main"}))
    pushed = _action(workspace, {**_actions_env(top, github, top / "push.json"), "GITHUB_EVENT_NAME": "push"})
    assert pushed.returncode == 2 and pushed.stderr.count("\n") == 1 and "lacks 'after'" in pushed.stderr
    tagged = {"ref": "refs/tags/v1", "after": head}
    (top / "push.json").write_text(json.dumps(tagged))
    pushed = _action(workspace, {**_actions_env(top, github, top / "push.json"), "GITHUB_EVENT_NAME": "push"})
    assert pushed.returncode == 2 and "gates pushes to a branch, not to refs/tags/v1" in pushed.stderr
    (top / "issue.json").write_text(json.dumps({"action": "opened"}))
    other = _action(workspace, {**_actions_env(top, github, top / "issue.json"), "GITHUB_EVENT_NAME": "issues"})
    assert other.returncode == 2 and other.stderr.count("\n") == 1 and "not 'issues'" in other.stderr
    event = _pull_request_event(top / "event.json", 10, head, "no-task-here", "Nothing to see")
    untitled = _action(workspace, _actions_env(top, github, event))
    assert untitled.returncode == 2 and "no task id" in untitled.stderr and "Traceback" not in untitled.stderr
    event = _pull_request_event(top / "event.json", 10, head, "task-1", "TASK-1: x")
    wrong = _action(workspace, _actions_env(top, github, event, LEDGER_ATTEST="vsa"))
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "takes none or svr, not 'vsa'" in wrong.stderr
    assert github.requests == []


def test_a_pull_request_cannot_choose_the_store_its_ladder_writes_to(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    """Issue 22 (cases 4 and 5 through CI): the checkout's .ledger/config.toml is the
    candidate's. One that names another store would have CI's honest sealer seal from a copy
    that leaves out a rejection, and the gate audit that copy; the action refuses it before
    any key is written or any tier runs."""
    top, _, _ = world
    dev = top / "dev"
    git(dev, "checkout", "-q", "task-1")
    (dev / ".ledger" / "config.toml").write_text('store = "postgresql://mallory@127.0.0.1:1/copy"\n')
    git(dev, "add", "-f", ".ledger/config.toml")
    git(dev, "commit", "-qm", "T: a store of my own")
    git(dev, "push", "-q", "origin", "task-1")
    workspace, head = _checkout(top, "ws-store", "task-1")
    event = _pull_request_event(top / "event.json", 12, head, "task-1", "Greet the receipts")
    env = {
        k: v for k, v in _actions_env(top, github, event, LEDGER_RUN="all", **_keys(top)).items() if k != "LEDGER_DIR"
    }
    refused = _action(workspace, env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "names the store postgresql://mallory@127.0.0.1:1/copy" in refused.stderr, refused.stderr
    assert "origin/main names (none)" in refused.stderr, refused.stderr
    assert github.requests == [] and not list((top / "runner").glob("receipt-ledger-keys-*"))
    # The store input overrides (here: the same bogus store, so the tiers fail on it, not the rule).
    assert "names the store" not in _action(workspace, {**env, "LEDGER_STORE": "postgresql://127.0.0.1:1/x"}).stderr


def _one_verdict(top: Path) -> None:
    """Issue 46: a job the gate passed reads as one verdict: its summary never says the
    opposite of the pass (not eligible, unproven) for the same receipt, and its outputs
    agree with its heading."""
    summary = (top / "runner" / "summary.md").read_text()
    assert "**GATE PASS:" in summary.splitlines()[1], summary
    said = [w for w in ("not merge-eligible", "not eligible", "unproven", "rejected") if w in summary.lower()]
    assert not said, (said, summary)
    outputs = dict(line.split("=", 1) for line in (top / "runner" / "output").read_text().splitlines())
    assert (outputs["decision"], outputs["merge-eligible"]) == ("pass", "true"), outputs


def test_a_merge_group_event_gates_the_queue_commit(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    """The merge queue's commit merges the up-to-date pull request: same tree, passes by it."""
    top, _, _ = world
    workspace = fresh_clone(top, "queue", branch="main")
    git(workspace, "fetch", "-q", "origin", "task-1")
    git(workspace, "merge", "-q", "--no-ff", "-m", "Merge pull request #7 from task-1", "origin/task-1")
    queue_sha = git(workspace, "rev-parse", "HEAD")
    git(workspace, "push", "-q", "origin", "HEAD:refs/heads/gh-readonly-queue/main/pr-7-%s" % queue_sha)
    payload = {
        "action": "checks_requested",
        "merge_group": {
            "head_sha": queue_sha,
            "head_ref": "refs/heads/gh-readonly-queue/main/pr-7-%s" % queue_sha,
            "base_sha": git(workspace, "rev-parse", "origin/main"),
            "base_ref": "refs/heads/main",
            "head_commit": {"id": queue_sha, "message": "Merge pull request #7 from task-1\n\nTASK-1: greet"},
        },
        "repository": {"full_name": "acme/app"},
    }
    (top / "mg.json").write_text(json.dumps(payload))
    env = {**_actions_env(top, github, top / "mg.json", LEDGER_RUN="gate", LEDGER_TASK="TASK-1")}
    env["GITHUB_EVENT_NAME"] = "merge_group"
    res = _action(workspace, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "via its tree" in res.stdout
    assert github.requests == []  # a merge group has no pull-request comment
    _one_verdict(top)
    # The default run in a queue is the gate alone; with the secrets but no ledger on the
    # runner it still gates by the receipts in git, and says its decision was not recorded.
    bare = {k: v for k, v in env.items() if k != "LEDGER_RUN"}
    bare.update(_keys(top), LEDGER_DIR=str(top / "no-ledger"))
    res = _action(workspace, bare)
    assert res.returncode == 0 and "via its tree" in res.stdout, res.stdout + res.stderr
    summary = (top / "runner" / "summary.md").read_text()
    assert "- note: the gate's decision was not recorded: no ledger at" in summary, summary


def test_the_keys_exist_only_while_the_tiers_run_and_only_for_the_owner(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    """The action writes each key input to a 0600 file in a 0700 folder for the tier that
    needs it, and removes them when the tiers are done (the runner here records what a
    tier would have found, instead of running it)."""
    import os
    import stat

    from ledger import run_action

    top, _, _ = world
    workspace, head = _checkout(top, "keys-ws", "task-1")
    event = _pull_request_event(top / "event.json", 11, head, "task-1", "TASK-1")
    env = _actions_env(top, github, event, LEDGER_RUN="check", GITHUB_TOKEN="", **_keys(top))
    seen: list[tuple[str, int, dict[str, int]]] = []

    def runner(args: Any, child_env: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
        keys = Path(child_env["RECEIPT_LEDGER_KEYS"])
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in keys.iterdir()}
        seen.append((args[0], stat.S_IMODE(keys.stat().st_mode), modes))
        assert not any(k.startswith("LEDGER_") and k.endswith("_KEY") for k in child_env)  # not in the tier's env
        return subprocess.CompletedProcess(list(args), 0, '{"checks": []}', "")

    report = run_action({**os.environ, **env}, workspace, runner=runner)
    assert seen == [("check", 0o700, {"ci": 0o600, "judge": 0o600, "sealer": 0o600})]
    assert report.tier_exits == {"check": 0} and report.gated is None
    assert not list((top / "runner").glob("receipt-ledger-keys-*"))


def test_a_push_is_judged_under_the_pin_the_branch_held_before_it(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    """Mallory pushes straight to main (a gap in branch protection) a commit that adds her
    admin key to .ledger/allowed_signers and carries a receipt from her own ledger. The
    push's gate reads the pin from main as it was before the push, never from the pushed
    commit: trusting it would pass her receipt (test_travel shows that it verifies under
    her key). A push that creates the branch has no earlier pin: bad input."""
    from test_travel import _mallorys_pull_request

    top, _, _ = world

    def add_her_key(pr: Path, hers: Path) -> None:
        pinned = pr / ".ledger" / "allowed_signers"
        pinned.write_text(pinned.read_text() + (hers / "allowed_signers").read_text())

    ci, head, receipt = _mallorys_pull_request(top, "7", add_her_key, "TASK-1: greet, and trust my key")
    before = git(ci, "rev-parse", "origin/main")
    git(ci, "push", "-q", "origin", "HEAD:main")
    workspace, pushed = _checkout(top, "ws-push", "main")
    assert pushed == head
    event = {"ref": "refs/heads/main", "before": before, "after": head, "head_commit": {"message": "TASK-1: greet"}}
    (top / "push.json").write_text(json.dumps(event))
    env = {
        **_actions_env(top, github, top / "push.json", LEDGER_DIR=str(top / "evil7" / "ledger")),
        "GITHUB_EVENT_NAME": "push",
    }
    res = _action(workspace, env)
    assert res.returncode == 1 and "GATE FAIL" in res.stdout and receipt not in res.stdout.split("GATE FAIL")[0]
    assert "decision=block" in (top / "runner" / "output").read_text()
    created = {**event, "before": "0" * 40}
    (top / "push.json").write_text(json.dumps(created))
    res = _action(workspace, env)
    assert res.returncode == 2 and "no earlier pin" in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_the_summary_shows_a_failing_tests_last_output(
    world: tuple[Path, dict[str, str], str], github: FakeGithub
) -> None:
    # Issue 46: the summary's failing row said only "exit code 1"; the failing assertion,
    # read from the verified bundle, follows the table in a fence nothing in it can close.
    top, env, _ = world
    dev = top / "dev"
    failing = '\n[[checks]]\nid = "greets-twice"\ntype = "test_passes"\ncommand = [%s, "-c", %s]\n' % (
        json.dumps(sys.executable),
        json.dumps("print('``` @octocat'); assert 1 == 2, 'expected two greetings'"),
    )
    _task_pushed(dev, "TASK-3", failing, "print('hello, once')\n")
    workspace, head = _checkout(top, "ws3", "task-3")
    event = _pull_request_event(top / "event.json", 10, head, "task-3", "Greet")
    env = _actions_env(top, github, event, LEDGER_RUN="check,seal,gate", **_keys(top))
    res = _action(workspace, env)
    summary = (top / "runner" / "summary.md").read_text()
    assert res.returncode == 1 and "greets-twice: its last output" in summary, res.stdout + res.stderr + summary
    block = summary.split("greets-twice: its last output", 1)[1].split("</details>", 1)[0]
    assert "AssertionError: expected two greetings" in block and "\n````text\n" in block  # longer than the ``` inside
