"""Every attack on the formats, one named vector each (tests/vectors/tamper.json)."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import (
    ADMIN_ID,
    OTHER_CANDIDATE,
    SIGNERS,
    TASK,
    Row,
    Sample,
    build_sample,
    find_row,
    flaky_command,
    judge_table,
    read_rows,
    run_cli,
    sign_decision,
    write_rows,
)
from ledger import Ledger, LedgerError, deterministic_runs, seal_receipt
from verify import BundleSource, CannotVerify, LedgerSource, Result, TrustRoot, verify_chain, verify_receipt

VECTORS = json.loads((Path(__file__).parent / "vectors" / "tamper.json").read_text())["cases"]
MUTATIONS: dict[str, Callable[[Path], Sample]] = {}


def mutation(name: str) -> Callable[[Callable[[Path], Sample]], Callable[[Path], Sample]]:
    def register(fn: Callable[[Path], Sample]) -> Callable[[Path], Sample]:
        MUTATIONS[name] = fn
        return fn

    return register


def _record_body(rows: list[Row], i: int) -> r.TierRecord:
    body = r.decode_body(r.EntryKind.TIER_RECORD, rows[i].body)
    assert isinstance(body, r.TierRecord)
    return body


def _receipt_index(rows: list[Row]) -> int:
    return max(i for i, row in enumerate(rows) if row.entry.kind is r.EntryKind.RECEIPT)


def _replace_body(rows: list[Row], i: int, body: r.Body) -> str:
    rows[i].body = r.encode_body(body)
    return str(r.body_hash(rows[i].entry.kind, rows[i].body))


def _retarget_receipt(rows: list[Row], old: r.Digest, new: r.Digest) -> str:
    """Point the receipt at a record's new hash; returns the receipt's new hash."""
    ri = _receipt_index(rows)
    rec = r.decode_receipt(rows[ri].body)
    entries = tuple(
        dataclasses.replace(e, records=tuple(new if d == old else d for d in e.records)) for e in rec.entries
    )
    return _replace_body(rows, ri, dataclasses.replace(rec, entries=entries))


@mutation("flipped-byte-record-body")
def _flip(tmp: Path) -> Sample:
    s = build_sample(tmp)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        seq, body = conn.execute(
            "SELECT seq, body FROM entries WHERE body_hash = ?",
            (r.Digest.parse(str(s.records[r.Tier.DETERMINISTIC])).value,),
        ).fetchone()
        body = bytearray(body)
        body[len(body) // 2] ^= 0x40
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (bytes(body), seq))
    conn.close()
    return s


@mutation("record-resigned-without-role")
def _wrong_role(tmp: Path) -> Sample:
    return _resigned_by(tmp, r.Tier.DETERMINISTIC, "judge")


@mutation("signature-after-revocation")
def _after_revocation(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.DETERMINISTIC])
    revoke = r.KeyRevoke(r.fingerprint(SIGNERS["ci"].public_key_blob), "laptop lost")
    admin_entry = dataclasses.replace(rows[1].entry, kind=r.EntryKind.KEY_REVOKE)
    rows.insert(i, Row(admin_entry, r.encode_body(revoke)))
    write_rows(s.root, rows, resign_from=i)
    return s


@mutation("signature-by-unknown-key")
def _unknown_key(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.DETERMINISTIC])
    rows[i].entry = dataclasses.replace(rows[i].entry, signer=r.fingerprint(SIGNERS["mallory"].public_key_blob))
    write_rows(s.root, rows, resign_from=i, role=lambda row: r.Role.DETERMINISTIC)
    return s


@mutation("merge-eligible-flipped-resigned")
def _flip_eligible(tmp: Path) -> Sample:
    s = build_sample(
        tmp, verdicts={r.Tier.DETERMINISTIC: r.Verdict.PASS, r.Tier.JUDGE: r.Verdict.FAIL, r.Tier.HUMAN: r.Verdict.PASS}
    )
    rows = read_rows(s.root)
    ri = _receipt_index(rows)
    rec = r.decode_receipt(rows[ri].body)
    assert rec.merge_eligible is False
    s.receipt = _replace_body(rows, ri, dataclasses.replace(rec, merge_eligible=True))
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("required-tier-missing")
def _missing_tier(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    ri = _receipt_index(rows)
    rec = r.decode_receipt(rows[ri].body)
    s.receipt = _replace_body(
        rows, ri, dataclasses.replace(rec, entries=tuple(e for e in rec.entries if e.tier is not r.Tier.HUMAN))
    )
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("record-for-other-candidate-spliced")
def _splice(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.JUDGE])
    other = dataclasses.replace(_record_body(rows, i), input_hash=OTHER_CANDIDATE)
    new_row = Row(rows[i].entry, r.encode_body(other))
    ri = _receipt_index(rows)
    rows.insert(ri, new_row)
    s.receipt = _retarget_receipt(rows, s.records[r.Tier.JUDGE], r.tier_record_hash(other))
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("record-of-another-task-spliced")
def _other_task_record(tmp: Path) -> Sample:
    # A receipt's walk keeps only its own task's bodies: a record of another task is read
    # again on demand, and must still be named for what it is.
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.JUDGE])
    other = dataclasses.replace(_record_body(rows, i), task_id="TASK-2")
    ri = _receipt_index(rows)
    rows.insert(ri, Row(rows[i].entry, r.encode_body(other)))
    s.receipt = _retarget_receipt(rows, s.records[r.Tier.JUDGE], r.tier_record_hash(other))
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("evidence-hash-copied")
def _evidence_hash(tmp: Path) -> Sample:
    s = build_sample(
        tmp, verdicts={r.Tier.DETERMINISTIC: r.Verdict.FAIL, r.Tier.JUDGE: r.Verdict.PASS, r.Tier.HUMAN: r.Verdict.PASS}
    )
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.DETERMINISTIC])
    passing = _record_body(rows, find_row(rows, s.records[r.Tier.JUDGE]))
    forged = dataclasses.replace(_record_body(rows, i), evidence_hash=passing.evidence_hash, verdict=r.Verdict.PASS)
    _replace_body(rows, i, forged)
    ri = _receipt_index(rows)
    s.receipt = _retarget_receipt(rows, s.records[r.Tier.DETERMINISTIC], r.tier_record_hash(forged))
    rec = r.decode_receipt(rows[ri].body)
    s.receipt = _replace_body(rows, ri, dataclasses.replace(rec, merge_eligible=True))
    write_rows(s.root, rows, resign_from=i)
    return s


def _first_blob(s: Sample) -> Path:
    return sorted(p for p in (s.root / "blobs").rglob("*") if p.is_file())[0]


@mutation("evidence-blob-missing")
def _blob_missing(tmp: Path) -> Sample:
    s = build_sample(tmp)
    _first_blob(s).unlink()
    return s


@mutation("evidence-blob-altered")
def _blob_altered(tmp: Path) -> Sample:
    s = build_sample(tmp)
    blob = _first_blob(s)
    os.chmod(blob, 0o644)
    data = bytearray(blob.read_bytes())
    data[0] ^= 0x01
    blob.write_bytes(bytes(data))
    return s


def _raw_rows(root: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(root / "ledger.db")
    rows = conn.execute("SELECT seq, hash, kind, body_hash, task, entry, body FROM entries ORDER BY seq").fetchall()
    conn.close()
    return rows


def _store_raw(root: Path, rows: list[tuple[Any, ...]]) -> None:
    conn = sqlite3.connect(root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries")
        conn.executemany("INSERT INTO entries VALUES (?,?,?,?,?,?,?)", rows)
    conn.close()


@mutation("chain-entry-deleted")
def _deleted(tmp: Path) -> Sample:
    s = build_sample(tmp)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries WHERE seq = 2")
    conn.close()
    return s


@mutation("genesis-body-unusable")
def _genesis_body(tmp: Path) -> Sample:
    s = build_sample(tmp)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("UPDATE entries SET body = ? WHERE seq = 0", (b"junk",))
    conn.close()
    return s


@mutation("chain-entries-reordered")
def _reordered(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = _raw_rows(s.root)
    a, b = rows[2], rows[3]
    rows[2], rows[3] = (2,) + b[1:], (3,) + a[1:]
    _store_raw(s.root, rows)
    return s


@mutation("chain-entry-inserted")
def _inserted(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = _raw_rows(s.root)
    extra = r.KeyAdd(r.KeySpec("mallory", (r.Role.DETERMINISTIC,), SIGNERS["mallory"].public_key_blob))
    entry = r.Entry(
        seq=3,
        prev=r.Digest(rows[2][1]),
        kind=r.EntryKind.KEY_ADD,
        body_hash=r.body_hash(r.EntryKind.KEY_ADD, r.encode_body(extra)),
        time=r.decode_entry(rows[2][5]).time,
        signer=ADMIN_ID,
        signature=b"-",
        ring=r.Digest(rows[2][1]),
    )
    entry = dataclasses.replace(
        entry, signature=r.sshsig_sign(SIGNERS["admin"], r.namespace_for("admin"), r.entry_signed_bytes(entry))
    )
    data = r.encode_entry(entry)
    new = (3, r.entry_hash(data).value, "key_add", entry.body_hash.value, None, data, r.encode_body(extra))
    shifted = [(row[0] + 1,) + row[1:] for row in rows[3:]]
    _store_raw(s.root, rows[:3] + [new] + shifted)
    return s


@mutation("non-canonical-record-encoding")
def _non_canonical(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.DETERMINISTIC])
    canonical = rows[i].body
    # "v": 1 is encoded 0x61 0x76 0x01; the non-shortest form of 1 is 0x18 0x01.
    assert canonical.count(b"\x61\x76\x01") == 1
    rows[i].body = canonical.replace(b"\x61\x76\x01", b"\x61\x76\x18\x01")
    write_rows(s.root, rows, resign_from=i)  # the body no longer decodes; re-signed as deterministic
    return s


@mutation("index-column-forged")
def _index(tmp: Path) -> Sample:
    s = build_sample(tmp)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("UPDATE entries SET hash = ? WHERE seq = 1", (b"\x00" * 32,))
    conn.close()
    return s


def status_agrees_with_verify(root: Path, result: Result) -> int:
    """`ledger status` derives each deterministic step with the verifier's rule: on every
    deterministic record the receipt lists, both derive the same verdict, whatever the record
    claims. A ledger status cannot read at all yields no state (it fails closed). Returns
    how many records were compared."""
    derived = {line.record: line.derived for line in result.tiers if line.tier is r.Tier.DETERMINISTIC and line.derived}
    try:
        runs = {str(run.digest): run.outcome.verdict.value for run in deterministic_runs(Ledger.open(root), TASK)}
    except (LedgerError, r.ReceiptsError, CannotVerify):
        return 0
    compared = [record for record in derived if record in runs]
    for record in compared:
        assert runs[record] == derived[record], (record, runs[record], derived[record])
    return len(compared)


@pytest.mark.parametrize(
    "verdicts",
    [
        {},
        {r.Tier.DETERMINISTIC: r.Verdict.FAIL},
        {r.Tier.JUDGE: r.Verdict.FAIL},
        {r.Tier.HUMAN: r.Verdict.FAIL},
    ],
    ids=["all-pass", "deterministic-fails", "judge-fails", "human-rejects"],
)
def test_status_and_verify_agree_on_every_fixture(tmp_path: Path, verdicts: dict[r.Tier, r.Verdict]) -> None:
    s = build_sample(tmp_path, {**{t: r.Verdict.PASS for t in r.LADDER}, **verdicts})
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TrustRoot(frozenset({ADMIN_ID}), "test"))
    assert result.ok, result.defects
    assert status_agrees_with_verify(s.root, result) == 1


def test_every_vector_has_a_mutation() -> None:
    assert sorted(MUTATIONS) == sorted(c["name"] for c in VECTORS)


def test_untampered_sample_verifies_clean(sample: Sample) -> None:
    result = verify_receipt(LedgerSource.open(sample.root), sample.receipt, TrustRoot(frozenset({ADMIN_ID}), "test"))
    assert result.ok, result.defects
    assert result.claimed_eligible is True and result.derived_eligible is True


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_tamper_vector_is_rejected(case: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    s = MUTATIONS[case["name"]](tmp_path)
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TrustRoot(frozenset({ADMIN_ID}), "test"))
    codes = [d.code for d in result.defects]
    assert not result.ok
    for code in case["defects"]:
        if code in ("chain-gap", "chain-link") and len(case["defects"]) > 1:
            continue
        assert code in codes, (case["name"], result.defects)
    if len(case["defects"]) > 1 and set(case["defects"]) == {"chain-gap", "chain-link"}:
        assert {"chain-gap", "chain-link"} & set(codes)
    if case.get("only"):
        assert set(codes) == set(case["defects"]), result.defects
    status_agrees_with_verify(s.root, result)
    cli = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--json")
    assert cli.returncode == case["exit"], cli.stderr
    assert "Traceback" not in cli.stderr
    assert json.loads(cli.stdout)["verified"] is False


def _checkpointed_sample(tmp: Path, *args: Any, **kwargs: Any) -> Sample:
    """`build_sample`, then a checkpoint over it: the tampering then happens under a signed
    root, so the single-receipt paths (proof, a bundle) have something to prove against."""
    import conftest

    s = conftest.build_sample(tmp, *args, **kwargs)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    return s


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_no_bundle_exported_from_a_tampered_ledger_verifies(
    case: dict,  # type: ignore[type-arg]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22, the tamper sweep through a bundle (what the gate reads): every vector the
    walk rejects (`test_tamper_vector_is_rejected`) is refused by the exporter or by the
    bundle's verification too. test_flat.py runs the sweep by proof, and
    test_one_row_changes.py holds every path to the chain audit."""
    from ledger import export_bundle

    monkeypatch.setattr(__import__(__name__), "build_sample", _checkpointed_sample)
    s = MUTATIONS[case["name"]](tmp_path)
    trust = TrustRoot(frozenset({ADMIN_ID}), "test")
    try:
        # A mutation that appended a receipt after the checkpoint: sign one over it too, if
        # the writer will (it reads signed data, and may refuse a tampered ledger).
        ledger = Ledger.open(s.root)
        try:
            if ledger.checkpoints()[-1][0] < ledger.reader.count():
                ledger.checkpoint(SIGNERS["sealer"])
        finally:
            ledger.close()
    except (LedgerError, r.ReceiptsError, CannotVerify):
        pass
    accepted = []
    try:
        ledger = Ledger.open(s.root)
        try:
            export_bundle(ledger, r.Digest.parse(s.receipt), tmp_path / "bundle.zip")
        finally:
            ledger.close()
        with BundleSource(tmp_path / "bundle.zip") as bundle:
            if verify_receipt(bundle, s.receipt, trust).ok:
                accepted.append("bundle")
    except (LedgerError, r.ReceiptsError, CannotVerify):
        pass  # the exporter refused it
    assert not accepted, accepted


