"""A receipt as an in-toto Statement v1 inside a DSSE envelope signed by the seal key,
so that supply-chain tooling that knows nothing of receipt-ledger can check it.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from pathlib import Path
from typing import Any

from receipts import (
    CHECK_RESULT_FORMAT,
    Contract,
    Digest,
    LadderReceipt,
    Signer,
    Tier,
    TierRecord,
    Verdict,
    config_hash,
    content_digest,
    decode_as,
    decode_entry,
    derive_check,
    fingerprint,
)
from verify import Result, StoredEntry, Trust, verify_receipt

from .. import _clock
from .._errors import InputError
from .._files import write_atomic, write_text_atomic
from ..ladder._evidence import evidence_json, snapshot_of
from ..store._ledger import Ledger

__all__ = [
    "PREDICATE_TYPE",
    "PAYLOAD_TYPE",
    "VSA_PREDICATE_TYPE",
    "pae",
    "export_intoto",
    "export_vsa",
    "vsa_statement",
    "SVR_PREDICATE_TYPE",
    "svr_predicate",
    "TEST_RESULT_PREDICATE_TYPE",
    "test_result_statement",
    "export_test_result",
]

PREDICATE_TYPE = "https://receipt-ledger.dev/ladder-receipt/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
VSA_PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://receipt-ledger.dev/verify/v1"
# The VSA allows extension fields whose names are URIs.
VSA_EXTENSION = "https://receipt-ledger.dev/vsa/receipt/v1"


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
    Refuses (`InputError`) a receipt that does not verify. Returns the envelope.
    """
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, ledger.genesis_trust())
    if not result.ok:
        raise InputError("refusing to attest a receipt that does not verify: %s" % result.defects[0].message)
    statement = _statement(ledger, stored.body, receipt, receipt_hash)
    return write_envelope(ledger, statement, signer, out)


def _require_seal(ledger: Ledger, signer: Signer) -> str:
    key_id = fingerprint(signer.public_key_blob)
    state = ledger.keyring().get(key_id)
    if state is None or state.revoked_at is not None or "seal" not in [r.value for r in state.spec.roles]:
        raise InputError("refused: the envelope must be signed by an active seal key of this ledger")
    return key_id


def write_envelope(ledger: Ledger, statement: dict[str, Any], signer: Signer, out: Path) -> dict[str, Any]:
    """Sign ``statement`` in a DSSE envelope with an active seal key and write it to ``out``."""
    key_id = _require_seal(ledger, signer)
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    envelope = {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {"keyid": key_id, "sig": base64.b64encode(signer.sign_raw(pae(PAYLOAD_TYPE, payload))).decode("ascii")}
        ],
    }
    write_text_atomic(out, json.dumps(envelope, indent=2, sort_keys=True) + "\n")
    return envelope


def _sha256(data: bytes) -> dict[str, str]:
    return {"sha256": hashlib.sha256(data).hexdigest()}


def vsa_statement(
    ledger: Ledger, receipt_digest: Digest, trust: Trust, resource_uri: str | None = None, now: int | None = None
) -> dict[str, Any]:
    """A SLSA Verification Summary (``https://slsa.dev/verification_summary/v1``) of one
    receipt, verified here against ``trust``: PASSED exactly when the receipt verifies and
    its merge eligibility re-derives true. Subjects: the candidate commit and tree.
    """
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, trust)
    passed = result.ok and bool(result.derived_eligible)
    inputs = [{"uri": "urn:receipt-ledger:receipt:%s" % receipt_hash[7:], "digest": _sha256(stored.body)}]
    subjects: list[dict[str, Any]] = []
    for digest, entry in _listed_entries(ledger, receipt):
        inputs.append({"uri": "urn:receipt-ledger:record:%s" % digest.hex, "digest": _sha256(entry.body)})
        rec = decode_as(TierRecord, entry.body)
        if rec.tier is Tier.DETERMINISTIC and not subjects:
            subjects = _commit_subjects(ledger, rec)
    if not subjects:
        raise InputError("the receipt names no commit (no deterministic snapshot): a VSA needs a subject")
    contract = next(
        (
            rev.contract
            for _, rev in ledger.contract_revisions(receipt.task_id)
            if config_hash(rev.contract) == receipt.config_hash
        ),
        None,
    )
    if contract is None:
        raise InputError("the receipt's contract %s is not in the ledger" % receipt.config_hash.short())
    verified_at = _clock.now() if now is None else now
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": VSA_PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID},
            "timeVerified": datetime.datetime.fromtimestamp(verified_at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "resourceUri": resource_uri or "urn:receipt-ledger:candidate:%s" % receipt.input_hash.hex,
            "policy": {"uri": "urn:receipt-ledger:contract:%s" % receipt.task_id, "digest": _sha256(contract)},
            "inputAttestations": inputs,
            "verificationResult": "PASSED" if passed else "FAILED",
            # Our own track: custom SlsaResult values must not start with SLSA_.
            "verifiedLevels": ["RECEIPT_LEDGER_MERGE_ELIGIBLE"] if passed else ["FAILED"],
            "slsaVersion": "1.0",
            VSA_EXTENSION: {
                "receipt": receipt_hash,
                "task": receipt.task_id,
                "candidate": str(receipt.input_hash),
                "trust": result.trust,
                "defects": [d.message for d in result.defects],
                "eligibility_reasons": list(result.eligibility_reasons),
                "weakenings": list(result.weakenings),
                "waivers": list(result.waivers),
                "tiers": {t.tier.value: t.status for t in result.tiers},
            },
        },
    }


