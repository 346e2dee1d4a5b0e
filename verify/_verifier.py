"""Recompute and re-derive: `verify_receipt` runs the steps of docs/format.md §8 in order,
one function per step, each returning what it found.

Nothing stored is believed: every hash is recomputed from stored bytes, every signature
is checked against the keyring replayed up to its entry, and `merge_eligible` is derived
again from the tier verdicts with the same rule the sealer used.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NoReturn

from receipts import (
    JUDGE_RUN_FORMAT,
    JUDGE_RUN_MEDIA_TYPE,
    KEYRING_KINDS,
    LADDER,
    PROVENANCE_FORMAT,
    PROVENANCE_MEDIA_TYPE,
    Body,
    CachedNodes,
    CompactRange,
    Contract,
    ContractRevision,
    Digest,
    Eligibility,
    Entry,
    EntryKind,
    FormatError,
    Keyring,
    LadderReceipt,
    ReceiptsError,
    RevealedSet,
    SampleOutcome,
    TaskEvent,
    Tier,
    TierRecord,
    Verdict,
    author_keys,
    body_hash,
    decode_as,
    decode_body,
    decode_entry,
    derive_human,
    derive_judge,
    derive_merge_eligible,
    entry_hash,
    evidence_list_hash,
    inclusion_proof,
    is_valid_inclusion,
    latest_human_decisions,
    leaf_hash,
    parse_checkpoint,
    parse_note,
    rederive_deterministic,
    waivers_in_force,
)

from ._errors import CannotVerify
from ._evidence import blob_problem, evidence_reader, read_blob, read_evidence
from ._flat import MissingNode, StoredNodes, flat_source
from ._policy import Transparency
from ._result import ChainResult, Defect, Finding, Result, TierLine, VerificationFailed
from ._source import LedgerSource, Source, StoredEntry, ledger_transparency
from ._transparency import checkpoint_signer, read_checkpoint
from ._trust import Trust
from ._walk import SignatureQueue, Walk, describe_waiver

if TYPE_CHECKING:  # a receipt on a ledger never loads the bundle reader, the renderings or the audit state
    from receipts import EvidenceRef

    from ._bundle import BundleSource
    from ._state import AuditState

__all__ = [
    "bundle_renderings",
    "verify_receipt",
    "verify_receipt_strict",
    "verify_chain",
    "RECEIPT_CLOCK_SKEW",
    "METHODS",
]


RECEIPT_CLOCK_SKEW = 300  # seconds a receipt's own date may trail the entry that appended it


METHODS = ("auto", "proof", "walk")


def verify_receipt(
    source: Source, target: str, trust: Trust, transparency: Transparency | None = None, method: str = "auto"
) -> Result:
    """Verify one receipt against ``trust`` (a pinned `TrustRoot`, or the explicitly
    unsafe `UnsafeTrustOnFirstUse`).

    On a ledger, ``method`` says how (docs/format.md §8): ``proof`` reads only the
    receipt's task and keyring entries and proves each into the newest signed checkpoint,
    in time that does not grow with the ledger; ``walk`` replays every entry up to the
    receipt; ``auto`` (the default) proves where a checkpoint covers the receipt and walks
    otherwise, saying so. A bundle is always checked by proof.

    The steps, numbered as in docs/format.md §8:
      1. resolve ``target`` to a receipt entry;
      2. replay the chain up to it: links, bodies, signatures, contracts, keyring;
      3. check the genesis signer against the trust root (during step 2);
      4. check the receipt itself: its date, its contract, its required tiers;
      5. check every record it lists: signer, binding, date, evidence, re-derived verdict
         (deterministic, judge and human alike);
      6. check that the human slot lists exactly each key's latest decision;
      7. derive merge_eligible again and compare it with the claim;
      8. check transparency as the source can prove it (a ledger, or a bundle's proofs);
      9. for a bundle: re-render its manifest.json, report.md and report.html from the
         verified content (`bundle_renderings`) and compare them byte for byte.

    Returns a `Result` listing every defect found. Raises `CannotVerify` only when the
    check cannot run at all (unknown hash, unreadable source, a worker that died).
    """
    if method not in METHODS:
        raise ValueError("method is one of %s" % ", ".join(METHODS))
    result = _verify_receipt(source, target, trust, transparency or Transparency(), method)
    if getattr(source, "accounting", False) and result.receipt_seq is not None:
        from ._bundle import BundleSource

        step9 = _step9_renderings(source, result) if isinstance(source, BundleSource) else []
        if step9:
            result = replace(result, defects=(*result.defects, *step9))
    return result


def _verify_receipt(source: Source, target: str, trust: Trust, policy: Transparency, method: str) -> Result:
    result = _verify_once(source, target, trust, policy, method)
    if result.method == "proof" and isinstance(source, LedgerSource) and _RETENTION_UNPROVEN in result.warnings:
        # Evidence excused under a policy the checkpoint does not name: only a walk proves it newest.
        if method == "proof":
            raise CannotVerify(
                "cannot verify by proof: evidence was removed under a retention policy the newest checkpoint does"
                " not name (sign a checkpoint, or `--method walk`, which proves the policy in force is the newest)"
            )
        walked = _verify_once(source, target, trust, policy, "walk")
        return replace(walked, notes=(*walked.notes, _RETENTION_WALKED))
    return result


_RETENTION_UNPROVEN = "retention: evidence excused by a policy the checkpoint does not name"
_RETENTION_WALKED = (
    "not checked by proof (evidence removed under a retention policy the newest checkpoint does not name: only a"
    " walk proves the policy in force is the newest): the chain was walked from its genesis instead"
)


def _warnings(source: Source, *found: Sequence[str]) -> tuple[str, ...]:
    """What the steps found unchecked, and a retention excuse proof could not name."""
    unnamed = (_RETENTION_UNPROVEN,) if getattr(source, "retention_unproven", False) else ()
    return (*(w for part in found for w in part), *unnamed)


def _verify_once(source: Source, target: str, trust: Trust, policy: Transparency, method: str) -> Result:
    stored = _step1_resolve(source, target)
    used = "proof" if source.sparse else "walk"
    fallback: tuple[str, ...] = ()
    if isinstance(source, LedgerSource) and method != "walk":
        flat = flat_source(source, stored, policy)
        if isinstance(flat, str):
            if method == "proof":
                raise CannotVerify("cannot verify by proof: %s (`--method walk` replays the chain instead)" % flat)
            fallback = ("not checked by proof (%s): the chain was walked from its genesis instead" % flat,)
        else:
            source, used = flat, "proof"
    walk = _step2_replay(source, trust, stored.seq, _receipt_task(stored))
    found = walk.bodies.get(stored.body_hash)
    if found is None or not isinstance(found[1], LadderReceipt):
        defects = (*walk.defects, Defect("receipt-malformed", "the receipt entry could not be read", stored.seq))
        return Result(target, defects, walk.trust_label, entries_checked=walk.entries, method=used)
    receipt_entry, receipt = found[0], found[1]
    contract = walk.contracts.get((receipt.task_id, receipt.config_hash.value))
    step4 = _step4_receipt(receipt, receipt_entry, contract)
    step5 = _step5_records(walk, source, receipt, receipt_entry)
    step6, stale = _step6_human_slot(walk, receipt, receipt_entry)
    derived, step7 = _step7_eligibility(receipt, receipt_entry, contract, step5, walk)
    step8 = _step8_transparency(source, walk, stored.seq, policy)
    completeness, step8d, unproven = _step8d_completeness(used, step8, policy)
    return Result(
        target=target,
        trust=walk.trust_label,
        task_id=receipt.task_id,
        candidate=str(receipt.input_hash),
        config=str(receipt.config_hash),
        # A human record the receipt lists is checked in step 5 and met again in step 6: report it once.
        defects=tuple(dict.fromkeys((*walk.defects, *step4, *step5.defects, *step6, *step7, *step8.defects, *step8d))),
        claimed_eligible=receipt.merge_eligible,
        derived_eligible=derived.eligible,
        sealed_at=receipt.created,
        eligibility_reasons=derived.reasons,
        uncounted_approvals=derived.uncounted,
        tiers=tuple(step5.lines),
        entries_checked=walk.entries,
        weakenings=tuple(d for t, d in walk.weakened if t == receipt.task_id),
        warnings=_warnings(source, step5.warnings, step8.warnings, unproven),
        notes=(*step8.notes, *fallback),
        stale=stale,
        waivers=tuple(
            describe_waiver(seq, w, label)
            for seq, w, label in walk.waivers
            if w.task_id == receipt.task_id and seq < receipt_entry.seq and w.in_force(receipt.created)
        ),
        checkpoint=step8.checkpoint,
        method=used,
        completeness=completeness,
        certified_by=step8.certified_by,
        receipt_seq=stored.seq,
        receipt_entry=str(entry_hash(stored.entry)),
    )


def verify_receipt_strict(
    source: Source, target: str, trust: Trust, transparency: Transparency | None = None, method: str = "auto"
) -> Result:
    """As `verify_receipt`, but raise `VerificationFailed` (holding the result) unless it verified."""
    result = verify_receipt(source, target, trust, transparency, method)
    if not result.ok:
        raise VerificationFailed(result)
    return result


# -- 9 ------------------------------------------------------------------------------------------


def bundle_renderings(source: BundleSource, receipt_hash: str, links: bool = True) -> dict[str, bytes]:
    """The bytes a bundle's rendering members must hold (format.md §10): the receipt
    verified again from the bundle's content alone (under its own genesis pin, the default
    policy, without the member checks that read the renderings), then rendered. The
    exporter writes exactly these; step 9 compares them.

    Args:
        source: the bundle (an exporter's draft, or the bundle itself).
        receipt_hash: the receipt it renders.
        links: whether the page links the bundle's evidence members.

    Returns:
        ``{"manifest.json": ..., "report.md": ..., "report.html": ...}``.

    Raises:
        CannotVerify: the bundle cannot be rendered (no genesis, no such receipt).
    """
    from ._rendering import bundle_manifest, render, rendering_trust

    source.accounting = False
    try:
        result = _verify_receipt(source, receipt_hash, rendering_trust(source.entries), Transparency(), "auto")
        manifest = bundle_manifest(
            source.entries,
            lambda digest, fmt: read_evidence(source, digest, fmt),
            receipt_hash,
            result,
            source.checkpoint_text,
            source.redactions(),
        )
    finally:
        source.accounting = True
    return render(manifest, links=links)


def _step9_renderings(source: BundleSource, result: Result) -> list[Defect]:
    """Each rendering member is the rendering of the verified content, byte for byte."""
    # 9. Re-render from the bundle's content alone and compare (format.md §10).
    receipt = source.entries[result.receipt_seq] if result.receipt_seq is not None else None
    if receipt is None:
        return []
    try:
        expected = bundle_renderings(source, str(Digest(receipt.body_hash)))
    except (CannotVerify, ReceiptsError) as exc:
        return [Defect("rendering-mismatch", "the bundle's renderings cannot be re-rendered: %s" % exc)]
    from ._rendering import RENDERINGS

    found = []
    for name in RENDERINGS:
        try:
            held = source.read(name) if name in source.members else None
        except CannotVerify:
            held = None
        if held != expected[name]:
            found.append(
                Defect(
                    "rendering-mismatch",
                    "%s %s" % (name, "is missing" if held is None else "is not the rendering of the verified content"),
                )
            )
    return found


# -- 1 ------------------------------------------------------------------------------------------


def _step1_resolve(source: Source, target: str) -> StoredEntry:
    # 1. The strict text form of a digest, found as a body hash, else as an entry hash; it must be a receipt.
    try:
        digest = Digest.parse(target)
    except FormatError as exc:
        raise CannotVerify(str(exc)) from None
    stored = source.by_body_hash(digest) or source.by_hash(digest)
    if stored is None:
        raise CannotVerify("no entry or receipt with hash %s in this ledger" % target)
    if stored.kind != EntryKind.RECEIPT.value:
        raise CannotVerify("%s is a %s entry, not a receipt" % (target, stored.kind))
    return stored


# -- 2, 3 ---------------------------------------------------------------------------------------


def _receipt_task(stored: StoredEntry) -> str | None:
    try:
        return decode_as(LadderReceipt, stored.body).task_id
    except ReceiptsError:
        return None  # step 4 names a receipt that does not decode; the walk then keeps everything


def _step2_replay(source: Source, trust: Trust, upto: int, task: str | None) -> Walk:
    # 2. Replay every entry up to the receipt (3. judges the genesis signer on the way).
    # Tier records are signature-checked in step 5, only those the receipt relies on.
    walk = Walk(trust, sparse=source.sparse, only_task=task)
    for stored in source.iter_entries(upto=upto):
        walk.step(stored, check_signature=stored.kind != EntryKind.TIER_RECORD.value)
    if task is not None:  # a sealed set revealed after the receipt still decides its checks (§6e)
        walk.later_reveals(source.iter_entries(task=task), upto)
    return walk


# -- 4 ------------------------------------------------------------------------------------------


def _step4_receipt(receipt: LadderReceipt, entry: Entry, contract: Contract | None) -> list[Defect]:
    # 4. The receipt itself.
    defects = []
    # 4a. A receipt cannot be back-dated to before a waiver expired or evidence went stale.
    if entry.time - receipt.created > RECEIPT_CLOCK_SKEW:
        defects.append(
            Defect(
                "receipt-time",
                "the receipt is dated %d s before it was appended" % (entry.time - receipt.created),
                entry.seq,
            )
        )
    # 4b. Its config is a registered contract of its task, it requires every tier that contract
    # requires, and each required tier has an entry.
    if contract is None:
        defects.append(
            Defect(
                "config-unregistered",
                "config %s is not a registered contract of %s" % (receipt.config_hash.short(), receipt.task_id),
                entry.seq,
            )
        )
    else:
        defects += [
            Defect("required-weakened", "the contract requires tier %s but the receipt does not" % tier, entry.seq)
            for tier in contract.required_tiers
            if tier not in receipt.required
        ]
    defects += [
        Defect("required-tier-missing", "required tier %s has no entry in the receipt" % tier, entry.seq)
        for tier in LADDER
        if tier in receipt.required and receipt.entry(tier) is None
    ]
    return defects


# -- 5 ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Records:
    """What step 5 found: the ladder's lines, the records that resolved, their verified signers."""

    defects: list[Defect] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: list[TierLine] = field(default_factory=list)
    records: dict[Digest, TierRecord] = field(default_factory=dict)
    signers: dict[Digest, str] = field(default_factory=dict)


def _step5_records(walk: Walk, source: Source, receipt: LadderReceipt, receipt_entry: Entry) -> _Records:
    # 5. Each record the receipt lists.
    out = _Records()
    for tier in LADDER:
        slot = receipt.entry(tier)
        required = tier in receipt.required
        if slot is None:
            out.lines.append(TierLine(tier, required, "missing", None, None, "no entry"))
        elif not slot.records:
            out.lines.append(TierLine(tier, required, "skip", None, None, slot.skip_reason or ""))
        for digest in slot.records if slot is not None else ():
            found = walk.bodies.get(digest.value) or _walked_elsewhere(source, digest, receipt_entry.seq)
            if found is None or not isinstance(found[1], TierRecord):
                # 5a. Every listed record is a tier record earlier in the chain.
                out.defects.append(
                    Defect(
                        "record-missing",
                        "tier %s record %s is not a tier record before the receipt" % (tier, digest.short()),
                        receipt_entry.seq,
                    )
                )
                out.lines.append(TierLine(tier, required, "missing", str(digest), None, "record not found"))
                continue
            rec_entry, rec = found[0], found[1]
            checked = _check_record(walk, source, receipt, tier, rec_entry, rec)
            out.defects += checked.defects
            out.warnings += checked.warnings
            derived = checked.derived
            out.records[digest] = rec
            label = walk.signers.get(digest.value)
            if label is not None:
                out.signers[digest] = rec_entry.signer
            out.lines.append(
                TierLine(
                    tier,
                    required,
                    rec.verdict.value,
                    str(digest),
                    label,
                    "%d evidence item(s)" % len(rec.evidence),
                    derived,
                    checked.reason,
                )
            )
    return out


def _walked_elsewhere(source: Source, digest: Digest, before: int) -> tuple[Entry, Body] | None:
    """A listed record of another task, which the walk did not keep: read again, and taken
    only as the walk met it (the first entry whose body has this hash, before the receipt,
    its bytes hashing to it), so that step 5b can name it for what it is.
    """
    stored = source.by_body_hash(digest)
    if stored is None or stored.seq >= before:
        return None
    try:
        entry = decode_entry(stored.entry)
        if entry.seq != stored.seq or entry.body_hash != digest or body_hash(entry.kind, stored.body) != digest:
            return None
        return entry, decode_body(entry.kind, stored.body)
    except ReceiptsError:
        return None


@dataclass(frozen=True, slots=True)
class _RecordCheck:
    """What steps 5a to 5h found for one record, and the verdict its evidence entails (None
    where none is re-derived).
    """

    derived: str | None
    defects: tuple[Defect, ...] = ()
    warnings: tuple[str, ...] = ()
    reason: str | None = None  # why the evidence entails ``derived``, in the rule's words


def _check_record(
    walk: Walk, source: Source, receipt: LadderReceipt, tier: Tier, entry: Entry, rec: TierRecord
) -> _RecordCheck:
    """Steps 5a to 5h for one record."""
    defects: list[Defect] = []
    warnings: list[str] = []
    # 5a. ... signed by a key with that tier's role (as in 2e).
    if entry.body_hash.value not in walk.signers:
        signed = walk.signature(entry, rec)
        if isinstance(signed, Defect):
            defects.append(signed)
    defects += _binding_defects(receipt, tier, entry, rec)
    # 5d. Its evidence list re-hashes, and every blob exists and re-hashes to its digest.
    defects += _evidence_defects(source, rec, tier, entry.seq, warnings=warnings)
    if rec.tier is not tier:
        return _RecordCheck(None, tuple(defects), tuple(warnings))
    if tier is Tier.HUMAN:
        entailed = _human_entailed(source, entry, rec, walk.signers.get(entry.body_hash.value))
    else:
        contract = walk.contracts.get((rec.task_id, rec.config_hash.value))
        if contract is None:
            why = "the %s record's config is not a registered contract" % tier
            entailed = _RecordCheck(None, (Defect("config-unregistered", why, entry.seq),))
        elif tier is Tier.DETERMINISTIC:
            entailed = _deterministic_entailed(walk, source, receipt, entry, rec, contract)
        else:
            entailed = _judge_entailed(source, entry, rec, contract)
    return _RecordCheck(
        entailed.derived, (*defects, *entailed.defects), (*warnings, *entailed.warnings), entailed.reason
    )


def _binding_defects(receipt: LadderReceipt, tier: Tier, entry: Entry, rec: TierRecord) -> list[Defect]:
    """Steps 5b and 5c: what the record is about, and when."""
    seq = entry.seq
    defects: list[Defect] = []
    # 5b. The record is for this task, this candidate and this config, in this tier's slot.
    if rec.tier is not tier:
        defects.append(Defect("record-tier", "the %s slot holds a %s record" % (tier, rec.tier), seq))
    if rec.task_id != receipt.task_id:
        why = "tier %s record is for task %s, not %s" % (tier, rec.task_id, receipt.task_id)
        defects.append(Defect("record-task", why, seq))
    if rec.input_hash != receipt.input_hash:
        why = "tier %s record is for candidate %s, not %s" % (tier, rec.input_hash.short(), receipt.input_hash.short())
        defects.append(Defect("record-candidate", why, seq))
    if rec.config_hash != receipt.config_hash:
        why = "tier %s record is under config %s, not %s" % (tier, rec.config_hash.short(), receipt.config_hash.short())
        defects.append(Defect("record-config", why, seq))
    # 5c. A record cannot claim to be newer than the entry that appended it (it would look fresher).
    if rec.created > entry.time:
        why = "tier %s record is dated %d, after it was appended at %d" % (tier, rec.created, entry.time)
        defects.append(Defect("record-time", why, seq))
    return defects


def _human_entailed(source: Source, entry: Entry, rec: TierRecord, label: str | None) -> _RecordCheck:
    # 5h. A human verdict is what its decision document says, by the key that signed it
    # (named by the keyring's name for it, when its signature verified: people read names).
    human, why = derive_human(rec, entry.signer, evidence_reader(source), label)
    if human is rec.verdict:
        return _RecordCheck(human.value, reason=why)
    message = "the human record says %s but its decision entails %s: %s" % (rec.verdict, human, why)
    return _RecordCheck(human.value, (Defect("verdict-not-entailed", message, entry.seq),), reason=why)


def _deterministic_entailed(
    walk: Walk, source: Source, receipt: LadderReceipt, entry: Entry, rec: TierRecord, contract: Contract
) -> _RecordCheck:
    # 5e. A deterministic verdict must follow from its recorded evidence under its contract and waivers.
    seq = entry.seq
    in_force = waivers_in_force(walk.waivers, rec, seq)
    outcome = rederive_deterministic(
        rec,
        contract,
        evidence_reader(source),
        {c: describe_waiver(*ws[-1]) for c, ws in in_force.items()},
        _reveals(source, walk, rec.task_id),
    )
    defects: list[Defect] = []
    # 5f. A pass that leans on a waiver needs the waiver still in force when the receipt was sealed.
    for check_id in outcome.waived:
        if not any(w.in_force(receipt.created) for _, w, _ in in_force[check_id]):
            why = "the deterministic pass relies on a waiver of %s that expired before the receipt was sealed (%s)" % (
                check_id,
                describe_waiver(*in_force[check_id][-1]),
            )
            defects.append(Defect("waiver-expired", why, seq))
    if (outcome.verdict is Verdict.PASS) != (rec.verdict is Verdict.PASS):
        why = "the deterministic record says %s but its evidence entails %s: %s" % (
            rec.verdict,
            outcome.verdict,
            "; ".join(outcome.reasons) or "all checks passed",
        )
        defects.append(Defect("verdict-not-entailed", why, seq))
    # A pass that leans on a waiver is never worded as if every check passed.
    why = "; ".join(outcome.reasons) or (
        "passed with waived failure(s): %s" % ", ".join(outcome.waived) if outcome.waived else "every check passed"
    )
    return _RecordCheck(outcome.verdict.value, tuple(defects), outcome.warnings, why)


def _reveals(source: Source, walk: Walk, task_id: str) -> dict[str, RevealedSet]:
    """What the task's verified reveals made public, by sealed set digest (§6e): each set's
    plaintext and its runs' results, as read from the blobs (None: missing or altered).
    """
    found: dict[str, RevealedSet] = {}
    for _, event, _ in walk.reveals:
        sealed = dict(event.fields).get("sealed")
        if event.task_id != task_id or sealed is None:
            continue
        plaintext, results = None, {}
        for ref in event.evidence:
            data = read_blob(source, ref.digest, None)
            if ref.check_id == "sealed-set":
                plaintext = data
            elif ref.check_id.startswith("revealed:"):
                results[str(ref.digest)] = data
        found[sealed] = RevealedSet(plaintext, results)
    return found


def _judge_entailed(source: Source, entry: Entry, rec: TierRecord, contract: Contract) -> _RecordCheck:
    # 5g. A judge verdict (and a pass's confidence) must follow from its stored replies under its contract.
    judged = _rederive_judge(source, rec, contract)
    # The verdict itself is re-derived, not only pass against not-pass: a review re-signed
    # as a fail (or a retry as a skip) says something its replies do not (issue 47).
    if judged.verdict is rec.verdict and (rec.verdict is not Verdict.PASS or rec.confidence_bp == judged.confidence_bp):
        return _RecordCheck(judged.verdict.value, reason=judged.reason)
    why = "the judge record says %s (confidence %s) but its stored replies entail %s: %s" % (
        rec.verdict,
        rec.confidence_bp,
        judged.verdict,
        judged.reason,
    )
    return _RecordCheck(judged.verdict.value, (Defect("verdict-not-entailed", why, entry.seq),), reason=judged.reason)


def _excusable(source: Source, tier: Tier, ref: EvidenceRef) -> bool:
    """Whether a missing blob may be a warning: no verdict is derived from it, and the
    bundle declares it redacted (format.md §10).
    """
    from receipts import is_derivation_input  # read only when a blob is missing

    return not is_derivation_input(tier, ref) and source.redacted(ref.digest)


def _evidence_defects(
    source: Source,
    record: TierRecord,
    tier: Tier,
    seq: int,
    seen: dict[tuple[Digest, int], str | None] | None = None,
    warnings: list[str] | None = None,
) -> list[Defect]:
    """5d: the evidence list re-hashes, and each blob exists and re-hashes to its digest and
    size, read in chunks. ``seen`` remembers blobs already read (an audit reads each once).
    A blob a bundle's exporter redacted is a warning, not a defect, only where no verdict
    is derived from it (and ``warnings`` is given): it was not checked, and says so.
    """
    defects = []
    if evidence_list_hash(record.evidence) != record.evidence_hash:
        defects.append(
            Defect("evidence-hash", "tier %s: evidence_hash does not match the record's evidence list" % tier, seq)
        )
    for ref in record.evidence:
        key = (ref.digest, ref.size)
        problem = seen[key] if seen is not None and key in seen else blob_problem(source, ref.digest, ref.size)
        if seen is not None:
            seen[key] = problem
        if problem == "evidence-missing" and warnings is not None and _excusable(source, tier, ref):
            retained = source.pruned(record, ref)
            warnings.append(
                "tier %s evidence %s (%s) %s: not checked" % (tier, ref.check_id, ref.digest.short(), retained)
                if retained
                else "REDACTED from this bundle by its exporter, not checked: tier %s evidence %s (%s)"
                % (tier, ref.check_id, ref.digest.short())
            )
        elif problem == "evidence-missing" and warnings is not None and (why := source.pruned(record, ref)):
            warnings.append("tier %s evidence %s (%s) %s: not checked" % (tier, ref.check_id, ref.digest.short(), why))
        elif problem == "evidence-missing":
            defects.append(
                Defect(
                    problem,
                    "tier %s: evidence %s (%s) is missing from the blob store"
                    % (tier, ref.check_id, ref.digest.short()),
                    seq,
                )
            )
        elif problem == "evidence-altered":
            defects.append(
                Defect(
                    problem,
                    "tier %s: evidence %s no longer hashes to %s" % (tier, ref.check_id, ref.digest.short()),
                    seq,
                )
            )
    return defects


def _rederive_judge(source: Source, record: TierRecord, contract: Contract) -> SampleOutcome:
    run = None
    replies: dict[str, bytes] = {}
    provenance: dict[str, dict[str, Any] | None] = {}
    for ref in record.evidence:
        if ref.check_id == "judge:run" and ref.media_type == JUDGE_RUN_MEDIA_TYPE:
            run = read_evidence(source, ref.digest, JUDGE_RUN_FORMAT)
        elif ref.check_id.startswith("judge:reply:"):
            data = read_blob(source, ref.digest)
            if data is not None:
                replies[str(ref.digest)] = data
        elif ref.check_id.startswith("judge:provenance:") and ref.media_type == PROVENANCE_MEDIA_TYPE:
            provenance[str(ref.digest)] = read_evidence(source, ref.digest, PROVENANCE_FORMAT)
    if run is None:
        return SampleOutcome(Verdict.FAIL, 0, "no judge run was recorded")
    return derive_judge(run, replies, contract, provenance)


# -- 6 ------------------------------------------------------------------------------------------


def _step6_human_slot(walk: Walk, receipt: LadderReceipt, receipt_entry: Entry) -> tuple[list[Defect], tuple[str, ...]]:
    # 6. The human slot lists exactly each human key's latest validly signed decision on this
    # candidate and contract: no reject left out. A decision on this candidate whose signature
    # fails is a defect itself: a decision that cannot be checked never drops out silently.
    defects: list[Defect] = []
    stale: list[str] = []
    decisions = []
    for entry, body in list(walk.bodies.values()):
        if not (
            isinstance(body, TierRecord)
            and body.tier is Tier.HUMAN
            and body.task_id == receipt.task_id
            and entry.seq < receipt_entry.seq
        ):
            continue
        if body.input_hash != receipt.input_hash:
            stale.append(
                "entry %d: %s by %s is for candidate %s, not this one"
                % (
                    entry.seq,
                    "approval" if body.verdict is Verdict.PASS else body.verdict.value,
                    entry.signer,
                    body.input_hash.short(),
                )
            )
            continue
        if body.config_hash != receipt.config_hash:
            continue
        signed = (
            walk.signature(entry, body)
            if entry.body_hash.value not in walk.signers
            else walk.signers[entry.body_hash.value]
        )
        if isinstance(signed, Defect):
            defects.append(signed)
        else:
            decisions.append((entry.body_hash, body, entry.signer))
    expected = set(
        latest_human_decisions(
            decisions, task_id=receipt.task_id, input_hash=receipt.input_hash, config_hash=receipt.config_hash
        )
    )
    slot = receipt.entry(Tier.HUMAN)
    listed = set(slot.records) if slot is not None else set()
    if listed != expected:
        defects.append(
            Defect(
                "human-decisions",
                "the receipt's human slot lists %d decision(s) but the chain holds %d latest decision(s) by human keys on this candidate"
                % (len(listed), len(expected)),
                receipt_entry.seq,
            )
        )
    return defects, tuple(stale)


# -- 7 ------------------------------------------------------------------------------------------


def _step7_eligibility(
    receipt: LadderReceipt, entry: Entry, contract: Contract | None, records: _Records, walk: Walk
) -> tuple[Eligibility, list[Defect]]:
    # 7. merge_eligible is derived again with the sealer's rule and must equal the claim;
    # where the contract wants independent approvers, the authors come from the task's
    # events before the receipt (signed and walked in step 2).
    authors = None
    if contract is not None and contract.independent_approvers:
        authors = author_keys(
            sorted(
                (e.seq, body.type.value, e.signer)
                for e, body in walk.bodies.values()
                if isinstance(body, TaskEvent) and body.task_id == receipt.task_id and e.seq < entry.seq
            )
        )
    derived = derive_merge_eligible(
        task_id=receipt.task_id,
        input_hash=receipt.input_hash,
        config_hash=receipt.config_hash,
        required=receipt.required,
        entries=receipt.entries,
        records=records.records,
        signers=records.signers,
        human_approvals=contract.human_approvals if contract else 1,
        created=receipt.created,
        max_evidence_age_s=contract.max_evidence_age_s if contract else None,
        not_approvers=authors,
    )
    derived = replace(derived, reasons=_named(derived.reasons, walk))
    if derived.eligible == receipt.merge_eligible:
        return derived, []
    return derived, [
        Defect(
            "eligibility-mismatch",
            "receipt claims merge_eligible=%s but the tier verdicts entail %s"
            % (str(receipt.merge_eligible).lower(), str(derived.eligible).lower()),
            entry.seq,
        )
    ]


def _named(reasons: tuple[str, ...], walk: Walk) -> tuple[str, ...]:
    """The rule's reasons with each key id named as people read it: "alice (SHA256:…)"."""
    if walk.keyring is None:
        return reasons
    names = {state.key_id: "%s (%s)" % (state.spec.name, state.key_id) for state in walk.keyring}
    named = []
    for reason in reasons:
        for key_id, label in names.items():
            if key_id in reason and label not in reason:
                reason = reason.replace(key_id, label)
        named.append(reason)
    return tuple(named)


# -- 8 ------------------------------------------------------------------------------------------


def _step8_transparency(source: Source, walk: Walk, receipt_seq: int, policy: Transparency) -> Finding:
    # 8. The entries sit in a tree whose head the ledger signed, and the ledger only grew
    # since a kept checkpoint: each source proves it in its own way.
    if walk.origin is None:
        return Finding()  # no genesis: step 2 has already failed the receipt
    return source.check_transparency(walk.origin, walk.keyring, receipt_seq, policy)


def _step8d_completeness(used: str, found: Finding, policy: Transparency) -> tuple[str, list[Defect], tuple[str, ...]]:
    # 8d. Were all of the task's entries and the keyring seen (§8.1a)? A walk linked every
    # entry; by proof, only an auditing witness's cosignature can say that nothing every
    # later pointer skips exists. A quorum asked for and not met is a defect.
    if used == "walk":
        return "walked", [], ()
    enough = max(policy.audited_quorum, 1)
    if policy.auditors and len(found.certified_by) >= enough:
        return "certified", [], ()
    if policy.auditors and policy.require_complete:
        return (
            "unproven",
            [
                Defect(
                    "completeness-unproven",
                    "no checkpoint covering the receipt carries %d auditing witness cosignature(s) (it has %d): the"
                    " task's completeness is not proven" % (enough, len(found.certified_by)),
                )
            ],
            (),
        )
    return (
        "unproven",
        [],
        (
            "completeness UNPROVEN: checked by proof, so an entry of the task that every later pointer skips would"
            " not be seen; name auditing witnesses (--auditing-witness) or audit the chain (`ledger verify --chain`)",
        ),
    )


# -- the whole chain ------------------------------------------------------------------------------


class _Recent(dict[tuple[Digest, int], "str | None"]):
    """Blobs already re-hashed in this audit, the oldest forgotten past a bound: a blob
    forgotten and met again is read again, so memory stays bounded and nothing is skipped.
    """

    LIMIT = 1 << 16

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    def __setitem__(self, key: tuple[Digest, int], value: str | None) -> None:
        if key not in self:
            self.read += 1
            if len(self) >= self.LIMIT:
                del self[next(iter(self))]
        super().__setitem__(key, value)


def verify_chain(
    source: LedgerSource,
    trust: Trust,
    progress: Callable[[int], None] | None = None,
    transparency: Transparency | None = None,
    workers: int | None = None,
    evidence: bool = True,
    resume: AuditState | None = None,
) -> ChainResult:
    """Audit every entry of a ledger: steps 2 and 3 for the whole chain, every signature
    checked (on ``workers`` processes, default every core), step 5d for every tier record's
    evidence (``evidence=False`` skips it and the result says so), then step 8 against the
    newest checkpoint (and a kept one). Entries stream past and the leaves fold into a
    compact range: memory does not grow with the ledger. With ``resume`` (a clean audit's
    state) only the entries after the state's checkpoint are walked, from its keyring, task
    heads and compact range; the newest checkpoint's root then proves the audited prefix
    unchanged. A clean result carries the state at the newest checkpoint (``state``).

    Returns a `ChainResult` naming the first bad entry; raises `CannotVerify` if the ledger
    or the state cannot be read, or a signature worker dies.
    """
    policy = transparency or Transparency()
    if resume is not None and policy.since is not None:
        raise CannotVerify("--since with --resume: the audit state already holds the checkpoint you audited up to")
    count = source.count()
    newest = source.newest_checkpoint()
    queue = SignatureQueue(workers or os.cpu_count() or 1)
    if resume is None:
        walk, leaves, found = Walk(trust, deferred=queue, keep=False), CompactRange(), []
    else:
        # A resumed walk's range holds the audited prefix: it goes on from resume.size.
        walk, leaves = Walk.resumed(resume, trust, queue), _resumed_range(resume)
        found = _resume_defects(source, resume, count, newest, walk.keyring)
    seen, said = _Recent(), list[str]()  # blobs read (each once), what a redacted one leaves unchecked
    blobs = functools.partial(_evidence_defects, source, seen=seen, warnings=said) if evidence else None
    try:
        roots, state, last = _fold(
            source, walk, leaves, (leaves.size, count), _sizes_to_root(newest, policy), newest, blobs, progress
        )
        walk.defects.extend(queue.defects())
    finally:
        queue.close()
    defects = found + walk.defects
    if last is None and resume is None:
        defects.append(Defect("empty-ledger", "the ledger has no entries, not even a genesis", None))
    elif walk.origin is not None:  # 8. against the newest checkpoint (and a kept one)
        defects += ledger_transparency(source, walk.origin, -1, policy, roots, walk.keyring).defects
    defects.sort(key=lambda d: d.seq if d.seq is not None else -1)
    head = str(entry_hash(last.entry)) if last is not None else (str(Digest(resume.prev_hash)) if resume else None)
    return ChainResult(
        leaves.size,
        tuple(defects),
        walk.trust_label,
        head,
        seen.read if evidence else None,
        resumed_from=resume.size if resume is not None else None,
        state=state if not defects else None,
        warnings=tuple(said),
    )


def _fold(
    source: LedgerSource,
    walk: Walk,
    leaves: CompactRange,
    span: tuple[int, int],
    wanted: set[int],
    newest: tuple[int, str] | None,
    check_evidence: Callable[[TierRecord, Tier, int], list[Defect]] | None,
    progress: Callable[[int], None] | None,
) -> tuple[dict[int, bytes], AuditState | None, StoredEntry | None]:
    """Walk the entries in ``span`` and fold their leaves: the roots at the ``wanted`` sizes,
    the state at the newest checkpoint, and the last entry walked.
    """
    roots: dict[int, bytes] = {}
    state: AuditState | None = None
    last: StoredEntry | None = None

    def reached() -> None:
        nonlocal state
        if leaves.size in wanted:
            roots[leaves.size] = leaves.root()
        if newest is not None and leaves.size == newest[0]:
            state = walk.snapshot(leaves.copy(), newest[1])
            walk.defects += walk.retention_line(newest[1])

    reached()
    for stored in source.entries_between(*span):
        body = walk.step(stored, check_signature=True)
        leaves.append(leaf_hash(stored.entry))
        reached()
        if check_evidence is not None and isinstance(body, TierRecord):
            walk.defects += check_evidence(body, body.tier, stored.seq)
        last = stored
        if progress is not None:
            progress(1)
    return roots, state, last


def _sizes_to_root(newest: tuple[int, str] | None, policy: Transparency) -> set[int]:
    """The tree sizes whose roots step 8 needs: the newest checkpoint's and a kept one's."""
    wanted = {newest[0]} if newest is not None else set()
    if policy.since is not None:
        try:
            wanted.add(parse_checkpoint(parse_note(policy.since).text).size)
        except ReceiptsError:
            pass  # step 8 refuses a kept checkpoint that is not one
    return wanted


def _proven_into(nodes: CachedNodes, stored: StoredEntry, size: int, root: bytes) -> bool:
    # The stored tree is not trusted: a wrong node only makes the proof fail against the root.
    try:
        path = inclusion_proof(nodes, stored.seq, size)
    except (MissingNode, ReceiptsError):
        return False
    return is_valid_inclusion(leaf_hash(stored.entry), stored.seq, size, path, root)


def audited_entry(source: LedgerSource, state: AuditState, seq: int, entry: str) -> bool:
    """Whether the entry whose hash is ``entry`` sits at ``seq`` in the prefix a clean chain
    audit covered (format.md §8.1a): below the state's size, and the ledger's row there
    hashes to ``entry`` and is proven into the state's checkpoint root.

    Args:
        source: the ledger the audit (that left ``state``) ran on.
        state: a clean audit's state, re-proven or just written by `verify_chain`.
        seq: the entry's position, as the checked receipt says.
        entry: the entry hash in text form, computed from the checked entry's bytes.

    Returns:
        True only when all three hold; a row changed since the audit fails the proof.
    """
    if not 0 <= seq < state.size:
        return False
    stored = source.by_seq(seq)
    if stored is None or str(entry_hash(stored.entry)) != entry:
        return False
    return _proven_into(CachedNodes(StoredNodes(source)), stored, state.size, _resumed_range(state).root())


def _reprove_state(source: LedgerSource, state: AuditState, seam: StoredEntry, root: bytes) -> None:
    """Re-prove what the state says against the ledger before a resumed walk relies on it
    (format.md §8.2): the state file is not signed, so each fact is tied to the state's
    signed checkpoint through signed data.

    1. the seam entry (size - 1) is proven into the checkpoint's root by an inclusion proof
       built from the stored tree (never trusted: a wrong node fails the proof);
    2. the keyring is exactly the signed ``ring`` chain that ends at the seam: the state's
       last keyring entry is the seam (if it is one) or the one its ``ring`` names, each
       entry's ``ring`` names the one before it, the first is the genesis, and each body
       hashes to its entry's ``body``, so no change can be dropped, added or altered;
    3. each task head is an entry of that task below the size, proven into the root, and
       the newest entry of that task the ledger holds there;
    4. each task's contract is the body of the newest contract entry of that task below the
       size, that entry re-hashed and proven into the root; a task with one has it in the
       state, and every contract in the state belongs to a task with a head.

    Steps 3 and 4 find "newest" with one indexed probe per task (`newest_of_task`), so a
    resumed audit costs what the new entries and the tasks cost, not the audited prefix.

    Raises:
        CannotVerify: any of these fails; the state cannot be resumed from (a full audit can).
    """
    if not _proven_into(CachedNodes(StoredNodes(source)), seam, state.size, root):
        _refuse("entry %d is not proven into the state's checkpoint" % seam.seq)
    _reprove_ring(state, seam)
    _reprove_tasks(source, state, root)


def _refuse(why: str) -> NoReturn:
    raise CannotVerify("the audit state does not re-prove against the ledger (%s): run a full audit" % why)


def _reprove_ring(state: AuditState, seam: StoredEntry) -> None:
    """Step 2 of `_reprove_state`: the keyring is the signed ring chain that ends at the seam."""
    try:
        entries = [decode_entry(e) for e, _ in state.ring]
        at_seam = decode_entry(seam.entry)
    except ReceiptsError as exc:
        _refuse(str(exc))
    expected: Digest | None = Digest(state.prev_hash) if at_seam.kind in KEYRING_KINDS else at_seam.ring
    for (raw, body), entry in zip(reversed(state.ring), reversed(entries), strict=True):
        if expected is None or entry_hash(raw) != expected:
            _refuse("its keyring is not the signed ring chain ending at entry %d" % seam.seq)
        if body_hash(entry.kind, body) != entry.body_hash:
            _refuse("the body of keyring entry %d does not hash to its entry" % entry.seq)
        expected = entry.ring
    if expected is not None or state.last_ring != entry_hash(state.ring[-1][0]).value:
        _refuse("its keyring is not the signed ring chain ending at entry %d" % seam.seq)


def _reprove_tasks(source: LedgerSource, state: AuditState, root: bytes) -> None:
    """Steps 3 and 4 of `_reprove_state`: each task's head and contract."""
    nodes = CachedNodes(StoredNodes(source))

    def proven(stored: StoredEntry) -> bool:
        return _proven_into(nodes, stored, state.size, root)

    contracts = {}
    for raw_body in state.contracts:
        try:
            contracts[decode_as(ContractRevision, raw_body).task_id] = raw_body
        except ReceiptsError as exc:
            _refuse(str(exc))
    for task, head_hash in state.tasks:
        head = source.newest_of_task(task, state.size - 1)
        if head is None or entry_hash(head.entry).value != head_hash or not proven(head) or _task_of(head) != task:
            _refuse("task %s's head is not its newest entry, proven below size %d" % (task, state.size))
        found = source.newest_of_task(task, state.size - 1, EntryKind.CONTRACT.value)
        if found is not None and not (proven(found) and _task_of(found) == task):
            _refuse("task %s's newest contract entry %d is not proven below size %d" % (task, found.seq, state.size))
        if (found.body if found is not None else None) != contracts.pop(task, None):
            _refuse("task %s's contract is not its newest below size %d" % (task, state.size))
    if contracts:
        _refuse("it holds contracts of tasks it has no head for: %s" % ", ".join(sorted(contracts)))


def _task_of(stored: StoredEntry) -> str | None:
    """The task a row's signed bytes name (its body re-hashed against its entry), else None."""
    try:
        entry = decode_entry(stored.entry)
        if body_hash(entry.kind, stored.body) != entry.body_hash:
            return None
        return getattr(decode_body(entry.kind, stored.body), "task_id", None)
    except ReceiptsError:
        return None


def _resumed_range(state: AuditState) -> CompactRange:
    try:
        leaves = CompactRange(state.size, state.range)
    except FormatError as exc:
        raise CannotVerify("the audit state is malformed: %s" % exc) from None
    return leaves


def _resume_defects(
    source: LedgerSource, state: AuditState, count: int, newest: tuple[int, str] | None, ring: Keyring | None
) -> list[Defect]:
    """The state's own checkpoint re-proven against the keyring its entries replay to
    (``ring``; else it is bad input), the state shown to be this ledger's, then what the
    ledger must still be for the audit to resume: at least as long, the same entry at the
    seam, and a checkpoint no older than the one audited.
    """
    read = read_checkpoint(state.checkpoint, state.origin)
    if isinstance(read, str) or read[1].size != state.size or read[1].root != _resumed_range(state).root():
        raise CannotVerify("the audit state does not match its own checkpoint: it cannot be resumed from")
    genesis = source.by_seq(0)
    if genesis is None or genesis.entry != state.ring[0][0]:
        raise CannotVerify("the audit state is of another ledger (its genesis is not this ledger's)")
    if checkpoint_signer(ring, read[0], state.origin, state.size) is None:
        raise CannotVerify("the audit state's checkpoint is not signed by a seal or admin key of its keyring")
    rewritten = "history-rewritten"
    if count < state.size:
        return [Defect(rewritten, "the ledger holds %d entries, fewer than the %d you audited" % (count, state.size))]
    seam = source.by_seq(state.size - 1)
    defects = []
    if seam is None or entry_hash(seam.entry).value != state.prev_hash:  # the bytes, not the index column
        defects.append(
            Defect(rewritten, "entry %d is not the entry you audited there" % (state.size - 1), state.size - 1)
        )
    else:
        _reprove_state(source, state, seam, read[1].root)
    # Rows deleted from (or slipped into) the audited prefix; bytes changed in place there
    # without touching the signed history are what a periodic full audit is for.
    below = source.rows_below(state.size)
    if below != state.size:
        defects.append(
            Defect(rewritten, "the ledger holds %d entries below size %d, not %d" % (below, state.size, state.size))
        )
    if newest is None or newest[0] < state.size:
        defects.append(
            Defect(
                rewritten,
                "the ledger's newest checkpoint (size %d) is older than the one you audited (size %d)"
                % (newest[0] if newest else 0, state.size),
            )
        )
    return defects
