"""Recompute and re-derive. The numbered steps match docs/format.md §"Verification".

Nothing stored is believed: every hash is recomputed from stored bytes, every signature
is checked against the keyring replayed up to its entry, and `merge_eligible` is derived
again from the tier verdicts with the same rule the sealer used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from receipts import (
    CHECK_RESULT_FORMAT,
    CHECK_RESULT_MEDIA_TYPE,
    JUDGE_RUN_FORMAT,
    KEYRING_KINDS,
    TASK_KINDS,
    JUDGE_RUN_MEDIA_TYPE,
    LADDER,
    SNAPSHOT_FORMAT,
    SNAPSHOT_MEDIA_TYPE,
    ContentHasher,
    Contract,
    ContractRevision,
    Waiver,
    Digest,
    Entry,
    EntryKind,
    FormatError,
    Genesis,
    KeyAdd,
    Keyring,
    KeyringError,
    KeyRevoke,
    LadderReceipt,
    ReceiptsError,
    Role,
    SampleOutcome,
    Tier,
    TierRecord,
    Verdict,
    body_hash,
    content_digest,
    contract_roles,
    decode_body,
    decode_entry,
    derive_deterministic,
    derive_judge,
    derive_merge_eligible,
    entry_hash,
    latest_human_decisions,
    entry_signed_bytes,
    evidence_list_hash,
    namespace_for,
    parse_evidence_json,
    required_role,
    sshsig_namespace,
    sshsig_verify,
    weakenings,
)

from ._errors import CannotVerify, VerificationFailed
from ._bundle import BundleSource, bundle_transparency
from ._source import LedgerSource, Source, StoredEntry
from ._transparency import Transparency, check_transparency
from ._trust import TrustRoot

if TYPE_CHECKING:  # a single-receipt verify never starts processes: keep its start-up light
    from concurrent.futures import Future, ProcessPoolExecutor

__all__ = ["Defect", "TierLine", "Result", "ChainResult", "verify_receipt", "verify_receipt_strict", "verify_chain"]

_READ_CHUNK = 1 << 20
RECEIPT_CLOCK_SKEW = 300  # seconds a receipt's own date may trail the entry that appended it


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
    tier: Tier
    required: bool
    status: str  # a verdict, "skip" or "missing"
    record: str | None
    signer: str | None
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"tier": self.tier.value, "required": self.required, "status": self.status,
                "record": self.record, "signer": self.signer, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Result:
    target: str
    defects: tuple[Defect, ...]
    trust: str
    task_id: str | None = None
    candidate: str | None = None
    claimed_eligible: bool | None = None
    derived_eligible: bool | None = None
    eligibility_reasons: tuple[str, ...] = ()
    tiers: tuple[TierLine, ...] = ()
    entries_checked: int = 0
    weakenings: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    waivers: tuple[str, ...] = ()
    checkpoint: str | None = None

    @property
    def ok(self) -> bool:
        return not self.defects

    def as_dict(self) -> dict[str, object]:
        return {
            "weakenings": list(self.weakenings), "warnings": list(self.warnings), "stale_approvals": list(self.stale), "waivers": list(self.waivers), "checkpoint": self.checkpoint,
            "target": self.target, "verified": self.ok, "trust": self.trust, "task": self.task_id,
            "candidate": self.candidate, "merge_eligible_claimed": self.claimed_eligible,
            "merge_eligible_derived": self.derived_eligible, "eligibility_reasons": list(self.eligibility_reasons),
            "tiers": [t.as_dict() for t in self.tiers], "entries_checked": self.entries_checked,
            "defects": [d.as_dict() for d in self.defects],
        }


@dataclass(frozen=True, slots=True)
class ChainResult:
    entries: int
    defects: tuple[Defect, ...]
    trust: str
    head: str | None

    @property
    def ok(self) -> bool:
        return not self.defects

    @property
    def first_bad(self) -> int | None:
        seqs = [d.seq for d in self.defects if d.seq is not None]
        return min(seqs) if seqs else None

    def as_dict(self) -> dict[str, object]:
        return {"verified": self.ok, "entries": self.entries, "trust": self.trust, "head": self.head,
                "first_bad_entry": self.first_bad, "defects": [d.as_dict() for d in self.defects]}


@dataclass(slots=True)
class _Walk:
    """State while replaying the chain in order (steps 2 and 3)."""

    trust: TrustRoot | None
    sparse: bool = False
    defects: list[Defect] = field(default_factory=list)
    keyring: Keyring | None = None
    prev_hash: Digest | None = None
    prev_time: int = 0
    expected_seq: int = 0
    bodies: dict[bytes, tuple[Entry, object]] = field(default_factory=dict)
    signers: dict[bytes, str] = field(default_factory=dict)
    latest_contract: dict[str, tuple[ContractRevision, Contract]] = field(default_factory=dict)
    contracts: dict[tuple[str, bytes], Contract] = field(default_factory=dict)
    weakened: list[tuple[str, str]] = field(default_factory=list)  # (task, description)
    waivers: list[tuple[int, Waiver, str]] = field(default_factory=list)  # (seq, waiver, signer label)
    last_ring: Digest | None = None
    origin: str | None = None
    # When set, signatures are queued (authorization is still judged in order) and checked on worker processes.
    deferred: _SignatureQueue | None = None
    last_task: dict[str, Digest] = field(default_factory=dict)

    def defect(self, code: str, message: str, seq: int | None) -> None:
        self.defects.append(Defect(code, message, seq))

    def step(self, stored: StoredEntry, check_signature: bool) -> None:
        seq = stored.seq
        # 2a. The entry decodes canonically, sits at its position, and its index columns agree.
        try:
            entry = decode_entry(stored.entry)
        except ReceiptsError as exc:
            self.defect("entry-malformed", "entry %d does not decode: %s" % (seq, exc), seq)
            self._lose_link(stored)
            return
        # A sparse copy (a bundle) may skip entries; its inclusion proofs fix each entry's place.
        contiguous = seq == self.expected_seq
        if entry.seq != seq or (not self.sparse and not contiguous):
            self.defect("chain-gap", "expected entry %d, found entry %d stored at %d" % (self.expected_seq, entry.seq, seq), seq)
        self.expected_seq = seq + 1
        this_hash = entry_hash(stored.entry)
        if stored.hash != this_hash.value or stored.kind != entry.kind.value or stored.body_hash != entry.body_hash.value:
            self.defect("index-mismatch", "entry %d: stored index columns disagree with its bytes" % seq, seq)
        # 2b. It links to the entry before it.
        if (contiguous or not self.sparse) and entry.prev != self.prev_hash:
            self.defect("chain-link", "entry %d does not link to the entry before it" % seq, seq)
        self.prev_hash = this_hash
        # 2c. Its body re-hashes to the body hash it commits to, and decodes canonically.
        body: object = None
        if body_hash(entry.kind, stored.body) != entry.body_hash:
            self.defect("body-hash", "entry %d: body bytes do not hash to the committed body hash" % seq, seq)
        else:
            try:
                body = decode_body(entry.kind, stored.body)
            except ReceiptsError as exc:
                self.defect("body-malformed", "entry %d: body does not decode: %s" % (seq, exc), seq)
        # 2d. Time never runs backwards along the chain (no back-dating past a revocation).
        if entry.time < self.prev_time:
            self.defect("time-order", "entry %d is dated before the entry it follows" % seq, seq)
        self.prev_time = max(self.prev_time, entry.time)
        if body is None:
            return
        # 2d'. Its back-pointers name the latest keyring entry and the task's previous entry.
        task = getattr(body, "task_id", None) if entry.kind in TASK_KINDS else None
        if entry.ring != self.last_ring:
            self.defect("ring-link", "entry %d does not name the latest keyring entry before it" % seq, seq)
        if entry.task_prev != (self.last_task.get(task) if task is not None else None):
            self.defect("task-link", "entry %d does not name the previous entry of its task" % seq, seq)
        if entry.kind in KEYRING_KINDS:
            self.last_ring = this_hash
        if task is not None:
            self.last_task[task] = this_hash
        # 2e. Its signer may sign this kind now, and the signature verifies (keyring entries always checked).
        if entry.kind is EntryKind.GENESIS:
            assert isinstance(body, Genesis)
            self.keyring = Keyring.from_genesis(body)
            self.origin = "receipt-ledger/" + body.ledger_id
            # 3. The trust root: the genesis signer is pinned, or trust is on first use.
            if self.trust is not None and entry.signer not in self.trust.admin_key_ids:
                self.defect("trust-root", "genesis is signed by %s, which the trust root (%s) does not pin" % (entry.signer, self.trust.source), seq)
        if self.keyring is None:
            self.defect("no-genesis", "entry %d comes before any valid genesis entry" % seq, seq)
            return
        if isinstance(body, ContractRevision):
            self._contract(entry, body)
        elif isinstance(body, Waiver):
            label = self.check_signature(entry, body)
            if label is not None:
                self.waivers.append((entry.seq, body, label))
        elif check_signature or entry.kind in (EntryKind.GENESIS, EntryKind.KEY_ADD, EntryKind.KEY_REVOKE):
            self.check_signature(entry, body)
        # 2g. Keyring changes take effect for the entries after this one.
        try:
            if isinstance(body, KeyAdd):
                self.keyring = self.keyring.with_added(body.key, seq)
            elif isinstance(body, KeyRevoke):
                self.keyring = self.keyring.with_revoked(body.key_id, seq, body.reason)
        except KeyringError as exc:
            self.defect("keyring-change", "entry %d: %s" % (seq, exc), seq)
        self.bodies.setdefault(entry.body_hash.value, (entry, body))

    def _contract(self, entry: Entry, body: ContractRevision) -> None:
        # 2f. A revision that lowers the bar must be an admin's; it is listed, naming the signer.
        try:
            contract = body.parse()
        except ReceiptsError as exc:
            self.defect("body-malformed", "entry %d: contract does not parse: %s" % (entry.seq, exc), entry.seq)
            return
        prev = self.latest_contract.get(body.task_id)
        if body.previous != (prev[0].config_hash if prev else None):
            self.defect("contract-previous", "entry %d: contract revision of %s does not name the revision it replaces" % (entry.seq, body.task_id), entry.seq)
        lowered = weakenings(prev[1], contract) if prev else ()
        signer = self.check_signature(entry, body, contract_roles(bool(lowered)))
        if lowered:
            self.weakened.append((body.task_id, "entry %d: %s weakened the contract of %s: %s" % (
                entry.seq, signer or entry.signer, body.task_id, "; ".join(lowered))))
        self.latest_contract[body.task_id] = (body, contract)
        self.contracts[(body.task_id, body.config_hash.value)] = contract

    def check_signature(self, entry: Entry, body: object, roles: tuple[Role, ...] | None = None) -> str | None:
        """Check the entry's signer and signature; return the signer's label if both hold."""
        assert self.keyring is not None
        if roles is None:
            roles = (required_role(entry.kind, body),)  # type: ignore[arg-type]
        try:
            claimed = sshsig_namespace(entry.signature)
        except ReceiptsError as exc:
            self.defect("signature-invalid", "entry %d: %s" % (entry.seq, exc), entry.seq)
            return None
        role = next((r for r in roles if namespace_for(r) == claimed), None)
        if role is None:
            self.defect("signer-unauthorized", "entry %d is signed in namespace %r; it needs %s" % (
                entry.seq, claimed, " or ".join(namespace_for(r) for r in roles)), entry.seq)
            return None
        try:
            state = self.keyring.authorize(entry.signer, role, entry.seq, entry.time)
        except KeyringError as exc:
            self.defect("signer-unauthorized", "entry %d: %s" % (entry.seq, exc), entry.seq)
            return None
        label = "%s (%s)" % (state.spec.name, state.key_id)
        if self.deferred is not None:
            self.deferred.append((state.spec.public_key, namespace_for(role), entry_signed_bytes(entry), entry.signature, entry.seq, state.spec.name))
            return label
        try:
            sshsig_verify(state.spec.public_key, namespace_for(role), entry_signed_bytes(entry), entry.signature)
        except ReceiptsError as exc:
            self.defect("signature-invalid", "entry %d: signature by %s: %s" % (entry.seq, state.spec.name, exc), entry.seq)
            return None
        self.signers[entry.body_hash.value] = label
        return label

    def _lose_link(self, stored: StoredEntry) -> None:
        # An undecodable entry still occupies its place; carry its stored hash so the next link is judged.
        self.expected_seq = stored.seq + 1
        self.prev_hash = entry_hash(stored.entry)


def _trust_label(trust: TrustRoot | None, keyring: Keyring | None) -> str:
    if trust is not None:
        return "pinned (%s)" % trust.source
    admins = sorted(s.key_id for s in keyring or () if Role.ADMIN in s.spec.roles and s.available_from == 0)
    return "trust on first use: genesis admin key(s) %s not pinned; pass --trust to pin" % ", ".join(admins or ["?"])


def _resolve(source: Source, target: str) -> StoredEntry:
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


def _check_evidence(source: Source, record: TierRecord, tier: Tier, defects: list[Defect], seq: int) -> None:
    if evidence_list_hash(record.evidence) != record.evidence_hash:
        defects.append(Defect("evidence-hash", "tier %s: evidence_hash does not match the record's evidence list" % tier, seq))
    for ref in record.evidence:
        handle = source.open_blob(ref.digest)
        if handle is None:
            defects.append(Defect("evidence-missing", "tier %s: evidence %s (%s) is missing from the blob store" % (tier, ref.check_id, ref.digest.short()), seq))
            continue
        hasher = ContentHasher()
        with handle:
            while chunk := handle.read(_READ_CHUNK):
                hasher.update(chunk)
        if hasher.digest() != ref.digest or hasher.size != ref.size:
            defects.append(Defect("evidence-altered", "tier %s: evidence %s no longer hashes to %s" % (tier, ref.check_id, ref.digest.short()), seq))


def _blob_bytes(source: Source, digest: Digest) -> bytes | None:
    """A small blob's bytes, only if they still hash to their digest (step 6 reports the rest)."""
    handle = source.open_blob(digest)
    if handle is None:
        return None
    with handle:
        data = handle.read((4 << 20) + 1)
    return data if content_digest(data) == digest else None


