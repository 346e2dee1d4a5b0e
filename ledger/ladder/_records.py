"""Tier records and receipts: append a record with its evidence, and seal the latest
records of a candidate into a receipt whose merge_eligible claim the rule derives.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    LADDER,
    Contract,
    Digest,
    EvidenceRef,
    FormatError,
    LadderReceipt,
    ReceiptsError,
    Signer,
    Tier,
    TierEntry,
    TierRecord,
    Verdict,
    author_keys,
    config_hash,
    derive_merge_eligible,
    latest_human_decisions,
    new_tier_record,
    rederive_deterministic,
    waivers_in_force,
)
from receipts import config_hash as receipts_config_hash

from .. import _clock
from .._environment import VERSION, environment_digest
from .._errors import InputError
from ..store._ledger import Appended, RecordRow, Store
from ._contracts import current_contract, register_contract
from ._events import task_events
from ._evidence import store_evidence_reader

__all__ = [
    "Evidence",
    "record_tier",
    "record_by_hand",
    "seal_receipt",
    "seal",
    "Sealed",
    "append_tier_record",
    "parse_tiers",
]


@dataclass(frozen=True, slots=True)
class Evidence:
    check_id: str
    path: Path
    media_type: str | None = None


def _media_type(path: Path) -> str:
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


def append_tier_record(
    store: Store,
    signer: Signer,
    *,
    task_id: str,
    tier: Tier,
    config_hash: Digest,
    input_hash: Digest,
    evidence: tuple[EvidenceRef, ...],
    verdict: Verdict,
    verifier: str,
    created: int | None = None,
    confidence_bp: int | None = None,
    parents: tuple[Digest, ...] = (),
) -> tuple[TierRecord, Appended]:
    """Seal one tier record as this runner states it (its version and environment, the time
    now unless ``created``) and append it, signed: the one way every tier runner records.

    Raises:
        InputError: the record's fields are not valid (the data model says which).
    """
    try:
        record = new_tier_record(
            task_id=task_id,
            tier=tier,
            config_hash=config_hash,
            input_hash=input_hash,
            evidence=evidence,
            verdict=verdict,
            verifier=verifier,
            verifier_version=VERSION,
            environment=environment_digest(),
            created=_clock.now() if created is None else created,
            confidence_bp=confidence_bp,
            parents=parents,
        )
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None
    return record, store.append(record, signer)


def record_tier(
    ledger: Store,
    *,
    task_id: str,
    tier: Tier,
    verdict: Verdict,
    signer: Signer,
    config_hash: Digest,
    input_hash: Digest,
    evidence: Sequence[Evidence] = (),
    confidence_bp: int | None = None,
    verifier: str = "ledger-record (recorded by hand)",
    parents: Sequence[Digest] = (),
) -> tuple[TierRecord, Appended]:
    """Ingest evidence into the blob store, then append one signed tier record."""
    refs = []
    for item in evidence:
        try:
            item.check_id.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("evidence name %r is not UTF-8 text: rename the file" % item.check_id) from None
        digest, size = ledger.put_blob_file(item.path)
        refs.append(EvidenceRef(item.check_id, digest, size, item.media_type or _media_type(item.path)))
    return append_tier_record(
        ledger,
        signer,
        task_id=task_id,
        tier=tier,
        config_hash=config_hash,
        input_hash=input_hash,
        evidence=tuple(refs),
        verdict=verdict,
        verifier=verifier,
        confidence_bp=confidence_bp,
        parents=tuple(parents),
    )


def record_by_hand(
    store: Store,
    *,
    task_id: str,
    tier: Tier,
    verdict: Verdict,
    signer: Signer,
    contract: bytes,
    contract_source: str,
    input_hash: Digest,
    evidence: Sequence[Evidence] = (),
    confidence_bp: int | None = None,
    parents: Sequence[Digest] = (),
) -> tuple[TierRecord, Appended]:
    """`ledger record`: a tier record appended by hand under ``contract`` (registered first
    if it is new). A deterministic or judge pass is refused: only its runner can show the
    evidence that entails it, and verify would reject it; so is a human pass (an approval
    is signed with `ledger approve`, which records what the person was shown).
    """
    if verdict is Verdict.PASS and tier is Tier.DETERMINISTIC:
        raise InputError("a deterministic pass cannot be recorded by hand (verify would reject it): run `ledger check`")
    if verdict is Verdict.PASS and tier is Tier.JUDGE:
        raise InputError("a judge pass cannot be recorded by hand (verify would reject it): run `ledger judge`")
    if verdict is Verdict.PASS and tier is Tier.HUMAN:
        raise InputError("a human approval cannot be recorded by hand (verify would reject it): run `ledger approve`")
    chash = config_hash(contract)
    if not any(rev.config_hash == chash for _, rev in store.contract_revisions(task_id)):
        register_contract(store, task_id, contract, signer, contract_source)
    return record_tier(
        store,
        task_id=task_id,
        tier=tier,
        verdict=verdict,
        signer=signer,
        config_hash=chash,
        input_hash=input_hash,
        evidence=evidence,
        confidence_bp=confidence_bp,
        parents=parents,
    )


def _authors(ledger: Store, task_id: str) -> dict[str, str]:
    """The keys that claimed or authored the task's change, from its signed events."""
    return author_keys([(seq, event.type.value, signer) for seq, event, signer in task_events(ledger, task_id)])


