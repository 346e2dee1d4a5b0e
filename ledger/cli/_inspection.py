"""Reading the ledger: `show`, `blob`, `log`, `status`, `stats`."""

from __future__ import annotations

import sys

import click

from .. import _api as lib
from ._group import cli
from ._options import json_option
from ._output import emit
from ._shared import _reader


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("--signed-bytes", is_flag=True, help="Write the exact bytes the entry's signature covers to stdout.")
@click.option("--signature", is_flag=True, help="Write the entry's signature as an armored SSH signature.")
@json_option
@click.pass_context
def show(ctx: click.Context, hash_text: str, signed_bytes: bool, signature: bool, as_json: bool) -> None:
    """Show what a hash names: an entry, record or receipt (by its hash or entry hash), a
    contract (as its TOML) or evidence (as its text, with its type), whole or by the prefix
    any table printed.
    """
    ledger = _reader(ctx)
    shown = lib.find_shown(ledger, hash_text)
    stored = ledger.find(shown.entry) if shown.entry is not None else None
    if (signed_bytes or signature) and stored is None:
        raise lib.InputError("--signed-bytes and --signature show an entry's; %s is a %s" % (hash_text, shown.kind))
    if signed_bytes and stored is not None:
        sys.stdout.buffer.write(lib.signed_bytes(stored))
        sys.stdout.buffer.flush()
    elif signature and stored is not None:
        click.echo(lib.armored_signature(stored), nl=False)
    else:
        emit(as_json, *lib.shown_views(ledger, shown))


@cli.command()
@click.argument("digest_text", metavar="DIGEST")
@click.option("--full", is_flag=True, help="Write the whole blob (binary-safe) instead of a truncated view.")
@click.option("--lines", default=200, show_default=True, help="Lines shown when truncating.")
@click.pass_context
def blob(ctx: click.Context, digest_text: str, full: bool, lines: int) -> None:
    """Show stored evidence by its digest: truncated for reading, whole with --full."""
    ledger = _reader(ctx)
    digest = lib.resolve_blob(ledger, digest_text)
    if full:
        lib.copy_blob(ledger, digest, sys.stdout.buffer)
        return
    text, note = lib.blob_preview(ledger, digest, lines)
    click.echo(text, nl=False)
    if note:
        click.echo(note, err=True)


@cli.command()
@click.option("--task", help="Only entries of this task.")
@json_option
@click.pass_context
def log(ctx: click.Context, task: str | None, as_json: bool) -> None:
    """List the chain, oldest first."""
    ledger = _reader(ctx)
    rows = lib.log_rows(ledger.entries(task=task), {s.key_id: s.spec.name for s in ledger.keyring()})
    emit(as_json, rows, lib.log_lines(rows))


# -- status and stats ------------------------------------------------------------------------------


@cli.command()
@click.argument("task", required=False)
@click.option("--window", default=50, show_default=True, help="Claims the verification nudge looks back over.")
@click.option(
    "--threshold", default=0.3, show_default=True, help="Alert when more than this share of claims went unverified."
)
@json_option
@click.pass_context
def status(ctx: click.Context, task: str | None, window: int, threshold: float, as_json: bool) -> None:
    """Each task's state, derived from the chain alone, and the verification nudge."""
    report = lib.status_report(_reader(ctx), task, window, threshold)
    emit(as_json, report.as_dict(), lib.status_lines(report))


@cli.command()
@click.option("--task-prefix", default="", help="Only families whose tasks start with this.")
@click.option("--k", "ks", default="1,5", show_default=True, help="The k of pass@k and pass^k, comma-separated.")
@json_option
@click.pass_context
def stats(ctx: click.Context, task_prefix: str, ks: str, as_json: bool) -> None:
    """pass@k and pass^k over repeated trials of a task family (tasks named FAMILY@N)."""
    rows = lib.stats(_reader(ctx), task_prefix, lib.parse_ks(ks))
    emit(as_json, [row.as_dict() for row in rows], lib.stats_lines(rows))
