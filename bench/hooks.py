"""The agent hooks' start-up: whole-process wall time of every event Claude Code sends
(PreToolUse and PostToolUse for an Edit and a Bash call, SessionStart, Stop,
SubagentStop, SessionEnd) on a realistic payload and contract, run as the agent runs
them: the command `ledger hook install` writes, through `/bin/sh -c`. Each as a ratio to
`python -c pass` measured in the same run, all interleaved and repeated.

Every hook is measured twice: answered by the resident process (the default; here
`RECEIPT_LEDGER_RESIDENT=require`, so that a hook the server did not answer fails the
run instead of being measured as something else) and doing its own work
(`RECEIPT_LEDGER_RESIDENT=0`). The server lives in this run's temporary folder and is
stopped at the end.

The hooks run on every tool call an agent makes, so their start-up is the product.
Target (issue 24): at most 2.5 times the floor at the median, every event, in a regular
install (`pip install .`). Bytecode caches are written and used, as an installed package
has them.

    python bench/hooks.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONTRACT = """version = 1
task = "TASK-1"
goal = "greet people"
kind = "code"
owned_files = ["greet.py"]
protected_paths = ["secrets/*", ".ledger/contracts/*"]
secret_env = ["DEPLOY_TOKEN"]

[policy]
required_tiers = ["deterministic", "judge", "human"]

[tools]
denied = ["WebFetch"]
requires_human = ["Deploy"]

[tools.schemas.Bash]
type = "object"
required = ["command"]

