"""SCITT registration: `scitt register`, `scitt receipt`, `scitt serve` (format.md §15a)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import _FILE, F, client_timeout_option, json_option, key_option
from ._output import emit
from ._shared import _Group, _ledger, _signer


@cli.group(cls=_Group)
def scitt() -> None:
    """Register SCITT signed statements in the log and give RFC 9942 receipts for them."""


def _scitt_options(f: F) -> F:
    """The statement, the log's key, where the receipt goes, --json."""
    for option in reversed(
        (
            click.argument("statement", type=_FILE),
            key_option("The log's seal key: it signs the entry and the receipt"),
            click.option("-o", "--out", type=_FILE, required=True, help="Write the receipt (COSE_Sign1) here."),
            json_option,
            click.pass_context,
        )
    ):
        f = option(f)
    return f


def _issuers(names: tuple[str, ...], keys: tuple[Path, ...]) -> list[lib.Issuer]:
    """Each ``--issuer`` paired, in order, with its ``--issuer-key``: a key is accepted only
    for the issuer its statements name (``iss``).
    """
    if len(names) != len(keys):
        raise lib.InputError("give one --issuer ISS for each --issuer-key KEY, in the same order")
    return [lib.Issuer(name, lib.read_bounded(key, "issuer key")) for name, key in zip(names, keys, strict=True)]


_ISSUER_HELP = "The iss its statements carry, one per --issuer-key in the same order."


@scitt.command("register")
@_scitt_options
@click.option(
    "--issuer-key",
    type=_FILE,
    help="The statement issuer's public key (PEM or an OpenSSH .pub file); default: the seal key of this"
    " ledger that the statement's kid names (its iss then the ledger's origin).",
)
@click.option("--issuer", help=_ISSUER_HELP)
def scitt_register(
    ctx: click.Context,
    statement: Path,
    key_name: str,
    out: Path,
    as_json: bool,
    issuer_key: Path | None,
    issuer: str | None,
) -> None:
    """Register a signed statement (once: a retry appends nothing) and write its receipt."""
    given = _issuers((issuer,) if issuer is not None else (), (issuer_key,) if issuer_key is not None else ())
    data = lib.read_bounded(statement, "statement")
    done = lib.register_statement(_ledger(ctx), _signer(key_name), data, given[0] if given else None)
    _said_registration(done, out, as_json)


@scitt.command("receipt")
@_scitt_options
def scitt_receipt(ctx: click.Context, statement: Path, key_name: str, out: Path, as_json: bool) -> None:
    """Write a new receipt for a registered statement, over the statement log as it stands now."""
    data = lib.read_bounded(statement, "statement")
    done = lib.register_statement(_ledger(ctx), _signer(key_name), data, None, append=False)
    _said_registration(done, out, as_json)


def _said_registration(done: lib.Registration, out: Path, as_json: bool) -> None:
    lib.write_atomic(out, done.receipt)
    how = "registered at entry %d" % done.seq if done.appended else "already registered (entry %d)" % done.seq
    doc = {"seq": done.seq, "index": done.index, "tree_size": done.size, "appended": done.appended, "receipt": str(out)}
    emit(
        as_json,
        doc,
        ["%s, index %d of %d in the statement log; receipt written to %s" % (how, done.index, done.size, out)],
    )


@scitt.command("serve")
@key_option("The log's seal key: it signs the entries and the receipts")
@click.option(
    "--issuer-key",
    "issuer_keys",
    type=_FILE,
    multiple=True,
    help="An issuer whose statements are accepted (PEM or an OpenSSH .pub file; repeat, each with --issuer)."
    " Statements whose kid names an active seal key of this ledger are accepted too.",
)
@click.option("--issuer", "issuer_names", multiple=True, help=_ISSUER_HELP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port (0: a free one, printed).")
@client_timeout_option("--idle-timeout", "Seconds a connection may send nothing before it is dropped.")
@click.pass_context
def scitt_serve(
    ctx: click.Context,
    key_name: str,
    issuer_keys: tuple[Path, ...],
    issuer_names: tuple[str, ...],
    host: str,
    port: int,
    idle_timeout: float,
) -> None:
    """Serve SCITT registration (SCRAPI): POST /entries, GET /entries/ID, GET /.well-known/scitt-keys."""
    service = lib.ScittService(_ledger(ctx), _signer(key_name), _issuers(issuer_names, issuer_keys))
    lib.serve_scitt(service, host, port, _announce, idle_timeout)


def _announce(url: str) -> None:
    click.echo("SCITT registration serving %s" % url, err=True)
