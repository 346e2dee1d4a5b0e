"""Known-answer vectors: BLAKE3's own, and the exact bytes of our formats."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import blake3
import pytest

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


def test_judge_derive_order_vectors() -> None:
    # Which of a run's faults decides, and so the reason said, when several are present.
    contract = r.parse_contract(b'task = "T-1"\n[judge]\nbackend = "command"\ncommand = ["j"]\nmax_retries = 1\n')
    assert (contract.judge.max_retries, contract.judge.samples) == (1, 1)
    for case in JUDGE["derive_order"]:
        outcome = r.derive_judge(case["run"], {}, contract, {})
        assert (outcome.verdict.value, outcome.reason) == (case["verdict"], case["reason"]), case


ELIGIBILITY = json.loads((Path(__file__).parent / "vectors" / "eligibility.json").read_text())


def _eligibility_case(case: dict[str, Any]) -> bool:
    config, candidate = r.config_hash(b"c"), r.candidate_hash({"commit": "a" * 40, "tree": "b" * 40})

    def record(tier: r.Tier, verdict: str, n: int) -> r.TierRecord:
        return r.new_tier_record(
            task_id="T-1",
            tier=tier,
            config_hash=config,
            input_hash=candidate,
            evidence=(),
            verdict=r.Verdict(verdict),
            verifier="v",
            verifier_version="1",
            environment=config,
            created=1 + n,
        )

    lower = [record(r.Tier.DETERMINISTIC, "pass", 0), record(r.Tier.JUDGE, "pass", 0)]
    human = [record(r.Tier.HUMAN, v, 10 + i) for i, v in enumerate(case["human_verdicts"])]
    by_hash = {r.tier_record_hash(x): x for x in lower + human}
    signers = {d: "key-%d" % i for i, d in enumerate(by_hash)}
    if not case["human_signers_known"]:
        for x in human:
            signers.pop(r.tier_record_hash(x))
    entries = [r.TierEntry(x.tier, records=(r.tier_record_hash(x),)) for x in lower]
    if human:
        entries.append(
            r.TierEntry(
                r.Tier.HUMAN, records=tuple(sorted((r.tier_record_hash(x) for x in human), key=lambda d: d.value))
            )
        )
    required = tuple(t for t in r.LADDER if t.value in case["required"])
    return r.derive_merge_eligible(
        task_id="T-1",
        input_hash=candidate,
        config_hash=config,
        required=required,
        entries=tuple(entries),
        records=by_hash,
        signers=signers,
        human_approvals=case["human_approvals"],
        not_approvers={signers[r.tier_record_hash(human[i])]: "claimed the change" for i in case.get("authors", [])},
    ).eligible


@pytest.mark.parametrize("case", ELIGIBILITY["cases"], ids=[c["name"] for c in ELIGIBILITY["cases"]])
def test_eligibility_corner_vectors(case: dict[str, Any]) -> None:
    assert _eligibility_case(case) is case["eligible"]


CONTRACTS = json.loads((Path(__file__).parent / "vectors" / "contracts.json").read_text())


@pytest.mark.parametrize("case", CONTRACTS["cases"], ids=[c["name"] for c in CONTRACTS["cases"]])
def test_contract_schema_vectors(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(r.ContractError, match=re.escape(case["error"])):
            r.parse_contract(case["toml"].encode())
        return
    contract = r.parse_contract(case["toml"].encode())
    for field, expected in case["parsed"].items():
        value = getattr(contract, field)
        if isinstance(value, tuple):
            value = [getattr(v, "value", v) for v in value]
        assert value == expected, field


VALUES = json.loads((Path(__file__).parent / "vectors" / "values.json").read_text())


def test_value_rule_vectors() -> None:
    digest = r.content_digest(b"x")

    def accepted(check_id: str, media_type: str) -> bool:
        try:
            r.EvidenceRef(check_id, digest, 1, media_type)
        except r.FormatError:
            return False
        return True

    for case in VALUES["media_type"]:
        assert accepted("x", case["value"]) is case["valid"], case
    for case in VALUES["evidence_name"]:
        assert accepted(case["value"], "text/plain") is case["valid"], case
    assert [role.value for role in r.Role] == VALUES["role_order"]