def test_truncated_database_is_a_clean_error(sample: Sample) -> None:
    db = sample.root / "ledger.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    for args in (("verify", sample.receipt), ("verify", "--chain"), ("log",)):
        cli = run_cli("--dir", str(sample.root), *args)
        assert cli.returncode == 2, (args, cli.stdout, cli.stderr)
        assert "Traceback" not in cli.stderr
        assert len(cli.stderr.strip().splitlines()) >= 1 and cli.stderr.startswith("ledger: error:")


@pytest.mark.parametrize(
    "bad",
    [
        "blake3:xyz",
        "sha256:" + "0" * 64,
        "blake3:" + "A" * 64,
        "0" * 64,
        "",
        "blake3:" + "0" * 65,
    ],
)
def test_hash_of_the_wrong_form_is_exit_2(sample: Sample, bad: str) -> None:
    cli = run_cli("--dir", str(sample.root), "verify", bad)
    assert cli.returncode == 2
    assert "Traceback" not in cli.stderr and "blake3:<64 lowercase hex digits>" in cli.stderr


def test_a_prefix_that_names_no_entry_is_exit_2(sample: Sample) -> None:
    # 8 to 63 hex digits are a prefix, as tables print hashes: one that names nothing is
    # bad input that says so (a whole hash of another form gets the verifier's message).
    cli = run_cli("--dir", str(sample.root), "verify", "blake3:" + "0" * 63)
    assert cli.returncode == 2 and "no entry, record or receipt hash starts with" in cli.stderr, cli.stderr


