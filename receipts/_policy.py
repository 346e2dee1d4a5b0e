"""The merge-eligibility rule: one pure function, used when sealing and when verifying."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._digest import Digest
from ._model import LADDER, Tier, TierEntry, TierRecord, Verdict

__all__ = ["Eligibility", "derive_merge_eligible"]


@dataclass(frozen=True, slots=True)
class Eligibility:
    eligible: bool
    reasons: tuple[str, ...]


def derive_merge_eligible(
    *,
    task_id: str,
    input_hash: Digest,
    config_hash: Digest,
    required: tuple[Tier, ...],
    entries: tuple[TierEntry, ...],
    records: Mapping[Digest, TierRecord],
    created: int | None = None,
    max_evidence_age_s: int | None = None,
) -> Eligibility:
    """Eligible only if every required tier has a record for this candidate, and every
    recorded tier passed, within the contract's freshness window when it has one. A skip, a fail, a missing or unresolvable record all block:
    whatever cannot be evaluated counts against eligibility."""
    reasons: list[str] = []
    if not required:
        reasons.append("no tier is required: an empty ladder proves nothing")
    by_tier: dict[Tier, TierEntry] = {}
    for entry in entries:
        if entry.tier in by_tier:
            reasons.append("tier %s appears twice" % entry.tier)
        by_tier[entry.tier] = entry
    for tier in required:
        if tier not in by_tier:
            reasons.append("required tier %s has no entry" % tier)
    for tier in LADDER:
        slot = by_tier.get(tier)
        if slot is None:
            continue
        if slot.record is None:
            reasons.append("tier %s was skipped: %s" % (tier, slot.skip_reason))
            continue
        record = records.get(slot.record)
        if record is None:
            reasons.append("tier %s record %s is not available" % (tier, slot.record.short()))
            continue
        if record.tier is not tier:
            reasons.append("tier %s slot holds a %s record" % (tier, record.tier))
        if record.task_id != task_id:
            reasons.append("tier %s record is for task %s" % (tier, record.task_id))
        if record.input_hash != input_hash:
            reasons.append("tier %s record is for a different candidate" % tier)
        if record.config_hash != config_hash:
            reasons.append("tier %s record is under a different config" % tier)
        if record.verdict is not Verdict.PASS:
            reasons.append("tier %s verdict is %s" % (tier, record.verdict))
        if max_evidence_age_s is not None and created is not None and created - record.created > max_evidence_age_s:
            reasons.append("tier %s record is %d s old; the contract allows %d s" % (tier, created - record.created, max_evidence_age_s))
    return Eligibility(eligible=not reasons, reasons=tuple(reasons))