SVR_PREDICATE_TYPE = "https://in-toto.io/attestation/svr/v0.2"
SVR_EXTENSION = "https://receipt-ledger.dev/svr/receipt/v1"


def svr_statement(ledger: Ledger, receipt_digest: Digest, trust: Trust, now: int | None = None) -> dict[str, Any]:
    """An in-toto Simple Verification Result v0.2 of one receipt, verified here against
    ``trust`` (`svr_predicate`); the subjects are its commit and tree.
    """
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, trust)
    vsa = vsa_statement(ledger, receipt_digest, trust, now=now)  # the same subjects and policy
    contract = next(
        rev.contract
        for _, rev in ledger.contract_revisions(receipt.task_id)
        if config_hash(rev.contract) == receipt.config_hash
    )  # vsa_statement found it, or refused
    return {
        "_type": STATEMENT_TYPE,
        "subject": vsa["subject"],
        "predicateType": SVR_PREDICATE_TYPE,
        "predicate": svr_predicate(result, receipt, receipt_hash, contract, _clock.now() if now is None else now),
    }


def svr_predicate(
    result: Result, receipt: LadderReceipt, receipt_hash: str, contract: bytes, verified_at: int
) -> dict[str, Any]:
    """The SVR v0.2 predicate for a receipt's verification ``result``: the properties that
    hold (the receipt verifies, merge eligibility re-derives, each tier that passed as the
    verifier re-derived it, a human approval), the receipt's ``contract`` (its bytes) as
    the verifier's policy, ``verified_at`` as timeCreated.
    """
    properties = []
    if result.ok:
        properties.append("RECEIPT_LEDGER_RECEIPT_VERIFIED")
        if result.derived_eligible:
            properties.append("RECEIPT_LEDGER_MERGE_ELIGIBLE")
        for line in result.tiers:
            if line.status == "pass" and line.derived == "pass":  # not re-derived: not a property
                properties.append("RECEIPT_LEDGER_%s_PASSED" % line.tier.value.upper())
    approvers = sorted(
        {t.signer for t in result.tiers if t.tier is Tier.HUMAN and t.status == t.derived == "pass" and t.signer}
    )
    if result.ok and approvers:
        properties.append("RECEIPT_LEDGER_HUMAN_APPROVED")
    policy = {"uri": "urn:receipt-ledger:contract:%s" % receipt.task_id, "digest": _sha256(contract)}
    return {
        "verifier": {"id": VERIFIER_ID, "policies": [policy]},
        "timeCreated": datetime.datetime.fromtimestamp(verified_at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "properties": properties,
        SVR_EXTENSION: {
            "receipt": receipt_hash,
            "task": receipt.task_id,
            "approvers": approvers,
            "defects": [d.code for d in result.defects],
        },
    }


TEST_RESULT_PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"


def test_result_statement(ledger: Ledger, receipt_digest: Digest, trust: Trust) -> dict[str, Any]:
    """The in-toto test-result predicate (v0.1) of the receipt's deterministic record, for
    policy tools that read that format: PASSED when every check passed, WARNED when the
    record passes only because a failing check was waived, FAILED otherwise; each check
    by id in passedTests, warnedTests or failedTests, as the contract's rule derives it
    again from the recorded result. Configuration: the contract and each check's result
    document, by sha256. Refuses (`InputError`) a receipt that does not verify against
    ``trust`` or has no deterministic record.
    """
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, trust)
    if not result.ok:
        raise InputError("refusing to attest a receipt that does not verify: %s" % result.defects[0].message)
    slot = receipt.entry(Tier.DETERMINISTIC)
    entry = ledger.find(slot.records[0]) if slot is not None and slot.records else None
    if entry is None:
        raise InputError("the receipt lists no deterministic record: there are no test results to attest")
    record = decode_as(TierRecord, entry.body)
    revision = next(
        (rev for _, rev in ledger.contract_revisions(receipt.task_id) if rev.config_hash == record.config_hash), None
    )
    if revision is None:
        raise InputError("the record's contract %s is not in the ledger" % record.config_hash.short())
    contract = revision.parse()
    if not contract.checks:
        # PASSED over no tests would be a claim nothing was evaluated for.
        raise InputError("the contract declares no checks: there are no test results to attest")
    configuration = [
        {
            "name": "contract",
            "uri": "urn:receipt-ledger:contract:%s" % receipt.task_id,
            "digest": _sha256(revision.contract),
        }
    ]
    passed, warned, failed = _sorted_checks(ledger, contract, record, configuration)
    subjects = _commit_subjects(ledger, record)
    if not subjects:
        raise InputError("the record names no commit (no snapshot): a statement needs a subject")
    outcome = "FAILED" if failed or record.verdict is not Verdict.PASS else ("WARNED" if warned else "PASSED")
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": TEST_RESULT_PREDICATE_TYPE,
        "predicate": {
            "result": outcome,
            "configuration": configuration,
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
        },
    }


