"""Model validation, codec round trips and the merge-eligibility rule."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

import receipts as r
from conftest import CANDIDATE, OTHER_CANDIDATE

CONFIG = r.config_hash(b"contract")
ENV = r.domain_hash(r.Domain.ENVIRONMENT, b"env")
digests = st.binary(min_size=32, max_size=32).map(r.Digest)
evidence = st.builds(r.EvidenceRef, check_id=st.sampled_from(["tests", "lint", "diff"]), digest=digests,
                     size=st.integers(0, 2**40), media_type=st.sampled_from(["text/plain", "application/json"]))
records = st.builds(
    r.new_tier_record, task_id=st.from_regex(r"[A-Z]{1,5}-[0-9]{1,4}", fullmatch=True), tier=st.sampled_from(r.LADDER),
    config_hash=digests, input_hash=digests, evidence=st.lists(evidence, max_size=4).map(tuple),
    verdict=st.sampled_from(list(r.Verdict)), verifier=st.just("test"), verifier_version=st.just("1"), environment=digests,
    created=st.integers(0, 2**39), confidence_bp=st.none() | st.integers(0, 10000), parents=st.lists(digests, max_size=3).map(tuple),
)


@given(records)
def test_tier_record_round_trips(rec: r.TierRecord) -> None:
    data = r.encode_tier_record(rec)
    assert r.decode_tier_record(data) == rec
    assert r.encode_tier_record(r.decode_tier_record(data)) == data


def record(tier: r.Tier = r.Tier.DETERMINISTIC, verdict: r.Verdict = r.Verdict.PASS, candidate: r.Digest = CANDIDATE, **kw: object) -> r.TierRecord:
    return r.new_tier_record(task_id="T-1", tier=tier, config_hash=CONFIG, input_hash=candidate, evidence=(), verdict=verdict,
                             verifier="t", verifier_version="1", environment=ENV, created=1, **kw)  # type: ignore[arg-type]


def test_receipt_round_trips() -> None:
    rec = record()
    receipt = r.LadderReceipt("T-1", CANDIDATE, CONFIG, r.LADDER, (
        r.TierEntry(r.Tier.DETERMINISTIC, record=r.tier_record_hash(rec)),
        r.TierEntry(r.Tier.JUDGE, skip_reason="deterministic tier failed"),
    ), False, 5)
    assert r.decode_receipt(r.encode_receipt(receipt)) == receipt


@pytest.mark.parametrize("kwargs", [
    {"task_id": ""}, {"task_id": "has space"}, {"confidence_bp": 10001}, {"confidence_bp": -1}, {"created": -1},
    {"verifier": ""}, {"version": 2},
])
def test_constructor_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(r.FormatError):
        dataclasses.replace(record(), **kwargs)


def test_receipt_entries_must_be_in_ladder_order_and_unique() -> None:
    e1 = r.TierEntry(r.Tier.JUDGE, skip_reason="x")
    e2 = r.TierEntry(r.Tier.DETERMINISTIC, skip_reason="y")
    with pytest.raises(r.FormatError):
        r.LadderReceipt("T-1", CANDIDATE, CONFIG, r.LADDER, (e1, e2), False, 1)
    with pytest.raises(r.FormatError):
        r.LadderReceipt("T-1", CANDIDATE, CONFIG, r.LADDER, (e1, e1), False, 1)
    with pytest.raises(r.FormatError):
        r.TierEntry(r.Tier.JUDGE)


def test_decoder_rejects_unknown_and_missing_keys() -> None:
    m = r.canonical_loads(r.encode_tier_record(record()))
    with pytest.raises(r.FormatError):
        r.decode_tier_record(r.canonical_dumps({**m, "extra": 1}))
    del m["verdict"]
    with pytest.raises(r.FormatError):
        r.decode_tier_record(r.canonical_dumps(m))


def test_domains_separate_identical_bytes() -> None:
    data = r.encode_tier_record(record())
    hashes = {r.domain_hash(d, data) for d in r.Domain}
    assert len(hashes) == len(r.Domain)
    assert r.content_digest(data) not in hashes


@pytest.mark.parametrize("text", ["blake3:" + "0" * 63, "BLAKE3:" + "0" * 64, "blake3:" + "G" * 64, "blake3:" + "a" * 64 + "\n"])
def test_digest_text_form_is_strict(text: str) -> None:
    with pytest.raises(r.FormatError):
        r.Digest.parse(text)


# -- the eligibility rule ------------------------------------------------------------------


def derive(required: tuple[r.Tier, ...], recs: list[r.TierRecord], skips: dict[r.Tier, str] | None = None) -> r.Eligibility:
    by_hash = {r.tier_record_hash(x): x for x in recs}
    entries = [r.TierEntry(x.tier, record=h) for h, x in by_hash.items()]
    entries += [r.TierEntry(t, skip_reason=why) for t, why in (skips or {}).items()]
    entries.sort(key=lambda e: r.LADDER.index(e.tier))
    return r.derive_merge_eligible(task_id="T-1", input_hash=CANDIDATE, config_hash=CONFIG, required=required,
                                   entries=tuple(entries), records=by_hash)


def test_all_required_tiers_passing_is_eligible() -> None:
    assert derive(r.LADDER, [record(t) for t in r.LADDER]).eligible


@pytest.mark.parametrize("verdict", [v for v in r.Verdict if v is not r.Verdict.PASS])
def test_only_pass_is_eligible(verdict: r.Verdict) -> None:
    assert not derive(r.LADDER, [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE, verdict), record(r.Tier.HUMAN)]).eligible


def test_a_skip_blocks_even_when_not_required() -> None:
    assert not derive((r.Tier.DETERMINISTIC,), [record()], {r.Tier.JUDGE: "not configured"}).eligible


def test_a_failing_unrequired_tier_blocks() -> None:
    assert not derive((r.Tier.DETERMINISTIC,), [record(), record(r.Tier.JUDGE, r.Verdict.FAIL)]).eligible


def test_a_required_tier_without_entry_blocks() -> None:
    e = derive(r.LADDER, [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE)])
    assert not e.eligible and any("human" in x for x in e.reasons)


def test_a_record_for_another_candidate_blocks() -> None:
    assert not derive(r.LADDER, [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE, candidate=OTHER_CANDIDATE), record(r.Tier.HUMAN)]).eligible


def test_an_empty_ladder_is_never_eligible() -> None:
    assert not derive((), []).eligible


def test_an_unresolvable_record_blocks() -> None:
    rec = record()
    e = r.derive_merge_eligible(task_id="T-1", input_hash=CANDIDATE, config_hash=CONFIG, required=(r.Tier.DETERMINISTIC,),
                                entries=(r.TierEntry(r.Tier.DETERMINISTIC, record=r.tier_record_hash(rec)),), records={})
    assert not e.eligible
