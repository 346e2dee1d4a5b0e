"""The `ledger` command: a thin click layer over the library in `ledger`.

Each command parses its arguments, makes one library call and renders the result. Data
goes to stdout, status and errors to stderr. Exit codes: 0 done or verified, 1
verification rejected (or a failing verdict where a command says so), 2 bad input or
could not run: one line on stderr, never a traceback. The commands live in one module
per concern; importing each registers its commands on the one group, which imports a
module when one of its commands is first asked for (`_group.SECTIONS`).
"""

from __future__ import annotations

import sys

import click

from ._group import SECTIONS, cli
from ._shared import _fail

__all__ = ["cli", "main", "SECTIONS"]


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
