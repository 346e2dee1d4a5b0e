"""The merge-eligibility rule: one pure function, used when sealing and when verifying."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._digest import Digest
from ._model import LADDER, Tier, TierEntry, TierRecord, Verdict

__all__ = [
    "Eligibility",
    "approvals_shortfall",
    "derive_merge_eligible",
    "latest_human_decisions",
    "author_keys",
    "AUTHOR_EVENTS",
]

# The events only the change's author signs: its claim, its tool-call trace, its session's end.
AUTHOR_EVENTS = ("answer_proposed", "trace", "model_stopped")


_SHORTFALL = "%d of %d required human approvals"


def approvals_shortfall(reasons: Sequence[str]) -> tuple[int, int] | None:
    """The (given, required) approvals when ``reasons`` (`Eligibility.reasons`) say the
    receipt lacks approvals, else None: the reader of the reason this module writes.
    """
    for reason in reasons:
        found = re.fullmatch(r"(\d+) of (\d+) required human approvals", reason)
        if found:
            return int(found.group(1)), int(found.group(2))
    return None


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Whether a receipt is merge-eligible, why not, and which keys' approvals of the
    human tier did not count (they claimed or authored the change), by key id, whether or
    not the others sufficed.
    """

    eligible: bool
    reasons: tuple[str, ...]
    uncounted: tuple[str, ...] = ()


def latest_human_decisions(
    decisions: Sequence[tuple[Digest, TierRecord, str]], *, task_id: str, input_hash: Digest, config_hash: Digest
) -> tuple[Digest, ...]:
    """Each human key's latest decision on this candidate under this contract, from
    (record hash, record, signer key id) in chain order. A key's later approval withdraws
    its earlier reject; approving twice counts once. Sorted by digest bytes: the order a
    receipt's human slot must list them in (one set of decisions, one receipt hash).
    """
    latest: dict[str, Digest] = {}
    for digest, record, signer in decisions:
        if (
            record.tier is Tier.HUMAN
            and record.task_id == task_id
            and record.input_hash == input_hash
            and record.config_hash == config_hash
        ):
            latest.pop(signer, None)
            latest[signer] = digest
    return tuple(sorted(latest.values(), key=lambda d: d.value))


def derive_merge_eligible(
    *,
    task_id: str,
    input_hash: Digest,
    config_hash: Digest,
    required: tuple[Tier, ...],
    entries: tuple[TierEntry, ...],
    records: Mapping[Digest, TierRecord],
    signers: Mapping[Digest, str] | None = None,
    human_approvals: int = 1,
    created: int | None = None,
    max_evidence_age_s: int | None = None,
    not_approvers: Mapping[str, str] | None = None,
) -> Eligibility:
    """Eligible only if every required tier has records for this candidate and every
    recorded tier passed: for the human tier, at least ``human_approvals`` distinct keys
    approve and none rejects; within the contract's freshness window when it has one.
    ``not_approvers`` maps the key ids whose approval does not count (they claimed or
    authored the change, `author_keys`) to why: such an approval neither counts nor
    blocks, and a rejection by such a key still blocks.
    A skip, a fail, a missing or unresolvable record, an approval whose signer is
    unknown: all block, so whatever cannot be evaluated counts against eligibility.
    """
    by_tier, reasons = _slots(required, entries)
    uncounted: list[str] = []
    bound = _Binding(task_id, input_hash, config_hash, created, max_evidence_age_s)
    for tier in LADDER:
        slot = by_tier.get(tier)
        if slot is None:
            continue
        if not slot.records:
            reasons.append("tier %s was skipped: %s" % (tier, slot.skip_reason))
            continue
        approvers: set[str] = set()
        discounted: list[tuple[str, str]] = []  # (key id, why its approval does not count)
        for digest in slot.records:
            record = records.get(digest)
            if record is None:
                reasons.append("tier %s record %s is not available" % (tier, digest.short()))
                continue
            reasons += bound.defects(tier, record)
            signer = (signers or {}).get(digest)
            if tier is Tier.HUMAN and record.verdict is Verdict.PASS:
                if signer is None:
                    reasons.append("human approval %s has no known signer" % digest.short())
                elif signer in (not_approvers or {}):
                    why = (not_approvers or {})[signer]
                    discounted.append((signer, "the approval by %s does not count: that key %s" % (signer, why)))
                else:
                    approvers.add(signer)
            elif record.verdict is not Verdict.PASS:
                by = " by %s" % signer if tier is Tier.HUMAN and signer else ""
                reasons.append("tier %s verdict is %s%s" % (tier, record.verdict, by))
        if tier is Tier.HUMAN and len(approvers) < max(human_approvals, 1):
            reasons.append(_SHORTFALL % (len(approvers), max(human_approvals, 1)))
            reasons += [why for _, why in discounted]
        uncounted += [key for key, _ in discounted]
    return Eligibility(eligible=not reasons, reasons=tuple(reasons), uncounted=tuple(dict.fromkeys(uncounted)))


def _slots(required: tuple[Tier, ...], entries: tuple[TierEntry, ...]) -> tuple[dict[Tier, TierEntry], list[str]]:
    """The receipt's slots by tier, and what is wrong with its shape: no tier required, a
    tier twice, a required tier without a slot.
    """
    reasons: list[str] = []
    if not required:
        reasons.append("no tier is required: an empty ladder proves nothing")
    by_tier: dict[Tier, TierEntry] = {}
    for entry in entries:
        if entry.tier in by_tier:
            reasons.append("tier %s appears twice" % entry.tier)
        by_tier[entry.tier] = entry
    reasons.extend("required tier %s has no entry" % tier for tier in required if tier not in by_tier)
    return by_tier, reasons


@dataclass(frozen=True, slots=True)
class _Binding:
    """What every record in a receipt must be about: this task, candidate and contract, and
    fresh enough when the contract has a window.
    """

    task_id: str
    input_hash: Digest
    config_hash: Digest
    created: int | None
    max_age_s: int | None

    def defects(self, tier: Tier, record: TierRecord) -> list[str]:
        reasons: list[str] = []
        if record.tier is not tier:
            reasons.append("tier %s slot holds a %s record" % (tier, record.tier))
        if record.task_id != self.task_id:
            reasons.append("tier %s record is for task %s" % (tier, record.task_id))
        if record.input_hash != self.input_hash:
            reasons.append("tier %s record is for a different candidate" % tier)
        if record.config_hash != self.config_hash:
            reasons.append("tier %s record is under a different config" % tier)
        if self.max_age_s is not None and self.created is not None and self.created - record.created > self.max_age_s:
            reasons.append(
                "tier %s record is %d s old; the contract allows %d s"
                % (tier, self.created - record.created, self.max_age_s)
            )
        return reasons


def author_keys(events: Sequence[tuple[int, str, str]]) -> dict[str, str]:
    """The keys that claimed or authored a task's change, from its events as (seq, event
    type, signer key id) in chain order, with why: each key that signed one of
    `AUTHOR_EVENTS`, named by its first such event.
    """
    found: dict[str, str] = {}
    for seq, etype, signer in events:
        if etype in AUTHOR_EVENTS and signer not in found:
            found[signer] = "signed the task's %s event at entry %d" % (etype, seq)
    return found
