"""Retention that keeps the chain verifiable: an admin's policy in the chain,
`prune` deleting only the evidence it lets go, and verify naming each removed item
instead of failing, while a blob missing without such a policy still fails."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
import zipfile
from pathlib import Path

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, Row, Sample, build_sample, read_rows, run_cli, write_rows
from ledger import InputError, Ledger, export_bundle, frozen_clock, prune, set_retention
from verify import BundleSource, CannotVerify, LedgerSource, TrustRoot, verify_chain, verify_receipt
from verify.schema import blob_path

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
DAY = 86400


def _old_sample(tmp: Path) -> Sample:
    """The sample ledger, its records made ten days ago."""
    with frozen_clock(time.time() - 10 * DAY):
        return build_sample(tmp)


def _kept_and_prunable(root: Path) -> tuple[list[r.Digest], list[r.Digest]]:
    ledger = Ledger.open(root)
    try:
        refs = [(row.record, ref) for row in ledger.records_for("TASK-1") for ref in row.record.evidence]
    finally:
        ledger.close()
    inputs = {ref.digest for rec, ref in refs if r.is_derivation_input(rec.tier, ref)}
    return sorted(inputs, key=lambda d: d.value), sorted(
        {ref.digest for _, ref in refs} - inputs, key=lambda d: d.value
    )


def test_prune_removes_only_what_the_policy_lets_go_and_the_receipt_still_verifies(tmp_path: Path) -> None:
    s = _old_sample(tmp_path)
    kept, prunable = _kept_and_prunable(s.root)
    assert prunable, "the sample's raw outputs and diff"
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])  # over the receipt, before any policy
    with pytest.raises(InputError, match="no retention policy"):
        prune(ledger)
    with pytest.raises(InputError, match="refused"):
        set_retention(ledger, SIGNERS["ci"], 7 * DAY)  # only an admin may sign a policy
    set_retention(ledger, SIGNERS["admin"], 7 * DAY)
    planned = prune(ledger, dry_run=True)
    assert sorted(d for _, d, _ in planned.removed) == sorted(str(d) for d in prunable)
    assert all(blob_path(s.root, d).exists() for d in prunable)  # a dry run removes nothing
    done = prune(ledger)
    assert done.removed == planned.removed and done.bytes > 0
    assert not any(blob_path(s.root, d).exists() for d in prunable)
    assert all(blob_path(s.root, d).exists() for d in kept)  # every verdict's documents stay
    # The policy is newer than every checkpoint: no signed line names it, so only a walk
    # proves it is the newest, and proof refuses (issue 22: an index column that hides the
    # newest policy must not excuse a held item).
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST)
    assert result.ok and result.method == "walk", result.defects
    assert any("retention policy the newest checkpoint does not name" in n for n in result.notes)
    with pytest.raises(CannotVerify, match="does not name"):
        verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, method="proof")
    # A checkpoint over it names it in its retention line: proof excuses by that entry.
    note = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    named = r.named_retention(r.parse_checkpoint(note.text).extensions)
    assert named is not None and named.seq == _seq_of_kind(s.root, "retention")
    for method, used in (("auto", "proof"), ("proof", "proof"), ("walk", "walk")):
        result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, method=method)
        assert result.ok and result.derived_eligible, (method, result.defects)
        assert result.method == used
        said = [w for w in result.warnings if "removed under the retention policy of entry" in w]
        assert len(said) >= len(prunable), said  # one per evidence item (identical outputs share a blob)
    chain = verify_chain(LedgerSource.open(s.root), TRUST)
    assert chain.ok and chain.warnings and all("not checked" in w for w in chain.warnings)


def _seq_of_kind(root: Path, kind: str) -> int:
    conn = sqlite3.connect(root / "ledger.db")
    try:
        return int(conn.execute("SELECT max(seq) FROM entries WHERE kind = ?", (kind,)).fetchone()[0])
    finally:
        conn.close()


def test_evidence_still_young_or_held_is_not_pruned_and_its_absence_fails(tmp_path: Path) -> None:
    s = _old_sample(tmp_path)
    _, prunable = _kept_and_prunable(s.root)
    ledger = Ledger.open(s.root)
    set_retention(ledger, SIGNERS["admin"], 30 * DAY)  # ten days old: too young to go
    assert prune(ledger).removed == ()
    set_retention(ledger, SIGNERS["admin"], 7 * DAY, holds=("TASK-1",))  # old enough, but held
    report = prune(ledger)
    assert report.removed == () and report.held == len(prunable)
    ledger.close()
    blob_path(s.root, prunable[0]).unlink()  # gone anyway, by hand
    codes = [d.code for d in verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST).defects]
    assert codes == ["evidence-missing"]


def test_a_policy_not_signed_by_an_admin_excuses_nothing(tmp_path: Path) -> None:
    # A database-level attacker appends a policy signed by a key without the admin role,
    # then deletes a blob: verify does not honour the policy and the chain audit names it.
    s = _old_sample(tmp_path)
    _, prunable = _kept_and_prunable(s.root)
    rows = read_rows(s.root)
    last = rows[-1].entry
    forged = dataclasses.replace(last, kind=r.EntryKind.RETENTION, signer=r.fingerprint(SIGNERS["ci"].public_key_blob))
    rows.append(Row(forged, r.encode_body(r.RetentionPolicy(DAY))))
    write_rows(s.root, rows, resign_from=len(rows) - 1)
    blob_path(s.root, prunable[0]).unlink()
    assert "evidence-missing" in [d.code for d in verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST).defects]
    chain = verify_chain(LedgerSource.open(s.root), TRUST)
    assert {"signer-unauthorized", "evidence-missing"} <= {d.code for d in chain.defects}


def test_a_pruned_receipt_exports_to_a_bundle_that_verifies_and_says_why(tmp_path: Path) -> None:
    s = _old_sample(tmp_path)
    ledger = Ledger.open(s.root)
    set_retention(ledger, SIGNERS["admin"], 7 * DAY)
    prune(ledger)
    ledger.checkpoint(SIGNERS["sealer"])
    manifest = export_bundle(ledger, r.Digest.parse(s.receipt), tmp_path / "b.zip")
    ledger.close()
    assert manifest["redacted"] and all("retention policy" in item["reason"] for item in manifest["redacted"])
    with BundleSource(tmp_path / "b.zip") as source:
        result = verify_receipt(source, s.receipt, TRUST)
    assert result.ok, result.defects
    assert any(
        "removed before export under the ledger's retention policy" in w for w in result.warnings
    )  # named as retention
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        assert "removed under the retention policy" in zf.read("report.html").decode()  # retention, named so


def test_the_cli_sets_the_policy_and_prunes(tmp_path: Path) -> None:
    s = _old_sample(tmp_path)
    keys = tmp_path / "keys"
    from conftest import write_private_key

    write_private_key(keys / "admin", "admin")
    base = ("--dir", str(s.root))
    env = {"RECEIPT_LEDGER_KEYS": str(keys)}
    refused = run_cli(*base, "prune", env=env)
    assert refused.returncode == 2 and "no retention policy" in refused.stderr
    assert run_cli(*base, "retention", "set", "--max-age-days", "7", "--key", "admin", env=env).returncode == 0
    dry = run_cli(*base, "prune", "--dry-run", "--json", env=env)
    assert dry.returncode == 0 and json.loads(dry.stdout)["dry_run"] is True and json.loads(dry.stdout)["removed"]
    real = run_cli(*base, "prune", env=env)
    assert real.returncode == 0 and "removed" in real.stdout
    verified = run_cli(*base, "verify", s.receipt, "--trust", ADMIN_ID)
    assert verified.returncode == 0 and "removed under the retention policy" in verified.stdout
    conn = sqlite3.connect(s.root / "ledger.db")
    assert conn.execute("SELECT count(*) FROM entries WHERE kind = 'retention'").fetchone() == (1,)
    conn.close()


def _resign_newest_checkpoint(root: Path, line: str | None) -> None:
    """A seal-key holder's checkpoint at the newest size whose retention line says ``line``
    (None: no line, as checkpoints signed before the line existed)."""
    conn = sqlite3.connect(root / "ledger.db")
    with conn:
        size, stored = conn.execute("SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1").fetchone()
        cp = r.parse_checkpoint(r.parse_note(stored).text)
        text = r.checkpoint_text(r.Checkpoint(cp.origin, cp.size, cp.root, () if line is None else (line,)))
        note = r.SignedNote(text, (r.sign_note(text, cp.origin, SIGNERS["sealer"]),))
        conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note.encode(), size))
    conn.close()


def _policies_then_hold(tmp: Path) -> tuple[Sample, r.Digest]:
    """A policy that lets TASK-1's raw outputs go, a newer one holding TASK-1, a checkpoint
    over both, and one of those outputs deleted by hand (the hold says it must stay)."""
    s = _old_sample(tmp)
    _, prunable = _kept_and_prunable(s.root)
    ledger = Ledger.open(s.root)
    older = set_retention(ledger, SIGNERS["admin"], 7 * DAY)
    set_retention(ledger, SIGNERS["admin"], 7 * DAY, holds=("TASK-1",))
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    blob_path(s.root, prunable[0]).unlink()
    return s, older.entry_hash


def test_a_checkpoint_naming_an_older_policy_is_caught_by_the_audit_and_never_excuses(tmp_path: Path) -> None:
    # A seal-key holder names the older policy (no hold) in the checkpoint: by proof the
    # ledger's newest policy differs, so the receipt is walked and the held item is missing;
    # the chain audit (and so an auditing witness) names the lie.
    s, older = _policies_then_hold(tmp_path)
    named = r.NamedRetention(_seq_of_kind(s.root, "retention") - 1, older)
    _resign_newest_checkpoint(s.root, r.retention_extension(named))
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST)
    assert not result.ok and "evidence-missing" in [d.code for d in result.defects], result.defects
    chain = verify_chain(LedgerSource.open(s.root), TRUST)
    assert "checkpoint-retention" in [d.code for d in chain.defects], chain.defects
    # A line that names no policy at all is the same lie.
    _resign_newest_checkpoint(s.root, r.retention_extension(r.NamedRetention(None, None)))
    assert "checkpoint-retention" in [d.code for d in verify_chain(LedgerSource.open(s.root), TRUST).defects]


def test_a_hold_hidden_from_the_kind_index_after_a_checkpoint_named_it_still_fails(tmp_path: Path) -> None:
    # The checkpoint names the hold; the store's kind column hides it: the newest policy is
    # still found from the signed line, and the held item's absence fails.
    s, _ = _policies_then_hold(tmp_path)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("UPDATE entries SET kind = 'event' WHERE seq = ?", (_seq_of_kind(s.root, "retention"),))
    conn.close()
    codes = [d.code for d in verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST).defects]
    assert "evidence-missing" in codes, codes


@pytest.mark.parametrize(
    "line",
    ["receipt-ledger/retention 3", "receipt-ledger/retention 03 blake3:" + "0" * 64, "receipt-ledger/retention 2 x"],
)
def test_a_malformed_retention_line_is_a_defect_by_proof_and_in_the_audit(tmp_path: Path, line: str) -> None:
    s = _old_sample(tmp_path)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    _resign_newest_checkpoint(s.root, line)
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, method="proof")
    assert "checkpoint-retention" in [d.code for d in result.defects], result.defects
    assert "checkpoint-retention" in [d.code for d in verify_chain(LedgerSource.open(s.root), TRUST).defects]


def test_a_retention_line_naming_an_entry_that_is_no_policy_is_a_defect_by_proof(tmp_path: Path) -> None:
    s = _old_sample(tmp_path)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    receipt = next(row for row in read_rows(s.root) if str(row.entry.body_hash) == s.receipt)
    named = r.NamedRetention(receipt.entry.seq, r.entry_hash(r.encode_entry(receipt.entry)))
    _resign_newest_checkpoint(s.root, r.retention_extension(named))
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, method="proof")
    assert "checkpoint-retention" in [d.code for d in result.defects], result.defects


def test_the_writer_names_the_newest_policy_from_signed_bytes_across_checkpoints(tmp_path: Path) -> None:
    s = _old_sample(tmp_path)
    ledger = Ledger.open(s.root)
    first = ledger.checkpoint(SIGNERS["sealer"])
    assert r.named_retention(r.parse_checkpoint(first.text).extensions) == r.NamedRetention(None, None)
    policy = set_retention(ledger, SIGNERS["admin"], 7 * DAY)
    want = r.NamedRetention(policy.seq, policy.entry_hash)
    ledger.append(r.KeyAdd(r.KeySpec("extra", (r.Role.HUMAN,), _fresh_key())), SIGNERS["admin"])
    second = ledger.checkpoint(SIGNERS["sealer"])
    assert r.named_retention(r.parse_checkpoint(second.text).extensions) == want
    # Later checkpoints carry it on from the previous line; a policy signed by no admin never counts.
    ledger.append(r.KeyAdd(r.KeySpec("more", (r.Role.HUMAN,), _fresh_key())), SIGNERS["admin"])
    third = ledger.checkpoint(SIGNERS["sealer"])
    assert r.named_retention(r.parse_checkpoint(third.text).extensions) == want
    ledger.close()
    # A previous checkpoint without the line (signed before it existed): every entry is read again.
    _resign_newest_checkpoint(s.root, None)
    ledger = Ledger.open(s.root)
    ledger.append(r.KeyAdd(r.KeySpec("last", (r.Role.HUMAN,), _fresh_key())), SIGNERS["admin"])
    fourth = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    assert r.named_retention(r.parse_checkpoint(fourth.text).extensions) == want
    assert verify_chain(LedgerSource.open(s.root), TRUST).ok


def _fresh_key() -> bytes:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return r.Ed25519Signer(Ed25519PrivateKey.generate()).public_key_blob


def test_a_hold_after_the_newest_checkpoint_hidden_from_the_kind_index_still_fails(tmp_path: Path) -> None:
    # No checkpoint names the hold yet and its kind column lies: the entries after the newest
    # checkpoint are read by their own bytes, so the hold is found and the item fails.
    s = _old_sample(tmp_path)
    _, prunable = _kept_and_prunable(s.root)
    ledger = Ledger.open(s.root)
    set_retention(ledger, SIGNERS["admin"], 7 * DAY)
    ledger.checkpoint(SIGNERS["sealer"])
    hold = set_retention(ledger, SIGNERS["admin"], 7 * DAY, holds=("TASK-1",))
    ledger.close()
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("UPDATE entries SET kind = 'event' WHERE seq = ?", (hold.seq,))
    conn.close()
    blob_path(s.root, prunable[0]).unlink()
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST)
    assert "evidence-missing" in [d.code for d in result.defects], result.defects