def test_unknown_hash_is_exit_2(sample: Sample) -> None:
    cli = run_cli("--dir", str(sample.root), "verify", "blake3:" + "0" * 64)
    assert cli.returncode == 2 and "no entry or receipt" in cli.stderr


@mutation("receipt-signature-byte-flipped")
def _sig_flip(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    ri = _receipt_index(rows)
    sig = bytearray(rows[ri].entry.signature)
    sig[-5] ^= 0x01  # inside the 64-byte Ed25519 signature at the end of the SSHSIG blob
    rows[ri].entry = dataclasses.replace(rows[ri].entry, signature=bytes(sig))
    write_rows(s.root, rows, resign_from=len(rows))
    return s


@mutation("entry-backdated")
def _backdated(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.DETERMINISTIC])
    rows[i].entry = dataclasses.replace(rows[i].entry, time=rows[i - 1].entry.time - 3600)
    write_rows(s.root, rows, resign_from=i)
    return s


def _claim_pass(
    tmp: Path,
    tier: r.Tier = r.Tier.DETERMINISTIC,
    forge_evidence: Callable[[Sample, r.TierRecord], tuple[r.EvidenceRef, ...]] | None = None,
    command: str | None = None,
    check_extra: str = "",
) -> Sample:
    """A failing record of ``tier`` re-signed by its own key as a pass (its evidence kept,
    or forged), and the receipt re-sealed as eligible: only re-derivation can catch it."""
    verdicts = {t: r.Verdict.PASS for t in r.LADDER}
    verdicts[tier] = r.Verdict.FAIL
    s = build_sample(tmp, verdicts=verdicts, command=command, check_extra=check_extra)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[tier])
    rec = _record_body(rows, i)
    evidence = forge_evidence(s, rec) if forge_evidence else rec.evidence
    forged = dataclasses.replace(
        rec, verdict=r.Verdict.PASS, evidence=evidence, evidence_hash=r.evidence_list_hash(evidence)
    )
    _replace_body(rows, i, forged)
    _retarget_receipt(rows, s.records[tier], r.tier_record_hash(forged))
    ri = _receipt_index(rows)
    s.receipt = _replace_body(rows, ri, dataclasses.replace(r.decode_receipt(rows[ri].body), merge_eligible=True))
    write_rows(s.root, rows, resign_from=i)
    return s