[[checks]]
id = "greets"
type = "file_contains"
path = "greet.py"
literal = "Hello"
"""


# What Claude Code adds to the common fields for the events without a tool call.
_LIFECYCLE: dict[str, dict[str, object]] = {
    "SessionStart": {"source": "startup"},
    "Stop": {"stop_hook_active": False},
    "SubagentStop": {"stop_hook_active": False},
    "SessionEnd": {"reason": "exit"},
}


def _payload(repo: Path, event: str, tool: str = "Edit") -> bytes:
    doc: dict[str, object] = {
        "session_id": "bench-session",
        "transcript_path": str(repo / "transcript.jsonl"),
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Edit",
        "tool_input": {"file_path": str(repo / "greet.py"), "old_string": "hi", "new_string": "Hello"}
        if tool == "Edit"
        else {"command": "python -m pytest -q", "description": "run the tests"},
        "tool_use_id": "toolu_01BenchBenchBenchBench",
    }
    doc["tool_name"] = tool
    if event not in ("PreToolUse", "PostToolUse"):
        for name in ("tool_name", "tool_input", "tool_use_id"):
            del doc[name]
        doc.update(_LIFECYCLE[event])
    if event == "PostToolUse":
        doc["tool_response"] = (
            {"filePath": str(repo / "greet.py"), "success": True}
            if tool == "Edit"
            else {"stdout": "1 passed", "stderr": "", "interrupted": False}
        )
    return json.dumps(doc).encode()


_HOOKS = (
    # (label, event, tool): Stop runs the contract's checks (here one that reads a file: the
    # check's own cost is the check's, not the hook's) and records the claim, signed.
    ("PreToolUse Edit", "pre-tool-use", "Edit"),
    ("PreToolUse Bash", "pre-tool-use", "Bash"),
    ("PostToolUse Edit", "post-tool-use", "Edit"),
    ("PostToolUse Bash", "post-tool-use", "Bash"),
    ("SessionStart", "session-start", ""),
    ("Stop", "stop", ""),
    ("SubagentStop", "subagent-stop", ""),
    ("SessionEnd", "session-end", ""),
)
_MODES = {"resident": "require", "own process": "0"}


def _stop_servers(folder: Path) -> None:
    for lock in folder.glob("*.sock.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGTERM)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    from ledger import HOOK_EVENTS, hook_command  # the command as installed for this interpreter

    ledger_cmd = shutil.which("ledger", path=str(Path(sys.executable).parent)) or "ledger"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as tmp:
        repo, runtime = Path(tmp) / "repo", Path(tmp) / "run"
        runtime.mkdir(mode=0o700)
        (repo / ".ledger" / "contracts").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "task-1", str(repo)], check=True)
        (repo / ".ledger" / "contracts" / "TASK-1.toml").write_text(CONTRACT)
        (repo / "greet.py").write_text("def greet(n):\n    return 'Hello ' + n\n")
        # The agent's box: its ledger and its only key (claims are signed and appended).
        env["RECEIPT_LEDGER_KEYS"] = str(Path(tmp) / "keys")
        env["RECEIPT_LEDGER_RUNTIME_DIR"] = str(runtime)
        for setup in (["init"], ["keys", "generate", "agent", "--role", "agent"]):
            subprocess.run([ledger_cmd, *setup], cwd=repo, env=env, check=True, capture_output=True)
        who = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        for git in (["add", "-A"], [*who, "commit", "-qm", "TASK-1: greet with Hello"]):
            subprocess.run(["git", *git], cwd=repo, env=env, check=True, capture_output=True)
        floor_cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            # The least any hook that reads a JSON payload and a TOML contract imports itself.
            "import json, tomllib": [sys.executable, "-c", "import json, tomllib"],
        }
        cases: dict[str, tuple[list[str], bytes, dict[str, str]]] = {
            name: (command, b"", env) for name, command in floor_cases.items()
        }
        for label, event, tool in _HOOKS:
            name = HOOK_EVENTS[event]
            for mode, value in _MODES.items():
                command = ["/bin/sh", "-c", hook_command(event)]
                cases["%s, %s" % (label, mode)] = (
                    command,
                    _payload(repo, name, tool or "Edit"),
                    {**env, RESIDENT: value},
                )
        # The first call starts the server; the warm-up waits until it answers.
        try:
            _warm(cases, repo)
            times: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, (command, data, case_env) in cases.items():
                    started = time.perf_counter()
                    done = subprocess.run(command, input=data, cwd=repo, env=case_env, capture_output=True)
                    times[name].append(time.perf_counter() - started)
                    _allowed(name, done)
        finally:
            _stop_servers(runtime)
        floor = statistics.median(times["python -c pass"])
        print("hook start-up, %d interleaved rounds (median wall time; ratio to python -c pass):" % args.rounds)
        for name, values in times.items():
            median = statistics.median(values)
            print(
                "  %-34s %7.1f ms   ratio %.2f   (p90 ratio %.2f)"
                % (name, median * 1000, median / floor, statistics.quantiles(values, n=10)[-1] / floor)
            )
        print("target: ratio <= 2.5 at the median for every hook and tool, answered by the resident process")


RESIDENT = "RECEIPT_LEDGER_RESIDENT"


def _allowed(name: str, done: subprocess.CompletedProcess[bytes]) -> None:
    """A measured hook must have done its work and allowed the call or the stop."""
    quiet = name.startswith(("PreToolUse", "Stop", "SubagentStop"))
    if done.returncode != 0 or (quiet and done.stdout):
        raise SystemExit("%s did not allow it: %r %r" % (name, done.stdout, done.stderr))


def _warm(cases: dict[str, tuple[list[str], bytes, dict[str, str]]], repo: Path) -> None:
    """Warm the bytecode and page caches, and start the server: the first call starts it
    and answers itself; a resident case is retried until the server answers it.
    """
    for name, (command, data, case_env) in cases.items():
        if name.endswith(", resident"):
            subprocess.run(command, input=data, cwd=repo, env={**case_env, RESIDENT: "1"}, capture_output=True)
            for _ in range(400):  # until the server listens (a bound for a broken build)
                done = subprocess.run(command, input=data, cwd=repo, env=case_env, capture_output=True)
                if b"no resident hook process answered" not in done.stdout + done.stderr:
                    break
                time.sleep(0.05)
            _allowed(name, done)
        else:
            subprocess.run(command, input=data, cwd=repo, env=case_env, capture_output=True, check=True)


if __name__ == "__main__":
    main()
