"""The ladder's tiers: `record`, `seal`, `check`, `judge` (the human tier is `_review.py`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from receipts import (
    Tier,
    Verdict,
)

from .. import _api as lib
from ._group import cli
from ._options import TIER_CHOICE, contract_option, input_option, json_option, key_option
from ._output import emit, emit_appended, exit_with
from ._shared import _candidate, _contract, _digest, _ledger, _repo, _required_contract, _root, _signer


def _confidence(value: float | None) -> int | None:
    if value is None:
        return None
    if not 0.0 <= value <= 1.0:
        raise lib.InputError("--confidence must be between 0 and 1")
    return round(value * 10000)


@cli.command()
@click.argument("task")
@click.option("--tier", required=True, type=TIER_CHOICE)
@click.option("--verdict", required=True, type=click.Choice([v.value for v in Verdict]))
@key_option("Signing key; its role must be the tier")
@click.option(
    "--evidence", "evidence", multiple=True, type=click.Path(path_type=Path), help="Evidence file; repeatable."
)
@contract_option
@input_option()
@click.option("--confidence", type=float, help="Judge confidence in [0, 1] (stored as basis points).")
@click.option("--parent", "parents", multiple=True, help="Hash of an earlier record this one builds on; repeatable.")
@json_option
@click.pass_context
def record(
    ctx: click.Context,
    task: str,
    tier: str,
    verdict: str,
    key_name: str,
    evidence: Sequence[Path],
    contract_path: Path | None,
    input_spec: str,
    confidence: float | None,
    parents: Sequence[str],
    as_json: bool,
) -> None:
    """Append one tier record by hand (the tier runners call the same API)."""
    source, data = _required_contract(ctx, task, contract_path)
    rec, appended = lib.record_by_hand(
        _ledger(ctx),
        task_id=task,
        tier=Tier(tier),
        verdict=Verdict(verdict),
        signer=_signer(key_name),
        contract=data,
        contract_source=source,
        input_hash=_candidate(input_spec),
        evidence=[lib.Evidence(p.name, p) for p in evidence],
        confidence_bp=_confidence(confidence),
        parents=[_digest(p) for p in parents],
    )
    emit_appended(as_json, "record", appended, rec, "recorded %s %s for %s" % (tier, verdict, task))


@cli.command()
@click.argument("task")
@key_option("Seal-role key")
@input_option()
@contract_option
@click.option("--require", "require", default="", help="Tiers to require beyond the contract's (comma-separated).")
@json_option
@click.pass_context
def seal(
    ctx: click.Context,
    task: str,
    key_name: str,
    input_spec: str,
    contract_path: Path | None,
    require: str,
    as_json: bool,
) -> None:
    """Bind the candidate's latest tier records into a signed receipt."""
    found = _contract(ctx, task, contract_path)
    sealed = lib.seal(
        _ledger(ctx),
        task_id=task,
        signer=_signer(key_name),
        input_hash=_candidate(input_spec),
        extra_required=lib.parse_tiers(require),
        contract_file=found[1] if found else None,
    )
    emit_appended(as_json, "receipt", sealed.appended, sealed.receipt, lib.sealed_line(task, sealed))


def _shows_progress(as_json: bool) -> bool:
    """Progress lines go to a terminal, never into --json's stream or a log's noise."""
    return sys.stderr.isatty() and not as_json


def _in_force(ctx: click.Context, task: str, contract_path: Path | None, trust_ref: str | None) -> dict[str, Any]:
    """The repository and the contract a check runs on: the file given, or the task's file
    as a revision of the contract in force (the registered one, else the target branch's).
    """
    source, data = _required_contract(ctx, task, contract_path)
    repo = _repo()
    target = None if contract_path else lib.target_contract(repo, _root(ctx), task, trust_ref)
    return {"repo": repo, "contract_bytes": data, "source": source, "target": target, "from_target": not contract_path}


@cli.command()
@click.argument("task")
@contract_option
@key_option("Deterministic-role key")
@click.option("--base", help="Revision the candidate is compared against (default: merge-base with main, else HEAD~1).")
@click.option("--allow-dirty", is_flag=True, help="Include uncommitted changes in the snapshot instead of refusing.")
@click.option(
    "--clean-room",
    is_flag=True,
    help="Run the checks in a fresh checkout of the candidate, protected paths and test files restored from the base.",
)
@click.option(
    "--trust-ref",
    "trust_ref",
    envvar="LEDGER_TRUST_REF",
    help="The target branch whose contract is in force when the ledger has none registered"
    " (default: origin/main, else main; never the candidate's config.toml).",
)
@json_option
@click.pass_context
def check(
    ctx: click.Context,
    task: str,
    contract_path: Path | None,
    key_name: str,
    base: str | None,
    allow_dirty: bool,
    clean_room: bool,
    trust_ref: str | None,
    as_json: bool,
) -> None:
    """Run the deterministic tier: evaluate the contract's checks on the candidate.

    The contract in force is the ledger's registered one, else the target branch's: the
    candidate's own copy is a revision of it (a weakening needs an admin key), never a
    first registration. Exit 0 if the tier passed, 1 if it failed.
    """
    run = lib.run_deterministic(
        _ledger(ctx),
        task_id=task,
        signer=_signer(key_name),
        base=base,
        allow_dirty=allow_dirty,
        on_check=(lambda cid: click.echo("running %s ..." % cid, err=True)) if _shows_progress(as_json) else None,
        clean_room=clean_room,
        **_in_force(ctx, task, contract_path, trust_ref),
    )
    emit(as_json, lib.check_document(run), lib.check_lines(run))
    exit_with(run.outcome.verdict is Verdict.PASS)


@cli.command()
@click.argument("task")
@key_option("Judge-role key")
@contract_option
@input_option()
@click.option(
    "--samples", type=click.IntRange(1, 15), help="Ask N times and require a majority (at least the contract's number)."
)
@json_option
@click.pass_context
def judge(
    ctx: click.Context,
    task: str,
    key_name: str,
    contract_path: Path | None,
    input_spec: str,
    samples: int | None,
    as_json: bool,
) -> None:
    """Run the judge tier: ask the configured independent model about the candidate.

    Exit 0 if the judge passed the candidate, 1 otherwise (review, retry, fail or skip).
    """
    _, data = _required_contract(ctx, task, contract_path)
    result = lib.run_judge(
        _ledger(ctx),
        task_id=task,
        contract_bytes=data,
        candidate=_candidate(input_spec),
        signer=_signer(key_name),
        config_toml=_root(ctx) / "config.toml",
        samples=samples,
    )
    emit(as_json, lib.judge_document(result), lib.judge_lines(result))
    exit_with(result.outcome.verdict is Verdict.PASS)
