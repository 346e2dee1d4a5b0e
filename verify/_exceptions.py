"""What a decision rests on besides passing checks: the exceptions every page that states a
decision also states (issue 45). One function for every surface (the CLI, the bundle's
report page, the web view and static site, the PR comment, the JSON), so that no page can
say "every check passed" of a pass that leans on a waiver or a weakened contract.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from receipts import Tier

from ._result import Result

__all__ = [
    "ExceptionNote",
    "EXCEPTION_KINDS",
    "UNPROVEN_PREFIX",
    "exceptions",
    "headline",
    "decision_headline",
    "completeness_text",
]

# In the order a page lists them. The first two qualify a pass (its headline says so); the
# rest are stated under it. An unproven completeness is the usual state of a ledger with no
# auditing witness, so it is stated, not shouted.
EXCEPTION_KINDS = (
    "waiver",  # a failing check let through by a signed waiver
    "weakening",  # the contract was lowered by a signed revision before the receipt
    "completeness",  # unproven: an entry of the task could have been left out
    "stale approval",  # an approval of another candidate, not counted
    "retention",  # evidence removed under the signed retention policy: not re-checked
    "rejection",  # a person's or a tier's rejection, with its reason
    "judge",  # the judge's reasoning
    "warning",  # anything else the verifier said a reader must know
)
_QUALIFIES_A_PASS = frozenset(EXCEPTION_KINDS[:2])


@dataclass(frozen=True, slots=True)
class ExceptionNote:
    """One exception: its ``kind`` (one of `EXCEPTION_KINDS`) and the sentence a page shows."""

    kind: str
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


def completeness_text(completeness: str, certified_by: Iterable[str] = ()) -> str:
    """How the task's completeness up to the receipt was proven (format.md §8.1a)."""
    said = {
        "audited": "audited (this gate's chain audit of the store covers the receipt's entry)",
        "walked": "walked (every entry up to the receipt linked)",
        "certified": "certified by auditing witness(es) %s" % ", ".join(certified_by),
    }
    return said.get(completeness, "UNPROVEN (no auditing witness cosigned its checkpoint)")


UNPROVEN_PREFIX = "completeness UNPROVEN"


def exceptions(result: Result) -> tuple[ExceptionNote, ...]:
    """Every exception of a verified receipt, in `EXCEPTION_KINDS` order.

    Args:
        result: what `verify_receipt` returned.

    Returns:
        The notes; empty for a receipt that rests on nothing but passing checks, proven
        complete, with nothing removed.
    """
    notes = [ExceptionNote("waiver", "in force when sealed: %s" % w) for w in result.waivers]
    notes += [ExceptionNote("weakening", w) for w in result.weakenings]
    notes += [ExceptionNote("stale approval", "not counted: %s" % s) for s in result.stale]
    if result.completeness not in ("walked", "certified", "audited"):
        notes.append(ExceptionNote("completeness", completeness_text(result.completeness, result.certified_by)))
    retention = [w for w in result.warnings if "retention policy" in w]
    notes += [ExceptionNote("retention", w) for w in retention]
    for line in result.tiers:
        if line.tier is Tier.JUDGE and line.reason:
            notes.append(ExceptionNote("judge", "%s: %s" % (line.derived or line.status, line.reason)))
        elif line.status in ("fail", "missing") or line.derived == "fail":
            notes.append(ExceptionNote("rejection", "%s: %s" % (line.tier.value, line.reason or line.detail)))
    # Completeness is listed above as its own kind; how the receipt was checked (its notes) is no exception.
    notes += [
        ExceptionNote("warning", w) for w in result.warnings if w not in retention and not w.startswith(UNPROVEN_PREFIX)
    ]
    order = {kind: i for i, kind in enumerate(EXCEPTION_KINDS)}
    return tuple(sorted(notes, key=lambda n: order[n.kind]))


def headline(result: Result, notes: Iterable[ExceptionNote] = ()) -> str:
    """The decision in one sentence, first on every page (`decision_headline` of ``result``)."""
    eligible = bool(result.derived_eligible and result.claimed_eligible)
    return decision_headline(result.ok, eligible, result.eligibility_reasons, (n.kind for n in notes))


def decision_headline(verified: bool, eligible: bool, reasons: Iterable[str], kinds: Iterable[str] = ()) -> str:
    """The decision in one sentence: verified or not, eligible or not, and whether the pass
    rests on an exception of ``kinds`` (then never "every required tier passed" alone).
    """
    if not verified:
        return "REJECTED: the receipt did not verify; nothing it claims can be relied on."
    if not eligible:
        return "NOT MERGE-ELIGIBLE (verified): %s." % ("; ".join(reasons) or "a required tier did not pass")
    qualified = sorted({k for k in kinds if k in _QUALIFIES_A_PASS}, key=EXCEPTION_KINDS.index)
    if qualified:
        return (
            "MERGE-ELIGIBLE WITH EXCEPTIONS (verified): every required tier passed, resting on %s; read the"
            " exceptions before relying on it." % " and ".join(_PLURAL[k] for k in qualified)
        )
    return "MERGE-ELIGIBLE (verified): every required tier passed, re-derived by the verifier."


_PLURAL = {
    "waiver": "a waiver",
    "weakening": "a weakened contract",
}
