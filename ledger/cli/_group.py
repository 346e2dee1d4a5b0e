"""The `ledger` group itself: where the ledger is, which store."""

from __future__ import annotations

from pathlib import Path

import click

from .. import _api as lib
from ._options import store_option
from ._shared import _Group, _Where


@click.group(cls=_Group)
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
    """Signed, replayable receipts of what was actually checked."""
    ctx.obj = _Where(lib.find_ledger_dir(ledger_dir, Path.cwd()), store, ledger_dir is not None)
