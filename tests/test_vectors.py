"""Known-answer vectors: BLAKE3's own, and the exact bytes of our formats."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import blake3

import receipts as r

HERE = Path(__file__).parent / "vectors"


def test_blake3_official_vectors_in_hash_and_derive_key_modes() -> None:
    doc = json.loads((HERE / "blake3.json").read_text())
    for case in doc["cases"]:
        data = bytes(i % 251 for i in range(case["input_len"]))
        assert r.content_digest(data).hex == case["hash"]
        assert blake3.blake3(data, derive_key_context=doc["context_string"]).hexdigest() == case["derive_key"]


def test_our_formats_reproduce_their_known_answers() -> None:
    spec = importlib.util.spec_from_file_location("make_known_answers", HERE / "make_known_answers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build() == json.loads((HERE / "known_answers.json").read_text())


def test_known_answers_decode_and_verify_independently() -> None:
    ka = json.loads((HERE / "known_answers.json").read_text())
    record = r.decode_tier_record(bytes.fromhex(ka["tier_record"]["cbor"]))
    assert str(r.tier_record_hash(record)) == ka["tier_record"]["hash"]
    assert str(r.evidence_list_hash(record.evidence)) == ka["tier_record"]["evidence_hash"]
    assert (
        str(r.body_hash(r.EntryKind.TIER_RECORD, bytes.fromhex(ka["tier_record"]["cbor"]))) == ka["tier_record"]["hash"]
    )
    receipt = r.decode_receipt(bytes.fromhex(ka["receipt"]["cbor"]))
    assert str(r.receipt_hash(receipt)) == ka["receipt"]["hash"]
    entry_bytes = bytes.fromhex(ka["entry"]["cbor"])
    entry = r.decode_entry(entry_bytes)
    assert str(r.entry_hash(entry_bytes)) == ka["entry"]["hash"]
    assert r.entry_signed_bytes(entry).hex() == ka["entry"]["signed_bytes"]
    blob, _ = r.parse_public_key_line(ka["signer_public_key"])
    r.sshsig_verify(blob, ka["entry"]["namespace"], r.entry_signed_bytes(entry), entry.signature)
    assert r.fingerprint(blob) == ka["signer_key_id"] == entry.signer


def test_base64_is_read_only_in_its_canonical_form() -> None:
    doc = json.loads((HERE / "base64.json").read_text())
    for case in doc["valid"]:
        assert r.b64decode_canonical(case["text"], "x") == bytes.fromhex(case["bytes"])
    for case in doc["invalid"]:
        try:
            r.b64decode_canonical(case["text"], "x")
        except r.FormatError:
            continue
        raise AssertionError("accepted %s: %r" % (case["name"], case["text"]))


JUDGE = json.loads((Path(__file__).parent / "vectors" / "judge_arithmetic.json").read_text())


def test_judge_arithmetic_vectors() -> None:
    for case in JUDGE["confidence_to_bp"]:
        answer = r.parse_answer(json.dumps({"verdict": "accept", "confidence": case["confidence"]}))
        assert isinstance(answer, r.Answer) and answer.confidence_bp == case["confidence_bp"], case
    for case in JUDGE["model_family"]:
        assert r.model_family(case["model"]) == case["family"], case
    for case in JUDGE["attempt_majority_and_median"]:
        samples = [r.SampleOutcome(r.Verdict(s["verdict"]), s["confidence_bp"], "x") for s in case["samples"]]
        outcome = r.attempt_outcome(samples)
        assert (outcome.verdict.value, outcome.confidence_bp) == (case["verdict"], case["confidence_bp"]), case
    for case in JUDGE["threshold"]:
        answer = r.parse_answer(json.dumps({"verdict": "accept", "confidence": case["confidence"]}))
        assert isinstance(answer, r.Answer)
        outcome = r.sample_outcome(answer, threshold_bp=case["threshold_bp"], independent=True)
        assert outcome.verdict.value == case["verdict"], case
