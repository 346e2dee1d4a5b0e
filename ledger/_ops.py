"""Library operations behind the CLI: record a tier, seal a receipt, change the keyring."""

from __future__ import annotations

import mimetypes
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    CHECK_RESULT_FORMAT,
    CHECK_RESULT_MEDIA_TYPE,
    LADDER,
    Contract,
    ContractRevision,
    ReceiptsError,
    Digest,
    Domain,
    EvidenceRef,
    FormatError,
    KeyAdd,
    KeyRevoke,
    KeySpec,
    LadderReceipt,
    Role,
    Signer,
    Tier,
    TierEntry,
    TierRecord,
    Verdict,
    Waiver,
    canonical_dumps,
    candidate_hash,
    derive_check,
    derive_merge_eligible,
    domain_hash,
    latest_human_decisions,
    new_tier_record,
    parse_evidence_json,

)

from . import _clock
from ._errors import InputError
from ._git import git_root, resolve_commit
from ._store import LEDGER_DIRNAME, Appended, Store

__all__ = [
    "VERSION",
    "find_ledger_dir",
    "environment_digest",
    "resolve_candidate",
    "Evidence",
    "record_tier",
    "seal_receipt",
    "add_key",
    "revoke_key",
    "register_contract",
    "current_contract",
    "waive_check",
]

VERSION = "0.1.0"


def find_ledger_dir(explicit: Path | None, cwd: Path) -> Path:
    """``--dir`` if given, else ``.ledger`` at the git root, else in the current directory."""
    if explicit is not None:
        return explicit
    root = git_root(cwd)
    base: Path = root if root is not None else cwd
    return base / LEDGER_DIRNAME


def environment_digest() -> Digest:
    """What ran the check: interpreter, platform and tool version (not secrets, not paths)."""
    facts = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": platform.system(),
        "machine": platform.machine(),
        "receipt-ledger": VERSION,
    }
    return domain_hash(Domain.ENVIRONMENT, canonical_dumps(facts))


def resolve_candidate(spec: str, cwd: Path) -> Digest:
    """``blake3:<hex>`` is taken as a candidate hash; anything else is a git revision."""
    if spec.startswith("blake3:"):
        try:
            return Digest.parse(spec)
        except FormatError as exc:
            raise InputError(str(exc)) from None
    return candidate_hash(resolve_commit(spec, cwd))


@dataclass(frozen=True, slots=True)
class Evidence:
    check_id: str
    path: Path
    media_type: str | None = None


def _media_type(path: Path) -> str:
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


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
        digest, size = ledger.put_blob_file(item.path)
        refs.append(EvidenceRef(item.check_id, digest, size, item.media_type or _media_type(item.path)))
    try:
        record = new_tier_record(
            task_id=task_id, tier=tier, config_hash=config_hash, input_hash=input_hash, evidence=tuple(refs),
            verdict=verdict, verifier=verifier, verifier_version=VERSION, environment=environment_digest(),
            created=_clock.now(), confidence_bp=confidence_bp, parents=tuple(parents),
        )
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return record, ledger.append(record, signer)


def seal_receipt(
    ledger: Store,
    *,
    task_id: str,
    signer: Signer,
    input_hash: Digest,
    extra_required: tuple[Tier, ...] = (),
    config_hash: Digest | None = None,
) -> tuple[LadderReceipt, Appended]:
    """Bind the latest tier record of each tier for this candidate into a receipt. The
    contract's required tiers are always required; ``extra_required`` can only add."""
    rows = [row for row in ledger.records_for(task_id) if row.record.input_hash == input_hash]
    if config_hash is None:
        if not rows:
            raise InputError("task %s has no tier records for candidate %s; pass --config to seal an empty ladder" % (task_id, input_hash.short()))
        config_hash = rows[-1].record.config_hash
    contract = current_contract(ledger, task_id, config_hash)
    required = tuple(t for t in LADDER if t in contract.required_tiers or t in extra_required)
    rows = [row for row in rows if row.record.config_hash == config_hash]
    by_hash = {row.digest: row.record for row in rows}
    signers = {row.digest: row.signer for row in rows}
    chosen: dict[Tier, tuple[Digest, ...]] = {}
    for row in rows:
        if row.record.tier is not Tier.HUMAN:
            chosen[row.record.tier] = (row.digest,)  # chain order: the latest counts
    human = latest_human_decisions([(row.digest, row.record, row.signer) for row in rows],
                                   task_id=task_id, input_hash=input_hash, config_hash=config_hash)
    if human:
        chosen[Tier.HUMAN] = human
    entries = []
    for tier in LADDER:
        if tier in chosen:
            entries.append(TierEntry(tier, records=chosen[tier]))
        elif tier in required:
            entries.append(TierEntry(tier, skip_reason="no %s record for this candidate and config" % tier))
    now = _clock.now()
    det = chosen.get(Tier.DETERMINISTIC)
    if det is not None and by_hash[det[0]].verdict is Verdict.PASS:
        expired = _expired_waivers_relied_on(ledger, by_hash[det[0]], contract, now)
        if expired:
            raise InputError("the deterministic pass relied on a waiver of %s that has expired: run `ledger check` again"
                             % ", ".join(expired))
    eligibility = derive_merge_eligible(
        task_id=task_id, input_hash=input_hash, config_hash=config_hash,
        required=required, entries=tuple(entries), records=by_hash, signers=signers,
        human_approvals=contract.human_approvals, created=now, max_evidence_age_s=contract.max_evidence_age_s,
    )
    try:
        receipt = LadderReceipt(
            task_id=task_id, input_hash=input_hash, config_hash=config_hash, required=required,
            entries=tuple(entries), merge_eligible=eligibility.eligible, created=now,
        )
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return receipt, ledger.append(receipt, signer)


