"""The shared store on a real PostgreSQL server: schema, append-only tables, faults,
concurrent writers, killed writers, terminated connections, and a rewritten history."""

from __future__ import annotations

import base64
import io
import json
import os
import random
import signal
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import psycopg
import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, filler_record, run_cli, seeded_signer, write_private_key
from ledger import Appended, Ledger, StoreError, add_key, pull, revoke_key
from verify import CannotVerify, LedgerSource, PostgresSource, TrustRoot, verify_chain
from verify.schema import blob_path

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
KILL_TRIALS = int(os.environ.get("RECEIPT_LEDGER_PG_KILL_TRIALS", "100"))
APPEND_ONLY = ("entries", "tree", "checkpoints", "blobs", "blob_chunks")


# A line of the form a witness's cosignature takes (key id and a 72-byte timestamped signature).
COSIGNATURE_LINE = "\u2014 w %s\n" % base64.b64encode(b"\x01\x02\x03\x04" + b"\x00" * 72).decode()


def shared(url: str, tmp: Path) -> Ledger:
    """A shared ledger with an admin, a sealer and a human key."""
    ledger = Ledger.create(tmp / "clone" / ".ledger", SIGNERS["admin"], "admin", store=url)
    add_key(ledger, SIGNERS["admin"], "sealer", [r.Role.SEAL], SIGNERS["sealer"].public_key_blob)
    add_key(ledger, SIGNERS["admin"], "alice", [r.Role.HUMAN], SIGNERS["alice"].public_key_blob)
    return ledger


def approve(ledger: Ledger, task: str) -> Appended:
    return filler_record(ledger, task)


