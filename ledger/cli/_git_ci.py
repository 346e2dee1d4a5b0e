"""Receipts in git and CI: `attach`, `receipts`, `ci`, `gate`, `pr-comment`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from .. import _api as lib
from ._group import cli
from ._options import _FILE, F, _AuditorArgs, _TrustArgs, auditor_option, json_option, key_option, trust_option
from ._output import emit, exit_with, warn_if_unsafe
from ._shared import (
    _Group,
    _ledger,
    _ledger_opener,
    _policy,
    _reader,
    _repo,
    _resolved,
    _signer,
    _trust,
    _where,
)


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("--commit", "rev", help="The candidate commit (default: the one the deterministic tier snapshotted).")
@key_option("Seal key that signs a checkpoint if none covers the receipt yet", required=False)
@click.pass_context
def attach(ctx: click.Context, hash_text: str, rev: str | None, key_name: str | None) -> None:
    """Store a receipt in git: its evidence bundle under refs/receipts/, and a note on its
    candidate commit and on that commit's tree (refs/notes/receipts).
    """
    signer = _signer(key_name) if key_name else None
    click.echo(
        lib.attach(ledger := _ledger(ctx), _repo(), _resolved(ctx, hash_text, ledger), rev, checkpoint_signer=signer)
    )
    click.echo("attached; share it with: ledger receipts push", err=True)


@cli.group(cls=_Group)
def receipts() -> None:
    """Share receipts through a git remote: notes merged without loss, pushes never forced."""


def _remote_option(f: F) -> F:
    return click.option("--remote", default="origin", show_default=True, help="The git remote.")(f)


@receipts.command("fetch")
@_remote_option
@json_option
def receipts_fetch(remote: str, as_json: bool) -> None:
    """Fetch the remote's receipt notes and bundles; merge its notes into ours (cat_sort_uniq)."""
    res = lib.fetch_receipts(_repo(), remote)
    emit(
        as_json, res.as_dict(), ["fetched receipts from %s%s" % (remote, "; notes merged" if res.notes_merged else "")]
    )


@receipts.command("push")
@_remote_option
@json_option
def receipts_push(remote: str, as_json: bool) -> None:
    """Push receipt bundles and notes, merging the remote's first; retried on a race, never forced."""
    res = lib.push_receipts(_repo(), remote)
    emit(as_json, res.as_dict(), ["pushed receipts to %s (attempt %d)" % (remote, res.attempts)])


@cli.group(cls=_Group)
def ci() -> None:
    """Entry points for CI systems (the GitHub Action calls `ledger ci github`)."""


@ci.command("github")
def ci_github() -> None:
    """Run the receipt-ledger GitHub Action in the checked-out workspace, from the runner's
    environment (GITHUB_*) and the action's inputs (LEDGER_*). Exit 0 when the gate passes
    (or, without the gate, every tier passed), 1 otherwise, 2 on bad input.
    """
    report = lib.run_action(os.environ, _repo())
    for line in report.notes:
        click.echo("note: %s" % line, err=True)
    if report.gated is not None:
        click.echo("\n".join(lib.gate_lines(report.gated)))
    exit_with(report.ok)


@cli.command()
@click.argument("rev", default="HEAD")
@trust_option
@click.option("--require-checkpoint", is_flag=True, help="Also require a signed checkpoint covering the receipt.")
@click.option(
    "--mode",
    type=click.Choice(["enforce", "advisory"]),
    default="enforce",
    show_default=True,
    help="advisory records and prints the would-be decision but never blocks.",
)
@key_option("Seal key that records the decision in the ledger (required for advisory)", required=False)
@click.option(
    "--task", help="Task the decision is recorded for (default: the receipt's, or the only task with a receipt)."
)
@auditor_option
@click.option(
    "--policy",
    "policy_file",
    type=_FILE,
    help="A C2SP tlog-policy: the covering checkpoint's witness cosignatures must meet its quorum.",
)
@click.option(
    "--audit-state",
    type=_FILE,
    help="In CI that can reach the store: audit its chain (resumed from this file, kept there) to prove the"
    " receipt's task complete.",
)
@json_option
@click.pass_context
def gate(
    ctx: click.Context,
    rev: str,
    trust: _TrustArgs,
    require_checkpoint: bool,
    mode: str,
    key_name: str | None,
    task: str | None,
    auditors: _AuditorArgs,
    policy_file: Path | None,
    audit_state: Path | None,
    as_json: bool,
) -> None:
    """Exit 0 only if REV, or another commit with REV's exact tree, has a verified,
    merge-eligible receipt whose task is proven complete up to it: by a quorum of auditing
    witnesses, or by the gate's own audit of the store (--audit-state). Trust comes from
    the target branch, never from REV.

    The command a CI job runs before merge; a commit without one fails closed.
    """
    root = _trust(ctx, trust, judges_candidate=True)
    result = lib.gate(
        _repo(),
        rev,
        root,
        transparency=_policy(trust, auditors, policy_file=policy_file, require_checkpoint=require_checkpoint),
        mode=mode,
        open_ledger=_gate_opener(ctx, audit_state),
        audit_state=audit_state,
        recorder=(_ledger(ctx), _signer(key_name)) if key_name else None,
        task=task,
    )
    emit(as_json, result.as_dict(), lib.gate_lines(result), root)
    exit_with(not result.blocks)


def _gate_opener(ctx: click.Context, audit_state: Path | None) -> Any:
    """With --audit-state the gate audits the ledger the options name; else it reads a
    receipt without a bundle in git from there (`_ledger_opener`).
    """
    return _where(ctx).named_opener("--audit-state audits") if audit_state is not None else _ledger_opener(ctx)


@cli.command("pr-comment")
@click.argument("hash_text", metavar="HASH")
@trust_option
@click.pass_context
def pr_comment_cmd(ctx: click.Context, hash_text: str, trust: _TrustArgs) -> None:
    """Markdown for a pull-request comment, as the GitHub Action writes it: the decision
    and why, the goal, each check (failures first), the tiers, who approved, how to verify.
    """
    root = _trust(ctx, trust)
    comment = lib.receipt_comment(_reader(ctx), _resolved(ctx, hash_text), root)
    warn_if_unsafe(root)
    click.echo(comment, nl=False)
