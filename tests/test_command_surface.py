"""The command surface a newcomer meets (issue 46): `ledger --help` leads with the daily
loop and lists the rest under headings; a command's module loads only when it runs, so
`ledger verify HASH` loads what verifying needs and not every room of the house."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from conftest import run_cli
from ledger.cli import SECTIONS, cli

CLI_DIR = Path(__file__).resolve().parents[1] / "ledger" / "cli"


def _every_command_module_loaded() -> None:
    for path in sorted(CLI_DIR.glob("_*.py")):
        importlib.import_module("ledger.cli." + path.stem)


def test_every_command_is_in_exactly_one_section_under_the_module_that_registers_it() -> None:
    _every_command_module_loaded()
    listed = [name for _, commands in SECTIONS for name, _ in commands]
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == sorted(cli.commands)
    for _, commands in SECTIONS:
        for name, module in commands:
            callback = cli.commands[name].callback
            assert callback is not None and callback.__module__ == "ledger.cli." + module, name


def test_help_shows_the_daily_loop_first_then_headed_groups() -> None:
    shown = CliRunner().invoke(cli, ["--help"]).output
    headings = [line for line in shown.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert headings[:3] == ["Options:", "The daily loop:", "Setting up:"], headings
    first = shown.split("The daily loop:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert 5 <= len(first) <= 12 and [line.split()[0] for line in first[:2]] == ["check", "judge"], first
    assert all(name in shown for _, commands in SECTIONS for name, _ in commands)


def test_a_command_runs_without_loading_the_other_rooms(tmp_path: Path) -> None:
    # A fresh process: `ledger status` in an empty directory (bad input, exit 2) must not
    # have imported the web server, the agents' hooks or the CI commands to say so.
    probe = (
        "import atexit, runpy, sys, json\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        "sys.argv = ['ledger', 'verify', 'blake3:' + '0' * 64]\n"
        "runpy.run_module('ledger', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=_env(tmp_path), check=False
    )
    assert done.returncode == 2, done.stderr
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    for room in ("ledger.cli._web", "ledger.cli._agents", "ledger.cli._git_ci", "ledger.web", "ledger.agents._hooks"):
        assert room not in loaded, room
    assert "ledger.cli._verification" in loaded


def _env(home: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["HOME"] = str(home)
    return env


def test_an_unknown_command_is_one_line_and_exit_2() -> None:
    done = run_cli("no-such-command")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
