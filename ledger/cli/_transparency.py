"""The log: `checkpoint`, `prove`, `consistency`, `repair-head`, `witness`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import _FILE, _TrustArgs, json_option, key_option, trust_option
from ._output import emit, progress, ticker, write_out
from ._shared import (
    _Group,
    _ledger,
    _read_text,
    _reader,
    _resolved,
    _signer,
    _source,
    _tlog_policy,
    _trust,
    _where,
    _witnesses,
)


@cli.group(cls=_Group, invoke_without_command=True)
@key_option("Seal or admin key that signs the tree head", required=False)
@click.option("--show", is_flag=True, help="Print the latest checkpoint instead of making one.")
@click.option(
    "--tsa",
    "tsa_url",
    help="Also obtain an RFC 3161 time-stamp over it from this authority (the key must be a seal key).",
)
@click.pass_context
def checkpoint(ctx: click.Context, key_name: str | None, show: bool, tsa_url: str | None) -> None:
    """Sign the current tree head as a C2SP checkpoint (a signed note); `vkey` prints the log's verifier key."""
    if ctx.invoked_subcommand is not None:
        return
    if show:
        click.echo(lib.latest_checkpoint(_reader(ctx)).encode(), nl=False)
        return
    if key_name is None:
        raise lib.InputError("give --key NAME (a seal or admin key), or --show")
    note, stamped = lib.sign_checkpoint(_ledger(ctx), _signer(key_name), tsa_url)
    if stamped is not None:
        click.echo("time-stamp over the checkpoint recorded at entry %d" % stamped.seq, err=True)
    click.echo(note.encode(), nl=False)


@checkpoint.command("vkey")
@click.option("--log-key", required=True, help="The log's seal key: its .pub file or an 'ssh-ed25519 AAAA...' line.")
@click.pass_context
def checkpoint_vkey(ctx: click.Context, log_key: str) -> None:
    """Print the log's signed-note verifier key (NAME+HASH+BASE64), as tile clients and witnesses take it."""
    click.echo(lib.checkpoint_vkey(_reader(ctx), lib.read_public_key(log_key)))


@cli.group(cls=_Group)
def publish() -> None:
    """Publish the log for readers who have neither the ledger nor a mirror."""


@publish.command("tiles")
@click.option(
    "--to",
    "target",
    required=True,
    help="A folder, or s3://BUCKET/PREFIX (the s3 extra; boto3's endpoint and credentials).",
)
@click.pass_context
def publish_tiles(ctx: click.Context, target: str) -> None:
    """Write the newest checkpoint, its hash tiles and entry bundles (C2SP tlog-tiles)."""
    store = lib.open_tile_store(target)
    source = _source(ctx)
    ctx.call_on_close(source.close)
    with progress(False, "publishing tiles") as bar:
        done = lib.publish_tiles(source, store, ticker(bar))
    click.echo(
        "published checkpoint size %d to %s: %d tiles written, %d already there"
        % (done.size, target, done.written, done.kept)
    )


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.pass_context
def prove(ctx: click.Context, hash_text: str) -> None:
    """An inclusion proof for an entry against the latest checkpoint, as a C2SP tlog-proof."""
    click.echo(lib.prove_inclusion(_reader(ctx), _resolved(ctx, hash_text)), nl=False)


@cli.command()
@click.argument("old_size", type=click.IntRange(1))
@click.pass_context
def consistency(ctx: click.Context, old_size: int) -> None:
    """A consistency proof from an earlier tree size to the latest checkpoint."""
    click.echo(lib.prove_consistency(_reader(ctx), old_size), nl=False)


@cli.command("repair-head")
@click.option("--apply", is_flag=True, help="Move the junk rows (without it: only say what would move, exit 1).")
@trust_option
@json_option
@click.pass_context
def repair_head(ctx: click.Context, apply: bool, trust: _TrustArgs, as_json: bool) -> None:
    """Quarantine a shared store's junk head (the database owner's job): the rows from the
    first entry the audit rejects to the head, and the checkpoints over them, move to
    quarantined_entries and quarantined_checkpoints; what remains verifies. Blob rows whose
    bytes do not hash to their name move to quarantined_blobs. --apply also (re)installs the
    store's guards (a store older than one of them gets it).
    """
    url = _where(ctx).store
    if url is None:
        raise lib.InputError("repair-head repairs a shared store: name it with --store URL (as its owner)")
    done = lib.repair_head(url, _trust(ctx, trust), apply=apply)
    emit(as_json, done.as_dict(), done.lines())
    # A dry run that found junk is not a success: the store still does not verify.
    if done.found and not done.applied:
        sys.exit(1)


