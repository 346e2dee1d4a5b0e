"""The task lifecycle, derived from the chain alone: no separate mutable state.

The ledger turns a task's entries into `Step`s (facts it read from them); `derive_state`
folds them into one state. docs/lifecycle.md has the table; every arrow is a test.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["State", "Step", "TaskState", "derive_state"]


class State(enum.StrEnum):
    WORKING = "WORKING"
    VERIFYING = "VERIFYING"
    REPAIRING = "REPAIRING"
    REVIEW_REQUIRED = "REVIEW_REQUIRED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    BLOCKED = "BLOCKED"
    READY_TO_COMMIT = "READY_TO_COMMIT"
    COMMITTING = "COMMITTING"
    RECONCILING = "RECONCILING"
    COMMITTED_BUT_UNVERIFIED = "COMMITTED_BUT_UNVERIFIED"
    VERIFIED_COMPLETE = "VERIFIED_COMPLETE"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class Step:
    """One fact about the task, in chain order.

    kind: claim, stopped, det, judge, human, receipt, verified, effect_begin, effect_result.
    """

    kind: str
    candidate: str | None = None
    verdict: str | None = None  # det/judge/human verdicts; receipt: "eligible" or not
    key: str | None = None  # effect idempotency key, or the human signer
    outcome: str | None = None  # effect result
    failing: frozenset[str] = frozenset()  # det: the checks that failed
    integrity: bool = False  # det: failed on the process (protected paths, trace)


@dataclass(frozen=True, slots=True)
class TaskState:
    state: State
    reason: str
    candidate: str | None = None
    attempts: int = 0
    claims: tuple[str, ...] = field(default=())


def derive_state(
    steps: Sequence[Step],
    *,
    human_approvals: int = 1,
    repair_attempts: int = 5,
    no_progress_after: int = 3,
    judge_required: bool = True,
    human_required: bool = True,
) -> TaskState:
    candidate = None
    for s in steps:
        if s.kind in ("claim", "det") and s.candidate:
            candidate = s.candidate
    on = [s for s in steps if s.candidate == candidate]
    dets = [s for s in on if s.kind == "det"]
    attempts = _attempts(steps)

    # Effects come first: once something took effect, that is what the task's state is about.
    effects: dict[str, tuple[Step, Step | None]] = {}
    for s in steps:
        if s.kind == "effect_begin" and s.key:
            effects[s.key] = (s, None)
        elif s.kind == "effect_result" and s.key in effects:
            effects[s.key] = (effects[s.key][0], s)
    if effects:
        begin, result = list(effects.values())[-1]
        if result is None:
            return TaskState(
                State.COMMITTING, "effect %s begun, no outcome recorded yet" % begin.key, begin.candidate, attempts
            )
        if result.outcome == "unknown":
            return TaskState(
                State.RECONCILING,
                "effect %s has an unknown outcome: read back to confirm or deny" % begin.key,
                begin.candidate,
                attempts,
            )
        if result.outcome == "confirmed":
            verified = any(s.kind == "verified" and s.candidate == begin.candidate for s in steps)
            if verified:
                return TaskState(
                    State.VERIFIED_COMPLETE,
                    "effect %s confirmed, success verified" % begin.key,
                    begin.candidate,
                    attempts,
                )
            return TaskState(
                State.COMMITTED_BUT_UNVERIFIED,
                "effect %s confirmed, but no verified success for its candidate" % begin.key,
                begin.candidate,
                attempts,
            )
        # a failed effect: back to what the ladder says
    if any(s.integrity for s in dets):
        return TaskState(
            State.FAILED, "integrity violation on the candidate: the process broke the rules", candidate, attempts
        )
    receipts = [s for s in on if s.kind == "receipt"]
    if any(s.kind == "verified" for s in on) or (receipts and receipts[-1].verdict == "eligible"):
        return TaskState(State.READY_TO_COMMIT, "a merge-eligible receipt covers the candidate", candidate, attempts)
    if attempts >= repair_attempts:
        return TaskState(
            State.BLOCKED, "repair budget exhausted: %d failed verification attempts" % attempts, candidate, attempts
        )
    recent = _failing_streak(steps)
    if len(recent) >= no_progress_after and len(set(recent[-no_progress_after:])) == 1:
        return TaskState(
            State.BLOCKED,
            "no progress: the same checks failed the same way %d times in a row" % no_progress_after,
            candidate,
            attempts,
        )
    humans: dict[str, str] = {}
    for s in on:
        if s.kind == "human" and s.key:
            humans.pop(s.key, None)
            humans[s.key] = s.verdict or ""
    if any(v == "fail" for v in humans.values()):
        return TaskState(State.BLOCKED, "a human rejected the candidate", candidate, attempts)
    last_claim = max((i for i, s in enumerate(steps) if s.kind == "claim"), default=-1)
    last_det = max((i for i, s in enumerate(steps) if s.kind == "det"), default=-1)
    if last_claim > last_det:
        return TaskState(State.VERIFYING, "a claim awaits verification", candidate, attempts)
    if dets and dets[-1].verdict != "pass":
        return TaskState(
            State.REPAIRING,
            "the deterministic tier failed: %s" % ", ".join(sorted(dets[-1].failing)) or "see the record",
            candidate,
            attempts,
        )
    if dets:
        judges = [s for s in on if s.kind == "judge"]
        if judge_required and judges and judges[-1].verdict in ("review", "retry"):
            return TaskState(
                State.REVIEW_REQUIRED, "the judge asked for review (%s)" % judges[-1].verdict, candidate, attempts
            )
        if judge_required and judges and judges[-1].verdict == "fail":
            return TaskState(State.REPAIRING, "the judge rejected the candidate", candidate, attempts)
        judged = not judge_required or (judges and judges[-1].verdict == "pass")
        approvals = sum(1 for v in humans.values() if v == "pass")
        if judged and human_required and approvals < max(human_approvals, 1):
            return TaskState(
                State.AWAITING_APPROVAL,
                "%d of %d human approvals" % (approvals, max(human_approvals, 1)),
                candidate,
                attempts,
            )
        if judged:
            return TaskState(State.VERIFYING, "all tiers ruled; no receipt sealed yet", candidate, attempts)
        return TaskState(State.VERIFYING, "waiting for the judge", candidate, attempts)
    return TaskState(State.WORKING, "nothing claimed or checked yet" if not steps else "working", candidate, attempts)


def _attempts(steps: Sequence[Step]) -> int:
    """Failed deterministic attempts since the last deterministic pass."""
    count = 0
    for s in steps:
        if s.kind == "det":
            count = 0 if s.verdict == "pass" else count + 1
    return count


def _failing_streak(steps: Sequence[Step]) -> list[frozenset[str]]:
    streak: list[frozenset[str]] = []
    for s in steps:
        if s.kind == "det":
            streak = [] if s.verdict == "pass" else streak + [s.failing]
    return streak