def _resigned_by(tmp: Path, tier: r.Tier, signer: str) -> Sample:
    """The sample's record of ``tier`` re-signed, unchanged, by ``signer``'s key."""
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[tier])
    rows[i].entry = dataclasses.replace(rows[i].entry, signer=r.fingerprint(SIGNERS[signer].public_key_blob))
    write_rows(s.root, rows, resign_from=i)
    return s


@mutation("deterministic-fail-claimed-pass")
def _claimed_pass(tmp: Path) -> Sample:
    return _claim_pass(tmp)


@mutation("check-command-swapped")
def _echo_pass(tmp: Path) -> Sample:
    def forge(s: Sample, rec: r.TierRecord) -> tuple[r.EvidenceRef, ...]:
        out = []
        for ref in rec.evidence:
            if ref.check_id == "check:tests":
                doc = json.loads(_blob(s, ref.digest).read_bytes())
                doc["declared"]["command"] = doc["facts"]["command"] = ["echo", "PASS"]
                doc["facts"]["exit_code"] = 0
                ref = _stored_as(s, ref, doc)
            out.append(ref)
        return tuple(out)

    return _claim_pass(tmp, forge_evidence=forge)


@mutation("check-attempt-dropped")
def _attempt_dropped(tmp: Path) -> Sample:
    # A check run three times failed once; the record keeps the two passing attempts only.
    def forge(s: Sample, rec: r.TierRecord) -> tuple[r.EvidenceRef, ...]:
        dropped = tuple(ref for ref in rec.evidence if not ref.check_id.startswith("check:tests#2"))
        assert len(dropped) < len(rec.evidence)
        return dropped

    return _claim_pass(tmp, forge_evidence=forge, command=flaky_command(tmp / "runs"), check_extra="runs = 3\n")


