"""The agent hooks' start-up: whole-process wall time of `ledger hook EVENT` for every
event Claude Code sends (PreToolUse and PostToolUse for an Edit and a Bash call,
SessionStart, Stop, SubagentStop, SessionEnd) on a realistic payload and contract, as a
ratio to `python -c pass` measured in the same run, all interleaved and repeated.

The hooks run on every tool call an agent makes, so their start-up is the product.
Target (issue 14): at most 2.5 times the floor at the median. Bytecode caches are
allowed to be written and used, as an installed package has them.

    python bench/hooks.py [--rounds 41]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
    doc = {
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    ledger_cmd = shutil.which("ledger", path=str(Path(sys.executable).parent)) or "ledger"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as tmp:
        repo = Path(tmp) / "repo"
        (repo / ".ledger" / "contracts").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "task-1", str(repo)], check=True)
        (repo / ".ledger" / "contracts" / "TASK-1.toml").write_text(CONTRACT)
        (repo / "greet.py").write_text("def greet(n):\n    return 'Hello ' + n\n")
        # The agent's box: its ledger and its only key (claims are signed and appended).
        env["RECEIPT_LEDGER_KEYS"] = str(Path(tmp) / "keys")
        for setup in (["init"], ["keys", "generate", "agent", "--role", "agent"]):
            subprocess.run([ledger_cmd, *setup], cwd=repo, env=env, check=True, capture_output=True)
        who = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        for git in (["add", "-A"], [*who, "commit", "-qm", "TASK-1: greet with Hello"]):
            subprocess.run(["git", *git], cwd=repo, env=env, check=True, capture_output=True)
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], b""),
            # The least any hook that reads a JSON payload and a TOML contract imports.
            "import json, tomllib": ([sys.executable, "-c", "import json, tomllib"], b""),
            "hook pre-tool-use": ([ledger_cmd, "hook", "pre-tool-use"], _payload(repo, "PreToolUse")),
            "hook post-tool-use": ([ledger_cmd, "hook", "post-tool-use"], _payload(repo, "PostToolUse")),
            # A Bash call is checked against the contract's argument schema for Bash.
            "hook pre-tool-use Bash": ([ledger_cmd, "hook", "pre-tool-use"], _payload(repo, "PreToolUse", "Bash")),
            "hook post-tool-use Bash": ([ledger_cmd, "hook", "post-tool-use"], _payload(repo, "PostToolUse", "Bash")),
            "hook session-start": ([ledger_cmd, "hook", "session-start"], _payload(repo, "SessionStart")),
            # Stop runs the contract's checks (here one that reads a file: the check's own
            # cost is the check's, not the hook's) and records the claim, signed, in the ledger.
            "hook stop": ([ledger_cmd, "hook", "stop"], _payload(repo, "Stop")),
            "hook subagent-stop": ([ledger_cmd, "hook", "subagent-stop"], _payload(repo, "SubagentStop")),
            "hook session-end": ([ledger_cmd, "hook", "session-end"], _payload(repo, "SessionEnd")),
        }
        for command, data in cases.values():  # warm the bytecode caches and the page cache
            subprocess.run(command, input=data, cwd=repo, env=env, capture_output=True, check=True)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (command, data) in cases.items():
                started = time.perf_counter()
                done = subprocess.run(command, input=data, cwd=repo, env=env, capture_output=True)
                times[name].append(time.perf_counter() - started)
                if done.returncode != 0 or (name.startswith(("hook pre-tool-use", "hook stop")) and done.stdout):
                    raise SystemExit("%s did not allow it: %r %r" % (name, done.stdout, done.stderr))
        floor = statistics.median(times["python -c pass"])
        print("hook start-up, %d interleaved rounds (median wall time; ratio to python -c pass):" % args.rounds)
        for name, values in times.items():
            median = statistics.median(values)
            print(
                "  %-24s %7.1f ms   ratio %.2f   (p90 ratio %.2f)"
                % (name, median * 1000, median / floor, statistics.quantiles(values, n=10)[-1] / floor)
            )
        print("target: ratio <= 2.5 at the median for every hook and tool")
        floor2 = statistics.median(times["import json, tomllib"])
        for name in [n for n in cases if n.startswith("hook ")]:
            print("  %s against import json, tomllib: %.2f" % (name, statistics.median(times[name]) / floor2))


if __name__ == "__main__":
    main()