@cli.group(cls=_Group)
def witness() -> None:
    """Witness a ledger: cosign checkpoints only after checking they extend what you saw."""


@witness.command("cosign")
@click.argument("checkpoint_file", type=_FILE)
@key_option("The witness's own Ed25519 key")
@click.option("--name", "witness_name", required=True, help="The witness's key name, e.g. witness.example/w1.")
@click.option("--log-key", required=True, help="The log's checkpoint key: 'ssh-ed25519 AAAA...' or a .pub file.")
@click.option(
    "--state", type=_FILE, help="The witness's state file (default ~/.config/receipt-ledger/witness-state.json)."
)
@click.option("-o", "--output", type=_FILE, help="Write the cosigned checkpoint here (default: stdout).")
@click.option(
    "--audit",
    "audit_state",
    type=_FILE,
    help="Be an auditing witness: cosign only after a chain audit (resumed from this state file, kept there) passes.",
)
@trust_option
@click.pass_context
def witness_cosign(
    ctx: click.Context,
    checkpoint_file: Path,
    key_name: str,
    witness_name: str,
    log_key: str,
    state: Path | None,
    output: Path | None,
    audit_state: Path | None,
    trust: _TrustArgs,
) -> None:
    """Add a tlog-cosignature to a checkpoint after proving it consistent with the last one seen."""
    with _source(ctx) as source:
        text = lib.cosign(
            source=source,
            checkpoint=_read_text(checkpoint_file, "checkpoint"),
            signer=_signer(key_name),
            name=witness_name,
            log_key=lib.read_log_key(log_key),
            state_path=state,
            audit=(_trust(ctx, trust), audit_state) if audit_state is not None else None,
        )
    write_out(output, text, "cosigned checkpoint written to %s")


@witness.command("add")
@click.argument("checkpoint_file", type=_FILE)
@click.option(
    "--witness",
    "witnesses",
    multiple=True,
    required=True,
    help="The witness whose cosignature to store: 'NAME ssh-ed25519 AAAA...' (or 'NAME PATH.pub'); repeatable.",
)
@click.pass_context
def witness_add(ctx: click.Context, checkpoint_file: Path, witnesses: Sequence[str]) -> None:
    """Store witnesses' cosignatures on the ledger's own checkpoint, each after it verifies."""
    added = lib.add_cosignatures(_ledger(ctx), _read_text(checkpoint_file, "checkpoint"), _witnesses(witnesses, 0))
    click.echo("stored cosignatures of %s" % ", ".join(added) if added else "already stored: nothing to add")


@witness.command("serve")
@key_option("The witness's own Ed25519 key")
@click.option("--name", "witness_name", required=True, help="The witness's key name, e.g. witness.example/w1.")
@click.option(
    "--log", "logs", multiple=True, required=True, help="A log it follows: its verifier key (`ledger checkpoint vkey`)."
)
@click.option("--state", type=_FILE, required=True, help="The witness's state file (kept across restarts).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
def witness_serve(key_name: str, witness_name: str, logs: Sequence[str], state: Path, host: str, port: int) -> None:
    """Run a C2SP tlog-witness: answer POST /add-checkpoint, cosigning only what extends what it holds."""
    service = lib.WitnessService(witness_name, _signer(key_name), lib.log_vkeys(logs), state)
    lib.serve_witness(
        service, host, port, lambda url: click.echo("witness %s serving %s" % (witness_name, url), err=True)
    )


@witness.command("request")
@click.option(
    "--policy", "policy_file", type=_FILE, required=True, help="A C2SP tlog-policy naming the witnesses' URLs."
)
@click.pass_context
def witness_request(ctx: click.Context, policy_file: Path) -> None:
    """Ask each witness of the policy to cosign the newest checkpoint; store the cosignatures that verify."""
    asked = lib.request_cosignatures(_ledger(ctx), _tlog_policy(policy_file))
    for done in asked:
        click.echo("%s: %s" % (done.witness, done.outcome))
    if not asked or any(done.outcome != "cosigned" for done in asked):
        sys.exit(1)


@witness.command("vkey")
@click.option("--name", "witness_name", required=True, help="The witness's key name, e.g. witness.example/w1.")
@click.option(
    "--public-key", required=True, help="The witness's public key: its .pub file or an 'ssh-ed25519 AAAA...' line."
)
def witness_vkey(witness_name: str, public_key: str) -> None:
    """Print the witness's verifier key (cosignature type), for the witness lines of a tlog-policy."""
    click.echo(lib.witness_vkey(witness_name, lib.read_public_key(public_key)))
