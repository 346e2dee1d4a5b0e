"""The one path between the model and its hashed and signed bytes.

Every object is a CBOR map with text keys, each key always present (absent values are
null), encoded canonically. Decoders demand exactly the specified keys and types, so
that decode(encode(x)) == x and encode(decode(b)) == b for every accepted b.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import cbor2

from ._cbor import canonical_dumps, canonical_loads
from ._chain import BODY_DOMAIN, Entry, EntryKind
from ._contract import ContractRevision, Waiver
from ._digest import Digest, Domain, domain_hash
from ._errors import FormatError
from ._events import EVENT_ROLES, EventType, TaskEvent
from ._keyring import Genesis, KeyAdd, KeyRevoke, KeySpec
from ._model import FORMAT_VERSION, EvidenceRef, LadderReceipt, Role, Tier, TierEntry, TierRecord, Verdict
from ._retention import CheckpointTimestamp, RetentionPolicy
from ._statement import StatementRegistration

__all__ = [
    "Body",
    "decode_as",
    "encode_tier_record",
    "decode_tier_record",
    "tier_record_hash",
    "evidence_list_hash",
    "new_tier_record",
    "encode_receipt",
    "decode_receipt",
    "receipt_hash",
    "encode_body",
    "decode_body",
    "body_kind",
    "body_hash",
    "entry_signed_bytes",
    "encode_entry",
    "sign_entry",
    "decode_entry",
    "entry_hash",
    "candidate_hash",
    "config_hash",
    "required_role",
]

Body = (
    TierRecord
    | LadderReceipt
    | Genesis
    | KeyAdd
    | KeyRevoke
    | ContractRevision
    | Waiver
    | TaskEvent
    | RetentionPolicy
    | CheckpointTimestamp
    | StatementRegistration
)
_E = TypeVar("_E")
_B = TypeVar(
    "_B",
    TierRecord,
    LadderReceipt,
    Genesis,
    KeyAdd,
    KeyRevoke,
    ContractRevision,
    Waiver,
    TaskEvent,
    RetentionPolicy,
    CheckpointTimestamp,
    StatementRegistration,
)


def _map(value: object, keys: frozenset[str], what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise FormatError("%s must be a CBOR map" % what)
    if set(value) != keys:
        missing = sorted(keys - set(value))
        extra = sorted(set(value) - keys)
        raise FormatError("%s has missing keys %s / unknown keys %s" % (what, missing, extra))
    return value


def _typed(value: object, kind: type[_E], what: str) -> _E:
    if isinstance(value, bool) and kind is not bool:
        raise FormatError("%s has the wrong type" % what)
    if not isinstance(value, kind):
        raise FormatError("%s has the wrong type" % what)
    return value


def _digest(value: object, what: str) -> Digest:
    return Digest(_typed(value, bytes, what))


def _opt(value: object, conv: Callable[[object, str], _E], what: str) -> _E | None:
    return None if value is None else conv(value, what)


def _int(value: object, what: str) -> int:
    return _typed(value, int, what)


def _enum(cls: Callable[[str], _E], value: object, what: str) -> _E:
    try:
        return cls(_typed(value, str, what))
    except ValueError:
        raise FormatError("%s: unknown value %r" % (what, value)) from None


def _array(value: object, what: str) -> list[Any]:
    return _typed(value, list, what)


# -- tier records ---------------------------------------------------------------------

_EVIDENCE_KEYS = frozenset({"check", "digest", "size", "type"})
_RECORD_KEYS = frozenset(
    {
        "v",
        "task",
        "tier",
        "config",
        "input",
        "evidence",
        "evidence_hash",
        "verdict",
        "confidence",
        "verifier",
        "verifier_version",
        "env",
        "parents",
        "created",
    }
)


def _evidence_map(ref: EvidenceRef) -> dict[str, object]:
    return {"check": ref.check_id, "digest": ref.digest.value, "size": ref.size, "type": ref.media_type}


def evidence_list_hash(evidence: tuple[EvidenceRef, ...]) -> Digest:
    return domain_hash(Domain.EVIDENCE_LIST, canonical_dumps([_evidence_map(e) for e in evidence]))


def _record_map(rec: TierRecord) -> dict[str, object]:
    return {
        "v": rec.version,
        "task": rec.task_id,
        "tier": rec.tier.value,
        "config": rec.config_hash.value,
        "input": rec.input_hash.value,
        "evidence": [_evidence_map(e) for e in rec.evidence],
        "evidence_hash": rec.evidence_hash.value,
        "verdict": rec.verdict.value,
        "confidence": rec.confidence_bp,
        "verifier": rec.verifier,
        "verifier_version": rec.verifier_version,
        "env": rec.environment.value,
        "parents": [p.value for p in rec.parents],
        "created": rec.created,
    }


def encode_tier_record(rec: TierRecord) -> bytes:
    return canonical_dumps(_record_map(rec))


def _evidence_from(item: object) -> EvidenceRef:
    e = _map(item, _EVIDENCE_KEYS, "evidence reference")
    return EvidenceRef(
        check_id=_typed(e["check"], str, "evidence check"),
        digest=_digest(e["digest"], "evidence digest"),
        size=_int(e["size"], "evidence size"),
        media_type=_typed(e["type"], str, "evidence type"),
    )


def _record_from(m: Mapping[str, Any]) -> TierRecord:
    evidence = [_evidence_from(item) for item in _array(m["evidence"], "evidence")]
    return TierRecord(
        version=_int(m["v"], "version"),
        task_id=_typed(m["task"], str, "task"),
        tier=_enum(Tier, m["tier"], "tier"),
        config_hash=_digest(m["config"], "config"),
        input_hash=_digest(m["input"], "input"),
        evidence=tuple(evidence),
        evidence_hash=_digest(m["evidence_hash"], "evidence_hash"),
        verdict=_enum(Verdict, m["verdict"], "verdict"),
        confidence_bp=_opt(m["confidence"], _int, "confidence"),
        verifier=_typed(m["verifier"], str, "verifier"),
        verifier_version=_typed(m["verifier_version"], str, "verifier_version"),
        environment=_digest(m["env"], "env"),
        parents=tuple(_digest(p, "parent") for p in _array(m["parents"], "parents")),
        created=_int(m["created"], "created"),
    )


def decode_tier_record(data: bytes) -> TierRecord:
    return _record_from(_map(canonical_loads(data), _RECORD_KEYS, "tier record"))


def tier_record_hash(rec: TierRecord) -> Digest:
    return domain_hash(Domain.TIER_RECORD, encode_tier_record(rec))


def new_tier_record(
    *,
    task_id: str,
    tier: Tier,
    config_hash: Digest,
    input_hash: Digest,
    evidence: tuple[EvidenceRef, ...],
    verdict: Verdict,
    verifier: str,
    verifier_version: str,
    environment: Digest,
    created: int,
    confidence_bp: int | None = None,
    parents: tuple[Digest, ...] = (),
) -> TierRecord:
    """A new record whose evidence_hash is computed from its evidence."""
    return TierRecord(
        task_id=task_id,
        tier=tier,
        config_hash=config_hash,
        input_hash=input_hash,
        evidence=tuple(evidence),
        evidence_hash=evidence_list_hash(tuple(evidence)),
        verdict=verdict,
        confidence_bp=confidence_bp,
        verifier=verifier,
        verifier_version=verifier_version,
        environment=environment,
        parents=tuple(parents),
        created=created,
    )


# -- receipts ---------------------------------------------------------------------------

_RECEIPT_KEYS = frozenset({"v", "task", "input", "config", "required", "entries", "merge_eligible", "created"})
_ENTRY_KEYS = frozenset({"tier", "records", "skip"})


def _receipt_map(r: LadderReceipt) -> dict[str, object]:
    return {
        "v": r.version,
        "task": r.task_id,
        "input": r.input_hash.value,
        "config": r.config_hash.value,
        "required": [t.value for t in r.required],
        "entries": [
            {"tier": e.tier.value, "records": [d.value for d in e.records], "skip": e.skip_reason} for e in r.entries
        ],
        "merge_eligible": r.merge_eligible,
        "created": r.created,
    }


def encode_receipt(r: LadderReceipt) -> bytes:
    return canonical_dumps(_receipt_map(r))


def decode_receipt(data: bytes) -> LadderReceipt:
    m = _map(canonical_loads(data), _RECEIPT_KEYS, "receipt")
    entries = []
    for item in _array(m["entries"], "entries"):
        e = _map(item, _ENTRY_KEYS, "receipt entry")
        entries.append(
            TierEntry(
                tier=_enum(Tier, e["tier"], "entry tier"),
                records=tuple(_digest(d, "entry record") for d in _array(e["records"], "entry records")),
                skip_reason=_opt(e["skip"], lambda v, w: _typed(v, str, w), "entry skip"),
            )
        )
    return LadderReceipt(
        version=_int(m["v"], "version"),
        task_id=_typed(m["task"], str, "task"),
        input_hash=_digest(m["input"], "input"),
        config_hash=_digest(m["config"], "config"),
        required=tuple(_enum(Tier, t, "required tier") for t in _array(m["required"], "required")),
        entries=tuple(entries),
        merge_eligible=_typed(m["merge_eligible"], bool, "merge_eligible"),
        created=_int(m["created"], "created"),
    )


def receipt_hash(r: LadderReceipt) -> Digest:
    return domain_hash(Domain.LADDER_RECEIPT, encode_receipt(r))


# -- keyring bodies ---------------------------------------------------------------------

_KEY_KEYS = frozenset({"name", "roles", "key", "valid_after", "valid_before"})


def _key_map(k: KeySpec) -> dict[str, object]:
    return {
        "name": k.name,
        "roles": [r.value for r in k.roles],
        "key": k.public_key,
        "valid_after": k.valid_after,
        "valid_before": k.valid_before,
    }


def _key_from(value: object) -> KeySpec:
    m = _map(value, _KEY_KEYS, "key")
    return KeySpec(
        name=_typed(m["name"], str, "key name"),
        roles=tuple(_enum(Role, r, "role") for r in _array(m["roles"], "roles")),
        public_key=_typed(m["key"], bytes, "public key"),
        valid_after=_opt(m["valid_after"], _int, "valid_after"),
        valid_before=_opt(m["valid_before"], _int, "valid_before"),
    )


def _body_map(body: Body) -> dict[str, object]:
    if isinstance(body, TierRecord):
        return _record_map(body)
    if isinstance(body, LadderReceipt):
        return _receipt_map(body)
    if isinstance(body, Genesis):
        genesis: dict[str, object] = {
            "v": body.version,
            "ledger": body.ledger_id,
            "created": body.created,
            "keys": [_key_map(k) for k in body.keys],
        }
        if body.log_origin is not None:  # present only when named: older genesis bodies stay as they were
            genesis["origin"] = body.log_origin
        return genesis
    if isinstance(body, KeyAdd):
        return {"v": body.version, "key": _key_map(body.key)}
    if isinstance(body, RetentionPolicy):
        return {"v": body.version, "max_age": body.evidence_max_age_s, "holds": list(body.holds)}
    if isinstance(body, StatementRegistration):
        return {"v": body.version, "statement": body.statement}
    if isinstance(body, CheckpointTimestamp):
        return {
            "v": body.version,
            "size": body.size,
            "checkpoint": body.checkpoint.value,
            "token": body.token.value,
            "token_size": body.token_size,
        }
    if isinstance(body, ContractRevision):
        # Reason and source are written only when recorded: a revision without them keeps
        # the bytes (and the hash) it had before they existed.
        optional = {"reason": body.reason, "from": body.criteria_from}
        return {
            "v": body.version,
            "task": body.task_id,
            "contract": body.contract,
            "previous": None if body.previous is None else body.previous.value,
            **{k: v for k, v in optional.items() if v},
        }
    if isinstance(body, Waiver):
        return {
            "v": body.version,
            "task": body.task_id,
            "check": body.check_id,
            "config": body.config_hash.value,
            "reason": body.reason,
            "expires": body.expires,
        }
    if isinstance(body, TaskEvent):
        return {
            "v": body.version,
            "task": body.task_id,
            "type": body.type.value,
            "candidate": None if body.candidate is None else body.candidate.value,
            "fields": dict(body.fields),
            "evidence": [_evidence_map(e) for e in body.evidence],
            "created": body.created,
        }
    return {"v": body.version, "key_id": body.key_id, "reason": body.reason}


_KIND_OF: dict[type, EntryKind] = {
    TierRecord: EntryKind.TIER_RECORD,
    LadderReceipt: EntryKind.RECEIPT,
    Genesis: EntryKind.GENESIS,
    KeyAdd: EntryKind.KEY_ADD,
    KeyRevoke: EntryKind.KEY_REVOKE,
    ContractRevision: EntryKind.CONTRACT,
    Waiver: EntryKind.WAIVER,
    TaskEvent: EntryKind.EVENT,
    RetentionPolicy: EntryKind.RETENTION,
    CheckpointTimestamp: EntryKind.TIMESTAMP,
    StatementRegistration: EntryKind.STATEMENT,
}


def body_kind(body: Body) -> EntryKind:
    return _KIND_OF[type(body)]


def decode_as(cls: type[_B], data: bytes) -> _B:
    """Decode body bytes as the body type ``cls`` (its entry kind follows from the type).
    Raises `FormatError` if the bytes are not a canonical body of that type.
    """
    body = decode_body(_KIND_OF[cls], data)
    if not isinstance(body, cls):
        raise FormatError("expected a %s body" % _KIND_OF[cls].value)
    return body


def encode_body(body: Body) -> bytes:
    return canonical_dumps(_body_map(body))


def body_hash(kind: EntryKind, data: bytes) -> Digest:
    """The hash of a body's bytes under its kind's domain (a record's hash is its body hash)."""
    return domain_hash(BODY_DOMAIN[kind], data)


def decode_body(kind: EntryKind, data: bytes) -> Body:
    """Decode a body of ``kind`` from its canonical bytes (format.md §3).

    Raises:
        FormatError: the bytes are not the canonical encoding of a valid body of that kind.
    """
    # The same row is often decoded by several readers in one process (a writer's check,
    # then a task's state): bodies are frozen, so one decoding serves them all.
    if type(data) is bytes:
        return _decoded(kind, data)
    return _decode_body(kind, data)


@functools.lru_cache(maxsize=1024)
def _decoded(kind: EntryKind, data: bytes) -> Body:
    return _decode_body(kind, data)


def _decode_body(kind: EntryKind, data: bytes) -> Body:
    if kind is EntryKind.TIER_RECORD:
        return decode_tier_record(data)
    if kind is EntryKind.RECEIPT:
        return decode_receipt(data)
    return _BODY_DECODERS[kind](canonical_loads(data))


def _genesis_from(value: object) -> Genesis:
    named = isinstance(value, dict) and "origin" in value
    m = _map(value, frozenset({"v", "ledger", "created", "keys", *(("origin",) if named else ())}), "genesis")
    return Genesis(
        version=_int(m["v"], "version"),
        ledger_id=_typed(m["ledger"], str, "ledger id"),
        created=_int(m["created"], "created"),
        keys=tuple(_key_from(k) for k in _array(m["keys"], "keys")),
        log_origin=_typed(m["origin"], str, "origin") if named else None,
    )


def _key_add_from(value: object) -> KeyAdd:
    m = _map(value, frozenset({"v", "key"}), "key_add")
    return KeyAdd(version=_int(m["v"], "version"), key=_key_from(m["key"]))


def _timestamp_from(value: object) -> CheckpointTimestamp:
    m = _map(value, frozenset({"v", "size", "checkpoint", "token", "token_size"}), "timestamp")
    return CheckpointTimestamp(
        version=_int(m["v"], "version"),
        size=_int(m["size"], "size"),
        checkpoint=_digest(m["checkpoint"], "checkpoint"),
        token=_digest(m["token"], "token"),
        token_size=_int(m["token_size"], "token size"),
    )


def _statement_from(value: object) -> StatementRegistration:
    m = _map(value, frozenset({"v", "statement"}), "statement")
    return StatementRegistration(version=_int(m["v"], "version"), statement=_typed(m["statement"], bytes, "statement"))


def _retention_from(value: object) -> RetentionPolicy:
    m = _map(value, frozenset({"v", "max_age", "holds"}), "retention policy")
    return RetentionPolicy(
        version=_int(m["v"], "version"),
        evidence_max_age_s=_int(m["max_age"], "max_age"),
        holds=tuple(_typed(h, str, "hold") for h in _array(m["holds"], "holds")),
    )


def _contract_from(value: object) -> ContractRevision:
    base = frozenset({"v", "task", "contract", "previous"})
    given = frozenset(value) & {"reason", "from"} if isinstance(value, dict) else frozenset()
    m = _map(value, base | given, "contract revision")
    # An optional key is absent or non-empty text: an empty one would be a second encoding.
    optional = {k: _typed(m[k], str, k) for k in given}
    if any(not v for v in optional.values()):
        raise FormatError("contract revision has an empty reason or source: omit the key instead")
    return ContractRevision(
        version=_int(m["v"], "version"),
        task_id=_typed(m["task"], str, "task"),
        contract=_typed(m["contract"], bytes, "contract"),
        previous=_opt(m["previous"], _digest, "previous"),
        reason=optional.get("reason", ""),
        criteria_from=optional.get("from", ""),
    )


def _event_from(value: object) -> TaskEvent:
    m = _map(value, frozenset({"v", "task", "type", "candidate", "fields", "evidence", "created"}), "event")
    raw_fields = _typed(m["fields"], dict, "event fields")
    return TaskEvent(
        version=_int(m["v"], "version"),
        task_id=_typed(m["task"], str, "task"),
        type=_enum(EventType, m["type"], "event type"),
        candidate=_opt(m["candidate"], _digest, "candidate"),
        fields=tuple(sorted((k, _typed(v, str, "event field")) for k, v in raw_fields.items())),
        evidence=tuple(_evidence_from(e) for e in _array(m["evidence"], "event evidence")),
        created=_int(m["created"], "created"),
    )


def _waiver_from(value: object) -> Waiver:
    m = _map(value, frozenset({"v", "task", "check", "config", "reason", "expires"}), "waiver")
    return Waiver(
        version=_int(m["v"], "version"),
        task_id=_typed(m["task"], str, "task"),
        check_id=_typed(m["check"], str, "check"),
        config_hash=_digest(m["config"], "config"),
        reason=_typed(m["reason"], str, "reason"),
        expires=_int(m["expires"], "expires"),
    )


def _key_revoke_from(value: object) -> KeyRevoke:
    m = _map(value, frozenset({"v", "key_id", "reason"}), "key_revoke")
    return KeyRevoke(
        version=_int(m["v"], "version"),
        key_id=_typed(m["key_id"], str, "key id"),
        reason=_typed(m["reason"], str, "reason"),
    )


# Each kind's decoder from the canonical value (tier records and receipts have their own).
_BODY_DECODERS: dict[EntryKind, Callable[[object], Body]] = {
    EntryKind.GENESIS: _genesis_from,
    EntryKind.KEY_ADD: _key_add_from,
    EntryKind.KEY_REVOKE: _key_revoke_from,
    EntryKind.TIMESTAMP: _timestamp_from,
    EntryKind.STATEMENT: _statement_from,
    EntryKind.RETENTION: _retention_from,
    EntryKind.CONTRACT: _contract_from,
    EntryKind.EVENT: _event_from,
    EntryKind.WAIVER: _waiver_from,
}


# -- chain entries ----------------------------------------------------------------------

_ENTRY_FIELDS = frozenset({"v", "seq", "prev", "kind", "body", "time", "signer", "ring", "tprev", "sig"})


def _entry_unsigned_map(e: Entry) -> dict[str, object]:
    return {
        "v": e.version,
        "seq": e.seq,
        "prev": None if e.prev is None else e.prev.value,
        "kind": e.kind.value,
        "body": e.body_hash.value,
        "time": e.time,
        "signer": e.signer,
        "ring": None if e.ring is None else e.ring.value,
        "tprev": None if e.task_prev is None else e.task_prev.value,
    }


def entry_signed_bytes(e: Entry) -> bytes:
    """The message an entry's SSHSIG signs: the entry map without its ``sig`` key."""
    return canonical_dumps(_entry_unsigned_map(e))


def encode_entry(e: Entry) -> bytes:
    m = _entry_unsigned_map(e)
    m["sig"] = e.signature
    return canonical_dumps(m)


_V_PAIR = len(cbor2.dumps("v")) + len(cbor2.dumps(FORMAT_VERSION))
_SEQ_KEY = len(cbor2.dumps("seq"))
_SIG_KEY = cbor2.dumps("sig")


def sign_entry(
    *,
    seq: int,
    prev: Digest | None,
    kind: EntryKind,
    body_hash: Digest,
    time: int,
    signer: str,
    ring: Digest | None,
    task_prev: Digest | None,
    sign: Callable[[bytes], bytes],
) -> tuple[Entry, bytes]:
    """The entry with these fields and the signature ``sign`` makes over its signed bytes,
    and the entry's encoding: what `entry_signed_bytes`, then `Entry` and `encode_entry`
    give, with the map built and its values checked once (every append goes through
    here). The entry is constructed, so every field validated, before it is returned.
    """
    m: dict[str, object] = {
        "v": FORMAT_VERSION,
        "seq": seq,
        "prev": None if prev is None else prev.value,
        "kind": kind.value,
        "body": body_hash.value,
        "time": time,
        "signer": signer,
        "ring": None if ring is None else ring.value,
        "tprev": None if task_prev is None else task_prev.value,
    }
    # The constructor below checks every field more strictly than the generic value check
    # would (types, ranges, forms) before the entry leaves this function, so the map is
    # encoded directly; an invalid field means a discarded signature, never a stored entry.
    signed = bytes(cbor2.dumps(m, canonical=True))
    signature = sign(signed)
    entry = Entry(seq, prev, kind, body_hash, time, signer, signature, ring, task_prev)
    # The whole entry is the signed map with "sig" added. In canonical order (shorter keys
    # first, then bytewise) "sig" follows "v" and "seq" and precedes every other key, so its
    # pair is spliced in there and the map header counts one more pair (9 -> 10, both < 24).
    split = 1 + _V_PAIR + _SEQ_KEY + _uint_size(seq)
    return entry, b"\xaa" + signed[1:split] + _SIG_KEY + _bytes_head(len(signature)) + signature + signed[split:]


def _uint_size(n: int) -> int:
    """Bytes of the canonical CBOR encoding of a non-negative integer (RFC 8949 §4.2.1)."""
    return 1 if n < 24 else 2 if n < 1 << 8 else 3 if n < 1 << 16 else 5 if n < 1 << 32 else 9


def _bytes_head(n: int) -> bytes:
    """The canonical CBOR head of a byte string of length ``n`` (at most 65535 here)."""
    return bytes([0x40 | n]) if n < 24 else b"\x58" + bytes([n]) if n < 1 << 8 else b"\x59" + n.to_bytes(2, "big")


def decode_entry(data: bytes) -> Entry:
    m = _map(canonical_loads(data), _ENTRY_FIELDS, "chain entry")
    return Entry(
        version=_int(m["v"], "version"),
        seq=_int(m["seq"], "seq"),
        prev=_opt(m["prev"], _digest, "prev"),
        kind=_enum(EntryKind, m["kind"], "kind"),
        body_hash=_digest(m["body"], "body"),
        time=_int(m["time"], "time"),
        signer=_typed(m["signer"], str, "signer"),
        signature=_typed(m["sig"], bytes, "sig"),
        ring=_opt(m["ring"], _digest, "ring"),
        task_prev=_opt(m["tprev"], _digest, "tprev"),
    )


def entry_hash(data: bytes) -> Digest:
    """The hash that names an entry and that the next entry's ``prev`` holds."""
    return domain_hash(Domain.CHAIN_ENTRY, data)


# -- candidates and configs -------------------------------------------------------------


def candidate_hash(fields: Mapping[str, str]) -> Digest:
    """Hash of a candidate snapshot given as text fields (e.g. commit, tree, diff digest)."""
    if not fields or not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        raise FormatError("a candidate is a non-empty map of text fields")
    return domain_hash(Domain.CANDIDATE, canonical_dumps(dict(fields)))


def config_hash(data: bytes) -> Digest:
    """Hash of the exact bytes of the contract or policy file that configured a tier."""
    return domain_hash(Domain.CONFIG, bytes(data))


def required_role(kind: EntryKind, body: Body) -> Role:
    """The role whose key must sign an entry: admin for the keyring, the tier's own role
    for a tier record, seal for a receipt. Contract revisions depend on the revision
    before them: see `contract_roles`.
    """
    if kind in (EntryKind.GENESIS, EntryKind.KEY_ADD, EntryKind.KEY_REVOKE, EntryKind.WAIVER, EntryKind.RETENTION):
        return Role.ADMIN
    if isinstance(body, TaskEvent):
        return EVENT_ROLES[body.type]
    if kind is EntryKind.CONTRACT:
        raise FormatError("a contract revision's role depends on whether it weakens the bar")
    if isinstance(body, TierRecord):
        return Role(body.tier.value)
    return Role.SEAL