def _listed_entries(ledger: Ledger, receipt: LadderReceipt) -> list[tuple[Digest, StoredEntry]]:
    """The records the receipt lists that the ledger holds, in slot order."""
    found = []
    for slot in receipt.entries:
        for digest in slot.records:
            entry = ledger.find(digest)
            if entry is not None:
                found.append((digest, entry))
    return found


def _sorted_checks(
    ledger: Ledger, contract: Contract, record: TierRecord, configuration: list[dict[str, Any]]
) -> tuple[list[str], list[str], list[str]]:
    """Each check as passed, warned (the record's pass rests on a waiver of it) or failed, as
    the contract's rule derives it again; each result document joins ``configuration``.
    """
    passed: list[str] = []
    warned: list[str] = []
    failed: list[str] = []
    for check in contract.checks:
        ref = next((e for e in record.evidence if e.check_id == "check:" + check.id), None)
        doc = evidence_json(ledger, ref.digest, CHECK_RESULT_FORMAT) if ref is not None else None
        ok, _why = derive_check(check, doc)
        if ref is not None:
            blob = ledger.reader.open_blob(ref.digest)
            if blob is not None:
                with blob:
                    configuration.append({"name": ref.check_id, "digest": _sha256(blob.read())})
        if ok:
            passed.append(check.id)
        elif record.verdict is Verdict.PASS:
            warned.append(check.id)
        else:
            failed.append(check.id)
    return passed, warned, failed


def _commit_subjects(ledger: Ledger, record: TierRecord) -> list[dict[str, Any]]:
    snap = snapshot_of(ledger, record) or {}
    return [
        {"name": "git+%s" % field, "digest": {algorithm: snap[field]}}
        for field, algorithm in (("commit", "gitCommit"), ("tree", "gitTree"))
        if isinstance(snap.get(field), str)
    ]


def export_test_result(
    ledger: Ledger, receipt_digest: Digest, signer: Signer, out: Path, trust: Trust
) -> dict[str, Any]:
    """Write `test_result_statement` in a DSSE envelope signed by an active seal key."""
    return write_envelope(ledger, test_result_statement(ledger, receipt_digest, trust), signer, out)


def export_vsa(
    ledger: Ledger,
    receipt_digest: Digest,
    signer: Signer,
    out: Path,
    trust: Trust,
    resource_uri: str | None = None,
) -> dict[str, Any]:
    """Write `vsa_statement` in a DSSE envelope signed by ``signer`` (an active seal key);
    a FAILED summary is written too (policy tools must see failures). Returns the envelope.
    """
    return write_envelope(ledger, vsa_statement(ledger, receipt_digest, trust, resource_uri), signer, out)


def export_scitt(ledger: Ledger, receipt_digest: Digest, signer: Signer, out: Path, trust: Trust) -> bytes:
    """A SCITT signed statement about the receipt (`receipts.receipt_statement`), signed by
    an active seal key only after the receipt verifies against ``trust``: the issuer is the
    log's origin, the subject the receipt's candidate, the payload the SHA-256 of the
    receipt's canonical bytes. Written to ``out``; returned.

    Raises:
        InputError: the key is not an active seal key, or the receipt does not verify.
    """
    from receipts import receipt_statement

    key_id = _require_seal(ledger, signer)
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, trust)
    if not result.ok:
        raise InputError("refused: the receipt does not verify (%s)" % ", ".join(d.code for d in result.defects))
    statement = receipt_statement(
        stored.body,
        issuer=ledger.origin(),
        subject="urn:receipt-ledger:candidate:%s" % receipt.input_hash.hex,
        location="urn:receipt-ledger:receipt:%s" % receipt_hash.removeprefix("blake3:"),
        kid=key_id.encode(),
        sign=signer.sign_raw,
    )
    try:
        write_atomic(out, statement)
    except OSError as exc:
        raise InputError("cannot write %s: %s" % (out, exc)) from None
    return statement
