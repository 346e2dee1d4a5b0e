"""Receipts verified by proof on a ledger: only the receipt's task and keyring
entries are read, each proven into the newest signed checkpoint, and the result is the
walk's wherever the receipt's own history is concerned."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import test_tamper

import receipts as r
from conftest import ADMIN_ID, SIGNERS, Sample, build_sample, other_records, read_rows, run_cli, write_rows
from ledger import Ledger
from verify import CannotVerify, LedgerSource, Result, Transparency, TrustRoot, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")


def _verify(s: Sample, method: str, **policy: str) -> Result:
    with LedgerSource.open(s.root) as source:
        return verify_receipt(source, s.receipt, TRUST, Transparency(**policy), method)  # type: ignore[arg-type]


def _other_task(root: Path, n: int) -> None:
    """n entries of another task, signed and appended as the writer would."""
    ledger = Ledger.open(root)
    ledger.append_many(other_records("OTHER-1", n, r.Verdict.FAIL, distinct=False), SIGNERS["ci"])
    ledger.close()


def _checkpoint(root: Path) -> None:
    ledger = Ledger.open(root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()


def _resign_tree_and_checkpoint(root: Path) -> None:
    """What an attacker holding every key does after rewriting rows: rebuild the stored
    tree from the rows as they now are and sign a fresh checkpoint over it."""
    conn = sqlite3.connect(root / "ledger.db")
    with conn:
        leaves = [r.leaf_hash(bytes(e)) for (e,) in conn.execute("SELECT entry FROM entries ORDER BY seq")]
        tree = r.MemoryTree(leaves)
        (old_note,) = conn.execute("SELECT note FROM checkpoints ORDER BY size DESC LIMIT 1").fetchone()
        conn.execute("DELETE FROM tree")
        conn.execute("DELETE FROM checkpoints")
        conn.executemany(
            "INSERT INTO tree (level, idx, hash) VALUES (?, ?, ?)",
            [(level, i, h) for level, row in enumerate(tree.levels) for i, h in enumerate(row)],
        )
        # The log's name, as the checkpoint being replaced says it (the genesis body may be the attack).
        origin = old_note.split("\n", 1)[0]
        text = r.checkpoint_text(r.Checkpoint(origin, len(leaves), r.tree_root(tree, len(leaves))))
        note = r.SignedNote(text, (r.sign_note(text, origin, SIGNERS["sealer"]),))
        conn.execute("INSERT INTO checkpoints (size, note) VALUES (?, ?)", (len(leaves), note.encode()))
    conn.close()


def test_a_covered_receipt_is_checked_by_proof_with_the_walks_result(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _other_task(s.root, 300)
    _checkpoint(s.root)
    proof, walk = _verify(s, "auto"), _verify(s, "walk")
    assert proof.ok and walk.ok, (proof.defects, walk.defects)
    assert (proof.method, walk.method) == ("proof", "walk")
    # The same facts about the receipt, from a fraction of the entries.
    assert proof.tiers == walk.tiers and proof.derived_eligible is walk.derived_eligible is True
    assert (proof.task_id, proof.candidate, proof.sealed_at) == (walk.task_id, walk.candidate, walk.sealed_at)
    assert proof.checkpoint == walk.checkpoint
    # Every entry of the sample is on the receipt's task or keyring chain; the other task's
    # entries after it (and the checkpoint's last one) are all that separates the two.
    assert proof.entries_checked == walk.entries_checked
    assert any("the ledger's other 299 entries were not read" in n for n in proof.notes), proof.notes


def test_a_ledger_of_nothing_but_the_receipts_chains_says_so_not_zero_entries(tmp_path: Path) -> None:
    # The demo's own verify said "the ledger's other 0 entries were not read".
    s = build_sample(tmp_path)
    _checkpoint(s.root)
    proof = _verify(s, "proof")
    assert proof.ok, proof.defects
    said = [n for n in proof.notes if n.startswith("checked by proof:")]
    assert len(said) == 1 and said[0].endswith("; the ledger holds no other entry"), proof.notes
    _other_task(s.root, 1)
    said = [n for n in _verify(s, "proof").notes if n.startswith("checked by proof:")]
    assert "the ledger's other entry was not read (`ledger verify --chain` audits it)" in said[0], said


def test_entries_it_does_not_depend_on_are_not_read(tmp_path: Path) -> None:
    # The price of not reading them, stated in docs/format.md §8: damage to another task's
    # entry is the chain audit's to find, not this receipt's.
    s = build_sample(tmp_path)
    _other_task(s.root, 5)
    _checkpoint(s.root)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        seq, body = conn.execute("SELECT seq, body FROM entries WHERE task = 'OTHER-1' LIMIT 1").fetchone()
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (body[:-1] + bytes([body[-1] ^ 1]), seq))
    conn.close()
    assert _verify(s, "proof").ok
    chain = run_cli("--dir", str(s.root), "verify", "--chain", "--trust", ADMIN_ID)
    assert chain.returncode == 1 and "body-hash" in chain.stdout


def test_a_wrong_stored_node_fails_the_proof_not_the_check(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _other_task(s.root, 40)
    _checkpoint(s.root)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("UPDATE tree SET hash = ? WHERE level = 3 AND idx = 0", (bytes(32),))
    conn.close()
    codes = [d.code for d in _verify(s, "proof").defects]
    assert codes and set(codes) == {"inclusion"}


def test_without_a_covering_checkpoint_auto_walks_and_proof_refuses(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    auto = _verify(s, "auto")
    assert auto.ok and auto.method == "walk"
    assert any("not checked by proof (no signed checkpoint covers entry" in n for n in auto.notes)
    with pytest.raises(CannotVerify, match="cannot verify by proof"):
        _verify(s, "proof")
    cli = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--method", "proof")
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1 and "Traceback" not in cli.stderr
    walked = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--json")
    assert walked.returncode == 0 and json.loads(walked.stdout)["method"] == "walk"


def test_a_kept_checkpoint_is_proven_consistent_by_proof(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _other_task(s.root, 5)
    _checkpoint(s.root)
    kept = Ledger.open(s.root).checkpoints()[-1][1].encode()
    _other_task(s.root, 9)
    _checkpoint(s.root)
    assert _verify(s, "proof", since=kept).ok
    # An entry the receipt does not depend on, rewritten before the kept checkpoint, with
    # the tree rebuilt and the checkpoint re-signed by an attacker holding every key.
    rows = read_rows(s.root)
    i = next(i for i, row in enumerate(rows) if row.entry.kind is r.EntryKind.TIER_RECORD and i > 12)
    rows[i].entry = dataclasses.replace(rows[i].entry, time=rows[i].entry.time + 1)
    write_rows(s.root, rows, resign_from=i)
    _resign_tree_and_checkpoint(s.root)
    assert _verify(s, "proof").ok  # the receipt's own history is untouched...
    codes = [d.code for d in _verify(s, "proof", since=kept).defects]
    assert codes == ["history-rewritten"]  # ...but the log is not the one you kept


@pytest.mark.parametrize("resigned", [False, True], ids=["checkpoint-before-tamper", "checkpoint-re-signed"])
@pytest.mark.parametrize("case", test_tamper.VECTORS, ids=[c["name"] for c in test_tamper.VECTORS])
def test_every_tamper_vector_is_rejected_by_proof(
    case: dict[str, Any],
    resigned: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sample's every entry lies on the receipt's task or keyring chain, so checking by
    # proof must reject each attack, whether or not the attacker also re-signed the checkpoint.
    def checkpointed(tmp: Path, *args: object, **kwargs: object) -> Sample:
        sample = build_sample(tmp, *args, **kwargs)  # type: ignore[arg-type]
        _checkpoint(sample.root)
        return sample

    monkeypatch.setattr(test_tamper, "build_sample", checkpointed)
    s = test_tamper.MUTATIONS[case["name"]](tmp_path)
    if resigned:
        _resign_tree_and_checkpoint(s.root)
    try:
        result = _verify(s, "proof")
    except CannotVerify as exc:
        # Rows inserted before the receipt moved it past the checkpoint signed before them (or a
        # deleted row left the re-signed tree too short to reach it): nothing proves the
        # receipt, so checking by proof refuses (and `auto` walks the chain).
        assert "no signed checkpoint covers" in str(exc), (case["name"], exc)
        assert not resigned or case["name"] == "chain-entry-deleted"
        return
    assert result.method == "proof" and not result.ok, case["name"]
    if resigned:
        codes = {d.code for d in result.defects}
        # Where the walk sees a gap or a broken link, checking by proof sees a broken pointer or
        # misplaced entry; and a record that no longer decodes, or that belongs to another
        # task, is on no chain that proof reads, so the receipt's reference to it is what fails.
        named = set(case["defects"]) - {"chain-gap", "chain-link"}
        if case["name"] in ("non-canonical-record-encoding", "record-of-another-task-spliced"):
            named = {"record-missing"}
        if case["name"] == "contract-revision-empty-reason":  # the contract its records name is not read
            named = {"config-unregistered"}
        assert codes and named <= codes, (case["name"], result.defects)
