"""The interface every store driver implements, written once: `Ledger` (the chain's rules)
talks to a driver only through it. A new driver (object storage, another database) is a
module beside `_sqlite` and `_postgres` that keeps every MUST below.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from receipts import Digest
from verify import LedgerSource

__all__ = ["Backend"]


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

    def reconnect(self) -> None:
        """Open a new connection after `NotCommitted` or `CommitUnknown`."""
        ...

    def close(self) -> None:
        """Release the connection; the driver MUST NOT be used after it."""
        ...
