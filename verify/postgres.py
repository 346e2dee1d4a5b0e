"""A shared ledger on PostgreSQL, opened read-only (docs/format.md §7a). Public, like
`verify.schema`, because the writer connects and checks the schema the same way.

The same queries as a ledger directory (`LedgerSource`); only the placeholders, the blob
table and the errors differ. `psycopg` is imported when a source is opened, so that the
base install and every other use of `verify` work without it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, BinaryIO

from receipts import Digest

from ._errors import CannotVerify, NoLedger
from ._source import LedgerSource
from .schema import PG_SCHEMA_VERSION

__all__ = [
    "PostgresSource",
    "is_postgres_url",
    "redact_url",
    "import_psycopg",
    "first_line",
    "connect_error",
    "check_schema",
]


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL store (a ``postgresql://`` or ``postgres://`` URL)."""
    return text.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """The URL with any password replaced, for messages and files."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return scheme + sep + (userinfo + at if at else "") + host + slash + tail


def import_psycopg() -> Any:
    """The optional PostgreSQL driver.

    Raises:
        CannotVerify: the ``postgres`` extra is not installed.
    """
    try:
        import psycopg
    except ImportError:
        raise CannotVerify(
            "a PostgreSQL store needs the optional driver: pip install 'receipt-ledger[postgres]'"
        ) from None
    return psycopg


def first_line(exc: BaseException) -> str:
    """A driver error as one line: its first (libpq adds hints and context below it)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect_error(url: str, exc: Exception) -> str:
    """One line for a failed connection: the server's own reason, without the password."""
    return "cannot connect to the shared ledger %s: %s" % (redact_url(url), first_line(exc))


def check_schema(conn: Any, url: str) -> None:
    """Refuse a database that holds no ledger, or one of a schema version we do not know."""
    row = conn.execute("SELECT to_regclass('ledger_meta') IS NOT NULL, to_regclass('entries') IS NOT NULL").fetchone()
    if not row[1] or conn.execute("SELECT 1 FROM entries WHERE seq = 0").fetchone() is None:
        raise NoLedger("no ledger in %s: run `ledger init --store URL` first" % redact_url(url))
    version = None
    if row[0]:
        found = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
        version = None if found is None else found[0]
    if version != str(PG_SCHEMA_VERSION):
        raise CannotVerify(
            "the shared ledger %s has schema version %s; this receipt-ledger reads version %d (upgrade it)"
            % (redact_url(url), version, PG_SCHEMA_VERSION)
        )


class _BlobReader(io.RawIOBase):
    """A blob's chunks fetched one at a time: a large blob never sits whole in memory."""

    def __init__(self, source: PostgresSource, digest: bytes, chunks: int) -> None:
        self._source, self._digest, self._chunks = source, digest, chunks
        self._next, self._buffer = 0, b""

    def readable(self) -> bool:
        return True

    def readinto(self, out: Any) -> int:
        while not self._buffer and self._next < self._chunks:
            rows = list(
                self._source._rows(
                    "SELECT data FROM blob_chunks WHERE digest = ? AND idx = ?", (self._digest, self._next)
                )
            )
            if not rows:
                raise CannotVerify("evidence blob blake3:%s lacks chunk %d" % (self._digest.hex(), self._next))
            self._buffer, self._next = bytes(rows[0][0]), self._next + 1
        n = min(len(out), len(self._buffer))
        out[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


class PostgresSource(LedgerSource):
    """A shared ledger read through a read-only transaction mode: nothing here can write."""

    def __init__(self, conn: Any, url: str) -> None:
        super().__init__(conn, None)
        self.url = url
        self._errors: Any = import_psycopg().Error

    @classmethod
    def open_url(cls, url: str) -> PostgresSource:
        """Connect read-only to the shared ledger at ``url`` and check its schema.

        Raises:
            CannotVerify: the server cannot be reached or read, or its schema is not one this reads.
        """
        psycopg = import_psycopg()
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise CannotVerify(connect_error(url, exc)) from None
        try:
            conn.execute("SET default_transaction_read_only = on")
            check_schema(conn, url)
        except psycopg.Error as exc:
            conn.close()
            raise CannotVerify("cannot read the shared ledger %s: %s" % (redact_url(url), first_line(exc))) from None
        except CannotVerify:
            conn.close()
            raise
        return cls(conn, url)

    def _rows(self, sql: str, args: tuple[object, ...] = ()) -> Iterator[tuple[Any, ...]]:
        try:
            # Our queries hold no literal '?' or '%': placeholders are the only ones.
            yield from self.conn.execute(sql.replace("?", "%s"), args)
        except self._errors as exc:
            raise CannotVerify("cannot read the shared ledger: %s" % first_line(exc)) from None

    def _has_checkpoints(self) -> bool:
        return True  # part of every schema version this reads (check_schema)

    def blob_digests(self, prefix: str) -> list[str]:
        """The stored blobs' digests (hex) that start with ``prefix``, sorted."""
        low = bytes.fromhex(prefix[: len(prefix) // 2 * 2])
        return sorted(
            d.hex()
            for (d,) in self._rows("SELECT digest FROM blobs WHERE substring(digest from 1 for ?) = ?", (len(low), low))
            if bytes(d).hex().startswith(prefix)
        )

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        """The blob's bytes, streamed from its chunks; None if it is not stored."""
        for (chunks,) in self._rows("SELECT chunks FROM blobs WHERE digest = ?", (digest.value,)):
            return io.BufferedReader(_BlobReader(self, digest.value, int(chunks)), 1 << 20)
        return None
