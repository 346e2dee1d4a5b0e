"""The auditor's commands: `verify`, `pull`, `export`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from .. import _api as lib
from ._group import cli
from ._options import (
    _FILE,
    _AuditorArgs,
    _CheckpointArgs,
    _TrustArgs,
    auditor_option,
    checkpoint_options,
    json_option,
    key_option,
    trust_option,
)
from ._output import emit, exit_with, progress, warn_if_unsafe
from ._shared import _ledger, _policy, _reader, _readers, _receipt_arg, _resolved, _signer, _source, _trust, _where


@cli.command("verify")
@click.argument("hash_text", metavar="[HASH]", required=False)
@click.option("--chain", is_flag=True, help="Audit the whole chain instead of one receipt.")
@click.option("--bundle", type=_FILE, help="Verify an exported evidence bundle, offline.")
@click.option("--commit", "commit_rev", help="Verify the receipts attached to this commit (git notes).")
@click.option(
    "--tiles",
    help="The log as published in tiles (a folder or an http(s) prefix): with HASH or --bundle, the receipt's"
    " checkpoint must be its prefix; alone, audit the published log from its files. Needs --log-vkey.",
)
@click.option("--log-vkey", help="With --tiles: the log's verifier key (`ledger checkpoint vkey`).")
@click.option(
    "--scitt",
    "scitt",
    nargs=4,
    type=_FILE,
    metavar="STATEMENT RECEIPT ISSUER_KEY LOG_KEY",
    help="Check a SCITT signed statement and its RFC 9942 receipt offline (the keys as PEM or OpenSSH .pub files).",
)
@click.option(
    "--registered",
    is_flag=True,
    help="With --scitt: also check that the receipt's tree is this ledger's statement log (a split view fails).",
)
@trust_option
@checkpoint_options
@auditor_option
@click.option("--skip-evidence", is_flag=True, help="With --chain: do not read evidence blobs (the output says so).")
@click.option(
    "--resume",
    "resume_path",
    type=_FILE,
    help="With --chain: the state a clean audit left; walk only the entries after it, then update it.",
)
@click.option(
    "--save-state",
    type=_FILE,
    help="With --chain: after a clean audit, write its state at the newest checkpoint here (for --resume).",
)
@click.option(
    "--method",
    type=click.Choice(["auto", "proof", "walk"]),
    default="auto",
    show_default=True,
    help="A receipt on a ledger: prove its entries into the newest checkpoint (proof), replay the chain (walk),"
    " or prove where a checkpoint covers it and walk otherwise (auto).",
)
@json_option
@click.pass_context
def verify_cmd(
    ctx: click.Context,
    hash_text: str | None,
    chain: bool,
    bundle: Path | None,
    commit_rev: str | None,
    tiles: str | None,
    log_vkey: str | None,
    scitt: tuple[Path, Path, Path, Path] | None,
    registered: bool,
    trust: _TrustArgs,
    checkpoints: _CheckpointArgs,
    auditors: _AuditorArgs,
    skip_evidence: bool,
    resume_path: Path | None,
    save_state: Path | None,
    method: str,
    as_json: bool,
) -> None:
    """Recompute every hash and signature and re-derive merge_eligible.

    Exit 0 verified (a receipt: and merge-eligible), 1 rejected, 2 cannot run, 3 a receipt
    verified but not merge-eligible.
    """
    if scitt:
        _verify_scitt(ctx, scitt, registered, as_json)
    alone = tiles is not None and hash_text is None and bundle is None and commit_rev is None
    policy = _policy(
        trust, auditors, checkpoints, require_checkpoint=bundle is not None, published=_published(tiles, log_vkey)
    )
    if alone:
        _audit_tiles(str(tiles), log_vkey, policy, as_json)
    receipt = _receipt_arg(ctx, hash_text, bundle)
    request = lib.VerifyRequest(receipt, chain, bundle, commit_rev, method, not skip_evidence, resume_path, save_state)
    root = _trust(ctx, trust, judges_candidate=commit_rev is not None)
    with progress(as_json, "verifying chain") as bar:
        verified = lib.run_verify(request, root, policy, progress=bar, **_readers(ctx))
    emit(as_json, verified.document, verified.lines, root)
    sys.exit(verified.exit_code)


def _verify_scitt(
    ctx: click.Context, files: tuple[Path, Path, Path, Path], registered: bool, as_json: bool
) -> NoReturn:
    source = _source(ctx) if registered else None
    if source is not None:
        ctx.call_on_close(source.close)
    statement, receipt, issuer_key, log_key = (lib.read_bounded(f, "SCITT input") for f in files)
    verdict = lib.check_scitt(statement, receipt, issuer_key, log_key, registered_in=source)
    doc = {
        "ok": verdict.ok,
        "failure": verdict.failure,
        "detail": verdict.detail,
        "tree_size": verdict.tree_size,
        "leaf_index": verdict.leaf_index,
    }
    said = "VERIFIED: %s" % verdict.detail if verdict.ok else "REJECTED (%s): %s" % (verdict.failure, verdict.detail)
    emit(as_json, doc, [said])
    exit_with(verdict.ok)


def _published(where: str | None, log_vkey: str | None) -> Any:
    """The log as published in tiles, for step 8f (None without --tiles)."""
    if where is None:
        return None
    if log_vkey is None:
        raise lib.InputError("--tiles needs --log-vkey: the log's verifier key (`ledger checkpoint vkey`)")
    from verify import PublishedLog

    return PublishedLog(where, log_vkey)


def _audit_tiles(where: str, log_vkey: str | None, policy: Any, as_json: bool) -> NoReturn:
    if log_vkey is None:
        raise lib.InputError("--tiles needs --log-vkey: the log's verifier key (`ledger checkpoint vkey`)")
    audit = lib.run_tile_audit(where, log_vkey, policy)
    doc = {"size": audit.size, "tiles": audit.tiles, "ok": audit.ok, "defects": [d.as_dict() for d in audit.defects]}
    lines = ["%s: %s tiles at size %d read" % ("VERIFIED" if audit.ok else "REJECTED", audit.tiles, audit.size)]
    emit(as_json, doc, lines + ["  %s: %s" % (d.code, d.message) for d in audit.defects])
    exit_with(audit.ok)


@cli.command()
@click.option("--from", "from_url", help="The shared ledger's URL (default: the configured store).")
@click.option(
    "--to", "to_dir", type=click.Path(path_type=Path, file_okay=False), help="Mirror directory (default: --dir)."
)
@json_option
@click.pass_context
def pull(ctx: click.Context, from_url: str | None, to_dir: Path | None, as_json: bool) -> None:
    """Copy a shared ledger into a local mirror, proving the shared log only grew.

    Exit 0 pulled, 1 refused (a rewritten history: nothing written), 2 cannot run.
    """
    where = _where(ctx)
    url = lib.shared_store(where.root, from_url) if from_url else where.store
    if url is None:
        raise lib.InputError("pull needs --from postgresql://HOST/DB (or a configured store)")
    to = to_dir or where.root
    with progress(as_json, "pulling entries") as bar:
        res = lib.pull(url, to, progress=bar.update if bar is not None else None)
    emit(as_json, res.as_dict(), lib.pull_lines(res))
    exit_with(res.ok)


# -- exports and transparency --------------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("-o", "--output", type=_FILE, required=True, help="Where to write it.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["bundle", "intoto", "vsa", "svr", "scitt", "test-result"]),
    default="bundle",
    show_default=True,
    help="A zip that verifies offline; an in-toto Statement of our predicate; a SLSA verification summary;"
    " or in-toto's test-result predicate of the deterministic record (the last three in a DSSE envelope).",
)
@key_option("Seal key that signs the statement (intoto, vsa, svr, scitt and test-result)", required=False)
@trust_option
@click.option(
    "--redact",
    multiple=True,
    help="bundle: leave out an evidence item (check:tests:stdout, diff) or a check's raw output (tests),"
    " kept by digest; never what a verdict is derived from. Repeatable.",
)
@click.option("--resource-uri", help="vsa: the resourceUri policy tools match (default: a urn of the candidate).")
@click.pass_context
def export(
    ctx: click.Context,
    hash_text: str,
    output: Path,
    fmt: str,
    key_name: str | None,
    trust: _TrustArgs,
    redact: Sequence[str],
    resource_uri: str | None,
) -> None:
    """Export a receipt: as an evidence bundle, as a signed in-toto attestation, or as a
    signed SLSA verification summary of its verification against the trust root.
    """
    request = lib.ExportRequest(fmt, output, tuple(redact), resource_uri, signed=key_name is not None)
    signer = _signer(key_name) if key_name is not None else None
    root = _trust(ctx, trust) if request.verifies_here else None
    ledger = _reader(ctx) if fmt == "bundle" else _ledger(ctx)
    wrote = lib.export_receipt(ledger, _resolved(ctx, hash_text, ledger), request, signer, root)
    if root is not None:
        warn_if_unsafe(root)
    click.echo(wrote, err=True)


@cli.command()
@click.option(
    "--state", "state_path", type=_FILE, required=True, help="The monitor's state (created on the first pass)."
)
@click.option("--webhook", help="POST each alert as JSON here (nothing is sent anywhere without it).")
@click.option(
    "--evidence",
    "evidence_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where split views' checkpoints are saved (default: beside the state).",
)
@click.option(
    "--every", type=click.IntRange(1), help="Keep following: a pass every this many seconds (default: one pass)."
)
@trust_option
@checkpoint_options
@auditor_option
@click.pass_context
def monitor(
    ctx: click.Context,
    state_path: Path,
    webhook: str | None,
    evidence_dir: Path | None,
    every: int | None,
    trust: _TrustArgs,
    checkpoints: _CheckpointArgs,
    auditors: _AuditorArgs,
) -> None:
    """Follow the log from a state file: alert once on a split view, a rejected receipt, a weakening, a key change or a lost quorum.

    Exit 0 no new alert, 1 alerts raised (one pass), 2 cannot run.
    """
    raised = lib.follow_log(
        lambda: _source(ctx),
        lib.MonitorSetup(_trust(ctx, trust), _policy(trust, auditors, checkpoints), state_path, evidence_dir, webhook),
        every,
        lambda alert: click.echo("ALERT %s: %s" % (alert.kind, alert.message)),
        click.echo,
    )
    sys.exit(1 if raised else 0)
