"""The `ledger` group itself: where the ledger is, which store; and its commands, listed
under headings with the daily loop first, each module imported only when one of its
commands runs (so that `ledger verify HASH` loads what verifying needs, not every room).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from .. import _api as lib
from ._options import store_option
from ._shared import _Group, _Where

__all__ = ["cli", "SECTIONS"]

# (heading, ((command, the module under ledger.cli that registers it), ...)), in the order
# `ledger --help` shows them. The first section is what a newcomer runs every day.
SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "The daily loop",
        (
            ("check", "_ladder"),
            ("judge", "_ladder"),
            ("approve", "_review"),
            ("reject", "_review"),
            ("seal", "_ladder"),
            ("status", "_inspection"),
            ("gate", "_git_ci"),
            ("verify", "_verification"),
            ("show", "_inspection"),
            ("log", "_inspection"),
        ),
    ),
    (
        "Setting up",
        (
            ("init", "_keys"),
            ("keys", "_keys"),
            ("contract", "_contracts"),
            ("sealed", "_contracts"),
            ("task", "_agents"),
            ("demo", "_keys"),
        ),
    ),
    ("Exceptions and retention", (("waive", "_contracts"), ("retention", "_retention"), ("prune", "_retention"))),
    ("Receipts in git", (("attach", "_git_ci"), ("receipts", "_git_ci"), ("pr-comment", "_git_ci"))),
    (
        "Transparency",
        (
            ("checkpoint", "_transparency"),
            ("prove", "_transparency"),
            ("consistency", "_transparency"),
            ("witness", "_transparency"),
            ("publish", "_transparency"),
            ("monitor", "_verification"),
            ("scitt", "_scitt"),
        ),
    ),
    (
        "Audit and export",
        (
            ("report", "_retention"),
            ("export", "_verification"),
            ("stats", "_inspection"),
            ("blob", "_inspection"),
            ("pull", "_verification"),
            ("repair-head", "_transparency"),
        ),
    ),
    ("Servers", (("serve", "_web"), ("site", "_web"))),
    (
        "For hooks, CI and tier runners",
        (
            ("hook", "_agents"),
            ("ci", "_git_ci"),
            ("claim", "_agents"),
            ("stopped", "_agents"),
            ("effect", "_agents"),
            ("evidence", "_agents"),
            ("trace", "_agents"),
            ("record", "_ladder"),
        ),
    ),
)
_MODULE_OF = {name: module for _, commands in SECTIONS for name, module in commands}


class _Sectioned(_Group):
    """The top-level group: commands load on first use and `--help` lists them by section."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_MODULE_OF)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = _MODULE_OF.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            importlib.import_module("ledger.cli." + module)  # registers its commands on this group
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in _MODULE_OF)
        for heading, commands in SECTIONS:
            rows = []
            for name, _ in commands:
                found = self.get_command(ctx, name)
                if found is not None and not found.hidden:
                    rows.append((name, found.get_short_help_str(limit)))
            with formatter.section(heading):
                formatter.write_dl(rows)


@click.group(cls=_Sectioned)
@click.version_option(lib.VERSION, prog_name="receipt-ledger")
@click.option(
    "--dir",
    "ledger_dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="LEDGER_DIR",
    help="Ledger directory (default: .ledger at the git root).",
)
@store_option
@click.pass_context
def cli(ctx: click.Context, ledger_dir: Path | None, store: str | None) -> None:
    """Signed, replayable receipts of what was actually checked.

    Start with `ledger demo`; every day: check, judge, approve, seal, then gate or verify.
    """
    ctx.obj = _Where(ledger_dir, store)