@mutation("check-attempt-result-twice")
def _attempt_twice(tmp: Path) -> Sample:
    # A check run three times failed its second attempt; the record gains a passing result
    # under that attempt's name, beside the failing one: a reader that took the last would pass.
    def forge(s: Sample, rec: r.TierRecord) -> tuple[r.EvidenceRef, ...]:
        failing = next(ref for ref in rec.evidence if ref.check_id == "check:tests#2")
        doc = json.loads(_blob(s, failing.digest).read_bytes())
        assert doc["attempt"] == 2 and doc["facts"]["exit_code"] == 1
        doc["facts"]["exit_code"] = 0
        return (*rec.evidence, _stored_as(s, failing, doc))

    return _claim_pass(tmp, forge_evidence=forge, command=flaky_command(tmp / "runs"), check_extra="runs = 3\n")


@mutation("provenance-blob-altered")
def _provenance_altered(tmp: Path) -> Sample:
    # The agent's record, as stored, changed after the check read it: its model renamed.
    s = build_sample(
        tmp,
        check_extra='\n[[checks]]\nid = "declared"\ntype = "attribution_declared"\n',
        provenance=Path(__file__).parent / "vectors" / "provenance" / "agent-trace.json",
    )
    rec = _record_body(read_rows(s.root), find_row(read_rows(s.root), s.records[r.Tier.DETERMINISTIC]))
    ref = next(e for e in rec.evidence if e.check_id == "check:declared:provenance:0")
    blob = _blob(s, ref.digest)
    os.chmod(blob, 0o644)
    blob.write_bytes(blob.read_bytes().replace(b"anthropic/claude", b"anthropic/clause"))
    return s


