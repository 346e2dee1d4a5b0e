"""Model validation, codec round trips and the merge-eligibility rule."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import receipts as r
from conftest import CANDIDATE, OTHER_CANDIDATE, seeded_signer

CONFIG = r.config_hash(b"contract")
ENV = r.domain_hash(r.Domain.ENVIRONMENT, b"env")
digests = st.binary(min_size=32, max_size=32).map(r.Digest)
evidence = st.builds(
    r.EvidenceRef,
    check_id=st.sampled_from(["tests", "lint", "diff"]),
    digest=digests,
    size=st.integers(0, 2**40),
    media_type=st.sampled_from(["text/plain", "application/json"]),
)
records = st.builds(
    r.new_tier_record,
    task_id=st.from_regex(r"[A-Z]{1,5}-[0-9]{1,4}", fullmatch=True),
    tier=st.sampled_from(r.LADDER),
    config_hash=digests,
    input_hash=digests,
    evidence=st.lists(evidence, max_size=4).map(tuple),
    verdict=st.sampled_from(list(r.Verdict)),
    verifier=st.just("test"),
    verifier_version=st.just("1"),
    environment=digests,
    created=st.integers(0, 2**39),
    confidence_bp=st.none() | st.integers(0, 10000),
    parents=st.lists(digests, max_size=3).map(tuple),
)


@given(records)
def test_tier_record_round_trips(rec: r.TierRecord) -> None:
    data = r.encode_tier_record(rec)
    assert r.decode_tier_record(data) == rec
    assert r.encode_tier_record(r.decode_tier_record(data)) == data


def record(
    tier: r.Tier = r.Tier.DETERMINISTIC,
    verdict: r.Verdict = r.Verdict.PASS,
    candidate: r.Digest = CANDIDATE,
    **kw: Any,
) -> r.TierRecord:
    return r.new_tier_record(
        task_id="T-1",
        tier=tier,
        config_hash=CONFIG,
        input_hash=candidate,
        evidence=(),
        verdict=verdict,
        verifier="t",
        verifier_version="1",
        environment=ENV,
        created=1,
        **kw,
    )


def test_receipt_round_trips() -> None:
    rec = record()
    receipt = r.LadderReceipt(
        "T-1",
        CANDIDATE,
        CONFIG,
        r.LADDER,
        (
            r.TierEntry(r.Tier.DETERMINISTIC, records=(r.tier_record_hash(rec),)),
            r.TierEntry(r.Tier.JUDGE, skip_reason="deterministic tier failed"),
        ),
        False,
        5,
    )
    assert r.decode_receipt(r.encode_receipt(receipt)) == receipt


@pytest.mark.parametrize(
    "kwargs",
    [
        {"task_id": ""},
        {"task_id": "has space"},
        {"confidence_bp": 10001},
        {"confidence_bp": -1},
        {"created": -1},
        {"verifier": ""},
        {"version": 2},
    ],
)
def test_constructor_rejects_bad_values(kwargs: dict[str, Any]) -> None:
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


@pytest.mark.parametrize(
    "text", ["blake3:" + "0" * 63, "BLAKE3:" + "0" * 64, "blake3:" + "G" * 64, "blake3:" + "a" * 64 + "\n"]
)
def test_digest_text_form_is_strict(text: str) -> None:
    with pytest.raises(r.FormatError):
        r.Digest.parse(text)


# -- the eligibility rule ------------------------------------------------------------------


def derive(
    required: tuple[r.Tier, ...],
    recs: list[r.TierRecord],
    skips: dict[r.Tier, str] | None = None,
    signers: dict[r.Digest, str] | None = None,
    approvals: int = 1,
) -> r.Eligibility:
    by_hash = {r.tier_record_hash(x): x for x in recs}
    slots: dict[r.Tier, tuple[r.Digest, ...]] = {}
    for h, x in by_hash.items():
        slots[x.tier] = slots.get(x.tier, ()) + (h,)
    entries = [r.TierEntry(t, records=tuple(sorted(hs, key=lambda d: d.value))) for t, hs in slots.items()]
    entries += [r.TierEntry(t, skip_reason=why) for t, why in (skips or {}).items()]
    entries.sort(key=lambda e: r.LADDER.index(e.tier))
    if signers is None:
        signers = {h: "key-%s" % x.tier for h, x in by_hash.items()}
    return r.derive_merge_eligible(
        task_id="T-1",
        input_hash=CANDIDATE,
        config_hash=CONFIG,
        required=required,
        entries=tuple(entries),
        records=by_hash,
        signers=signers,
        human_approvals=approvals,
    )


def test_all_required_tiers_passing_is_eligible() -> None:
    assert derive(r.LADDER, [record(t) for t in r.LADDER]).eligible


@pytest.mark.parametrize("verdict", [v for v in r.Verdict if v is not r.Verdict.PASS])
def test_only_pass_is_eligible(verdict: r.Verdict) -> None:
    assert not derive(
        r.LADDER, [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE, verdict), record(r.Tier.HUMAN)]
    ).eligible


def test_a_skip_blocks_even_when_not_required() -> None:
    assert not derive((r.Tier.DETERMINISTIC,), [record()], {r.Tier.JUDGE: "not configured"}).eligible


def test_a_failing_unrequired_tier_blocks() -> None:
    assert not derive((r.Tier.DETERMINISTIC,), [record(), record(r.Tier.JUDGE, r.Verdict.FAIL)]).eligible


def test_a_required_tier_without_entry_blocks() -> None:
    e = derive(r.LADDER, [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE)])
    assert not e.eligible and any("human" in x for x in e.reasons)


def test_a_record_for_another_candidate_blocks() -> None:
    assert not derive(
        r.LADDER, [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE, candidate=OTHER_CANDIDATE), record(r.Tier.HUMAN)]
    ).eligible


def test_an_empty_ladder_is_never_eligible() -> None:
    assert not derive((), []).eligible


def test_an_unresolvable_record_blocks() -> None:
    rec = record()
    e = r.derive_merge_eligible(
        task_id="T-1",
        input_hash=CANDIDATE,
        config_hash=CONFIG,
        required=(r.Tier.DETERMINISTIC,),
        entries=(r.TierEntry(r.Tier.DETERMINISTIC, records=(r.tier_record_hash(rec),)),),
        records={},
    )
    assert not e.eligible


def human(verdict: r.Verdict = r.Verdict.PASS, created: int = 1) -> r.TierRecord:
    return dataclasses.replace(record(r.Tier.HUMAN, verdict), created=created)


def test_two_approvals_need_two_distinct_keys() -> None:
    a, b = human(created=1), human(created=2)
    ha, hb = r.tier_record_hash(a), r.tier_record_hash(b)
    base = [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE)]
    same = {ha: "alice", hb: "alice", **{r.tier_record_hash(x): "k" for x in base}}
    two = {ha: "alice", hb: "bob", **{r.tier_record_hash(x): "k" for x in base}}
    assert not derive(r.LADDER, base + [a, b], signers=same, approvals=2).eligible
    assert derive(r.LADDER, base + [a, b], signers=two, approvals=2).eligible
    unknown = {hb: "bob", **{r.tier_record_hash(x): "k" for x in base}}
    assert not derive(r.LADDER, base + [a, b], signers=unknown, approvals=2).eligible


def test_a_reject_blocks_and_a_later_approval_by_the_same_key_withdraws_it() -> None:
    rej, app_bob, app_alice = human(r.Verdict.FAIL, 1), human(r.Verdict.PASS, 2), human(r.Verdict.PASS, 3)
    hr, hb, ha = (r.tier_record_hash(x) for x in (rej, app_bob, app_alice))
    history = [(hr, rej, "alice"), (hb, app_bob, "bob")]
    latest = r.latest_human_decisions(history, task_id="T-1", input_hash=CANDIDATE, config_hash=CONFIG)
    assert set(latest) == {hr, hb}
    base = [record(r.Tier.DETERMINISTIC), record(r.Tier.JUDGE)]
    signers = {hr: "alice", hb: "bob", ha: "alice", **{r.tier_record_hash(x): "k" for x in base}}
    assert not derive(r.LADDER, base + [rej, app_bob], signers=signers).eligible
    latest = r.latest_human_decisions(
        history + [(ha, app_alice, "alice")], task_id="T-1", input_hash=CANDIDATE, config_hash=CONFIG
    )
    assert set(latest) == {hb, ha}
    assert derive(r.LADDER, base + [app_bob, app_alice], signers=signers, approvals=2).eligible


def test_approvals_of_another_candidate_are_not_decisions_on_this_one() -> None:
    other = record(r.Tier.HUMAN, candidate=OTHER_CANDIDATE)
    latest = r.latest_human_decisions(
        [(r.tier_record_hash(other), other, "alice")], task_id="T-1", input_hash=CANDIDATE, config_hash=CONFIG
    )
    assert latest == ()


def test_only_the_human_tier_may_list_several_records() -> None:
    d1, d2 = r.Digest(b"\x01" * 32), r.Digest(b"\x02" * 32)
    with pytest.raises(r.FormatError):
        r.TierEntry(r.Tier.JUDGE, records=(d1, d2))
    assert r.TierEntry(r.Tier.HUMAN, records=(d1, d2)).records == (d1, d2)


def test_a_slot_lists_its_records_in_one_order_only() -> None:
    # One set of decisions, one encoding, one receipt hash (issue 11, item 7).
    d1, d2 = r.Digest(b"\x01" * 32), r.Digest(b"\x02" * 32)
    for records in ((d2, d1), (d1, d1)):
        with pytest.raises(r.FormatError, match="ascending"):
            r.TierEntry(r.Tier.HUMAN, records=records)
    history = [(d2, human(r.Verdict.PASS, 1), "bob"), (d1, human(r.Verdict.PASS, 2), "alice")]
    assert r.latest_human_decisions(history, task_id="T-1", input_hash=CANDIDATE, config_hash=CONFIG) == (d1, d2)


@given(st.one_of(st.sampled_from([0, 1, 23, 24, 255, 256, 65535, 65536, (1 << 53) - 1]), st.integers(0, (1 << 53) - 1)))
def test_sign_entry_is_entry_signed_bytes_then_encode_entry(seq: int) -> None:
    # The writer's one-pass signing must give exactly the bytes of the spelled-out path.
    d = r.domain_hash(r.Domain.ENVIRONMENT, b"x")
    signer = seeded_signer("alice")
    fields: dict[str, Any] = dict(
        seq=seq,
        prev=None if seq == 0 else d,
        kind=r.EntryKind.GENESIS if seq == 0 else r.EntryKind.TIER_RECORD,
        body_hash=d,
        time=1764633600,
        signer=r.fingerprint(signer.public_key_blob),
        ring=None if seq == 0 else d,
        task_prev=d if seq % 2 else None,
    )
    seen: list[bytes] = []

    def sign(message: bytes) -> bytes:
        seen.append(message)
        return r.sshsig_sign(signer, "receipt-ledger/admin", message)

    entry, data = r.sign_entry(**fields, sign=sign)
    spelled = r.Entry(**fields, signature=entry.signature)
    assert entry == spelled and seen == [r.entry_signed_bytes(spelled)]
    assert data == r.encode_entry(spelled) and r.decode_entry(data) == spelled


def test_sign_entry_validates_before_returning() -> None:
    d = r.domain_hash(r.Domain.ENVIRONMENT, b"x")
    with pytest.raises(r.FormatError):
        r.sign_entry(
            seq=3,
            prev=d,
            kind=r.EntryKind.TIER_RECORD,
            body_hash=d,
            time=1764633600,
            signer="not a fingerprint",
            ring=d,
            task_prev=None,
            sign=lambda m: b"sig",
        )


@pytest.mark.parametrize("length", [1, 23, 24, 255, 256, 1024])
def test_sign_entry_splices_signatures_of_every_length_as_the_encoder_would(length: int) -> None:
    d = r.domain_hash(r.Domain.ENVIRONMENT, b"x")
    entry, data = r.sign_entry(
        seq=300,
        prev=d,
        kind=r.EntryKind.TIER_RECORD,
        body_hash=d,
        time=1764633600,
        signer=r.fingerprint(seeded_signer("alice").public_key_blob),
        ring=d,
        task_prev=None,
        sign=lambda message: b"s" * length,
    )
    assert data == r.encode_entry(entry) and len(entry.signature) == length