def parse_tiers(text: str) -> tuple[Tier, ...]:
    """A comma-separated list of tiers, in ladder order (`InputError` for an unknown one)."""
    try:
        chosen = {Tier(t.strip()) for t in text.split(",") if t.strip()}
    except ValueError:
        raise InputError("--require takes tiers from %s" % ",".join(t.value for t in LADDER)) from None
    return tuple(t for t in LADDER if t in chosen)


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed receipt, its entry, and each reason it is not merge-eligible (none when it is)."""

    receipt: LadderReceipt
    appended: Appended
    reasons: tuple[str, ...]


def seal_receipt(
    ledger: Store,
    *,
    task_id: str,
    signer: Signer,
    input_hash: Digest,
    extra_required: tuple[Tier, ...] = (),
    config_hash: Digest | None = None,
    contract_file: bytes | None = None,
) -> tuple[LadderReceipt, Appended]:
    """`seal` without the reasons: the receipt and its entry."""
    sealed = seal(
        ledger,
        task_id=task_id,
        signer=signer,
        input_hash=input_hash,
        extra_required=extra_required,
        config_hash=config_hash,
        contract_file=contract_file,
    )
    return sealed.receipt, sealed.appended


def seal(
    ledger: Store,
    *,
    task_id: str,
    signer: Signer,
    input_hash: Digest,
    extra_required: tuple[Tier, ...] = (),
    config_hash: Digest | None = None,
    contract_file: bytes | None = None,
) -> Sealed:
    """Bind the latest tier record of each tier for this candidate into a receipt. The
    contract's required tiers are always required; ``extra_required`` can only add. The
    contract is ``config_hash``'s, else that of the file ``contract_file``, else the one the
    candidate's newest record was checked under.

    Returns:
        The receipt, its entry, and why it is not merge-eligible when it is not (the same
        reasons `verify` derives again).
    """
    if config_hash is None and contract_file is not None:
        config_hash = receipts_config_hash(contract_file)
    rows, config_hash, stale = _candidate_rows(ledger, task_id, input_hash, config_hash)
    contract = current_contract(ledger, task_id, config_hash)
    required = tuple(t for t in LADDER if t in contract.required_tiers or t in extra_required)
    by_hash = {row.digest: row.record for row in rows}
    signers = {row.digest: row.signer for row in rows}
    entries = _ladder_entries(
        rows, required, task_id=task_id, input_hash=input_hash, config_hash=config_hash, stale_decisions=stale
    )
    now = _clock.now()
    _refuse_expired_waivers(ledger, rows, entries, contract, now)
    eligibility = derive_merge_eligible(
        task_id=task_id,
        input_hash=input_hash,
        config_hash=config_hash,
        required=required,
        entries=tuple(entries),
        records=by_hash,
        signers=signers,
        human_approvals=contract.human_approvals,
        created=now,
        max_evidence_age_s=contract.max_evidence_age_s,
        not_approvers=_authors(ledger, task_id) if contract.independent_approvers else None,
    )
    try:
        receipt = LadderReceipt(
            task_id=task_id,
            input_hash=input_hash,
            config_hash=config_hash,
            required=required,
            entries=tuple(entries),
            merge_eligible=eligibility.eligible,
            created=now,
        )
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return Sealed(receipt, ledger.append(receipt, signer), eligibility.reasons)


def _candidate_rows(
    ledger: Store, task_id: str, input_hash: Digest, config_hash: Digest | None
) -> tuple[list[RecordRow], Digest, int]:
    """The task's records of this candidate under the contract (``config_hash``, else the one
    its newest record was checked under), the contract, and how many human decisions were
    given on other candidates (stale for this one).
    """
    every = ledger.records_for(task_id)
    rows = [row for row in every if row.record.input_hash == input_hash]
    stale = sum(1 for row in every if row.record.tier is Tier.HUMAN and row.record.input_hash != input_hash)
    if config_hash is None:
        if not rows:
            raise InputError(
                "task %s has no tier records for candidate %s; pass --config to seal an empty ladder"
                % (task_id, input_hash.short())
            )
        config_hash = rows[-1].record.config_hash
    return [row for row in rows if row.record.config_hash == config_hash], config_hash, stale


def _ladder_entries(
    rows: list[RecordRow],
    required: tuple[Tier, ...],
    *,
    task_id: str,
    input_hash: Digest,
    config_hash: Digest,
    stale_decisions: int = 0,
) -> list[TierEntry]:
    """The receipt's slots: the latest record of each machine tier, every human key's latest
    decision, and a skip for each required tier without a record.
    """
    chosen: dict[Tier, tuple[Digest, ...]] = {}
    for row in rows:
        if row.record.tier is not Tier.HUMAN:
            chosen[row.record.tier] = (row.digest,)  # chain order: the latest counts
    human = latest_human_decisions(
        [(row.digest, row.record, row.signer) for row in rows],
        task_id=task_id,
        input_hash=input_hash,
        config_hash=config_hash,
    )
    if human:
        chosen[Tier.HUMAN] = human
    entries = []
    for tier in LADDER:
        if tier in chosen:
            entries.append(TierEntry(tier, records=chosen[tier]))
        elif tier in required:
            why = "no %s record for this candidate and config" % tier
            if tier is Tier.HUMAN and stale_decisions:
                # The reviewer approved an earlier commit: say so, not only that nothing is here.
                why += " (%d decision(s) are stale: given on earlier candidates)" % stale_decisions
            entries.append(TierEntry(tier, skip_reason=why))
    return entries


def _refuse_expired_waivers(
    store: Store, rows: list[RecordRow], entries: list[TierEntry], contract: Contract, now: int
) -> None:
    """A deterministic pass that leans on an expired waiver is not sealed: check again."""
    det = next((e.records for e in entries if e.tier is Tier.DETERMINISTIC and e.records), None)
    det_row = next((row for row in rows if det is not None and row.digest == det[0]), None)
    if det_row is None or det_row.record.verdict is not Verdict.PASS:
        return
    expired = _expired_waivers_relied_on(store, det_row, contract, now)
    if expired:
        raise InputError(
            "the deterministic pass relied on a waiver of %s that has expired: run `ledger check` again"
            % ", ".join(expired)
        )


def _expired_waivers_relied_on(store: Store, row: RecordRow, contract: Contract, now: int) -> list[str]:
    """Checks whose failure the record's pass leans on a waiver for, where no such waiver is
    in force any more: the verifier's step 5f, by the same rules.
    """
    in_force = waivers_in_force(store.waivers(row.record.task_id), row.record, row.seq)
    if not in_force:
        return []
    outcome = rederive_deterministic(
        row.record, contract, store_evidence_reader(store), {c: "waived" for c in in_force}
    )
    return [c for c in outcome.waived if not any(w.in_force(now) for _, w, _ in in_force[c])]