def _evidence_json(source: Source, digest: Digest, fmt: str) -> dict[str, object] | None:
    data = _blob_bytes(source, digest)
    if data is None:
        return None
    try:
        return parse_evidence_json(data, fmt)
    except ReceiptsError:
        return None


def _waivers_in_force(walk: _Walk, task: str, config: Digest, before_seq: int, at: int) -> dict[str, list[tuple[int, Waiver, str]]]:
    found: dict[str, list[tuple[int, Waiver, str]]] = {}
    for seq, waiver, label in walk.waivers:
        if seq < before_seq and waiver.task_id == task and waiver.config_hash == config and waiver.in_force(at):
            found.setdefault(waiver.check_id, []).append((seq, waiver, label))
    return found


def _describe(seq: int, waiver: Waiver, label: str) -> str:
    return "entry %d: %s waived %s until %d: %s" % (seq, label, waiver.check_id, waiver.expires, waiver.reason)


def _rederive_deterministic(source: Source, record: TierRecord, contract: Contract,
                            waivers: dict[str, str]) -> tuple[Verdict, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    snapshot = None
    results: dict[str, dict[str, object]] = {}
    seen: set[str] = set()
    for ref in record.evidence:
        if ref.check_id == "snapshot" and ref.media_type == SNAPSHOT_MEDIA_TYPE:
            snapshot = _evidence_json(source, ref.digest, SNAPSHOT_FORMAT)
        elif ref.check_id.startswith("check:") and ref.media_type == CHECK_RESULT_MEDIA_TYPE:
            check_id = ref.check_id[6:]
            doc = _evidence_json(source, ref.digest, CHECK_RESULT_FORMAT)
            if check_id in seen:
                results.pop(check_id, None)  # two results for one check: neither is believed
                continue
            seen.add(check_id)
            if doc is not None and doc.get("id") == check_id:
                results[check_id] = doc
    if snapshot is not None and snapshot.get("candidate") != str(record.input_hash):
        return Verdict.FAIL, ("the recorded snapshot is of a different candidate",), (), ()
    outcome = derive_deterministic(contract, results, snapshot, waivers)
    return outcome.verdict, outcome.reasons, outcome.warnings, outcome.waived


def _resolve_record(walk: _Walk, source: Source, receipt: LadderReceipt, receipt_seq: int, tier: Tier,
                    digest: Digest, defects: list[Defect], warnings: list[str]) -> tuple[TierRecord, Entry] | None:
    """Step 5 for one record a receipt relies on."""
    rec_found = walk.bodies.get(digest.value)
    rec = rec_found[1] if rec_found else None
    if rec_found is None or not isinstance(rec, TierRecord):
        defects.append(Defect("record-missing", "tier %s record %s is not a tier record before the receipt" % (tier, digest.short()), receipt_seq))
        return None
    rec_entry = rec_found[0]
    if digest.value not in walk.signers:
        walk.check_signature(rec_entry, rec)
    # 5b. The record is for this task, this candidate and this config, in this tier's slot.
    if rec.tier is not tier:
        defects.append(Defect("record-tier", "the %s slot holds a %s record" % (tier, rec.tier), rec_entry.seq))
    if rec.task_id != receipt.task_id:
        defects.append(Defect("record-task", "tier %s record is for task %s, not %s" % (tier, rec.task_id, receipt.task_id), rec_entry.seq))
    if rec.input_hash != receipt.input_hash:
        defects.append(Defect("record-candidate", "tier %s record is for candidate %s, not %s" % (tier, rec.input_hash.short(), receipt.input_hash.short()), rec_entry.seq))
    if rec.config_hash != receipt.config_hash:
        defects.append(Defect("record-config", "tier %s record is under config %s, not %s" % (tier, rec.config_hash.short(), receipt.config_hash.short()), rec_entry.seq))
    # 5c. A record cannot claim to be newer than the entry that appended it (it would look fresher).
    if rec.created > rec_entry.time:
        defects.append(Defect("record-time", "tier %s record is dated %d, after it was appended at %d" % (tier, rec.created, rec_entry.time), rec_entry.seq))
    # 5d. Its evidence list re-hashes, and every blob exists and re-hashes to its digest.
    _check_evidence(source, rec, tier, defects, rec_entry.seq)
    # 5e. A deterministic verdict must follow from its recorded evidence under its contract and waivers.
    if tier is Tier.DETERMINISTIC and rec.tier is Tier.DETERMINISTIC:
        rec_contract = walk.contracts.get((rec.task_id, rec.config_hash.value))
        if rec_contract is None:
            defects.append(Defect("config-unregistered", "the deterministic record's config is not a registered contract", rec_entry.seq))
        else:
            in_force = _waivers_in_force(walk, rec.task_id, rec.config_hash, rec_entry.seq, rec.created)
            derived_verdict, why, warned, used = _rederive_deterministic(
                source, rec, rec_contract, {c: _describe(*ws[-1]) for c, ws in in_force.items()})
            warnings.extend(warned)
            # 5f. A pass that leans on a waiver needs the waiver still in force when the receipt was sealed.
            for check_id in used:
                if not any(w.in_force(receipt.created) for _, w, _ in in_force[check_id]):
                    defects.append(Defect("waiver-expired", "the deterministic pass relies on a waiver of %s that expired before the receipt was sealed (%s)" % (
                        check_id, _describe(*in_force[check_id][-1])), rec_entry.seq))
            if (derived_verdict is Verdict.PASS) != (rec.verdict is Verdict.PASS):
                defects.append(Defect("verdict-not-entailed", "the deterministic record says %s but its evidence entails %s: %s" % (
                    rec.verdict, derived_verdict, "; ".join(why) or "all checks passed"), rec_entry.seq))
    # 5g. A judge verdict must follow from its stored replies under its contract's rules.
    if tier is Tier.JUDGE and rec.tier is Tier.JUDGE:
        rec_contract = walk.contracts.get((rec.task_id, rec.config_hash.value))
        if rec_contract is None:
            defects.append(Defect("config-unregistered", "the judge record's config is not a registered contract", rec_entry.seq))
        else:
            judged = _rederive_judge(source, rec, rec_contract)
            if (judged.verdict is Verdict.PASS) != (rec.verdict is Verdict.PASS) or (
                    rec.verdict is Verdict.PASS and rec.confidence_bp != judged.confidence_bp):
                defects.append(Defect("verdict-not-entailed", "the judge record says %s (confidence %s) but its stored replies entail %s: %s" % (
                    rec.verdict, rec.confidence_bp, judged.verdict, judged.reason), rec_entry.seq))
    return rec, rec_entry


def _rederive_judge(source: Source, record: TierRecord, contract: Contract) -> SampleOutcome:
    run = None
    replies: dict[str, bytes] = {}
    for ref in record.evidence:
        if ref.check_id == "judge:run" and ref.media_type == JUDGE_RUN_MEDIA_TYPE:
            run = _evidence_json(source, ref.digest, JUDGE_RUN_FORMAT)
        elif ref.check_id.startswith("judge:reply:"):
            data = _blob_bytes(source, ref.digest)
            if data is not None:
                replies[str(ref.digest)] = data
    if run is None:
        return SampleOutcome(Verdict.FAIL, 0, "no judge run was recorded")
    return derive_judge(run, replies, contract)


def verify_receipt(source: Source, target: str, trust: TrustRoot | None = None,
                   transparency: Transparency | None = None) -> Result:
    """Verify one receipt; the result lists every defect found. Raises `CannotVerify` only
    when the check cannot run at all."""
    # 1. Resolve the target to a receipt entry.
    stored_receipt = _resolve(source, target)
    walk = _Walk(trust, sparse=source.sparse)
    # 2-3. Replay the chain from genesis up to the receipt: links, bodies, keyring, trust root.
    # Tier records are signature-checked in step 4, only those this receipt relies on.
    count = 0
    for stored in source.iter_entries(upto=stored_receipt.seq):
        count += 1
        walk.step(stored, check_signature=stored.kind != EntryKind.TIER_RECORD.value)
    defects = walk.defects
    found = walk.bodies.get(stored_receipt.body_hash)
    receipt = found[1] if found else None
    if not isinstance(receipt, LadderReceipt):
        defects.append(Defect("receipt-malformed", "the receipt entry could not be read", stored_receipt.seq))
        return Result(target, tuple(defects), _trust_label(trust, walk.keyring), entries_checked=count)
    # 4a. A receipt cannot be back-dated to before a waiver expired or evidence went stale.
    receipt_entry = found[0] if found else None
    if receipt_entry is not None and receipt_entry.time - receipt.created > RECEIPT_CLOCK_SKEW:
        defects.append(Defect("receipt-time", "the receipt is dated %d s before it was appended" % (receipt_entry.time - receipt.created), stored_receipt.seq))
    # 4b. The receipt's config is a registered contract of its task, and it requires every tier that contract requires.
    contract = walk.contracts.get((receipt.task_id, receipt.config_hash.value))
    if contract is None:
        defects.append(Defect("config-unregistered", "config %s is not a registered contract of %s" % (receipt.config_hash.short(), receipt.task_id), stored_receipt.seq))
    else:
        for tier in contract.required_tiers:
            if tier not in receipt.required:
                defects.append(Defect("required-weakened", "the contract requires tier %s but the receipt does not" % tier, stored_receipt.seq))
    warnings: list[str] = []
    # 5a. Every tier entry resolves to tier records earlier in the chain, signed by keys with that tier's role.
    records: dict[Digest, TierRecord] = {}
    signers: dict[Digest, str] = {}
    lines: list[TierLine] = []
    for tier in LADDER:
        slot = receipt.entry(tier)
        required = tier in receipt.required
        if slot is None:
            if required:
                defects.append(Defect("required-tier-missing", "required tier %s has no entry in the receipt" % tier, stored_receipt.seq))
            lines.append(TierLine(tier, required, "missing", None, None, "no entry"))
            continue
        if not slot.records:
            lines.append(TierLine(tier, required, "skip", None, None, slot.skip_reason or ""))
            continue
        for digest in slot.records:
            found_rec = _resolve_record(walk, source, receipt, stored_receipt.seq, tier, digest, defects, warnings)
            if found_rec is None:
                lines.append(TierLine(tier, required, "missing", str(digest), None, "record not found"))
                continue
            rec, rec_entry = found_rec
            records[digest] = rec
            label = walk.signers.get(digest.value)
            if label is not None:
                signers[digest] = rec_entry.signer
            lines.append(TierLine(tier, required, rec.verdict.value, str(digest), label, "%d evidence item(s)" % len(rec.evidence)))
    # 6. The human slot lists exactly each key's latest decision on this candidate: no reject left out.
    decisions = []
    stale = []
    for entry, body in list(walk.bodies.values()):
        if isinstance(body, TierRecord) and body.tier is Tier.HUMAN and body.task_id == receipt.task_id and entry.seq < stored_receipt.seq:
            if body.input_hash != receipt.input_hash:
                stale.append("entry %d: %s by %s is for candidate %s, not this one" % (
                    entry.seq, "approval" if body.verdict is Verdict.PASS else body.verdict.value, entry.signer, body.input_hash.short()))
                continue
            if body.config_hash == receipt.config_hash and walk.check_signature(entry, body) is not None:
                decisions.append((entry.body_hash, body, entry.signer))
    expected = set(latest_human_decisions(decisions, task_id=receipt.task_id, input_hash=receipt.input_hash, config_hash=receipt.config_hash))
    human_slot = receipt.entry(Tier.HUMAN)
    listed = set(human_slot.records) if human_slot is not None else set()
    if listed != expected and (expected or listed):
        defects.append(Defect("human-decisions", "the receipt's human slot lists %d decision(s) but the chain holds %d latest decision(s) by human keys on this candidate" % (
            len(listed), len(expected)), stored_receipt.seq))
    # 7. merge_eligible is derived again with the sealer's rule and must equal the claim.
    derived = derive_merge_eligible(
        task_id=receipt.task_id, input_hash=receipt.input_hash, config_hash=receipt.config_hash,
        required=receipt.required, entries=receipt.entries, records=records,
        signers=signers, human_approvals=contract.human_approvals if contract else 1,
        created=receipt.created, max_evidence_age_s=contract.max_evidence_age_s if contract else None,
    )
    if derived.eligible != receipt.merge_eligible:
        defects.append(Defect("eligibility-mismatch", "receipt claims merge_eligible=%s but the tier verdicts entail %s" % (
            str(receipt.merge_eligible).lower(), str(derived.eligible).lower()), stored_receipt.seq))
    # 8. The entries sit in a tree whose head the ledger signed, and the ledger only grew since a kept checkpoint.
    checkpoint = None
    if walk.origin is not None:
        policy = transparency or Transparency()
        if isinstance(source, BundleSource):
            found_defects, found_warnings, checkpoint = bundle_transparency(source, walk.keyring, walk.origin, stored_receipt.seq, policy)
        else:
            assert isinstance(source, LedgerSource)
            found_defects, found_warnings, checkpoint = check_transparency(source, walk.origin, stored_receipt.seq, policy)
        defects.extend(Defect(code, message, None) for code, message in found_defects)
        warnings.extend(found_warnings)
    return Result(
        target=target, defects=tuple(defects), trust=_trust_label(trust, walk.keyring), task_id=receipt.task_id,
        candidate=str(receipt.input_hash), claimed_eligible=receipt.merge_eligible, derived_eligible=derived.eligible,
        eligibility_reasons=derived.reasons, tiers=tuple(lines), entries_checked=count,
        weakenings=tuple(d for t, d in walk.weakened if t == receipt.task_id), warnings=tuple(warnings),
        stale=tuple(stale),
        waivers=tuple(_describe(seq, w, label) for seq, w, label in walk.waivers
                      if w.task_id == receipt.task_id and seq < stored_receipt.seq and w.in_force(receipt.created)),
        checkpoint=checkpoint,
    )


def verify_receipt_strict(source: Source, target: str, trust: TrustRoot | None = None) -> Result:
    """As `verify_receipt`, but raise `VerificationFailed` unless the receipt verified."""
    result = verify_receipt(source, target, trust)
    if not result.ok:
        raise VerificationFailed(result)
    return result


def _signature_ok(item: tuple[bytes, str, bytes, bytes]) -> str | None:
    try:
        sshsig_verify(*item)
    except ReceiptsError as exc:
        return str(exc)
    return None


_Queued = tuple[bytes, str, bytes, bytes, int, str]  # key, namespace, signed bytes, signature, seq, signer name


def _signatures_ok(chunk: list[tuple[bytes, str, bytes, bytes]]) -> list[str | None]:
    return [_signature_ok(item) for item in chunk]


def _not_run(exc: Exception) -> CannotVerify:
    # A worker died (killed, out of memory): its signatures were not checked, so nothing is verified.
    return CannotVerify("signature checks could not run: %s" % (str(exc) or type(exc).__name__))


class _SignatureQueue:
    """Ed25519 is most of an audit's cost. Checks are queued in chunks that worker
    processes verify while the ordered walk goes on; a chain too short to repay the
    processes is checked in this one."""

    CHUNK = 2000

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pending: list[_Queued] = []
        self.sent: list[tuple[list[_Queued], Future[list[str | None]]]] = []
        self.pool: ProcessPoolExecutor | None = None

    def append(self, item: _Queued) -> None:
        self.pending.append(item)
        if self.workers > 1 and len(self.pending) >= self.CHUNK:
            if self.pool is None:
                from concurrent.futures import ProcessPoolExecutor

                self.pool = ProcessPoolExecutor(self.workers)
            try:
                self.sent.append((self.pending, self.pool.submit(_signatures_ok, [i[:4] for i in self.pending])))
            except Exception as exc:
                raise _not_run(exc) from None
            self.pending = []

    def defects(self) -> list[Defect]:
        try:
            done = [(items, future.result()) for items, future in self.sent]
        except Exception as exc:
            raise _not_run(exc) from None
        done.append((self.pending, _signatures_ok([i[:4] for i in self.pending])))
        return [Defect("signature-invalid", "entry %d: signature by %s: %s" % (item[4], item[5], why), item[4])
                for items, outcomes in done for item, why in zip(items, outcomes, strict=True) if why is not None]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def verify_chain(source: LedgerSource, trust: TrustRoot | None = None, progress: Callable[[int], None] | None = None,
                 transparency: Transparency | None = None, workers: int | None = None) -> ChainResult:
    """Audit every entry: steps 2 and 3 for the whole chain, every signature checked
    (on ``workers`` processes, default every core)."""
    queue = _SignatureQueue(workers or os.cpu_count() or 1)
    walk = _Walk(trust, deferred=queue)
    count = 0
    last: StoredEntry | None = None
    try:
        for stored in source.iter_entries():
            walk.step(stored, check_signature=True)
            count += 1
            last = stored
            if progress is not None:
                progress(1)
        walk.defects.extend(queue.defects())
    finally:
        queue.close()
    head = None if last is None else str(entry_hash(last.entry))
    walk.defects.sort(key=lambda d: (d.seq if d.seq is not None else -1))
    if count == 0:
        walk.defect("empty-ledger", "the ledger has no entries, not even a genesis", None)
    elif walk.origin is not None:
        # 8. The newest checkpoint (and a kept one) must match the entries.
        found, _, _ = check_transparency(source, walk.origin, -1, transparency or Transparency())
        walk.defects.extend(Defect(code, message, None) for code, message in found)
    return ChainResult(count, tuple(walk.defects), _trust_label(trust, walk.keyring), head)
