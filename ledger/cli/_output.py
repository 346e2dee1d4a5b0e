"""How commands answer: a result as JSON or lines (terminal-safe), an appended entry, a file
or stdout, the exit code, progress on long work, and the warning an unsafe trust root owes
every result it decides.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from verify import Trust, UnsafeTrustOnFirstUse

from .. import _api as lib
from .._escape import terminal_text


def warn_if_unsafe(trust: Trust) -> None:
    # Beside a result only: a command that fails on bad input still prints one line.
    if isinstance(trust, UnsafeTrustOnFirstUse):
        click.echo(
            "warning: UNSAFE: --unsafe-trust-on-first-use: the admin key is whatever the ledger starts with;"
            " this result proves nothing about who signed it",
            err=True,
        )


def emit(as_json: bool, doc: object, lines: Sequence[str], trust: Trust | None = None) -> None:
    if trust is not None:
        warn_if_unsafe(trust)
    click.echo(json.dumps(doc, indent=2) if as_json else terminal_text("\n".join(lines)))


def emit_appended(as_json: bool, name: str, appended: lib.Appended, body: object, said: str) -> None:
    """A command that appended one entry: its document with --json (`lib.appended_document`);
    else the body's hash on stdout (for scripts) and what was done on stderr.
    """
    if as_json:
        emit(True, lib.appended_document(name, appended, body), ())
    else:
        click.echo(str(appended.body_hash))
        first, _, rest = said.partition("\n")
        click.echo("%s (entry %d)%s" % (first, appended.seq, "\n" + rest if rest else ""), err=True)


def write_out(output: Path | None, text: str, said: str = "") -> None:
    """``text`` to stdout, or atomically to ``output`` (then ``said % output`` on stderr)."""
    if output is None:
        click.echo(text, nl=False)
        return
    lib.write_text_atomic(output, text)
    if said:
        click.echo(said % output, err=True)


def exit_with(ok: bool) -> NoReturn:
    sys.exit(0 if ok else 1)


class Bar:
    """A progress bar on stderr, drawn only once the work's size is known (`lib.Progress`)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: Any = None

    def start(self, total: int) -> None:
        self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
        self.bar.__enter__()

    def update(self, done: int) -> None:
        if self.bar is None:
            self.start(0)  # work of unknown size (a pull): the bar counts instead
        self.bar.update(done)


def ticker(bar: Bar | None) -> Callable[[int, int], None] | None:
    """A (done, total) callback that draws ``bar``: started at the first step, one step each."""
    if bar is None:
        return None
    drawn = bar

    def tell(done: int, total: int) -> None:
        if done == 1:
            drawn.start(total)
        drawn.update(1)

    return tell


@contextlib.contextmanager
def progress(as_json: bool, label: str) -> Iterator[Bar | None]:
    """Progress for a person at a terminal; none for machines (``--json``) or a CI log."""
    if as_json or not sys.stderr.isatty():
        yield None
        return
    bar = Bar(label)
    try:
        yield bar
    finally:
        if bar.bar is not None:
            bar.bar.__exit__(None, None, None)
