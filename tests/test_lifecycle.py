"""Every arrow of the lifecycle table (docs/lifecycle.md), on the pure state machine."""

from __future__ import annotations

import pytest

from receipts import State, Step, derive_state

A, B = "candidate-a", "candidate-b"
DET_PASS = Step("det", A, "pass")
JUDGE_PASS = Step("judge", A, "pass")
APPROVE = Step("human", A, "pass", key="alice")


def state(*steps: Step, **kw: object) -> State:
    return derive_state(list(steps), **kw).state  # type: ignore[arg-type]


ARROWS = [
    ("start -> WORKING", [], State.WORKING),
    ("WORKING -> VERIFYING (claim)", [Step("claim", A)], State.VERIFYING),
    ("model stopped is not a claim", [Step("stopped")], State.WORKING),
    (
        "VERIFYING -> REPAIRING (deterministic fail)",
        [Step("claim", A), Step("det", A, "fail", failing=frozenset({"tests"}))],
        State.REPAIRING,
    ),
    ("REPAIRING -> VERIFYING (new claim)", [Step("det", A, "fail"), Step("claim", B)], State.VERIFYING),
    ("VERIFYING -> REVIEW_REQUIRED (judge review)", [DET_PASS, Step("judge", A, "review")], State.REVIEW_REQUIRED),
    ("judge fail -> REPAIRING", [DET_PASS, Step("judge", A, "fail")], State.REPAIRING),
    ("VERIFYING -> AWAITING_APPROVAL", [DET_PASS, JUDGE_PASS], State.AWAITING_APPROVAL),
    ("approved, not sealed -> VERIFYING", [DET_PASS, JUDGE_PASS, APPROVE], State.VERIFYING),
    ("a human reject -> BLOCKED", [DET_PASS, JUDGE_PASS, Step("human", A, "fail", key="alice")], State.BLOCKED),
    (
        "eligible receipt -> READY_TO_COMMIT",
        [DET_PASS, JUDGE_PASS, APPROVE, Step("receipt", A, "eligible")],
        State.READY_TO_COMMIT,
    ),
    (
        "non-eligible receipt stays AWAITING_APPROVAL",
        [DET_PASS, JUDGE_PASS, Step("receipt", A, "not")],
        State.AWAITING_APPROVAL,
    ),
    (
        "READY_TO_COMMIT -> COMMITTING",
        [DET_PASS, Step("receipt", A, "eligible"), Step("effect_begin", A, key="k")],
        State.COMMITTING,
    ),
    (
        "COMMITTING -> RECONCILING (unknown outcome)",
        [DET_PASS, Step("effect_begin", A, key="k"), Step("effect_result", A, key="k", outcome="unknown")],
        State.RECONCILING,
    ),
    (
        "RECONCILING -> COMMITTED_BUT_UNVERIFIED (confirmed, nothing verified)",
        [
            DET_PASS,
            Step("effect_begin", A, key="k"),
            Step("effect_result", A, key="k", outcome="unknown"),
            Step("effect_result", A, key="k", outcome="confirmed"),
        ],
        State.COMMITTED_BUT_UNVERIFIED,
    ),
    (
        "COMMITTING -> VERIFIED_COMPLETE (confirmed, success verified)",
        [
            DET_PASS,
            Step("verified", A),
            Step("effect_begin", A, key="k"),
            Step("effect_result", A, key="k", outcome="confirmed"),
        ],
        State.VERIFIED_COMPLETE,
    ),
    (
        "COMMITTED_BUT_UNVERIFIED -> VERIFIED_COMPLETE (verified after)",
        [
            DET_PASS,
            Step("effect_begin", A, key="k"),
            Step("effect_result", A, key="k", outcome="confirmed"),
            Step("verified", A),
        ],
        State.VERIFIED_COMPLETE,
    ),
    (
        "a failed effect falls back to the ladder",
        [
            DET_PASS,
            Step("receipt", A, "eligible"),
            Step("effect_begin", A, key="k"),
            Step("effect_result", A, key="k", outcome="failed"),
        ],
        State.READY_TO_COMMIT,
    ),
    ("integrity violation -> FAILED", [DET_PASS, Step("det", A, "fail", integrity=True)], State.FAILED),
    (
        "repair budget exhausted -> BLOCKED",
        [Step("det", A, "fail", failing=frozenset({str(i)})) for i in range(5)],
        State.BLOCKED,
    ),
    ("no progress -> BLOCKED", [Step("det", A, "fail", failing=frozenset({"tests"}))] * 3, State.BLOCKED),
    (
        "progress keeps REPAIRING",
        [
            Step("det", A, "fail", failing=frozenset({"a"})),
            Step("det", A, "fail", failing=frozenset({"b"})),
            Step("det", A, "fail", failing=frozenset({"c"})),
        ],
        State.REPAIRING,
    ),
    (
        "a pass resets the budget",
        [Step("det", A, "fail", failing=frozenset({"x"}))] * 4
        + [DET_PASS, JUDGE_PASS, Step("det", A, "fail", failing=frozenset({"y"}))],
        State.REPAIRING,
    ),
    ("a deterministic pass waits for the judge", [DET_PASS], State.VERIFYING),
]


@pytest.mark.parametrize("name,steps,expected", ARROWS, ids=[a[0] for a in ARROWS])
def test_arrow(name: str, steps: list[Step], expected: State) -> None:
    assert state(*steps) is expected


def test_the_judge_and_human_tiers_are_skipped_when_not_required() -> None:
    assert state(DET_PASS, judge_required=False, human_required=False) is State.VERIFYING
    assert state(DET_PASS, judge_required=False) is State.AWAITING_APPROVAL


def test_two_approvals_needed() -> None:
    assert state(DET_PASS, JUDGE_PASS, APPROVE, APPROVE, human_approvals=2) is State.AWAITING_APPROVAL
    assert (
        state(DET_PASS, JUDGE_PASS, APPROVE, Step("human", A, "pass", key="bob"), human_approvals=2) is State.VERIFYING
    )


def test_every_state_is_reachable() -> None:
    reached = {expected for _, _, expected in ARROWS}
    assert reached == set(State)


def test_a_sealed_receipt_that_is_not_eligible_is_named_never_called_absent() -> None:
    # All tiers ruled after a receipt was sealed without the approval: `ledger status` must
    # not say "no receipt sealed yet" of a task whose receipt says NOT eligible.
    sealed_early = derive_state([DET_PASS, JUDGE_PASS, Step("receipt", A, "not"), APPROVE])
    assert sealed_early.state is State.VERIFYING
    assert "receipt is NOT merge-eligible" in sealed_early.reason and "no receipt" not in sealed_early.reason
    unsealed = derive_state([DET_PASS, JUDGE_PASS, APPROVE])
    assert unsealed.reason == "all tiers ruled; no receipt sealed yet"