def _forged_evidence(s: Sample, edit: Callable[[str, dict[str, Any]], bool]) -> Sample:
    """The runner re-signs its deterministic record of ``s`` with the JSON evidence that
    ``edit`` changed (it returns whether it changed the document of that check id)."""
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.DETERMINISTIC])
    rec = _record_body(rows, i)
    out = []
    for ref in rec.evidence:
        if ref.media_type in (r.SNAPSHOT_MEDIA_TYPE, r.CHECK_RESULT_MEDIA_TYPE):
            doc = json.loads(_blob(s, ref.digest).read_bytes())
            if edit(ref.check_id, doc):
                ref = _stored_as(s, ref, doc)
        out.append(ref)
    evidence = tuple(out)
    assert evidence != rec.evidence, "nothing was edited"
    forged = dataclasses.replace(rec, evidence=evidence, evidence_hash=r.evidence_list_hash(evidence))
    _replace_body(rows, i, forged)
    s.receipt = _retarget_receipt(rows, s.records[r.Tier.DETERMINISTIC], r.tier_record_hash(forged))
    write_rows(s.root, rows, resign_from=i)
    return s


@mutation("clean-room-file-left-unlisted")
def _room_unlisted(tmp: Path) -> Sample:
    # The runner re-signs its own record with a clean room that no longer accounts for a
    # changed file the contract's test_files match.
    def edit(check_id: str, doc: dict[str, Any]) -> bool:
        if check_id != "snapshot":
            return False
        assert doc["clean_room"]["kept_new"] == ["app.py"]
        doc["clean_room"]["kept_new"] = []
        return True

    return _forged_evidence(build_sample(tmp, clean_room=True, top='test_files = ["app.py"]\n'), edit)


def _room_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], bool]:
    def edit(check_id: str, doc: dict[str, Any]) -> bool:
        if check_id == "snapshot":
            change(doc["clean_room"])
        return check_id == "snapshot"

    return edit


def _report_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], bool]:
    def edit(check_id: str, doc: dict[str, Any]) -> bool:
        if check_id == "check:tests":
            change(doc["facts"])
        return check_id == "check:tests"

    return edit


@mutation("sandbox-missing")
def _sandbox_missing(tmp: Path) -> Sample:
    # A sandboxed contract's record re-signed as if its commands had run without one.
    return _forged_evidence(build_sample(tmp, sandboxed=True), _room_edit(lambda room: room.pop("sandbox")))


@mutation("control-passed")
def _control_passed(tmp: Path) -> Sample:
    # The report re-written so that the control test passed: a harness that cannot fail.
    def change(facts: dict[str, Any]) -> None:
        facts["report"]["tests"][facts["control"]["id"]] = "passed"

    return _forged_evidence(build_sample(tmp, sandboxed=True), _report_edit(change))


@mutation("restored-harness-file-left-unlisted")
def _harness_unlisted(tmp: Path) -> Sample:
    # The candidate's own conftest.py is no longer listed as removed from the room.
    def change(room: dict[str, Any]) -> None:
        assert room["removed"] == ["conftest.py"]
        room["removed"] = []

    return _forged_evidence(build_sample(tmp, sandboxed=True), _room_edit(change))


@mutation("restored-test-skipped")
def _restored_test_skipped(tmp: Path) -> Sample:
    # A test the base's test files define, reported skipped (as a skip marker would have it).
    def change(facts: dict[str, Any]) -> None:
        assert facts["expected"] == ["tests/test_app.py::test_app"]
        facts["report"]["tests"]["tests/test_app.py::test_app"] = "skipped"

    return _forged_evidence(build_sample(tmp, sandboxed=True), _report_edit(change))


def _stored_as(s: Sample, ref: r.EvidenceRef, doc: dict[str, Any]) -> r.EvidenceRef:
    """``doc`` stored as the runner stores JSON evidence, named as ``ref`` was."""
    data = json.dumps(doc, sort_keys=True, indent=1).encode()
    digest = r.content_digest(data)
    _blob(s, digest).parent.mkdir(exist_ok=True)
    _blob(s, digest).write_bytes(data)
    return r.EvidenceRef(ref.check_id, digest, len(data), ref.media_type)


def _blob(s: Sample, digest: r.Digest) -> Path:
    return s.root / "blobs" / digest.hex[:2] / digest.hex


