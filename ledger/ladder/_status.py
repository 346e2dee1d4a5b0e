"""A task's state derived from the chain alone (`ledger status`), and the verification
nudge. The deterministic step is re-derived from its stored evidence by the same rule and
the same evidence reader `ledger verify` uses, so the two never disagree on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from receipts import (
    Contract,
    Digest,
    EntryKind,
    EventType,
    LadderReceipt,
    Outcome,
    Step,
    TaskEvent,
    TaskState,
    Tier,
    TierRecord,
    Verdict,
    decode_as,
    decode_entry,
    derive_human,
    derive_state,
    integrity_failure,
    rederive_deterministic,
    waivers_in_force,
)

from .._errors import InputError
from ..store._ledger import Store

if TYPE_CHECKING:
    from verify import StoredEntry
from ._evidence import store_evidence_reader

__all__ = ["DeterministicRun", "deterministic_runs", "task_state", "Nudge", "nudge", "StatusReport", "status_report"]


@dataclass(frozen=True, slots=True)
class DeterministicRun:
    """A deterministic record with the outcome its evidence entails (not the one it claims)."""

    seq: int
    digest: Digest
    record: TierRecord
    outcome: Outcome


def _unregistered(record: TierRecord) -> Outcome:
    # Without its contract the verdict cannot be derived: it fails closed, as in verify.
    return Outcome(
        Verdict.FAIL, ("the record's config %s is not a registered contract" % record.config_hash.short(),), ()
    )


def deterministic_runs(store: Store, task: str) -> list[DeterministicRun]:
    """The task's deterministic records in chain order, each re-derived (§6a) under its
    contract and the waivers in force at its date.
    """
    contracts: dict[Digest, Contract] = {rev.config_hash: rev.parse() for _, rev in store.contract_revisions(task)}
    waivers = store.waivers(task)
    read = store_evidence_reader(store)
    runs = []
    for row in store.records_for(task):
        rec = row.record
        if rec.tier is not Tier.DETERMINISTIC:
            continue
        contract = contracts.get(rec.config_hash)
        if contract is None:
            outcome = _unregistered(rec)
        else:
            in_force = {
                check: ws[-1][1].describe(ws[-1][0], ws[-1][2])
                for check, ws in waivers_in_force(waivers, rec, row.seq).items()
            }
            outcome = rederive_deterministic(rec, contract, read, in_force)
        runs.append(DeterministicRun(row.seq, row.digest, rec, outcome))
    return runs


def task_state(store: Store, task: str) -> TaskState:
    """The task's lifecycle state (docs/lifecycle.md) from its entries in chain order."""
    latest = store.latest_contract(task)
    contract = latest.parse() if latest else None
    runs = {run.seq: run for run in deterministic_runs(store, task)}
    read = store_evidence_reader(store)
    steps: list[Step] = []
    for stored in store.entries(task=task):
        if stored.seq in runs:
            run = runs[stored.seq]
            steps.append(
                Step(
                    "det",
                    str(run.record.input_hash),
                    run.outcome.verdict.value,
                    failing=frozenset(run.outcome.failed),
                    integrity=integrity_failure(run.outcome.reasons),
                )
            )
        elif stored.kind == EntryKind.TIER_RECORD.value:
            rec = decode_as(TierRecord, stored.body)
            signer = decode_entry(stored.entry).signer
            # A human decision counts as its document says, as in verify (5h); judge verdicts as recorded.
            verdict = derive_human(rec, signer, read)[0] if rec.tier is Tier.HUMAN else rec.verdict
            steps.append(Step(rec.tier.value, str(rec.input_hash), verdict.value, key=signer))
        elif stored.kind == EntryKind.RECEIPT.value:
            receipt = decode_as(LadderReceipt, stored.body)
            steps.append(Step("receipt", str(receipt.input_hash), "eligible" if receipt.merge_eligible else "not"))
        elif stored.kind == EntryKind.EVENT.value:
            step = _event_step(decode_as(TaskEvent, stored.body))
            if step is not None:
                steps.append(step)
    tiers = contract.required_tiers if contract else ()
    return derive_state(
        steps,
        human_approvals=contract.human_approvals if contract else 1,
        repair_attempts=contract.repair_attempts if contract else 5,
        no_progress_after=contract.no_progress_after if contract else 3,
        judge_required=Tier.JUDGE in tiers,
        human_required=Tier.HUMAN in tiers,
    )


