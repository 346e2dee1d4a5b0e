"""The shared backend: one PostgreSQL database that a whole team appends to.

The sequencer is a transaction-scoped advisory lock taken at READ COMMITTED: every
statement after it sees every append committed before it, so the head read under the
lock is the head. Entries are signed on the client (private keys never reach the
server); `seq` is computed, never drawn from a database sequence (those leave gaps on
abort); PRIMARY KEY(seq) and UNIQUE(prev) refuse a fork even if the lock were bypassed.
Evidence is uploaded before the lock is taken, in chunks, content-addressed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from receipts import Digest
from verify import CannotVerify, NoLedger, StoredEntry
from verify.postgres import PostgresSource, check_schema, connect_error, first_line, import_psycopg, redact_url
from verify.schema import PG_SCHEMA, PG_SCHEMA_VERSION

from .._errors import CommitUnknown, InputError, NotCommitted, StoreError
from ._backend import LockedReads
from ._spool import copy_hashed

__all__ = ["PostgresBackend", "LOCK_KEY", "BLOB_CHUNK"]

# psycopg logs a warning when a pipeline that already failed fails again as it closes;
# the failure itself reaches the user as our one line, so the driver's log stays with the
# application's handlers (if it configured any) instead of Python's stderr fallback.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

LOCK_KEY = 0x7265636C65646772  # the sequencer's advisory lock key ("recledgr")
BLOB_CHUNK = 1 << 20  # bytes per blob_chunks row: bounded memory on both sides
_INSERT_ENTRY = (
    "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_INSERT_NODE = "INSERT INTO tree (level, idx, hash) VALUES (%s, %s, %s)"
# The rows after the last one a writer checked that `locked_reads` brings along: as many
# as writers usually append between two appends of one of them, and a bound on the bytes.
_AHEAD = 64
# The stored nodes the next leaf (index n = the newest seq + 1) may need as left siblings:
# the perfect subtree (l, (n >> l) - 1) for each one bit l of n, computed by the server.
# Each node is its own lookup on both key columns (the LIMIT keeps the planner from
# flattening it into a join that scans a whole level: a plan made while the table was
# small then read every leaf on every append, under the lock; bench/shared.py saw it).
_FRONTIER = (
    "SELECT t.level, t.idx, t.hash FROM (SELECT coalesce(max(seq), -1) + 1 AS n FROM entries) AS m"
    " CROSS JOIN generate_series(0, 62) AS l"
    " CROSS JOIN LATERAL (SELECT level, idx, hash FROM tree WHERE level = l AND idx = (m.n >> l) - 1 LIMIT 1) AS t"
    " WHERE ((m.n >> l) & 1) = 1"
)


def _timeout_ms() -> int:
    try:
        return max(1, int(os.environ.get("RECEIPT_LEDGER_BUSY_TIMEOUT_MS", "60000")))
    except ValueError:
        return 60000


class PostgresBackend:
    """A shared ledger in PostgreSQL, opened for appending (or read-only)."""

    def __init__(self, url: str, conn: Any, read_only: bool = False) -> None:
        self.url = url
        self.conn = conn
        self._pg = import_psycopg()
        self.errors: tuple[type[BaseException], ...] = (self._pg.Error,)
        # Inserts wait here until the next read or the COMMIT, and go with it in one round
        # trip: every round trip inside the transaction is time the sequencer is held.
        self._pending: list[tuple[str, Sequence[tuple[object, ...]]]] = []
        self._locking = False  # a write transaction whose BEGIN and lock are not sent yet
        self.reader = PostgresSource(_Flushing(conn, self._send_pending), url)
        self.read_only = read_only  # kept for reconnecting

    # -- connecting ----------------------------------------------------------------------

    @staticmethod
    def _connect(url: str) -> Any:
        try:
            psycopg = import_psycopg()
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(connect_error(url, exc)) from None
        except ValueError as exc:  # a malformed URL or option
            raise InputError("not a usable PostgreSQL URL %s: %s" % (redact_url(url), exc)) from None
        try:
            level = conn.execute("SHOW transaction_isolation").fetchone()[0]
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(connect_error(url, exc)) from None
        if level != "read committed":
            conn.close()
            # Under REPEATABLE READ or SERIALIZABLE the snapshot is taken at the first
            # statement, before the lock is granted: the head read under it may be stale.
            raise StoreError(
                "the shared ledger's connection runs at %s isolation; appends need READ COMMITTED"
                " (remove default_transaction_isolation from the URL or the role)" % level.upper()
            )
        return conn

    @classmethod
    def open(cls, url: str, read_only: bool = False) -> PostgresBackend:
        conn = cls._connect(url)
        try:
            check_schema(conn, url)
            if read_only:
                conn.execute("SET default_transaction_read_only = on")
        except (CannotVerify, import_psycopg().Error) as exc:
            conn.close()
            if isinstance(exc, NoLedger):
                raise InputError(str(exc)) from None
            raise StoreError("cannot open the shared ledger %s: %s" % (redact_url(url), first_line(exc))) from None
        return cls(url, conn, read_only)

    @classmethod
    def create(cls, url: str) -> PostgresBackend:
        """Create the schema (idempotently). A database that already holds a genesis entry,
        or a schema of another version, is refused.
        """
        conn = cls._connect(url)
        psycopg = import_psycopg()
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                if conn.execute("SELECT to_regclass('ledger_meta') IS NOT NULL").fetchone()[0]:
                    found = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
                    if found is not None and found[0] != str(PG_SCHEMA_VERSION):
                        raise StoreError(
                            "%s holds a ledger schema of version %s; this receipt-ledger writes version %d"
                            % (redact_url(url), found[0], PG_SCHEMA_VERSION)
                        )
                if conn.execute("SELECT to_regclass('entries') IS NOT NULL").fetchone()[0]:
                    if conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None:
                        raise InputError("%s already holds a ledger; refusing to initialise over it" % redact_url(url))
                conn.execute(PG_SCHEMA)
                conn.execute(
                    "INSERT INTO ledger_meta (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING",
                    (str(PG_SCHEMA_VERSION),),
                )
        except psycopg.Error as exc:
            conn.close()
            raise StoreError("cannot create the shared ledger in %s: %s" % (redact_url(url), first_line(exc))) from None
        except BaseException:
            conn.close()
            raise
        return cls(url, conn)

    def reconnect(self) -> None:
        """A new connection after the old one broke (the reader follows it)."""
        with contextlib.suppress(Exception):
            self.conn.close()
        self._pending.clear()
        self.conn = self._connect(self.url)
        if self.read_only:
            self.conn.execute("SET default_transaction_read_only = on")
        self.reader.conn = _Flushing(self.conn, self._send_pending)

    def close(self) -> None:
        self.conn.close()

    # -- the chain -----------------------------------------------------------------------

    def sql(self, query: str, args: tuple[object, ...] = ()) -> Any:
        self._send_pending()
        # Our queries hold no literal '?' or '%': placeholders are the only ones.
        return self.conn.execute(query.replace("?", "%s"), args)

    def _send_pending(self, commit: bool = False) -> None:
        """Send the lock a write transaction still owes, the queued inserts (and COMMIT) in
        one pipeline: one round trip.
        """
        if not self._pending and not commit and not self._locking:
            return
        pending, self._pending = self._pending, []
        with self.conn.pipeline(), self.conn.cursor() as cur:
            self._take_lock(cur)
            for query, rows in pending:
                cur.executemany(query, rows)
            if commit:
                cur.execute("COMMIT")

    def _take_lock(self, cur: Any) -> None:
        """Open the write transaction and queue the sequencer's lock on ``cur`` (a pipeline),
        if `write` has not sent them yet: whatever follows in the pipeline runs once the
        lock is granted, so the lock costs no round trip of its own.
        """
        if not self._locking:
            return
        self._locking = False
        cur.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        cur.execute("SELECT set_config('lock_timeout', %s, true)", ("%dms" % _timeout_ms(),))
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))

    def _rollback(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.execute("ROLLBACK")

    def _failed(self, exc: BaseException, what: str) -> StoreError:
        """Name a failure; a broken connection before COMMIT is `NotCommitted` (retryable)."""
        if isinstance(exc, self._pg.errors.LockNotAvailable):
            return StoreError(
                "the shared ledger is busy: its append lock was not granted within %d ms"
                " (RECEIPT_LEDGER_BUSY_TIMEOUT_MS)" % _timeout_ms()
            )
        if isinstance(exc, self._pg.errors.ReadOnlySqlTransaction):
            return StoreError("the shared ledger was opened read-only: this command writes")
        if self.conn.broken or self.conn.closed:
            return NotCommitted(
                "the connection to the shared ledger was lost (%s); nothing was written" % first_line(exc)
            )
        return StoreError("cannot %s the shared ledger: %s" % (what, first_line(exc)))

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        # The transaction and its lock go out with the first statement inside it (see
        # `_take_lock`): every path to the server sends them first.
        self._locking = True
        try:
            yield
        except BaseException as exc:
            self._locking = False
            self._pending.clear()
            self._rollback()
            # A read that failed through the verifier's reader arrives as another error type;
            # a broken connection means the same whatever it was raised as.
            if isinstance(exc, self._pg.Error) or (isinstance(exc, Exception) and self.conn.broken):
                raise self._failed(exc, "append to") from None
            raise
        try:
            self._send_pending(commit=True)
        except self._pg.Error as exc:
            self._locking = False
            self._pending.clear()
            if self.conn.broken or self.conn.closed:
                raise CommitUnknown(
                    "the connection to the shared ledger was lost while committing (%s)" % first_line(exc)
                ) from None
            self._rollback()
            raise StoreError("the shared ledger refused the append: %s" % first_line(exc)) from None

    def locked_reads(self, task: str | None, after: int) -> LockedReads | None:
        """The four reads of `Backend.locked_reads` in one pipeline: one round trip while
        the sequencer is held, where they were four or more.
        """
        if self._pending:
            self._send_pending()
        columns = StoredEntry.COLUMNS
        try:
            with self.conn.pipeline(), self.conn.cursor() as cur:
                self._take_lock(cur)
                head = self.conn.execute("SELECT %s FROM entries ORDER BY seq DESC LIMIT 1" % columns)
                newest = self.conn.execute(
                    "SELECT %s FROM entries WHERE task = %%s ORDER BY seq DESC LIMIT 1" % columns, (task,)
                )
                rows = self.conn.execute(
                    "SELECT %s FROM entries WHERE seq > %%s ORDER BY seq LIMIT %%s" % columns, (after, _AHEAD)
                )
                nodes = self.conn.execute(_FRONTIER)
            found_head, found_newest = head.fetchone(), newest.fetchone()
            return LockedReads(
                None if found_head is None else StoredEntry.from_row(found_head),
                task,
                None if found_newest is None else StoredEntry.from_row(found_newest),
                after,
                tuple(StoredEntry.from_row(row) for row in rows.fetchall()),
                tuple((int(level), int(idx), bytes(h)) for level, idx, h in nodes.fetchall()),
            )
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None

    def insert_entries(self, rows: Sequence[tuple[object, ...]]) -> None:
        if rows:
            self._pending.append((_INSERT_ENTRY, list(rows)))

    def insert_nodes(self, nodes: Sequence[tuple[int, int, bytes]]) -> None:
        if nodes:
            self._pending.append((_INSERT_NODE, list(nodes)))

    # -- blobs ---------------------------------------------------------------------------

    def put_blob_stream(self, stream: BinaryIO) -> tuple[Digest, int]:
        """Spool to a local temporary file while hashing (the digest names the rows), then
        upload in `BLOB_CHUNK` rows in one transaction, outside the sequencer's lock. An
        upload of a digest already stored is skipped; a lost connection is retried, since
        storing content-addressed bytes twice changes nothing.
        """
        with tempfile.TemporaryFile() as spool:
            try:
                digest, size = copy_hashed(stream, spool)
            except OSError as exc:
                raise StoreError("cannot spool evidence for upload: %s" % exc) from None
            for attempt in range(3):
                try:
                    self._upload(spool, digest, size)
                    return digest, size
                except NotCommitted:
                    if attempt == 2:
                        raise
                    self.reconnect()
        raise AssertionError("unreachable")

    def _upload(self, spool: Any, digest: Digest, size: int) -> None:
        try:
            self._send_pending()  # inside a write: its transaction and lock come first
            if self.conn.execute("SELECT 1 FROM blobs WHERE digest = %s", (digest.value,)).fetchone() is not None:
                return
            spool.seek(0)
            with self.conn.transaction():
                idx = 0
                while chunk := spool.read(BLOB_CHUNK):
                    self.conn.execute(
                        "INSERT INTO blob_chunks (digest, idx, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        (digest.value, idx, chunk),
                    )
                    idx += 1
                self.conn.execute(
                    "INSERT INTO blobs (digest, size, chunks) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    (digest.value, size, idx),
                )
        except self._pg.Error as exc:
            raise self._failed(exc, "store evidence in") from None

    def sweep_incoming(self) -> list[Path]:
        return []  # an upload is one transaction: an interrupted one leaves nothing behind


class _Flushing:
    """The connection as the reader sees it: queued inserts are sent before any read, so
    that a read inside the transaction sees them.
    """

    def __init__(self, conn: Any, flush: Any) -> None:
        self._conn, self._flush = conn, flush

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._flush()
        return self._conn.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)
