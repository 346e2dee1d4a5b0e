"""The auditor's commands: `verify`, `pull`, `export`."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import _FILE, _AuditorArgs, _TrustArgs, auditor_option, json_option, key_option, trust_option
from ._shared import (
    _digest,
    _done,
    _emit,
    _ledger,
    _ledger_opener,
    _policy,
    _read_bytes,
    _read_text,
    _reader,
    _repo,
    _said,
    _signer,
    _source,
    _trust,
    _where,
    _witnesses,
)


@cli.command("verify")
@click.argument("hash_text", metavar="[HASH]", required=False)
@click.option("--chain", is_flag=True, help="Audit the whole chain instead of one receipt.")
@click.option("--bundle", type=_FILE, help="Verify an exported evidence bundle, offline.")
@click.option("--commit", "commit_rev", help="Verify the receipts attached to this commit (git notes).")
@trust_option
@click.option("--since", "since", type=_FILE, help="A checkpoint you kept: prove the ledger only grew since.")
@click.option("--require-checkpoint", is_flag=True, help="Reject unless a signed checkpoint covers the receipt.")
@click.option(
    "--witness", "witnesses", multiple=True, help="A trusted witness: 'NAME ssh-ed25519 AAAA...'; repeatable."
)
@click.option(
    "--witness-quorum", default=0, type=click.IntRange(0, 64), help="Cosignatures required from --witness keys."
)
@auditor_option
@click.option("--skip-evidence", is_flag=True, help="With --chain: do not read evidence blobs (the output says so).")
@click.option(
    "--tsa-cert",
    type=_FILE,
    help="PEM certificate(s) of the time-stamping authority you trust: the checkpoint's RFC 3161 time-stamp must verify.",
)
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
    trust: _TrustArgs,
    since: Path | None,
    require_checkpoint: bool,
    witnesses: Sequence[str],
    witness_quorum: int,
    auditors: _AuditorArgs,
    skip_evidence: bool,
    tsa_cert: Path | None,
    resume_path: Path | None,
    save_state: Path | None,
    method: str,
    as_json: bool,
) -> None:
    """Recompute every hash and signature and re-derive merge_eligible.

    Exit 0 verified, 1 rejected, 2 cannot run.
    """
    from verify import AuditState, BundleSource, LedgerSource, tsa_roots, verify_chain, verify_receipt

    if bundle is not None and chain:
        raise lib.InputError("--chain audits a ledger, not a bundle")
    if (resume_path or save_state) and not chain:
        raise lib.InputError("--resume and --save-state go with --chain")
    resume = AuditState.from_json(_read_text(resume_path, "audit state")) if resume_path else None
    save_state = save_state or resume_path
    if bundle is None and commit_rev is None and chain == (hash_text is not None):
        raise lib.InputError("give either a receipt HASH or --chain")
    policy = _policy(
        trust,
        auditors,
        since=_read_text(since, "checkpoint") if since else None,
        require_checkpoint=require_checkpoint or bundle is not None,
        witnesses=_witnesses(witnesses, witness_quorum),
        quorum=witness_quorum,
        tsa_roots=tsa_roots(_read_bytes(tsa_cert, "TSA certificate")) if tsa_cert else (),
    )
    root = _trust(ctx, trust, judges_candidate=commit_rev is not None)
    if commit_rev is not None:
        if bundle is not None or chain:
            raise lib.InputError("--commit verifies what git holds for a commit: not with --bundle or --chain")
        checks = lib.verify_commit(_repo(), commit_rev, root, policy, open_ledger=_ledger_opener(ctx))
        _emit(as_json, [c.as_dict() for c in checks], lib.commit_lines(checks), root)
        _done(all(c.ok for c in checks))
    source: BundleSource | LedgerSource = BundleSource(bundle) if bundle is not None else _source(ctx)
    try:
        if chain and isinstance(source, LedgerSource):
            todo = source.count() - (resume.size if resume else 0)
            if sys.stderr.isatty() and not as_json:
                with click.progressbar(length=max(todo, 0), label="verifying chain", file=sys.stderr) as bar:
                    cres = verify_chain(
                        source,
                        root,
                        progress=bar.update,
                        transparency=policy,
                        evidence=not skip_evidence,
                        resume=resume,
                    )
            else:
                cres = verify_chain(source, root, transparency=policy, evidence=not skip_evidence, resume=resume)
            if save_state is not None and cres.state is not None:
                lib.write_text_atomic(save_state, cres.state.to_json())
            _emit(as_json, cres.as_dict(), lib.chain_lines(cres, save_state), root)
            _done(cres.ok)
        if hash_text is None and isinstance(source, BundleSource):
            hash_text = source.receipt_hash()
        res = verify_receipt(source, hash_text or "", root, policy, method)
    finally:
        source.close()
    _emit(as_json, res.as_dict(), lib.verify_lines(res), root)
    _done(res.ok)


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
    if sys.stderr.isatty() and not as_json:
        with click.progressbar(length=0, label="pulling entries", file=sys.stderr) as bar:
            res = lib.pull(url, to, progress=bar.update)
    else:
        res = lib.pull(url, to)
    _emit(as_json, res.as_dict(), lib.pull_lines(res))
    _done(res.ok)


# -- exports and transparency --------------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("-o", "--output", type=_FILE, required=True, help="Where to write it.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["bundle", "intoto", "vsa", "test-result"]),
    default="bundle",
    show_default=True,
    help="A zip that verifies offline; an in-toto Statement of our predicate; a SLSA verification summary;"
    " or in-toto's test-result predicate of the deterministic record (the last three in a DSSE envelope).",
)
@key_option("Seal key that signs the DSSE envelope (intoto, vsa and test-result)", required=False)
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
    if redact and fmt != "bundle":
        raise lib.InputError("--redact applies to a bundle")
    if fmt == "bundle":
        manifest = lib.export_bundle(_reader(ctx), _digest(hash_text), output, redact)
        click.echo(
            "wrote %s: %s, %d entries, final status %s%s"
            % (
                output,
                manifest["task"],
                len(manifest["entries"]),
                manifest["final_status"],
                "; redacted: %s" % ", ".join(r["check"] for r in manifest["redacted"]) if manifest["redacted"] else "",
            ),
            err=True,
        )
        return
    if key_name is None:
        raise lib.InputError("--format %s needs --key: the seal key that signs the envelope" % fmt)
    if fmt == "test-result":
        root = _trust(ctx, trust)
        envelope = lib.export_test_result(_ledger(ctx), _digest(hash_text), _signer(key_name), output, root)
        _said(root)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        click.echo("wrote %s (in-toto test result: %s)" % (output, statement["predicate"]["result"]), err=True)
        return
    if fmt == "vsa":
        root = _trust(ctx, trust)
        envelope = lib.export_vsa(_ledger(ctx), _digest(hash_text), _signer(key_name), output, root, resource_uri)
        _said(root)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        click.echo(
            "wrote %s (SLSA verification summary: %s)" % (output, statement["predicate"]["verificationResult"]),
            err=True,
        )
        return
    lib.export_intoto(_ledger(ctx), _digest(hash_text), _signer(key_name), output)
    click.echo("wrote %s (DSSE envelope, payloadType application/vnd.in-toto+json)" % output, err=True)
