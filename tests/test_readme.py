"""The README's "Using it" block and its starting contract, run as written (issue 46): in a
fresh repository of a small Python project, the lead's commands on the lead's home, the
approval on the reviewer's own home with her own SSH key. Only the two hashes the block
shows as placeholders are filled in, with what the seal printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from docs_as_written import run_shell

from conftest import GIT_ENV, git, judge_table

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _block(after: str, fence: str) -> str:
    return README.split(after, 1)[1].split("```%s\n" % fence, 1)[1].split("```", 1)[0]


def _home(tmp: Path, name: str) -> dict[str, str]:
    home = tmp / ("home-" + name)
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "RECEIPT_LEDGER_"))}
    path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))  # an activated venv
    return {**env, **GIT_ENV, "HOME": str(home), "PATH": path}


def test_the_readmes_using_it_block_runs_as_written_on_a_fresh_project(tmp_path: Path) -> None:
    lead, alice = _home(tmp_path, "lead"), _home(tmp_path, "alice")
    ssh = Path(alice["HOME"]) / ".ssh"
    ssh.mkdir(mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / "id_ed25519")], check=True)
    (Path(lead["HOME"]) / "alice.pub").write_bytes((ssh / "id_ed25519.pub").read_bytes())
    # main holds the task: its contract, its tests and a stub; the work is a branch on top.
    repo = tmp_path / "greeter"
    (repo / "tests").mkdir(parents=True)
    (repo / "greet.py").write_text("def greet():\n    raise NotImplementedError\n")
    (repo / "tests" / "test_greet.py").write_text(
        "from greet import greet\n\n\ndef test_friendly():\n    assert greet().startswith('Hello')\n"
    )
    (repo / ".ledger" / "contracts").mkdir(parents=True)
    (repo / ".ledger" / "contracts" / "TASK-7.toml").write_text(_block("## Completion contracts", "toml"))
    (repo / ".ledger" / "config.toml").write_text(judge_table("accept", "0.9"))  # the team's judge endpoint
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-7: the task, its tests and a stub")
    git(repo, "checkout", "-qb", "task-7-greeting")
    (repo / "greet.py").write_text("def greet():\n    return 'Hello, friend'\n")
    git(repo, "commit", "-qam", "TASK-7: greet")
    receipt = ""
    for line in _block("## Using it", "sh").splitlines():
        command = line.split("  #", 1)[0].strip()
        if not command:
            continue
        command = command.replace("blake3:…", receipt).replace("blake3:3aff4c64c4c8", receipt[:19])
        if "--key ~/.ssh/id_ed25519" in command:  # alice, on her machine, answers the question
            done = run_shell(command, repo, alice, answer="y\n")
        else:
            done = run_shell(command, repo, lead)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        if command.startswith("ledger seal"):
            receipt = done.stdout.strip()
    assert (
        receipt.startswith("blake3:") and "MERGE-ELIGIBLE" in run_shell("ledger verify %s" % receipt, repo, lead).stdout
    )