def _splice_revision(tmp: Path, revise: Callable[[str], str]) -> Sample:
    """A contract revision made from the task's first contract text, signed by the
    deterministic key (not admin) and spliced into the chain just before the receipt."""
    s = build_sample(tmp)
    rows = read_rows(s.root)
    ci = next(i for i, row in enumerate(rows) if row.entry.kind is r.EntryKind.CONTRACT)
    old = r.decode_as(r.ContractRevision, rows[ci].body)
    revision = r.ContractRevision(TASK, revise(old.contract.decode()).encode(), old.config_hash)
    assert r.weakenings(old.parse(), revision.parse())
    ri = _receipt_index(rows)
    rows.insert(ri, Row(rows[ci].entry, r.encode_body(revision)))
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("contract-weakened-without-admin")
def _weakened(tmp: Path) -> Sample:
    def weaker(text: str) -> str:
        return text[: text.index("[[checks]]")] + '[[checks]]\nid = "exists"\ntype = "path_exists"\npath = "app.py"\n'

    return _splice_revision(tmp, weaker)


@mutation("contract-revision-empty-reason")
def _empty_reason(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    ci = next(i for i, row in enumerate(rows) if row.entry.kind is r.EntryKind.CONTRACT)
    fields = dict(r.canonical_loads(rows[ci].body))
    fields["reason"] = ""  # absent means none recorded; empty is a second encoding of that
    rows[ci].body = r.canonical_dumps(fields)
    write_rows(s.root, rows, resign_from=ci)
    return s


@mutation("receipt-drops-contract-tier")
def _drops_tier(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    ri = _receipt_index(rows)
    rec = r.decode_receipt(rows[ri].body)
    s.receipt = _replace_body(
        rows,
        ri,
        dataclasses.replace(
            rec,
            required=(r.Tier.DETERMINISTIC, r.Tier.JUDGE),
            entries=tuple(e for e in rec.entries if e.tier is not r.Tier.HUMAN),
        ),
    )
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("judge-reply-says-retry")
def _judge_retry(tmp: Path) -> Sample:
    s = build_sample(tmp, judge=judge_table("retry", "0.5", max_retries=0))
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.JUDGE])
    rec = _record_body(rows, i)
    assert rec.verdict is r.Verdict.FAIL
    forged = dataclasses.replace(rec, verdict=r.Verdict.PASS, confidence_bp=9000)
    _replace_body(rows, i, forged)
    _retarget_receipt(rows, s.records[r.Tier.JUDGE], r.tier_record_hash(forged))
    ri = _receipt_index(rows)
    s.receipt = _replace_body(rows, ri, dataclasses.replace(r.decode_receipt(rows[ri].body), merge_eligible=True))
    write_rows(s.root, rows, resign_from=i)
    return s


@mutation("judge-review-resigned-as-fail")
def _judge_review_as_fail(tmp: Path) -> Sample:
    s = build_sample(tmp, judge=judge_table("accept", "0.5"))  # under the threshold: review
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.JUDGE])
    rec = _record_body(rows, i)
    assert rec.verdict is r.Verdict.REVIEW
    forged = dataclasses.replace(rec, verdict=r.Verdict.FAIL)  # not-pass either way: only the exact verdict differs
    _replace_body(rows, i, forged)
    s.receipt = _retarget_receipt(rows, s.records[r.Tier.JUDGE], r.tier_record_hash(forged))
    write_rows(s.root, rows, resign_from=i)
    return s


@mutation("human-reject-dropped")
def _reject_dropped(tmp: Path) -> Sample:
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    sign_decision(
        ledger,
        s.repo,
        s.contract,
        _record_body(read_rows(s.root), find_row(read_rows(s.root), s.records[r.Tier.HUMAN])).input_hash,
        SIGNERS["bob"],
        approve=False,
        note="not convinced",
        task=TASK,
    )
    ledger.close()
    rows = read_rows(s.root)
    old = rows[_receipt_index(rows)]
    receipt = r.decode_receipt(old.body)
    # Dated with the reject, not the old receipt: when the reject lands in a later second, the
    # copy would otherwise also be caught for time running backwards, which is not this attack.
    rows.append(
        Row(
            dataclasses.replace(old.entry, time=rows[-1].entry.time),
            r.encode_body(dataclasses.replace(receipt, created=receipt.created + 1)),
        )
    )
    s.receipt = str(r.body_hash(r.EntryKind.RECEIPT, rows[-1].body))
    write_rows(s.root, rows, resign_from=len(rows) - 1)
    return s


