"""A receipt as an in-toto Statement v1 inside a DSSE envelope signed by the seal key,
so that supply-chain tooling that knows nothing of receipt-ledger can check it."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from receipts import (
    Digest,
    LadderReceipt,
    Signer,
    Tier,
    TierRecord,
    content_digest,
    decode_as,
    decode_entry,
    fingerprint,
)
from verify import verify_receipt

from ._errors import InputError
from ._evidence import snapshot_of
from ._store import Ledger

__all__ = ["PREDICATE_TYPE", "PAYLOAD_TYPE", "pae", "export_intoto"]

PREDICATE_TYPE = "https://receipt-ledger.dev/ladder-receipt/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _statement(ledger: Ledger, stored_body: bytes, receipt: LadderReceipt, receipt_hash: str) -> dict[str, Any]:
    subjects: list[dict[str, Any]] = [
        {
            "name": "receipt-ledger/receipt/%s" % receipt_hash[7:],
            "digest": {"sha256": hashlib.sha256(stored_body).hexdigest(), "blake3": content_digest(stored_body).hex},
        }
    ]
    tiers = []
    for slot in receipt.entries:
        rows = []
        for digest in slot.records:
            entry = ledger.find(digest)
            if entry is None:
                continue
            rec = decode_as(TierRecord, entry.body)
            rows.append(
                {
                    "record": str(digest),
                    "verdict": rec.verdict.value,
                    "signer": decode_entry(entry.entry).signer,
                    "confidence_bp": rec.confidence_bp,
                    "verifier": rec.verifier,
                }
            )
            snap = snapshot_of(ledger, rec) if rec.tier is Tier.DETERMINISTIC else None
            if snap is not None and isinstance(snap.get("commit"), str):
                subjects.append({"name": "git+commit", "digest": {"gitCommit": snap["commit"]}})
        tiers.append({"tier": slot.tier.value, "records": rows, "skipped": slot.skip_reason})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "receipt": receipt_hash,
            "task": receipt.task_id,
            "candidate": str(receipt.input_hash),
            "contract": str(receipt.config_hash),
            "required": [t.value for t in receipt.required],
            "merge_eligible": receipt.merge_eligible,
            "created": receipt.created,
            "ledger": ledger.origin(),
            "tiers": tiers,
            "receipt_cbor": base64.b64encode(stored_body).decode("ascii"),
        },
    }


def export_intoto(ledger: Ledger, receipt_digest: Digest, signer: Signer, out: Path) -> dict[str, Any]:
    """Write a receipt as an in-toto Statement v1 (subjects: the receipt's sha256 and
    blake3 digests, and the candidate commit) in a DSSE envelope signed by ``signer``.
    Refuses (`InputError`) a receipt that does not verify. Returns the envelope."""
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, ledger.genesis_trust())
    if not result.ok:
        raise InputError("refusing to attest a receipt that does not verify: %s" % result.defects[0].message)
    key_id = fingerprint(signer.public_key_blob)
    state = ledger.keyring().get(key_id)
    if state is None or state.revoked_at is not None or "seal" not in [r.value for r in state.spec.roles]:
        raise InputError("refused: the envelope must be signed by an active seal key of this ledger")
    payload = json.dumps(
        _statement(ledger, stored.body, receipt, receipt_hash), sort_keys=True, separators=(",", ":")
    ).encode()
    envelope = {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {"keyid": key_id, "sig": base64.b64encode(signer.sign_raw(pae(PAYLOAD_TYPE, payload))).decode("ascii")}
        ],
    }
    try:
        out.write_text(json.dumps(envelope, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError("cannot write %s: %s" % (out, exc)) from None
    return envelope