def seqs(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [int(s) for (s,) in conn.execute("SELECT seq FROM entries ORDER BY seq")]


def audit(url: str, **kwargs: Any) -> Any:
    source = PostgresSource.open_url(url)
    try:
        return verify_chain(source, TRUST, **kwargs)
    finally:
        source.close()


def test_a_shared_ledger_appends_verifies_and_keeps_blobs_in_chunks(pg_url: str, tmp_path: Path) -> None:
    ledger = shared(pg_url, tmp_path)
    data = os.urandom(3 * (1 << 20) + 7)
    digest, size = ledger.put_blob_stream(io.BytesIO(data))
    again = ledger.put_blob_stream(io.BytesIO(data))  # content-addressed: a second upload is a no-op
    assert (digest, size) == again == (r.content_digest(data), len(data))
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM blob_chunks WHERE digest = %s", (digest.value,)).fetchone() == (4,)
        assert conn.execute("SELECT count(*) FROM blobs").fetchone() == (1,)
    handle = ledger.reader.open_blob(digest)
    assert handle is not None and handle.read() == data
    approve(ledger, "T")
    ledger.checkpoint(SIGNERS["sealer"])
    assert seqs(pg_url) == [0, 1, 2, 3]
    result = audit(pg_url)
    assert result.ok, result.defects


def test_every_append_only_table_refuses_update_and_delete(pg_url: str, tmp_path: Path) -> None:
    ledger = shared(pg_url, tmp_path)
    ledger.put_blob_stream(io.BytesIO(b"evidence"))
    note = ledger.checkpoint(SIGNERS["sealer"])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table in APPEND_ONLY:
            column = "size" if table in ("checkpoints", "blobs") else ("idx" if table != "entries" else "seq")
            for statement in ("UPDATE %s SET %s = %s + 1" % (table, column, column), "DELETE FROM %s" % table):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                    conn.execute(statement)
        for table in ("entries", "tree", "checkpoints"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute("TRUNCATE %s" % table)
        # The one change let through: a checkpoint gaining signature lines (a cosignature).
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE checkpoints SET note = %s", (note.encode().replace("receipt", "forged"),))
        conn.execute("UPDATE checkpoints SET note = note || %s", (COSIGNATURE_LINE.replace(" w ", " witness "),))
    assert seqs(pg_url) == [0, 1, 2]


def test_a_connection_at_snapshot_isolation_is_refused(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    for level in ("repeatable%5C%20read", "serializable"):
        url = pg_url + "?options=-c%20default_transaction_isolation%3D" + level
        with pytest.raises(StoreError, match="READ COMMITTED"):
            Ledger.open(tmp_path, store=url)
        res = run_cli("--store", url, "log")
        assert res.returncode == 2 and "READ COMMITTED" in res.stderr and "Traceback" not in res.stderr


def test_faults_are_one_clear_line_and_exit_2(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    bad = {
        "unreachable": "postgresql://postgres@127.0.0.1:1/test",
        "unknown role": pg_url.replace("postgres@", "nobody_here@"),
        "no such database": pg_url.rsplit("/", 1)[0] + "/rl_no_such_database",
        "not postgres": "mysql://127.0.0.1/test",
    }
    for what, url in bad.items():
        res = run_cli("--store", url, "log")
        assert res.returncode == 2, (what, res.stderr)
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("ledger: error:"), (what, res.stderr)
    empty = pg_url.rsplit("/", 1)[0] + "/test"  # a database that holds no ledger: bad input, named
    for args in (("log",), ("verify", "--chain", "--trust", ADMIN_ID), ("pull", "--to", str(tmp_path / "m"))):
        res = run_cli("--store", empty, *args)
        assert res.returncode == 2 and "no ledger in" in res.stderr and res.stderr.count("\n") == 1, res.stderr
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
    res = run_cli("--store", pg_url, "log")
    assert res.returncode == 2 and "schema version 99" in res.stderr
    res = run_cli("--store", pg_url, "verify", "--chain", "--trust", ADMIN_ID)
    assert res.returncode == 2 and "schema version 99" in res.stderr


def test_init_refuses_a_database_that_holds_a_ledger(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    with pytest.raises(Exception, match="already holds a ledger"):
        Ledger.create(tmp_path / "other", SIGNERS["admin"], "admin", store=pg_url)
    assert seqs(pg_url) == [0, 1, 2]


def test_a_lock_not_granted_in_time_is_a_clean_error_with_nothing_written(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    write_private_key(tmp_path / "admin.key", "admin")
    with psycopg.connect(pg_url) as holder:  # a transaction holding the sequencer
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (0x7265636C65646772,))
        res = run_cli(
            "--store",
            pg_url,
            "keys",
            "revoke",
            "alice",
            "--reason",
            "left",
            "--key",
            str(tmp_path / "admin.key"),
            env={"RECEIPT_LEDGER_BUSY_TIMEOUT_MS": "300"},
        )
    assert res.returncode == 2 and "busy" in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert seqs(pg_url) == [0, 1, 2]


# -- many writers -----------------------------------------------------------------------------


class Child:
    """A forked writer. Its reports come on a pipe of its own: when it dies the reader sees
    EOF and fails, it never hangs. ``work(report)`` runs in the child; report(seq) is one
    committed append."""

    def __init__(self, work: Any) -> None:
        read_fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            os.close(read_fd)
            code = 1
            try:
                work(lambda seq: os.write(write_fd, b"%d\n" % seq))
                code = 0
            except BaseException:
                traceback.print_exc()  # on the test's stderr: pytest shows it beside the failure
            finally:
                os._exit(code)
        os.close(write_fd)
        self._file = os.fdopen(read_fd, "rb", buffering=0)
        self._buffer = b""
        self.status: int | None = None

    def next(self) -> int:
        """Block until the child reports its next committed append: a real signal, not a time."""
        while b"\n" not in self._buffer:
            chunk = self._file.read(4096)
            assert chunk, "the writer exited before committing (status %s)" % self.wait()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return int(line)

    def alive(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is None

    def wait(self) -> int:
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        return self.status

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.wait()

    def rest(self) -> list[int]:
        """Every report, after the child has exited."""
        self.wait()
        data = self._buffer + self._file.read()
        self._file.close()
        return [int(x) for x in data.split()]


def _mixed_writer(url: str, root: Path, tag: int, appends: int) -> Any:
    def work(report: Any) -> None:
        ledger = Ledger.open(root, store=url)
        for i in range(appends):
            if i % 50 == 25:  # keyring changes interleave with everyone's records
                name = "k%d-%d" % (tag, i)
                appended = add_key(ledger, SIGNERS["admin"], name, [r.Role.HUMAN], seeded_signer(name).public_key_blob)
            elif i % 50 == 26:
                appended = revoke_key(ledger, SIGNERS["admin"], "k%d-%d" % (tag, i - 1), "rotated")
            else:
                appended = approve(ledger, "W%d" % tag)
            report(appended.seq)
            if i % 40 == 0:
                ledger.checkpoint(SIGNERS["sealer"])

    return work


def test_eight_writers_make_one_linear_chain(pg_url: str, tmp_path: Path) -> None:
    ledger = shared(pg_url, tmp_path)
    base = len(seqs(pg_url))
    ledger.close()
    writers = [Child(_mixed_writer(pg_url, tmp_path, i, 250)) for i in range(8)]
    reported = [seq for w in writers for seq in w.rest()]
    assert [w.wait() for w in writers] == [0] * 8
    assert sorted(reported) == list(range(base, base + 2000))  # every seq handed out once, no gap
    assert seqs(pg_url) == list(range(base + 2000))
    with psycopg.connect(pg_url) as conn:
        leaves = [r.leaf_hash(bytes(e)) for (e,) in conn.execute("SELECT entry FROM entries ORDER BY seq")]
        prevs = [p for (p,) in conn.execute("SELECT prev FROM entries")]
    assert len(set(prevs)) == len(prevs)  # no two entries extend one predecessor
    reopened = Ledger.open(tmp_path, store=pg_url)
    assert reopened.root_hash(len(leaves)) == r.tree_root(r.MemoryTree(leaves), len(leaves))
    reopened.close()
    result = audit(pg_url, evidence=False)
    assert result.ok, result.defects[:3]
    assert result.entries == base + 2000


def _looping_approver(url: str, root: Path) -> Any:
    def work(report: Any) -> None:
        ledger = Ledger.open(root, store=url)
        while True:
            report(approve(ledger, "KILL").seq)

    return work


def _waiting_backends(conn: psycopg.Connection[Any]) -> list[int]:
    return [
        int(pid)
        for (pid,) in conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
    ]


def _until_waiting(conn: psycopg.Connection[Any], child: Child) -> list[int]:
    """Block until some backend waits on the sequencer: polls a real condition in the server."""
    while True:
        found = _waiting_backends(conn)
        if found:
            return found
        assert child.alive(), "the writer exited before it waited for the sequencer"


def test_writers_killed_at_random_moments_lose_nothing_committed_and_tear_nothing(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    base = len(seqs(pg_url))
    rng = random.Random(1203)
    reported: list[int] = []
    watcher = psycopg.connect(pg_url, autocommit=True)
    for trial in range(KILL_TRIALS):
        if trial % 5 == 0:
            # Inside its transaction, waiting for the sequencer the test holds: killed there.
            with watcher.transaction():
                watcher.execute("SELECT pg_advisory_xact_lock(%s)", (0x7265636C65646772,))
                child = Child(_looping_approver(pg_url, tmp_path))
                _until_waiting(watcher, child)
                child.kill()
            reported += child.rest()
            continue
        child = Child(_looping_approver(pg_url, tmp_path))
        # Past its first commit the child is always inside some append: killing it after a
        # random number of further commits lands at a random point of one.
        for _ in range(1 + rng.randrange(3)):
            reported.append(child.next())
        child.kill()
        reported += child.rest()
    watcher.close()
    present = seqs(pg_url)
    assert present == list(range(len(present)))  # no gap, no fork
    assert set(reported) <= set(present)  # every append reported committed is there
    # and nothing else: at most the one append in flight per killed writer committed unreported
    assert len(present) - base - len(reported) <= KILL_TRIALS
    result = audit(pg_url, evidence=False)
    assert result.ok, result.defects[:3]


def test_a_connection_terminated_before_commit_is_retried_once_committed(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    before = seqs(pg_url)
    watcher = psycopg.connect(pg_url, autocommit=True)
    with watcher.transaction():
        watcher.execute("SELECT pg_advisory_xact_lock(%s)", (0x7265636C65646772,))

        def one(report: Any) -> None:
            report(approve(Ledger.open(tmp_path, store=pg_url), "TERM").seq)

        child = Child(one)
        (backend,) = _until_waiting(watcher, child)
        watcher.execute("SELECT pg_terminate_backend(%s)", (backend,))
        # The writer reconnects and waits again: the append had certainly not committed.
        while _waiting_backends(watcher) in ([], [backend]):
            assert child.alive(), "the writer gave up instead of retrying"
    assert child.wait() == 0
    watcher.close()
    (seq,) = child.rest()
    assert seqs(pg_url) == before + [seq]
    assert audit(pg_url, evidence=False).ok


def test_a_connection_terminated_every_time_gives_up_cleanly(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    before = seqs(pg_url)
    key = write_private_key(tmp_path / "keys" / "admin", "admin")
    watcher = psycopg.connect(pg_url, autocommit=True)
    with watcher.transaction():
        watcher.execute("SELECT pg_advisory_xact_lock(%s)", (0x7265636C65646772,))
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger", "--store", pg_url, "keys", "revoke", "alice", "--reason", "x"]
            + ["--key", str(key)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        terminated: set[int] = set()
        while proc.poll() is None:
            for backend in _waiting_backends(watcher):
                if backend not in terminated:
                    watcher.execute("SELECT pg_terminate_backend(%s)", (backend,))
                    terminated.add(backend)
    _, err = proc.communicate()
    watcher.close()
    assert proc.returncode == 2 and err.count("\n") == 1 and "connection" in err and "nothing was written" in err
    assert len(terminated) == 3  # a bounded number of attempts
    assert seqs(pg_url) == before


def test_connections_terminated_at_random_moments_keep_the_chain_whole(pg_url: str, tmp_path: Path) -> None:
    shared(pg_url, tmp_path).close()
    rng = random.Random(77)

    def tolerant(report: Any) -> None:
        ledger = Ledger.open(tmp_path, store=pg_url)
        for _ in range(120):
            try:
                report(approve(ledger, "TERM").seq)
            except (StoreError, CannotVerify):  # reads outside an append are not retried
                while True:
                    try:
                        ledger.backend.reconnect()
                        break
                    except StoreError:
                        pass

    child = Child(tolerant)
    reported: list[int] = []
    with psycopg.connect(pg_url, autocommit=True) as watcher:
        for _ in range(20):
            for _ in range(1 + rng.randrange(3)):
                reported.append(child.next())
            for (backend,) in watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall():
                watcher.execute("SELECT pg_terminate_backend(%s)", (backend,))
    assert child.wait() == 0
    reported += child.rest()
    present = seqs(pg_url)
    assert present == list(range(len(present)))
    assert set(reported) <= set(present)
    assert audit(pg_url, evidence=False).ok


# -- mirrors and a rewritten history ------------------------------------------------------------


def _rewrite_from(url: str, root: Path, keep: int) -> None:
    """What someone holding the database and the admin key can do: drop the entries from
    ``keep`` on, bypassing the triggers, and append others, validly signed, with a
    recomputed tree and a new checkpoint."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # triggers off: the admin's power
        conn.execute("DELETE FROM entries WHERE seq >= %s", (keep,))
        conn.execute("DELETE FROM tree")
        conn.execute("DELETE FROM checkpoints")
    ledger = Ledger.open(root, store=url)
    with ledger.backend.write():
        for seq, (entry,) in enumerate(ledger.backend.sql("SELECT entry FROM entries ORDER BY seq").fetchall()):
            ledger._add_leaf(seq, r.leaf_hash(bytes(entry)))
    add_key(ledger, SIGNERS["admin"], "eve", [r.Role.HUMAN], SIGNERS["mallory"].public_key_blob)
    for _ in range(6):  # longer than before: the rewrite cannot pass for a cut
        approve(ledger, "REWRITTEN")
    ledger.checkpoint(SIGNERS["admin"])
    ledger.close()


def test_a_rewritten_history_is_refused_by_pull_and_by_verify_since(pg_url: str, tmp_path: Path) -> None:
    ledger = shared(pg_url, tmp_path)
    for _ in range(5):
        approve(ledger, "T")
    kept = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    mirror = tmp_path / "mirror"
    first = pull(pg_url, mirror)
    assert first.ok and first.first and first.entries_after == 8
    (tmp_path / "kept.checkpoint").write_text(kept.encode())

    _rewrite_from(pg_url, tmp_path, keep=4)
    # Self-consistent: every hash and signature in the database checks out on its own ...
    assert audit(pg_url, evidence=False).ok
    # ... but not against what was kept outside it.
    refused = pull(pg_url, mirror)
    assert not refused.ok and "rewritten" in refused.defects[0]
    assert len(seqs_sqlite(mirror)) == 8  # nothing written
    res = run_cli(
        "--store", pg_url, "verify", "--chain", "--trust", ADMIN_ID, "--since", str(tmp_path / "kept.checkpoint")
    )
    assert res.returncode == 1, res.stdout + res.stderr
    res = run_cli("--dir", str(tmp_path / "m2"), "pull", "--from", pg_url)
    assert res.returncode == 0  # a new mirror has nothing kept to compare with ...
    res = run_cli("pull", "--from", pg_url, "--to", str(mirror))
    assert res.returncode == 1 and "REFUSED" in res.stdout  # ... the old one does


def test_a_row_rewritten_below_the_mirrors_head_leaves_the_mirror_intact(pg_url: str, tmp_path: Path) -> None:
    """docs/team.md §5, as written: pull does not read again the rows a mirror holds. A body
    rewritten below the mirror's head (by the owner, past the triggers) leaves the mirror's
    copy as it was and the next pull copies only the new entries; the store's own chain
    audit finds the rewrite."""
    ledger = shared(pg_url, tmp_path)
    approve(ledger, "T")
    ledger.checkpoint(SIGNERS["sealer"])
    mirror = tmp_path / "mirror"
    assert pull(pg_url, mirror).entries_after == 4
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (original,) = conn.execute("SELECT body FROM entries WHERE seq = 3").fetchone()  # type: ignore[misc]
        conn.execute("ALTER TABLE entries DISABLE TRIGGER entries_append_only")
        conn.execute("UPDATE entries SET body = %s WHERE seq = 3", (bytes(original)[:-1] + b"\x00",))
        conn.execute("ALTER TABLE entries ENABLE TRIGGER entries_append_only")
    approve(ledger, "T")
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    res = run_cli("pull", "--from", pg_url, "--to", str(mirror))
    assert res.returncode == 0 and "PULLED" in res.stdout, res.stdout + res.stderr
    assert seqs_sqlite(mirror) == [0, 1, 2, 3, 4]
    assert run_cli("--dir", str(mirror), "verify", "--chain", "--trust", ADMIN_ID).returncode == 0
    on_store = run_cli("--store", pg_url, "verify", "--chain", "--trust", ADMIN_ID)
    assert on_store.returncode == 1 and "entry 3" in on_store.stdout, on_store.stdout


def test_pull_is_incremental_and_proves_growth_against_the_kept_checkpoint(pg_url: str, tmp_path: Path) -> None:
    ledger = shared(pg_url, tmp_path)
    ledger.put_blob_stream(io.BytesIO(b"some evidence"))
    ledger.checkpoint(SIGNERS["sealer"])
    mirror = tmp_path / "mirror"
    assert pull(pg_url, mirror).entries_after == 3
    for _ in range(4):
        approve(ledger, "T")
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.put_blob_stream(io.BytesIO(b"more evidence"))
    second = pull(pg_url, mirror)
    assert second.ok and (second.entries_before, second.entries_after) == (3, 7)
    assert second.proven == (3, 7) and second.blobs_copied == 1 and second.checkpoints_copied == 1
    assert seqs_sqlite(mirror) == list(range(7))
    ledger.close()
    res = run_cli("--dir", str(mirror), "verify", "--chain", "--trust", ADMIN_ID, "--json")
    assert res.returncode == 0, res.stdout
    # A checkpoint that gains a (here unchecked) signature line after it was pulled: the
    # next pull brings the line; anything else changed in a kept checkpoint is refused.
    with LedgerSource.open(mirror) as source:
        newest = source.checkpoints()[-1][1]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE checkpoints SET note = note || %s WHERE size = 7", (COSIGNATURE_LINE,))
    assert pull(pg_url, mirror).ok
    with LedgerSource.open(mirror) as source:
        assert source.checkpoints()[-1][1] == newest + COSIGNATURE_LINE


def test_a_rollback_behind_what_a_mirror_saw_is_refused_by_its_next_pull(pg_url: str, tmp_path: Path) -> None:
    """Issue 22, case 10: the store's newest checkpoint (and then its newest entry) deleted
    by someone holding the database; a mirror that had pulled them refuses, naming it."""
    ledger = shared(pg_url, tmp_path)
    approve(ledger, "T")
    ledger.checkpoint(SIGNERS["sealer"])
    approve(ledger, "T")
    newest = r.parse_checkpoint(ledger.checkpoint(SIGNERS["sealer"]).text).size
    ledger.close()
    mirror = tmp_path / "mirror"
    assert pull(pg_url, mirror).ok
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # triggers off: the admin's power
        conn.execute("DELETE FROM checkpoints WHERE size = %s", (newest,))
    refused = pull(pg_url, mirror)
    assert not refused.ok and "rolled back" in refused.defects[0] and str(newest) in refused.defects[0]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("DELETE FROM entries WHERE seq = %s", (newest - 1,))
    again = pull(pg_url, mirror)
    assert not again.ok and ("rolled back" in again.defects[0] or "cut" in again.defects[0]), again.defects
    assert len(seqs_sqlite(mirror)) == newest  # nothing written
    res = run_cli("pull", "--from", pg_url, "--to", str(mirror))
    assert res.returncode == 1 and "REFUSED" in res.stdout
    # A mirror that never saw them cannot tell: that is what witnesses and monitors are for.
    assert pull(pg_url, tmp_path / "fresh").ok


def test_the_store_itself_refuses_rows_that_would_jam_its_writers(pg_url: str, tmp_path: Path) -> None:
    """Issue 22, case 9: someone with the writer role inserts a row that does not extend the
    head, a tree node at a future position or not derived from the entries, a checkpoint
    beyond the entries, or junk after a kept checkpoint's signatures: the database refuses
    each, and the ledger's writers carry on."""
    ledger = shared(pg_url, tmp_path)
    approve(ledger, "T")
    ledger.checkpoint(SIGNERS["sealer"])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT e.seq, e.hash, c.note, c.size FROM entries e, checkpoints c ORDER BY e.seq DESC, c.size DESC LIMIT 1"
        ).fetchone()
        assert found is not None
        head, head_hash, note, size = found
        attempts = {
            "entry-not-extending-the-head": (
                "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev)"
                " VALUES (%s, %s, 'event', %s, NULL, %s, %s, %s)",
                (head + 1, b"\x01" * 32, b"\x02" * 32, b"junk", b"junk", b"\x03" * 32),
            ),
            "entry-at-a-gap": (
                "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev)"
                " VALUES (%s, %s, 'event', %s, NULL, %s, %s, %s)",
                (head + 5, b"\x04" * 32, b"\x05" * 32, b"junk", b"junk", bytes(head_hash)),
            ),
            "tree-node-at-a-future-position": (
                "INSERT INTO tree (level, idx, hash) VALUES (0, %s, %s)",
                (head + 1, b"\x06" * 32),
            ),
            "tree-node-not-derived": ("INSERT INTO tree (level, idx, hash) VALUES (3, 7, %s)", (b"\x07" * 32,)),
            "checkpoint-beyond-the-entries": (
                "INSERT INTO checkpoints (size, note) VALUES (%s, 'x')",
                (head + 10,),
            ),
            "junk-after-a-kept-checkpoint": (
                "UPDATE checkpoints SET note = note || %s WHERE size = %s",
                ("not a signature line\n", size),
            ),
            "a-signature-line-too-short-to-parse": (
                "UPDATE checkpoints SET note = note || %s WHERE size = %s",
                ("\u2014 w AAAA\n", size),
            ),
            "non-canonical-base64": (
                "UPDATE checkpoints SET note = note || %s WHERE size = %s",
                ("\u2014 w AAAAAAAAAAB=\n", size),
            ),
        }
        for name, (query, args) in attempts.items():
            try:
                conn.execute(query, args)
            except psycopg.Error as exc:
                assert "refused" in str(exc), (name, exc)
            else:
                pytest.fail("%s was accepted" % name)
        # A well-formed cosignature line may still be added to a kept checkpoint.
        conn.execute("UPDATE checkpoints SET note = note || %s WHERE size = %s", (COSIGNATURE_LINE, size))
        kept = conn.execute("SELECT note FROM checkpoints WHERE size = %s", (size,)).fetchone()
        assert kept is not None and kept[0] == note + COSIGNATURE_LINE
    approve(ledger, "T")  # the writers carry on
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    assert audit(pg_url, evidence=False).ok


def test_a_junk_head_that_jams_the_writers_is_quarantined_by_the_owner(pg_url: str, tmp_path: Path) -> None:
    """Issue 22, case 9: the one junk row the database cannot refuse (it extends the head by
    seq and prev, but its bytes are no signed entry) jams every writer; `ledger repair-head`
    (dry run, then --apply) moves it and the checkpoint over it into quarantine, keeps them
    as evidence, and the writers carry on over a chain that verifies."""
    ledger = shared(pg_url, tmp_path)
    approve(ledger, "T")
    kept = ledger.checkpoint(SIGNERS["sealer"]).encode()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        assert found is not None
        head, head_hash = found
        conn.execute(
            "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev)"
            " VALUES (%s, %s, 'event', %s, 'T', %s, %s, %s)",
            (head + 1, b"\x01" * 32, b"\x02" * 32, b"junk", b"junk", bytes(head_hash)),
        )
        conn.execute("INSERT INTO checkpoints (size, note) VALUES (%s, 'junk over junk')", (head + 2,))
    with pytest.raises(StoreError):
        approve(ledger, "T")  # jammed: no honest writer extends junk
    ledger.close()
    assert audit(pg_url, evidence=False).first_bad == head + 1
    store = ("--store", pg_url)
    dry = run_cli(*store, "repair-head", "--trust", ADMIN_ID, cwd=tmp_path)
    assert dry.returncode == 1 and "WOULD QUARANTINE 1 row(s) from entry %d" % (head + 1) in dry.stdout, dry.stdout
    assert audit(pg_url, evidence=False).first_bad == head + 1  # the dry run wrote nothing
    done = run_cli(*store, "repair-head", "--apply", "--trust", ADMIN_ID, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = __import__("json").loads(done.stdout)
    assert doc["repaired"] is True and [row["seq"] for row in doc["rows"]] == [head + 1]
    assert doc["checkpoints"] == [head + 2]
    assert audit(pg_url, evidence=False).ok
    with psycopg.connect(pg_url, autocommit=True) as conn:
        junk = conn.execute("SELECT seq, entry, reason FROM quarantined_entries").fetchall()
        assert [(seq, bytes(entry)) for seq, entry, _ in junk] == [(head + 1, b"junk")] and junk[0][2]
        notes = conn.execute("SELECT size, note FROM quarantined_checkpoints").fetchall()
        assert notes == [(head + 2, "junk over junk")]
    again = Ledger.open(tmp_path / "clone" / ".ledger", store=pg_url)
    approve(again, "T")  # the writers carry on
    assert again.checkpoint(SIGNERS["sealer"]).encode().startswith(kept.split("\n")[0])
    again.close()
    assert audit(pg_url, evidence=False).ok
    # A store created before one of its guards existed gets it from the owner's --apply.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER entries_extend_head ON entries")
    nothing = run_cli(*store, "repair-head", "--apply", "--trust", ADMIN_ID, cwd=tmp_path)
    assert (
        nothing.returncode == 0 and "NOTHING TO REPAIR" in nothing.stdout and "guards are installed" in nothing.stdout
    )
    with (
        psycopg.connect(pg_url, autocommit=True) as conn,
        pytest.raises(psycopg.Error, match="does not extend the head"),
    ):
        conn.execute(
            "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev)"
            " VALUES (%s, %s, 'event', %s, NULL, 'junk', 'junk', %s)",
            (head + 40, b"\x07" * 32, b"\x08" * 32, b"\x09" * 32),
        )


def seqs_sqlite(mirror: Path) -> list[int]:
    import sqlite3

    conn = sqlite3.connect(mirror / "ledger.db")
    try:
        return [int(s) for (s,) in conn.execute("SELECT seq FROM entries ORDER BY seq")]
    finally:
        conn.close()


def _doc_grants(writer: str, auditor: str) -> list[str]:
    """The GRANT statements docs/team.md tells an owner to run, for these role names."""
    text = (Path(__file__).parent.parent / "docs" / "team.md").read_text()
    block = text.split("```sql")[2].split("```")[0]
    statements = [line.split("--")[0].strip() for line in block.splitlines()]
    return [
        st.replace("ledger_writer", writer).replace("ledger_auditor", auditor)
        for st in statements
        if st.startswith("GRANT")
    ]


def test_the_documented_roles_let_writers_append_and_auditors_only_read(pg_url: str, tmp_path: Path) -> None:
    ledger = shared(pg_url, tmp_path)
    ledger.close()
    suffix = pg_url.rsplit("_", 1)[1]
    writer, auditor = "rl_writer_" + suffix, "rl_auditor_" + suffix
    owner = psycopg.connect(pg_url, autocommit=True)
    try:
        for role in (writer, auditor):
            owner.execute("CREATE ROLE %s LOGIN" % role)
        grants = _doc_grants(writer, auditor)
        assert len(grants) == 4
        for statement in grants:
            owner.execute(statement)
        as_writer = pg_url.replace("postgres@", writer + "@")
        as_auditor = pg_url.replace("postgres@", auditor + "@")

        ledger = Ledger.open(tmp_path, store=as_writer)
        approve(ledger, "T")
        ledger.put_blob_stream(io.BytesIO(b"a writer's evidence"))
        ledger.checkpoint(SIGNERS["sealer"])
        with psycopg.connect(as_writer, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("DELETE FROM entries")
            # The one junk row a writer can still add (it extends the head); only the owner
            # can take it out again.
            found = conn.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
            assert found is not None
            conn.execute(
                "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev)"
                " VALUES (%s, %s, 'event', %s, NULL, 'junk', 'junk', %s)",
                (found[0] + 1, b"\x01" * 32, b"\x02" * 32, bytes(found[1])),
            )
        ledger.close()
        refused = run_cli("--store", as_writer, "repair-head", "--apply", "--trust", ADMIN_ID, cwd=tmp_path)
        assert refused.returncode == 2 and "only the database's owner" in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1
        repaired = run_cli("--store", pg_url, "repair-head", "--apply", "--trust", ADMIN_ID, cwd=tmp_path)
        assert repaired.returncode == 0 and "QUARANTINED 1 row(s)" in repaired.stdout, repaired.stderr

        assert pull(as_auditor, tmp_path / "mirror").entries_after == 4
        assert audit(as_auditor).ok
        admin_key = write_private_key(tmp_path / "admin.key", "admin")
        bob = r.public_key_line(SIGNERS["bob"].public_key_blob)
        res = run_cli("--store", as_auditor, "keys", "add", "bob", bob, "--role", "human", "--key", str(admin_key))
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "permission denied" in res.stderr, res.stderr
        with pytest.raises(StoreError, match="permission denied"):
            approve(Ledger.open(tmp_path, store=as_auditor), "T")
        assert seqs(pg_url) == [0, 1, 2, 3]
    finally:
        for role in (writer, auditor):
            owner.execute("DROP OWNED BY %s" % role)
        owner.close()
        with psycopg.connect(pg_url.rsplit("/", 1)[0] + "/test", autocommit=True) as server:
            for role in (writer, auditor):
                server.execute("DROP ROLE IF EXISTS %s" % role)


def test_the_writer_reads_ahead_in_one_round_trip_and_still_checks_every_row(pg_url: str, tmp_path: Path) -> None:
    """On the shared store an append reads the head, the task's newest row, the rows other
    writers added since and the Merkle frontier in one pipeline under the lock
    (`locked_reads`). The rows are checked as when read one query at a time: a rejection
    another writer appended and hid from the task index (the triggers off, as the
    database's owner can) stops the long-lived writer's next append, of any task, and a
    fresh writer's, naming the row; nothing is written."""
    shared(pg_url, tmp_path).close()
    first, second = Ledger.open(tmp_path, store=pg_url), Ledger.open(tmp_path, store=pg_url)
    read_ahead: list[int] = []
    fetch = first.backend.locked_reads

    def counted(task: str | None, after: int) -> Any:
        reads = fetch(task, after)
        read_ahead.append(-1 if reads is None else len(reads.rows))
        return reads

    first.backend.locked_reads = counted  # type: ignore[method-assign]
    for _ in range(3):
        filler_record(first, "TASK-1")
    hidden = filler_record(second, "TASK-1", r.Verdict.FAIL).seq
    filler_record(second, "TASK-2")
    with psycopg.connect(pg_url, autocommit=True) as owner:
        owner.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        owner.execute("UPDATE entries SET task = NULL WHERE seq = %s", (hidden,))
    before = seqs(pg_url)
    for writer, task in ((first, "TASK-2"), (first, "TASK-1"), (Ledger.open(tmp_path, store=pg_url), "TASK-1")):
        with pytest.raises(StoreError, match="entry %d: the ledger's index disagrees" % hidden):
            filler_record(writer, task)
    assert read_ahead[3] == 2  # the second writer's two rows came with the first writer's reads
    assert seqs(pg_url) == before
    first.close()
    second.close()


def test_a_junk_blob_row_does_not_stop_every_mirror(pg_url: str, tmp_path: Path) -> None:
    # Issue 47: the writer role can insert a blob row whose bytes do not hash to its name;
    # every `ledger pull` failed on it. The pull now copies everything else and names it.
    ledger = shared(pg_url, tmp_path)
    good, _ = ledger.put_blob_stream(io.BytesIO(b"real evidence"))
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    junk = r.content_digest(b"what the name promises")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO blob_chunks (digest, idx, data) VALUES (%s, 0, %s)", (junk.value, b"something else"))
        conn.execute("INSERT INTO blobs (digest, size, chunks) VALUES (%s, 14, 1)", (junk.value,))
    mirror = tmp_path / "mirror"
    done = run_cli("pull", "--from", pg_url, "--to", str(mirror))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: blob row not copied: %s: its bytes on the shared store hash to" % junk in done.stdout
    assert "quarantines it with `ledger repair-head`" in done.stdout  # what the reader does next
    assert blob_path(mirror, good).exists() and not blob_path(mirror, junk).exists()
    doc = json.loads(run_cli("pull", "--from", pg_url, "--to", str(mirror), "--json").stdout)
    assert doc["ok"] and [s.split(":")[0] + ":" + s.split(":")[1] for s in doc["skipped_blobs"]] == [str(junk)]
    res = run_cli("--dir", str(mirror), "verify", "--chain", "--trust", ADMIN_ID)
    assert res.returncode == 0, res.stdout  # no entry names it: the mirror verifies
    # The owner's repair-head names the junk row (a dry run exits 1 and moves nothing), then
    # quarantines it, keeping its bytes as evidence; the store's real blob stays.
    store = ("--store", pg_url)
    dry = run_cli(*store, "repair-head", "--trust", ADMIN_ID, cwd=tmp_path)
    assert dry.returncode == 1 and "WOULD QUARANTINE 1 blob row(s)" in dry.stdout and str(junk) in dry.stdout, (
        dry.stdout
    )
    done = run_cli(*store, "repair-head", "--apply", "--trust", ADMIN_ID, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [b["digest"] for b in json.loads(done.stdout)["blobs"]] == [str(junk)]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert [bytes(d) for (d,) in conn.execute("SELECT digest FROM blobs").fetchall()] == [good.value]
        kept = conn.execute("SELECT digest, data FROM quarantined_blob_chunks").fetchall()
        assert [(bytes(d), bytes(data)) for d, data in kept] == [(junk.value, b"something else")]
        with pytest.raises(psycopg.Error, match="append-only"):  # the guards are back
            conn.execute("DELETE FROM blobs")
    again = run_cli(*store, "repair-head", "--trust", ADMIN_ID, cwd=tmp_path)
    assert again.returncode == 0 and "NOTHING TO REPAIR" in again.stdout, again.stdout
