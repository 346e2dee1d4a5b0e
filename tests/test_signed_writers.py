"""Writers decide from signed data only: the sealer, the approver and
prune read a task's entries, the keyring and the retention policy through the chain's signed
back-pointers and the rows' own bytes; an index column that disagrees stops them, naming
the row, and nothing is written."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import receipts as r
from conftest import SIGNERS, build_sample, cli_repo_with_lower_tiers, filler_record, run_cli
from ledger import Ledger, StoreError, frozen_clock, prune, set_retention

DAY = 86400


def _sql(root: Path, query: str, *args: object) -> None:
    conn = sqlite3.connect(root / "ledger.db")
    with conn:
        conn.execute(query, args)
    conn.close()


def _seq_of(root: Path, kind: str) -> int:
    conn = sqlite3.connect(root / "ledger.db")
    (seq,) = conn.execute("SELECT max(seq) FROM entries WHERE kind = ?", (kind,)).fetchone()
    conn.close()
    return int(seq)


def _refused(res: object, seq: int) -> None:
    assert getattr(res, "returncode", None) == 2, res
    err = getattr(res, "stderr", "")
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith("ledger: error: entry %d: the ledger's index disagrees" % seq), (
        err
    )


def test_a_rejection_hidden_from_the_task_index_stops_the_sealer(tmp_path: Path) -> None:
    """Case 1: `UPDATE entries SET task = NULL` on a reviewer's rejection, then an honest seal."""
    repo, env = cli_repo_with_lower_tiers(tmp_path)
    root = repo / ".ledger"
    assert run_cli("keys", "generate", "sealer", "--role", "seal", cwd=repo, env=env).returncode == 0
    assert run_cli("approve", "TASK-1", "--key", "alice", "--yes", cwd=repo, env=env).returncode == 0
    rejected = run_cli("reject", "TASK-1", "--key", "alice", "--reason", "breaks it", "--yes", cwd=repo, env=env)
    assert rejected.returncode == 0, rejected.stderr
    seq = _seq_of(root, "tier_record")
    _sql(root, "UPDATE entries SET task = NULL WHERE seq = ?", seq)
    before = (root / "ledger.db").read_bytes()
    _refused(run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env), seq)
    _refused(run_cli("status", "TASK-1", cwd=repo, env=env), seq)
    assert run_cli("log", "--task", "TASK-1", cwd=repo, env=env).returncode == 2
    assert (root / "ledger.db").read_bytes() == before  # nothing was written
    # Restored, the same seal records the rejection: the receipt is not eligible.
    _sql(root, "UPDATE entries SET task = 'TASK-1' WHERE seq = ?", seq)
    sealed = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env)
    assert sealed.returncode == 0 and "merge_eligible=false" in sealed.stderr, sealed.stderr


def test_a_rejection_hidden_inside_the_task_chain_is_found_by_its_back_pointers(tmp_path: Path) -> None:
    """Case 1, where the hidden row is not the task's newest: the next entry's signed tprev names it."""
    repo, env = cli_repo_with_lower_tiers(tmp_path)
    root = repo / ".ledger"
    assert run_cli("reject", "TASK-1", "--key", "alice", "--reason", "no", "--yes", cwd=repo, env=env).returncode == 0
    seq = _seq_of(root, "tier_record")
    assert run_cli("judge", "TASK-1", "--key", "judge", cwd=repo, env=env).returncode == 0  # a later task entry
    _sql(root, "UPDATE entries SET task = NULL WHERE seq = ?", seq)
    res = run_cli("status", "TASK-1", cwd=repo, env=env)
    assert res.returncode == 2 and "entry %d" % seq in res.stderr, res.stderr


def test_a_revocation_hidden_from_the_kind_index_stops_the_approver(tmp_path: Path) -> None:
    """Case 2: `UPDATE entries SET kind = 'event'` on a revocation; the revoked key then approves."""
    repo, env = cli_repo_with_lower_tiers(tmp_path)
    root = repo / ".ledger"
    assert run_cli("keys", "revoke", "alice", "--reason", "laptop lost", cwd=repo, env=env).returncode == 0
    seq = _seq_of(root, "key_revoke")
    refused = run_cli("approve", "TASK-1", "--key", "alice", "--yes", cwd=repo, env=env)
    assert refused.returncode == 2 and "revoked" in refused.stderr, refused.stderr  # as it should
    _sql(root, "UPDATE entries SET kind = 'event' WHERE seq = ?", seq)
    _refused(run_cli("approve", "TASK-1", "--key", "alice", "--yes", cwd=repo, env=env), seq)
    # Hidden behind a later entry, the revocation is still named by that entry's ring pointer.
    _sql(root, "UPDATE entries SET kind = 'key_revoke' WHERE seq = ?", seq)
    assert run_cli("judge", "TASK-1", "--key", "judge", cwd=repo, env=env).returncode == 0
    _sql(root, "UPDATE entries SET kind = 'event' WHERE seq = ?", seq)
    _refused(run_cli("approve", "TASK-1", "--key", "alice", "--yes", cwd=repo, env=env), seq)