@mutation("receipt-backdated")
def _backdated_receipt(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    ri = _receipt_index(rows)
    receipt = r.decode_receipt(rows[ri].body)
    s.receipt = _replace_body(rows, ri, dataclasses.replace(receipt, created=receipt.created - 86400))
    write_rows(s.root, rows, resign_from=ri)
    return s


@mutation("record-postdated-to-look-fresh")
def _postdated(tmp: Path) -> Sample:
    s = build_sample(tmp)
    rows = read_rows(s.root)
    i = find_row(rows, s.records[r.Tier.HUMAN])
    rec = _record_body(rows, i)
    forged = dataclasses.replace(rec, created=rec.created + 3600)
    _replace_body(rows, i, forged)
    s.receipt = _retarget_receipt(rows, s.records[r.Tier.HUMAN], r.tier_record_hash(forged))
    write_rows(s.root, rows, resign_from=i)
    return s


@mutation("task-index-column-forged")
def _task_column(tmp: Path) -> Sample:
    s = build_sample(tmp)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute(
            "UPDATE entries SET task = 'OTHER-9' WHERE body_hash = ?",
            (r.Digest.parse(str(s.records[r.Tier.DETERMINISTIC])).value,),
        )
    conn.close()
    return s


@mutation("human-slot-out-of-order")
def _human_slot_reversed(tmp: Path) -> Sample:
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    candidate = _record_body(read_rows(s.root), find_row(read_rows(s.root), s.records[r.Tier.HUMAN])).input_hash
    sign_decision(ledger, s.repo, s.contract, candidate, SIGNERS["bob"], note="also fine", task=TASK)
    sealed = seal_receipt(ledger, task_id=TASK, signer=SIGNERS["sealer"], input_hash=candidate)[1]
    ledger.close()
    rows = read_rows(s.root)
    i = _receipt_index(rows)
    # The attacker lists the same two approvals in the other order (the constructor refuses
    # that order, so the CBOR is edited directly) and re-signs with the seal key.
    body = r.canonical_loads(rows[i].body)
    human = next(e for e in body["entries"] if e["tier"] == "human")
    assert len(human["records"]) == 2
    human["records"].reverse()
    rows[i].body = r.canonical_dumps(body)
    write_rows(s.root, rows, resign_from=i)
    s.receipt = str(r.body_hash(r.EntryKind.RECEIPT, rows[i].body))
    assert s.receipt != str(sealed.body_hash)
    return s


@mutation("human-pass-with-reject-decision")
def _reject_claimed_approval(tmp: Path) -> Sample:
    # alice's key turns her signed reject into a pass; the decision document still says reject.
    return _claim_pass(tmp, r.Tier.HUMAN)


@mutation("approval-names-another-approver")
def _borrowed_approval(tmp: Path) -> Sample:
    # bob signs alice's approval as his own: the record is unchanged, its document names alice.
    return _resigned_by(tmp, r.Tier.HUMAN, "bob")


@mutation("judge-replaced-without-admin")
def _judge_replaced(tmp: Path) -> Sample:
    def yes_man(text: str) -> str:
        # Every check unchanged; only the judge is swapped for a command that always accepts.
        return text[: text.index("[judge]")] + judge_table("accept", "1.0") + text[text.index("[[checks]]") :]

    return _splice_revision(tmp, yes_man)


@pytest.mark.parametrize(
    "name,code", [("evidence-blob-altered", "evidence-altered"), ("evidence-blob-missing", "evidence-missing")]
)
def test_a_full_audit_reads_every_evidence_blob(tmp_path: Path, name: str, code: str) -> None:
    # issue 11, item 3: `verify --chain` audits the evidence too, or says plainly that it did not.
    s = MUTATIONS[name](tmp_path)
    audit = verify_chain(LedgerSource.open(s.root), TrustRoot(frozenset({ADMIN_ID}), "test"), workers=1)
    assert code in [d.code for d in audit.defects] and audit.evidence_blobs
    cli = run_cli("--dir", str(s.root), "verify", "--chain", "--trust", ADMIN_ID)
    assert cli.returncode == 1 and code in cli.stdout and "blob(s) re-hashed" in cli.stdout
    skipped = run_cli("--dir", str(s.root), "verify", "--chain", "--trust", ADMIN_ID, "--skip-evidence")
    assert skipped.returncode == 0 and "NOT CHECKED" in skipped.stdout
