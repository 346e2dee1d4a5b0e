"""The `ledger` command: a thin click layer over the library in `ledger`.

Each command parses its arguments, makes one library call and renders the result. Data
goes to stdout, status and errors to stderr. Exit codes: 0 done or verified, 1
verification rejected (or a failing verdict where a command says so), 2 bad input or
could not run: one line on stderr, never a traceback. The commands live in one module
per concern; importing each registers its commands on the one group.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import _api as lib
from . import (
    _agents,
    _contracts,
    _git_ci,
    _inspection,
    _keys,
    _ladder,
    _retention,
    _review,
    _scitt,
    _transparency,
    _verification,
    _web,
)
from ._group import cli
from ._shared import _fail

__all__ = ["cli", "main"]

# Importing a module registers its commands on the group.
COMMAND_MODULES = (
    _keys,
    _ladder,
    _review,
    _contracts,
    _inspection,
    _verification,
    _transparency,
    _scitt,
    _git_ci,
    _agents,
    _web,
    _retention,
)


@cli.command()
@click.option("--keep", type=click.Path(path_type=Path, file_okay=False), help="Build the demo here and keep it.")
def demo(keep: Path | None) -> None:
    """Run the whole job end to end in a throwaway workspace."""
    sys.exit(lib.run_demo(keep))


def main() -> None:
    """Run the ``ledger`` command line (the console script's entry point)."""
    # Click's own handling of a bad option or argument prints usage over three lines; a
    # usage error is bad input like any other: one line on stderr, exit 2.
    try:
        code = cli.main(prog_name="ledger", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.format_message())  # no arguments at all: the help, as click gives it
        sys.exit(2)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ledger"
        _fail("%s (see `%s --help`)" % (exc.format_message(), where))
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
