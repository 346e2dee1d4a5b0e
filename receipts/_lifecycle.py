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
    """Fold a task's steps into its one state (docs/lifecycle.md's table, read top to bottom).

    Args:
        steps: the task's facts, in chain order.
        human_approvals: approvals the policy requires (at least one when humans are required).
        repair_attempts: failed deterministic attempts after which the task is blocked.
        no_progress_after: identical failures in a row after which the task is blocked.
        judge_required: whether the policy requires the judge tier.
        human_required: whether the policy requires the human tier.

    Returns:
        The state, why, the candidate it is about and the failed attempts so far.
    """
    candidate = None
    for s in steps:
        if s.kind in ("claim", "det") and s.candidate:
            candidate = s.candidate
    attempts = _attempts(steps)
    # Effects come first: once something took effect, that is what the task's state is about.
    effect = _effect_state(steps, attempts)
    if effect is not None:
        return effect
    on = [s for s in steps if s.candidate == candidate]
    stop = _ladder_stop(steps, on, repair_attempts, no_progress_after)
    if stop is not None:
        return TaskState(stop[0], stop[1], candidate, attempts)
    state, reason = _tier_progress(
        steps, on, human_approvals=human_approvals, judge_required=judge_required, human_required=human_required
    )
    return TaskState(state, reason, candidate, attempts)


def _effect_state(steps: Sequence[Step], attempts: int) -> TaskState | None:
    """The state the newest effect decides, or None when there is none or it failed."""
    effects: dict[str, tuple[Step, Step | None]] = {}
    for s in steps:
        if s.kind == "effect_begin" and s.key:
            effects[s.key] = (s, None)
        elif s.kind == "effect_result" and s.key in effects:
            effects[s.key] = (effects[s.key][0], s)
    if not effects:
        return None
    begin, result = list(effects.values())[-1]
    if result is None:
        state, reason = State.COMMITTING, "effect %s begun, no outcome recorded yet"
    elif result.outcome == "unknown":
        state, reason = State.RECONCILING, "effect %s has an unknown outcome: read back to confirm or deny"
    elif result.outcome != "confirmed":
        return None  # a failed effect: back to what the ladder says
    elif any(s.kind == "verified" and s.candidate == begin.candidate for s in steps):
        state, reason = State.VERIFIED_COMPLETE, "effect %s confirmed, success verified"
    else:
        state, reason = State.COMMITTED_BUT_UNVERIFIED, "effect %s confirmed, but no verified success for its candidate"
    return TaskState(state, reason % begin.key, begin.candidate, attempts)


def _ladder_stop(
    steps: Sequence[Step], on: Sequence[Step], repair_attempts: int, no_progress_after: int
) -> tuple[State, str] | None:
    """A state that ends the climb on this candidate: broken rules, a receipt, a budget or a rejection."""
    if any(s.integrity for s in on if s.kind == "det"):
        return State.FAILED, "integrity violation on the candidate: the process broke the rules"
    receipts = [s for s in on if s.kind == "receipt"]
    if any(s.kind == "verified" for s in on) or (receipts and receipts[-1].verdict == "eligible"):
        return State.READY_TO_COMMIT, "a merge-eligible receipt covers the candidate"
    attempts = _attempts(steps)
    if attempts >= repair_attempts:
        return State.BLOCKED, "repair budget exhausted: %d failed verification attempts" % attempts
    recent = _failing_streak(steps)
    if len(recent) >= no_progress_after and len(set(recent[-no_progress_after:])) == 1:
        return State.BLOCKED, "no progress: the same checks failed the same way %d times in a row" % no_progress_after
    if any(v == "fail" for v in _human_verdicts(on).values()):
        return State.BLOCKED, "a human rejected the candidate"
    return None


def _human_verdicts(on: Sequence[Step]) -> dict[str, str]:
    """Each signer's newest verdict on the candidate."""
    humans: dict[str, str] = {}
    for s in on:
        if s.kind == "human" and s.key:
            humans.pop(s.key, None)
            humans[s.key] = s.verdict or ""
    return humans


def _tier_progress(
    steps: Sequence[Step], on: Sequence[Step], *, human_approvals: int, judge_required: bool, human_required: bool
) -> tuple[State, str]:
    """Where the candidate is on the ladder when nothing has stopped it."""
    last_claim = max((i for i, s in enumerate(steps) if s.kind == "claim"), default=-1)
    last_det = max((i for i, s in enumerate(steps) if s.kind == "det"), default=-1)
    if last_claim > last_det:
        return State.VERIFYING, "a claim awaits verification"
    dets = [s for s in on if s.kind == "det"]
    if not dets:
        return State.WORKING, "nothing claimed or checked yet" if not steps else "working"
    if dets[-1].verdict != "pass":
        return State.REPAIRING, "the deterministic tier failed: %s" % (
            ", ".join(sorted(dets[-1].failing)) or "see the record"
        )
    judges = [s for s in on if s.kind == "judge"]
    newest_judge = judges[-1].verdict if judges else None
    if judge_required and newest_judge in ("review", "retry"):
        return State.REVIEW_REQUIRED, "the judge asked for review (%s)" % newest_judge
    if judge_required and newest_judge == "fail":
        return State.REPAIRING, "the judge rejected the candidate"
    if judge_required and newest_judge != "pass":
        return State.VERIFYING, "waiting for the judge"
    approvals = sum(1 for v in _human_verdicts(on).values() if v == "pass")
    if human_required and approvals < max(human_approvals, 1):
        return State.AWAITING_APPROVAL, "%d of %d human approvals" % (approvals, max(human_approvals, 1))
    if any(s.kind == "receipt" for s in on):
        # Sealed before the last tier ruled, or refused for a reason the verifier names.
        return (
            State.VERIFYING,
            "all tiers ruled; its receipt is NOT merge-eligible: ledger verify names why, or seal again",
        )
    return State.VERIFYING, "all tiers ruled; no receipt sealed yet"


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
