"""The interface every store driver implements, written once: `Ledger` (the chain's rules)
talks to a driver only through it. A new driver (object storage, another database) is a
module beside `_sqlite` and `_postgres` that keeps every MUST below.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from receipts import Digest
from verify import LedgerSource, StoredEntry

__all__ = ["Backend", "LockedReads"]


@dataclass(frozen=True, slots=True)
class LockedReads:
    """What an append reads under the sequencer, fetched at once (`Backend.locked_reads`).
    Lookups only: the writer checks every row's bytes as it does a row read alone.
    """

    head: StoredEntry | None
    task: str | None
    task_newest: StoredEntry | None  # the newest row whose task column is ``task``
    after: int
    rows: tuple[StoredEntry, ...]  # the rows with seq > after, in order, at most a page
    frontier: tuple[tuple[int, int, bytes], ...]  # tree nodes (level, index, hash) the next leaf needs


class Backend(Protocol):
    """Where a ledger keeps its rows and blobs. A driver locks, writes and commits; every
    rule of the chain (what may be appended, by whom, linked to what) stays in `Ledger`.
    Queries use ``?`` placeholders and the tables of docs/format.md §7.
    """

    errors: tuple[type[BaseException], ...]
    """The driver's own exception types, which `Ledger` maps to `StoreError`."""

    @property
    def reader(self) -> LedgerSource:
        """The same store as the auditor reads it (`verify`'s source over this connection).

        It MUST see the rows this driver has written in the current transaction, and MUST
        NOT write.
        """
        ...

    def sql(self, query: str, args: tuple[object, ...] = ()) -> Any:
        """Run one query with ``?`` placeholders; returns an iterable of rows.

        Inside `write` it MUST run in that transaction.
        """
        ...

    def write(self) -> contextlib.AbstractContextManager[None]:
        """A write transaction that holds the sequencer.

        While it is held, no other writer (process or machine) MUST be able to append: the
        head read inside it stays the head, so the chain never forks. It MUST commit on a
        clean exit and MUST roll back on any exception, writing nothing. A commit whose
        outcome is unknown MUST raise `CommitUnknown`; a connection lost before the commit
        was sent MUST raise `NotCommitted`.
        """
        ...

    def insert_entries(self, rows: Sequence[tuple[object, ...]]) -> None:
        """Insert entry rows (seq, hash, kind, body_hash, task, entry, body, prev), in order.

        It MUST be called inside `write` only, and MUST NOT reorder, merge or drop rows.
        """
        ...

    def insert_nodes(self, nodes: Sequence[tuple[int, int, bytes]]) -> None:
        """Store Merkle tree nodes (level, index, hash), replacing one already stored.

        It MUST be called inside `write` only.
        """
        ...

    def put_blob_stream(self, stream: BinaryIO) -> tuple[Digest, int]:
        """Store a blob by its BLAKE3 digest, streaming; returns the digest and size.

        It MUST make the blob durable before returning (an entry that refers to it is
        written after), MUST NOT hold the whole blob in memory, and MUST leave nothing
        behind when it fails. Storing a blob that is already stored MUST be harmless.
        """
        ...

    def sweep_incoming(self) -> list[Path]:
        """Remove what writers that died mid-blob left behind; returns what was removed.

        It MUST NOT touch a live writer's temporary files.
        """
        ...

    def locked_reads(self, task: str | None, after: int) -> LockedReads | None:
        """Inside `write`: the head, ``task``'s newest row by its index column, the rows after
        seq ``after`` (a page of them) and the stored tree nodes the next leaf's left
        siblings may be, read in that transaction.

        A driver whose every query is a round trip SHOULD read them at once (the sequencer
        is held meanwhile); one whose queries are cheap MAY return None, and the writer
        then reads them one query at a time. It MUST NOT return rows of another
        transaction's view.
        """
        ...

    def reconnect(self) -> None:
        """Open a new connection after `NotCommitted` or `CommitUnknown`."""
        ...

    def close(self) -> None:
        """Release the connection; the driver MUST NOT be used after it."""
        ...