_EVENT_STEPS = {
    EventType.ANSWER_PROPOSED: "claim",
    EventType.MODEL_STOPPED: "stopped",
    EventType.SUCCESS_VERIFIED: "verified",
}


def is_repair_step(ev: TaskEvent) -> bool:
    """A claim the Stop hook blocked: the agent was sent back to repair, it did not claim
    to be done (its ``outcome`` field says ``blocked``).
    """
    return ev.type is EventType.ANSWER_PROPOSED and ev.field("outcome") == "blocked"


def _event_step(ev: TaskEvent) -> Step | None:
    cand = str(ev.candidate) if ev.candidate else None
    if is_repair_step(ev):
        return None
    if ev.type in _EVENT_STEPS:
        return Step(_EVENT_STEPS[ev.type], cand)
    if ev.type is EventType.EFFECT_BEGIN:
        return Step("effect_begin", cand, key=ev.field("key"))
    if ev.type is EventType.EFFECT_RESULT:
        return Step("effect_result", cand, key=ev.field("key"), outcome=ev.field("outcome"))
    return None


@dataclass(frozen=True, slots=True)
class Nudge:
    """Over the last ``window`` claims: how many had no deterministic run after them."""

    window: int
    claims: int
    unverified: int
    share: float
    threshold: float
    alert: bool
    recent_unverified: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "window": self.window,
            "claims": self.claims,
            "unverified": self.unverified,
            "share": round(self.share, 4),
            "threshold": self.threshold,
            "alert": self.alert,
            "recent_unverified": list(self.recent_unverified),
        }


def _newest_first(store: Store, page: int = 500) -> Iterator[StoredEntry]:
    """The store's entries from the newest back, a page at a time."""
    stop = store.reader.count()
    while stop > 0:
        start = max(0, stop - page)
        yield from reversed(list(store.reader.entries_between(start, stop)))
        stop = start


def nudge(store: Store, window: int = 50, threshold: float = 0.3) -> Nudge:
    """Over the last ``window`` claims, the share with no deterministic run on the claimed
    candidate after the claim. Alert above ``threshold`` (strictly), with at least 3 claims.
    A Stop the hook blocked is a repair step, not a claim (`is_repair_step`).
    """
    newest_first: list[tuple[int, str, str | None]] = []
    runs: list[tuple[int, str, str]] = []
    # From the newest entry back, only until the window is full: a session's start must not
    # read a team's whole ledger. Every run after the oldest claim in it is read on the way.
    for stored in _newest_first(store):
        if len(newest_first) == window:
            break
        if stored.kind == EntryKind.EVENT.value:
            ev = decode_as(TaskEvent, stored.body)
            if ev.type is EventType.ANSWER_PROPOSED and not is_repair_step(ev):
                newest_first.append((stored.seq, ev.task_id, str(ev.candidate) if ev.candidate else None))
        elif stored.kind == EntryKind.TIER_RECORD.value:
            rec = decode_as(TierRecord, stored.body)
            if rec.tier is Tier.DETERMINISTIC:
                runs.append((stored.seq, rec.task_id, str(rec.input_hash)))
    recent = newest_first[::-1]
    unverified = [
        (seq, task)
        for seq, task, cand in recent
        if not any(rseq > seq and rtask == task and (cand is None or rcand == cand) for rseq, rtask, rcand in runs)
    ]
    share = len(unverified) / len(recent) if recent else 0.0
    return Nudge(
        window,
        len(recent),
        len(unverified),
        share,
        threshold,
        len(recent) >= 3 and share > threshold,
        tuple(task for _, task in reversed(unverified[-5:])),
    )


@dataclass(frozen=True, slots=True)
class StatusReport:
    """`ledger status`: each task's state and the verification nudge."""

    tasks: tuple[tuple[str, TaskState], ...]
    nudge: Nudge

    def as_dict(self) -> dict[str, object]:
        return {
            "tasks": {
                t: {"state": s.state.value, "reason": s.reason, "candidate": s.candidate, "failed_attempts": s.attempts}
                for t, s in self.tasks
            },
            "nudge": self.nudge.as_dict(),
        }


def status_report(store: Store, task: str | None = None, window: int = 50, threshold: float = 0.3) -> StatusReport:
    """The state of ``task`` (or of every task in the ledger) and the nudge."""
    if task is not None and not any(True for _ in store.entries(task=task)):
        raise InputError("task %s has no entries in this ledger" % task)
    tasks = [task] if task else sorted({e.task for e in store.entries() if e.task})
    return StatusReport(tuple((t, task_state(store, t)) for t in tasks), nudge(store, window, threshold))