def test_a_retention_policy_hidden_from_the_kind_index_stops_prune(tmp_path: Path) -> None:
    """Case 3: the newest policy holds TASK-1; hiding its kind column must not let prune
    delete under the older policy."""
    with frozen_clock(time.time() - 10 * DAY):
        s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    set_retention(ledger, SIGNERS["admin"], 7 * DAY)
    set_retention(ledger, SIGNERS["admin"], 7 * DAY, holds=("TASK-1",))
    assert prune(ledger, dry_run=True).removed == ()  # held
    ledger.close()
    seq = _seq_of(s.root, "retention")
    _sql(s.root, "UPDATE entries SET kind = 'event' WHERE seq = ?", seq)
    blobs = sorted(p for p in (s.root / "blobs").rglob("*") if p.is_file())
    ledger = Ledger.open(s.root)
    with pytest.raises(StoreError, match="entry %d: the ledger's index disagrees" % seq):
        prune(ledger)
    ledger.close()
    assert sorted(p for p in (s.root / "blobs").rglob("*") if p.is_file()) == blobs


@pytest.mark.parametrize("column", ["seq", "hash", "kind", "body_hash", "task", "body"])
def test_every_index_column_of_the_head_is_checked_before_an_append(tmp_path: Path, column: str) -> None:
    s = build_sample(tmp_path)
    conn = sqlite3.connect(s.root / "ledger.db")
    seq, body = conn.execute("SELECT seq, body FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    change = {
        "seq": ("seq", seq + 5),
        "hash": ("hash", b"\x00" * 32),
        "kind": ("kind", "event"),
        "body_hash": ("body_hash", b"\x00" * 32),
        "task": ("task", "TASK-9"),
        "body": ("body", bytes(body[:-1]) + bytes([body[-1] ^ 1])),
    }[column]
    with conn:
        conn.execute("UPDATE entries SET %s = ? WHERE seq = ?" % change[0], (change[1], seq))
    conn.close()
    ledger = Ledger.open(s.root)
    with pytest.raises(StoreError, match="the ledger's index disagrees"):
        set_retention(ledger, SIGNERS["admin"], DAY)
    ledger.close()


def test_a_long_lived_writer_still_checks_rows_another_writer_added(tmp_path: Path) -> None:
    """A writer skips rows it checked or wrote itself, never rows another writer added since:
    a rejection appended by a second process and then hidden still stops the first."""
    s = build_sample(tmp_path)
    first, second = Ledger.open(s.root), Ledger.open(s.root)

    def decide(ledger: Ledger, verdict: r.Verdict, task: str = "TASK-1") -> int:
        return filler_record(ledger, task, verdict, r.Tier.JUDGE, "judge", s.contract).seq

    decide(first, r.Verdict.PASS)
    decide(first, r.Verdict.PASS)  # the first writer's own rows: checked without decoding
    hidden = decide(second, r.Verdict.FAIL)
    decide(second, r.Verdict.PASS, "TASK-2")  # so the hidden row is not the head: only the scan finds it
    _sql(s.root, "UPDATE entries SET task = NULL WHERE seq = ?", hidden)
    with pytest.raises(StoreError, match="entry %d: the ledger's index disagrees" % hidden):
        decide(first, r.Verdict.PASS)
    first.close()
    second.close()


def test_a_writer_that_appends_another_task_still_checks_the_rows_it_passes(tmp_path: Path) -> None:
    """A long-lived writer appending to TASK-2 passes over a TASK-1 rejection another writer
    added and hid from the task index: it checks that row then (the rows it counts as
    checked are one run without a gap), so neither this append nor its next TASK-1 one
    signs past the rejection. It used to count every row below the head as checked."""
    s = build_sample(tmp_path)
    first, second = Ledger.open(s.root), Ledger.open(s.root)
    for _ in range(2):
        filler_record(first, "TASK-1", r.Verdict.PASS, r.Tier.JUDGE, "judge", s.contract)
    hidden = filler_record(second, "TASK-1", r.Verdict.FAIL, r.Tier.JUDGE, "judge", s.contract).seq
    filler_record(second, "TASK-2", r.Verdict.PASS, r.Tier.JUDGE, "judge", s.contract)
    _sql(s.root, "UPDATE entries SET task = NULL WHERE seq = ?", hidden)
    for task in ("TASK-2", "TASK-1"):
        with pytest.raises(StoreError, match="entry %d: the ledger's index disagrees" % hidden):
            filler_record(first, task, r.Verdict.PASS, r.Tier.JUDGE, "judge", s.contract)
    first.close()
    second.close()
