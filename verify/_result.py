"""What verification returns: typed results whose defect lists say why, never tuples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from receipts import Tier

from ._errors import VerifyError

if TYPE_CHECKING:
    from ._state import AuditState

__all__ = ["Defect", "TierLine", "Finding", "Result", "ChainResult", "VerificationFailed"]


@dataclass(frozen=True, slots=True)
class Defect:
    """One reason for rejection. ``code`` is stable for machines; ``message`` is for people."""

    code: str
    message: str
    seq: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message, "seq": self.seq}


@dataclass(frozen=True, slots=True)
class TierLine:
    """One record of the receipt's ladder as the verifier found it. ``status`` is what the
    record claims (a verdict, "skip" or "missing"); ``derived`` is the verdict its stored
    evidence entails, for the tiers whose verdict is re-derived (deterministic, judge);
    ``reason`` is why, in the rule's words (the judge's reasoning, the failing checks).
    """

    tier: Tier
    required: bool
    status: str
    record: str | None
    signer: str | None
    detail: str
    derived: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "tier": self.tier.value,
            "required": self.required,
            "status": self.status,
            "derived": self.derived,
            "reason": self.reason,
            "record": self.record,
            "signer": self.signer,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """What a source's transparency check (step 8) found."""

    defects: tuple[Defect, ...] = ()
    warnings: tuple[str, ...] = ()
    checkpoint: str | None = None  # one line: the checkpoint used, its signer and witnesses
    certified_by: tuple[str, ...] = ()  # auditing witnesses that cosigned a covering checkpoint
    notes: tuple[str, ...] = ()  # how it was checked (by proof, from a bundle): nothing to act on


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of `verify_receipt`: verified exactly when ``defects`` is empty."""

    target: str
    defects: tuple[Defect, ...]
    trust: str
    task_id: str | None = None
    candidate: str | None = None
    config: str | None = None  # the receipt's contract revision (config hash)
    claimed_eligible: bool | None = None
    derived_eligible: bool | None = None
    eligibility_reasons: tuple[str, ...] = ()
    tiers: tuple[TierLine, ...] = ()
    entries_checked: int = 0
    weakenings: tuple[str, ...] = ()
    # What was not checked and needs action or a reader's judgement; ``notes`` say how the
    # receipt was checked (by proof, from a bundle, walked instead), which needs neither.
    warnings: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    waivers: tuple[str, ...] = ()
    checkpoint: str | None = None
    sealed_at: int | None = None  # the receipt's signed creation time (Unix seconds)
    method: str = "walk"  # "proof": entries proven into a checkpoint; "walk": the chain replayed
    # Whether every entry of the task and the keyring up to the receipt was seen (§8.1a):
    # "walked" (every entry linked), "certified" (by auditing witnesses), or "unproven".
    completeness: str = "unproven"
    certified_by: tuple[str, ...] = ()
    receipt_seq: int | None = None  # the receipt entry's position, and its entry hash (from its bytes)
    receipt_entry: str | None = None
    notes: tuple[str, ...] = ()
    # Key ids whose human approval the eligibility rule did not count (they claimed or
    # authored the change, §6), whether or not the other approvals sufficed.
    uncounted_approvals: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """True when the task's completeness up to the receipt is proven (§8.1a)."""
        return self.completeness in ("walked", "certified")

    @property
    def ok(self) -> bool:
        return not self.defects

    def as_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "verified": self.ok,
            "trust": self.trust,
            "task": self.task_id,
            "candidate": self.candidate,
            "config": self.config,
            "merge_eligible_claimed": self.claimed_eligible,
            "merge_eligible_derived": self.derived_eligible,
            "eligibility_reasons": list(self.eligibility_reasons),
            "tiers": [t.as_dict() for t in self.tiers],
            "entries_checked": self.entries_checked,
            "weakenings": list(self.weakenings),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "stale_approvals": list(self.stale),
            "uncounted_approvals": list(self.uncounted_approvals),
            "waivers": list(self.waivers),
            "checkpoint": self.checkpoint,
            "sealed_at": self.sealed_at,
            "method": self.method,
            "completeness": self.completeness,
            "certified_by": list(self.certified_by),
            "receipt_seq": self.receipt_seq,
            "receipt_entry": self.receipt_entry,
            "defects": [d.as_dict() for d in self.defects],
        }


@dataclass(frozen=True, slots=True)
class ChainResult:
    """The outcome of `verify_chain`: every entry audited, the first bad one named."""

    entries: int
    defects: tuple[Defect, ...]
    trust: str
    head: str | None
    evidence_blobs: int | None = None  # blobs re-hashed; None when the audit skipped evidence
    resumed_from: int | None = None  # the audit state's size, when only the entries after it were walked
    state: AuditState | None = None  # a clean audit's state at the newest checkpoint, to resume from
    warnings: tuple[str, ...] = ()  # what was not checked, and why (evidence removed under retention)

    @property
    def ok(self) -> bool:
        return not self.defects

    @property
    def first_bad(self) -> int | None:
        seqs = [d.seq for d in self.defects if d.seq is not None]
        return min(seqs) if seqs else None

    def as_dict(self) -> dict[str, object]:
        return {
            "verified": self.ok,
            "entries": self.entries,
            "evidence_blobs_checked": self.evidence_blobs,
            "resumed_from": self.resumed_from,
            "state_size": self.state.size if self.state is not None else None,
            "warnings": list(self.warnings),
            "trust": self.trust,
            "head": self.head,
            "first_bad_entry": self.first_bad,
            "defects": [d.as_dict() for d in self.defects],
        }


class VerificationFailed(VerifyError):
    """The check ran and found defects; ``result`` holds them."""

    def __init__(self, result: Result) -> None:
        first = result.defects[0].message if result.defects else "rejected"
        super().__init__("verification failed with %d defect(s): %s" % (len(result.defects), first))
        self.result = result
