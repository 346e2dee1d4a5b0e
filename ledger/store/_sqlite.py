"""The embedded driver: one SQLite file in WAL mode (synchronous FULL) and a directory of
blob files, each written to a temporary file, fsynced and renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from receipts import Digest
from verify import LedgerSource
from verify.schema import BLOB_DIR, DB_NAME, blob_path

from .._errors import StoreError
from .._files import fsync_dir
from ._backend import LockedReads
from ._spool import copy_hashed

__all__ = ["SqliteBackend", "connect_sqlite", "install_staged"]

_INCOMING = ".incoming-"  # temporary blob files: .incoming-<writer pid>-<random>
# Rows carry the entry's `prev` last: the shared store keeps it as a UNIQUE column; here it is dropped.
_INSERT_ENTRY = "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body) VALUES (?, ?, ?, ?, ?, ?, ?)"
_INSERT_NODE = "INSERT OR REPLACE INTO tree (level, idx, hash) VALUES (?, ?, ?)"


def _busy_timeout_ms() -> int:
    try:
        return max(0, int(os.environ.get("RECEIPT_LEDGER_BUSY_TIMEOUT_MS", "60000")))
    except ValueError:
        return 60000


def connect_sqlite(db: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(db, isolation_level=None, timeout=_busy_timeout_ms() / 1000)
        conn.execute("PRAGMA busy_timeout = %d" % _busy_timeout_ms())
        # FULL makes a committed WAL transaction survive power loss, not only a process crash.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("SELECT max(seq) FROM entries").fetchone()
    except sqlite3.Error as exc:
        if not os.access(db.parent, os.W_OK) or not os.access(db, os.W_OK):
            raise StoreError(
                "ledger %s is read-only: this command writes (log, show, status and verify only read)" % db.parent
            ) from None
        raise StoreError("cannot open ledger database %s: %s" % (db, exc)) from None
    return conn


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class SqliteBackend:
    """The embedded driver (see `Backend` for what each method promises)."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, root: Path, conn: sqlite3.Connection) -> None:
        self.root = root
        self.conn = conn
        self.reader = LedgerSource(conn, root)

    @classmethod
    def open(cls, root: Path) -> SqliteBackend:
        """The ledger at ``root`` opened for writing (`StoreError` if it cannot be)."""
        return cls(root, connect_sqlite(root / DB_NAME))

    def sql(self, query: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        return self.conn.execute(query, args)

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError("cannot start a write transaction: %s" % exc) from None
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException as exc:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if isinstance(exc, sqlite3.Error):
                raise StoreError("cannot append to the ledger: %s" % exc) from None
            raise

    def insert_entries(self, rows: Sequence[tuple[object, ...]]) -> None:
        self.conn.executemany(_INSERT_ENTRY, [row[:7] for row in rows])

    def insert_nodes(self, nodes: Sequence[tuple[int, int, bytes]]) -> None:
        self.conn.executemany(_INSERT_NODE, nodes)

    def put_blob_stream(self, stream: BinaryIO) -> tuple[Digest, int]:
        """Store content by its plain BLAKE3 digest, streaming (never read whole). At most
        `MAX_EVIDENCE` bytes: more could not travel in a bundle. The temporary file is
        removed on every way out, an interrupt included.
        """
        blobs = self.root / BLOB_DIR
        try:
            fd, tmp_name = tempfile.mkstemp(prefix="%s%d-" % (_INCOMING, os.getpid()), dir=blobs)
        except OSError as exc:
            raise StoreError("cannot write to the blob store %s: %s" % (blobs, exc)) from None
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                digest, size = copy_hashed(stream, out)
                out.flush()
                os.fsync(out.fileno())
            final = blob_path(self.root, digest)
            final.parent.mkdir(exist_ok=True)
            if final.exists():
                tmp.unlink()
            else:
                os.chmod(tmp, 0o444)
                os.replace(tmp, final)
                fsync_dir(final.parent)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError("cannot write to the blob store: %s" % exc) from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return digest, size

    def sweep_incoming(self) -> list[Path]:
        removed = []
        for tmp in (self.root / BLOB_DIR).glob(_INCOMING + "*"):
            pid = tmp.name[len(_INCOMING) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        return removed

    def locked_reads(self, task: str | None, after: int) -> LockedReads | None:
        return None  # a query of the embedded store costs no round trip

    def reconnect(self) -> None:
        pass  # one file, no connection to lose

    def close(self) -> None:
        self.conn.close()


def install_staged(staging: Path, root: Path) -> None:
    """Move a ledger built in ``staging`` to ``root``; ``root`` may exist (a clone's
    contracts) as long as it holds no database.
    """
    if not root.exists():
        os.rename(staging, root)
    else:
        for name in (BLOB_DIR, ".gitignore"):
            if not (root / name).exists():
                os.rename(staging / name, root / name)
        # The database arrives last: until it does, there is no ledger here at all.
        os.rename(staging / DB_NAME, root / DB_NAME)
        shutil.rmtree(staging, ignore_errors=True)
    fsync_dir(root.parent)
