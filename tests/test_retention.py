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
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    for method in ("auto", "walk"):
        result = verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, method=method)
        assert result.ok and result.derived_eligible, (method, result.defects)
        assert result.method == "walk"
        said = [w for w in result.warnings if "removed under the retention policy of entry" in w]
        assert len(said) >= len(prunable), said  # one per evidence item (identical outputs share a blob)
    # Which policy is newest, no signed pointer says: only a walk proves it, so proof refuses
    # (issue 22: an index column that hides the newest policy must not excuse a held item).
    with pytest.raises(CannotVerify, match="only by walking"):
        verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, method="proof")
    chain = verify_chain(LedgerSource.open(s.root), TRUST)
    assert chain.ok and chain.warnings and all("not checked" in w for w in chain.warnings)


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
