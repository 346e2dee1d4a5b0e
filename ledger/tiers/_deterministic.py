"""The deterministic tier runner: snapshot the candidate, evaluate every signal of the
contract, store what happened as evidence, and seal a signed tier record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from receipts import (
    CHECK_RESULT_MEDIA_TYPE,
    SNAPSHOT_MEDIA_TYPE,
    Check,
    Contract,
    Digest,
    Ed25519Signer,
    EvidenceRef,
    Outcome,
    ReceiptsError,
    Signer,
    Tier,
    TierRecord,
    check_evidence_id,
    config_hash,
    content_digest,
    derive_attempts,
    derive_check,
    derive_deterministic,
    public_key_line,
    result_key,
)

from .. import _clock
from .._errors import InputError
from ..ladder._contracts import TargetContract, register_contract, register_in_force
from ..ladder._evidence import TAIL_BYTES, blob_tail, last_lines
from ..ladder._records import append_tier_record
from ..ladder._traces import process_facts
from ..store._ledger import Appended, Store
from ._clean_room import clean_room as _clean_room
from ._redact import Redactor
from ._signals import READ_ONLY_TYPES, Context, evaluate
from ._snapshot import Snapshot, remember_check_outputs, take_snapshot, untracked

__all__ = ["CheckRun", "LoopRun", "run_deterministic", "run_advisory", "run_in_loop", "RUNNER_NAME"]

RUNNER_NAME = "receipt-ledger deterministic runner"


@dataclass(frozen=True, slots=True)
class CheckRun:
    record: TierRecord
    appended: Appended
    outcome: Outcome
    rows: tuple[tuple[str, str, str, str], ...]  # check id, pass/fail, reason, result digest (full)
    snapshot: Snapshot
    contract_entry: Appended | None
    tails: tuple[tuple[str, str], ...] = ()  # a failing check's id and the last lines it printed


def _put_json(store: Store, doc: dict[str, Any], check_id: str, media_type: str) -> tuple[EvidenceRef, dict[str, Any]]:
    data = json.dumps(doc, sort_keys=True, indent=1).encode("utf-8")
    digest, size = store.put_blob_stream(io.BytesIO(data))
    # Decide on exactly what was stored, as the verifier will re-read it.
    return EvidenceRef(check_id, digest, size, media_type), json.loads(data)


def run_deterministic(
    store: Store,
    *,
    repo: Path,
    task_id: str,
    contract_bytes: bytes,
    source: str,
    signer: Signer,
    base: str | None = None,
    allow_dirty: bool = False,
    environ: dict[str, str] | None = None,
    on_check: Callable[[str], None] | None = None,
    clean_room: bool = False,
    target: TargetContract | None = None,
    from_target: bool = False,
) -> CheckRun:
    """The deterministic tier on ``repo``'s HEAD: register the contract (a weakening needs an
    admin), snapshot the candidate (dirty trees refused unless ``allow_dirty``), run every
    check for real, store the snapshot, diff and each check's result as evidence, and
    append a record whose verdict is the §6a rule applied to that evidence. Raises
    `InputError` on a bad contract, a dirty tree or a git failure; a failing check is a
    FAIL verdict, not an error. With ``clean_room`` (or a contract whose policy requires
    it) the checks run in a clean room (`_clean_room`), and the snapshot says what it did.
    With ``from_target`` the contract in force is the registered one or the target
    branch's (``target``), and ``contract_bytes`` (the candidate's copy) a revision of it
    (`register_in_force`): a candidate never brings its own contract. Returns the
    record, its entry and the table of checks.
    """
    if from_target:
        contract, contract_entry = register_in_force(store, task_id, contract_bytes, signer, source, target)
    else:
        contract, contract_entry = register_contract(store, task_id, contract_bytes, signer, source)
    subtasks = _subtasks(store, contract)
    snapshot = take_snapshot(repo, contract, base=base, allow_dirty=allow_dirty, subtasks=subtasks)
    snapshot = dataclasses.replace(snapshot, process=process_facts(store, task_id, contract, snapshot.candidate))
    env = dict(os.environ if environ is None else environ)
    snapshot, refs, snap_doc, results, rows = _evaluated(
        store, repo, contract, snapshot, env, on_check, clean_room or contract.clean_room, signer
    )
    now = _clock.now()
    waived = {
        w.check_id: w.describe(seq, signer)
        for seq, w, signer in store.waivers(task_id)
        if w.config_hash == config_hash(contract_bytes) and w.in_force(now)
    }
    outcome = derive_deterministic(contract, results, snap_doc, waived)
    record, appended = append_tier_record(
        store,
        signer,
        task_id=task_id,
        tier=Tier.DETERMINISTIC,
        config_hash=config_hash(contract_bytes),
        input_hash=snapshot.candidate,
        evidence=tuple(refs),
        verdict=outcome.verdict,
        verifier=RUNNER_NAME,
        created=now,
    )
    tails = tuple((cid, _stored_tail(store, refs, cid)) for cid, status, _, _ in rows if status == "fail")
    return CheckRun(record, appended, outcome, tuple(rows), snapshot, contract_entry, tails)


def _evaluated(
    store: Store,
    repo: Path,
    contract: Contract,
    snapshot: Snapshot,
    env: dict[str, str],
    on_check: Callable[[str], None] | None,
    in_room: bool,
    signer: Signer,
) -> tuple[Snapshot, list[EvidenceRef], dict[str, Any], dict[str, dict[str, Any]], list[tuple[str, str, str, str]]]:
    """Store the snapshot and run every check, in the working tree or in a clean room (which
    the snapshot then describes): the snapshot, the evidence refs, the snapshot document as
    stored, the results by evidence key and the table of checks.
    """
    if in_room and snapshot.dirty is not None:
        raise InputError("a clean room runs the committed candidate: commit the changes, or leave out --allow-dirty")
    with (
        _clean_room(repo, contract, snapshot.commit, snapshot.base, env) if in_room else contextlib.nullcontext()
    ) as room:
        if room is not None:
            snapshot = dataclasses.replace(snapshot, clean_room=room.document())
        refs, snap_doc = _put_snapshot(store, snapshot)
        ctx = Context(
            repo=repo if room is None else room.folder,
            contract=contract,
            store=store,
            redactor=Redactor(contract.secret_env, env),
            deadline=time.monotonic() + contract.total_timeout_s,
            environ=env,
            command_prefix=() if room is None else room.command_prefix,
            diff=snapshot.diff,
            sandbox=None if room is None else room.sandbox,
            sandbox_refused=None if room is None else room.sandbox_refused,
            expected=() if room is None else room.expected,
            base=snapshot.base,
            candidate=snapshot.candidate,
            # Only a key file held here opens a sealed set; an agent-held key cannot (§6e).
            sealed_key=signer.openssh_private_bytes() if isinstance(signer, Ed25519Signer) else None,
            sealed_recipient=public_key_line(signer.public_key_blob),
        )
        before = untracked(ctx.repo)
        results, rows = _run_checks(ctx, refs, on_check)
        if room is None:  # a clean room's leftovers go with it
            remember_check_outputs(repo, before)
    return snapshot, refs, snap_doc, results, rows


def _put_snapshot(store: Store, snapshot: Snapshot) -> tuple[list[EvidenceRef], dict[str, Any]]:
    """Store the candidate's diff, dirty state and snapshot document; their refs, and the
    snapshot document as stored.
    """
    refs: list[EvidenceRef] = []
    diff_digest, diff_size = store.put_blob_stream(io.BytesIO(snapshot.diff))
    refs.append(EvidenceRef("diff", diff_digest, diff_size, "text/x-diff"))
    dirty_digest = None
    if snapshot.dirty is not None:
        dirty_digest, dirty_size = store.put_blob_stream(io.BytesIO(snapshot.dirty))
        refs.append(EvidenceRef("dirty", dirty_digest, dirty_size, "application/octet-stream"))
    snap_ref, snap_doc = _put_json(store, snapshot.document(diff_digest, dirty_digest), "snapshot", SNAPSHOT_MEDIA_TYPE)
    refs.append(snap_ref)
    return refs, snap_doc


def _run_checks(
    ctx: Context, refs: list[EvidenceRef], on_check: Callable[[str], None] | None
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str, str]]]:
    """Run every check for real and store its result; the results as stored (by check id)
    and the table of checks. Each check's evidence refs are appended to ``refs`` in order.
    """
    results: dict[str, dict[str, Any]] = {}
    rows = []
    for check in ctx.contract.checks:
        for attempt in range(1, check.runs + 1):
            if on_check is not None:
                on_check(check.id if check.runs == 1 else "%s (run %d of %d)" % (check.id, attempt, check.runs))
            key = result_key(check, attempt)
            evaluated = evaluate(ctx, check)
            if check.runs > 1:  # each attempt's own evidence: check:ID#N and check:ID#N:stdout, ...
                evaluated.result["attempt"] = attempt
                own = "check:%s:" % check.id
                evaluated.refs = [
                    dataclasses.replace(ref, check_id="check:%s:%s" % (key, ref.check_id[len(own) :]))
                    if ref.check_id.startswith(own)
                    else ref
                    for ref in evaluated.refs
                ]
            refs.extend(evaluated.refs)
            ref, stored = _put_json(ctx.store, evaluated.result, check_evidence_id(key), CHECK_RESULT_MEDIA_TYPE)
            refs.append(ref)
            results[key] = stored
        ok, why, _ = derive_attempts(check, results)
        rows.append((check.id, "pass" if ok else "fail", why, str(ref.digest)))
    return results, rows


def _stored_tail(store: Store, refs: Sequence[EvidenceRef], check_id: str) -> str:
    """The last lines a failing check's last attempt printed (its stdout, then its stderr),
    read back from the store: what the agent's Stop shows, for `ledger check` too.
    """

    def last(part: str) -> bytes:
        own = [
            r
            for r in refs
            if r.check_id == "check:%s:%s" % (check_id, part)
            or (r.check_id.startswith("check:%s#" % check_id) and r.check_id.endswith(":" + part))
        ]
        return blob_tail(store.reader.open_blob(own[-1].digest)) if own else b""

    return last_lines(last(part) for part in ("stdout", "stderr"))


def _subtasks(store: Store, contract: Contract) -> tuple[str, ...]:
    latest: dict[str, Contract] = {}
    for _, revision in store.contract_revisions():
        try:
            latest[revision.task_id] = revision.parse()
        except ReceiptsError:
            continue
    return tuple(sorted(t for t, c in latest.items() if c.parent == contract.task_id))


class _Discard:
    """A blob sink for advisory runs: hashes what a check would have stored, and keeps only
    the last part of each, in memory, to show the agent why a check failed.
    """

    def __init__(self) -> None:
        self.tails: dict[Digest, bytes] = {}

    def put_blob_stream(self, stream: BinaryIO) -> tuple[Digest, int]:
        data = stream.read()
        digest = content_digest(data)
        self.tails[digest] = data[-TAIL_BYTES:]
        return digest, len(data)


def _output_tail(sink: _Discard, refs: Sequence[EvidenceRef], check_id: str) -> str:
    """The last lines a failing check printed (its stdout, then its stderr), for the agent."""
    named = {r.check_id: r.digest for r in refs}
    return last_lines(
        sink.tails.get(named[key], b"") if key in named else b""
        for key in ("check:%s:stdout" % check_id, "check:%s:stderr" % check_id)
    )


def run_advisory(
    repo: Path, contract: Contract, waived: Mapping[str, str] | None = None, environ: dict[str, str] | None = None
) -> tuple[tuple[str, bool, str, str], ...]:
    """Run every check of ``contract`` on the working tree as it is, for the agent's own
    loop: nothing is stored and nothing is signed (the agent's box holds no deterministic
    key, and this never replaces the signed tier). Rows of (check id, passed, reason, the
    last lines a failing check printed); a failing check that ``waived`` names passes, with
    the waiver as its reason.
    """
    return run_in_loop(repo, contract, waived, environ, budget_s=None).rows


@dataclass(frozen=True, slots=True)
class LoopRun:
    """What the agent's loop ran (`run_in_loop`): the rows of `run_advisory`, and the
    checks left to CI with why.
    """

    rows: tuple[tuple[str, bool, str, str], ...]
    deferred: tuple[tuple[str, str], ...]


def run_in_loop(
    repo: Path,
    contract: Contract,
    waived: Mapping[str, str] | None = None,
    environ: dict[str, str] | None = None,
    budget_s: float | None = None,
) -> LoopRun:
    """`run_advisory` within a time budget: with ``budget_s``, only the checks marked fast
    run, all of them within it; the others, and a fast one the budget cut short or left
    no time for, are deferred to CI (never failed for it).

    Args:
        repo: the working tree.
        contract: the task's contract.
        waived: check ids to their waivers' reasons.
        environ: the environment the checks run in (default: this process's).
        budget_s: the Stop's budget in seconds (``[hooks] stop_budget_s``), or None.

    Returns:
        The rows of the checks run and the deferred checks.
    """
    env = dict(os.environ if environ is None else environ)
    sink = _Discard()
    limit = float(contract.total_timeout_s) if budget_s is None else min(float(contract.total_timeout_s), budget_s)
    ctx = Context(
        repo=repo,
        contract=contract,
        store=cast(Store, sink),
        redactor=Redactor(contract.secret_env, env),
        deadline=time.monotonic() + limit,
        environ=env,
    )
    chosen, deferred = _loop_plan(contract, budget_s)
    rows = []
    # Only a command leaves files behind: a contract of file checks is spared two `git status`.
    watched = any(check.type not in READ_ONLY_TYPES for check in chosen)
    before = untracked(repo) if watched else None
    spent = "" if budget_s is None else "the Stop's budget of %g s" % budget_s
    for check in chosen:
        if budget_s is not None and ctx.deadline - time.monotonic() <= 0:
            deferred.append((check.id, "no time left within %s" % spent))
            continue
        attempts = _attempts_in_loop(ctx, check, sink, budget_s is not None)
        if attempts is None:
            deferred.append((check.id, "did not finish within %s" % spent))
            continue
        ok, why, tail = attempts
        if not ok and waived and check.id in waived:
            ok, why = True, "waived: %s" % waived[check.id]
        rows.append((check.id, ok, why, "" if ok else tail))
    if before is not None:
        remember_check_outputs(repo, before)
    if not contract.checks and not contract.no_op:
        # §6a fails such a task in the signed tier: an empty table must not read as a pass here.
        rows.append(("(contract)", False, "the contract declares no checks: nothing was verified", ""))
    return LoopRun(tuple(rows), tuple(deferred))


def _loop_plan(contract: Contract, budget_s: float | None) -> tuple[list[Check], list[tuple[str, str]]]:
    """The checks the loop runs, in order, and those it leaves to CI with why."""
    deferred: list[tuple[str, str]] = []
    chosen: list[Check] = []
    for check in contract.checks:
        if check.type == "attribution_declared":  # it reads the ledger's provenance and the snapshot's diff
            deferred.append((check.id, "decided by the signed tier"))
        elif check.param("sealed") is not None:  # held-out tests: never run or shown on the agent's machine
            deferred.append((check.id, "a sealed check: it runs only in CI, and only its verdict is shown"))
        elif budget_s is not None and not check.fast:
            deferred.append((check.id, "not marked fast"))
        else:
            chosen.append(check)
    if budget_s is not None:  # the checks that read files first: the budget is not spent before them
        chosen.sort(key=lambda c: c.type not in READ_ONLY_TYPES)
    return chosen, deferred


def _attempts_in_loop(ctx: Context, check: Check, sink: _Discard, budgeted: bool) -> tuple[bool, str, str] | None:
    """Run ``check`` as often as it takes to decide it under its ``runs`` and ``min_passes``
    (once for most checks): (passed, why, the output of its last failure). None when a
    budgeted run was cut short.
    """
    passes, failures, why, tail = 0, 0, "", ""
    for attempt in range(1, check.runs + 1):
        evaluated = evaluate(ctx, check)
        result = json.loads(json.dumps(evaluated.result))
        if budgeted and _cut_short(result):
            return None
        ok, said = derive_check(check, result)
        if ok:
            passes += 1
        else:
            failures += 1
            why = said if check.runs == 1 else "run %d of %d: %s" % (attempt, check.runs, said)
            tail = _output_tail(sink, evaluated.refs, check.id)
        if passes >= check.min_passes:
            return True, "" if not failures else "passed %d of %d runs" % (passes, attempt), ""
        if failures > check.runs - check.min_passes:
            break
    return False, why, tail


def _cut_short(result: dict[str, Any]) -> bool:
    """A command of the check was stopped at its time limit (the budget is one)."""
    facts = result.get("facts") or {}
    runs = [facts, *(facts.get("builds") or [])]
    return any(isinstance(run, dict) and run.get("timed_out") is True for run in runs)