def add_key(ledger: Store, admin: Signer, name: str, roles: Sequence[Role], public_key: bytes,
            valid_after: int | None = None, valid_before: int | None = None) -> Appended:
    try:
        spec = KeySpec(name, tuple(r for r in Role if r in roles), public_key, valid_after, valid_before)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return ledger.append(KeyAdd(spec), admin)


def revoke_key(ledger: Store, admin: Signer, name_or_id: str, reason: str) -> Appended:
    ring = ledger.keyring()
    state = ring.get(name_or_id) or ring.by_name(name_or_id)
    if state is None:
        raise InputError("no active key named or with id %r" % name_or_id)
    try:
        body = KeyRevoke(state.key_id, reason)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return ledger.append(body, admin)


def register_contract(store: Store, task_id: str, data: bytes, signer: Signer, source: str = "contract") -> tuple[Contract, Appended | None]:
    """Record ``data`` as the task's current contract unless it already is. A revision that
    weakens the bar is refused unless ``signer`` is an admin key (the store decides)."""
    try:
        contract = ContractRevision(task_id, data, None).parse()
    except ReceiptsError as exc:
        raise InputError(str(exc).replace("contract of %s" % task_id, source, 1)) from None
    latest = store.latest_contract(task_id)
    if latest is not None and latest.contract == data:
        return contract, None
    revision = ContractRevision(task_id, data, None if latest is None else latest.config_hash)
    return contract, store.append(revision, signer)


def current_contract(store: Store, task_id: str, config: Digest) -> Contract:
    """The task's registered contract with this config hash; refuse an unregistered one."""
    for _, revision in store.contract_revisions(task_id):
        if revision.config_hash == config:
            return revision.parse()
    raise InputError("no registered contract of %s has config %s: register it with `ledger contract set` (or run `ledger check`)" % (task_id, config.short()))


def waive_check(store: Store, admin: Signer, task_id: str, check_id: str, reason: str, expires: int,
                config: Digest | None = None) -> Appended:
    """Let a named failing check of the task's current contract stop blocking until ``expires``."""
    if config is None:
        latest = store.latest_contract(task_id)
        if latest is None:
            raise InputError("task %s has no registered contract to waive a check of" % task_id)
        config = latest.config_hash
    contract = current_contract(store, task_id, config)
    if contract.check(check_id) is None:
        raise InputError("the contract of %s has no check %r" % (task_id, check_id))
    if expires <= _clock.now():
        raise InputError("a waiver must expire in the future")
    try:
        body = Waiver(task_id, check_id, config, reason, expires)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return store.append(body, admin)


def _expired_waivers_relied_on(store: Store, record: TierRecord, contract: Contract, now: int) -> list[str]:
    """Checks that failed in ``record`` and passed only by a waiver no longer in force."""
    used = [w for _, w, _ in store.waivers(record.task_id)
            if w.config_hash == record.config_hash and w.in_force(record.created)]
    if not used:
        return []
    expired = []
    for ref in record.evidence:
        if not ref.check_id.startswith("check:") or ref.media_type != CHECK_RESULT_MEDIA_TYPE:
            continue
        check = contract.check(ref.check_id[6:])
        if check is None or not any(w.check_id == check.id for w in used):
            continue
        try:
            result = parse_evidence_json(store.blob_path(ref.digest).read_bytes(), CHECK_RESULT_FORMAT)
        except (OSError, ReceiptsError):
            result = None
        if not derive_check(check, result)[0] and not any(w.check_id == check.id and w.in_force(now) for w in used):
            expired.append(check.id)
    return expired
