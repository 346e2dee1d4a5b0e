"""Repairing a shared store whose head is junk (issue 22, case 9).

The database refuses a row that does not extend the head (`verify.schema`), but it cannot
check a signature: someone with the writer role can still insert, at head + 1 and linked
to the head, a row whose bytes are no signed entry. No honest writer will extend it, so
every later append fails. `repair_head` is the way back, for the database's owner (who
alone may set the append-only triggers aside): it audits the chain, and in one
transaction moves the rows from the first entry the audit rejects to the head, and the
checkpoints over them, into ``quarantined_entries`` and ``quarantined_checkpoints``
(kept as evidence, with when and why), drops the Merkle tree nodes that cover them, and
leaves a chain that verifies. Nothing is rewritten: what remains is a prefix of what was
there, so every checkpoint a mirror or a witness kept from before the junk still holds.
The writer role can also insert a blob row whose bytes cannot be read or do not hash to
its name (issue 47): no entry can name those bytes, so such rows move too, into
``quarantined_blobs`` and ``quarantined_blob_chunks``.
Applied, it also (re)installs the schema's guards, so that a store created before one of
them existed gets it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from receipts import Digest
from verify import CannotVerify, LedgerSource, PostgresSource, Trust, blob_problem, verify_chain
from verify.postgres import connect_error, first_line, import_psycopg, redact_url
from verify.schema import PG_SCHEMA

from .._errors import InputError, StoreError
from ._postgres import LOCK_KEY

__all__ = ["HeadRepair", "repair_head"]

_TRIGGERS = (
    ("entries", "entries_append_only"),
    ("tree", "tree_append_only"),
    ("checkpoints", "checkpoints_append_only"),
)


@dataclass(frozen=True, slots=True)
class HeadRepair:
    """What `repair_head` found and, when applied, moved.

    ``first_bad`` is None when the chain verifies (``applied`` then says the guards were
    installed, and any junk blob rows moved); ``rows`` are the quarantined entries' (seq,
    stored hash in hex), ``checkpoints`` the quarantined checkpoints' sizes, ``reasons``
    the audit's defects at the first bad entry, ``blobs`` the junk blob rows (digest,
    why).
    """

    first_bad: int | None
    rows: tuple[tuple[int, str], ...]
    checkpoints: tuple[int, ...]
    reasons: tuple[str, ...]
    applied: bool
    blobs: tuple[tuple[Digest, str], ...] = ()

    @property
    def found(self) -> bool:
        """Whether there was anything to quarantine."""
        return self.first_bad is not None or bool(self.blobs)

    def as_dict(self) -> dict[str, Any]:
        """`ledger repair-head --json`."""
        blobs = [{"digest": str(d), "reason": why} for d, why in self.blobs]
        if self.first_bad is None:
            return {
                "repaired": self.applied and bool(blobs),
                "guards_installed": self.applied,
                "rows": [],
                "blobs": blobs,
            }
        return {
            "repaired": self.applied,
            "first_bad": self.first_bad,
            "rows": [{"seq": seq, "hash": h} for seq, h in self.rows],
            "checkpoints": list(self.checkpoints),
            "reasons": list(self.reasons),
            "blobs": blobs,
        }

    def lines(self) -> list[str]:
        """`ledger repair-head` for the store's owner: what moved (or would), and why."""
        if not self.found:
            return [
                "NOTHING TO REPAIR: the chain verifies" + ("; the store's guards are installed" if self.applied else "")
            ]
        done = "QUARANTINED" if self.applied else "WOULD QUARANTINE"
        later = "" if self.applied else " (run again with --apply)"
        lines = []
        if self.first_bad is not None:
            lines.append("%s %d row(s) from entry %d%s:" % (done, len(self.rows), self.first_bad, later))
            lines += ["  entry %d  %s" % (seq, h) for seq, h in self.rows]
            lines += ["  checkpoint at size %d" % size for size in self.checkpoints]
            lines += ["  because: %s" % why for why in self.reasons]
        if self.blobs:
            lines.append("%s %d blob row(s) that no entry can name%s:" % (done, len(self.blobs), later))
            lines += ["  blob %s  %s" % (d, why) for d, why in self.blobs]
        return lines


def repair_head(url: str, trust: Trust, *, apply: bool) -> HeadRepair:
    """Quarantine a shared store's junk head.

    Args:
        url: the store, connected to as its owner (the triggers are the owner's to set aside).
        trust: the pin the audit runs under.
        apply: move the rows; without it, only say what would move.

    Returns:
        The `HeadRepair`.

    Raises:
        InputError: the audit rejects the store but at no entry (a damaged checkpoint or
            tree, which this does not repair), or the connection is not the owner's.
        StoreError: the store cannot be reached, or changed while it was audited.
    """
    # 1. Audit the chain (signatures, links, bodies; evidence is not what jams a writer),
    # and find the blob rows whose bytes no entry can name.
    try:
        with PostgresSource.open_url(url) as source:
            audited = verify_chain(source, trust, evidence=False)
            blobs = _junk_blobs(source)
    except CannotVerify as exc:
        raise StoreError(str(exc)) from None
    if audited.ok:
        if apply:
            with _as_owner(url, "install its guards" if not blobs else "quarantine its junk blob rows") as conn:
                _quarantine_blobs(conn, blobs)
                conn.execute(PG_SCHEMA)  # idempotent: a store older than a guard gets it
        return HeadRepair(None, (), (), (), applied=apply, blobs=blobs)
    bad = audited.first_bad
    if bad is None:
        raise InputError(
            "the audit rejects %s, but at no entry (%s): repair-head only quarantines a junk head"
            % (redact_url(url), audited.defects[0].message)
        )
    reasons = tuple("[%s] %s" % (d.code, d.message) for d in audited.defects if d.seq == bad)
    with _as_owner(url, "repair its head") as conn:
        # 2. Under the writers' sequencer, read what would move: the audit's view must still stand.
        rows = tuple(
            (int(seq), bytes(h).hex())
            for seq, h in conn.execute("SELECT seq, hash FROM entries WHERE seq >= %s ORDER BY seq", (bad,))
        )
        sizes = tuple(int(s) for (s,) in conn.execute("SELECT size FROM checkpoints WHERE size > %s", (bad,)))
        if not rows or rows[-1][0] != audited.entries - 1:
            raise StoreError("%s changed while it was audited: run the repair again" % redact_url(url))
        if not apply:
            return HeadRepair(bad, rows, sizes, reasons, applied=False, blobs=blobs)  # nothing written
        # 3. Keep the junk as evidence, then cut the store back to the prefix that verifies.
        _quarantine_blobs(conn, blobs)
        _quarantine(conn, bad, reasons)
    return HeadRepair(bad, rows, sizes, reasons, applied=True, blobs=blobs)


def _junk_blobs(source: LedgerSource) -> tuple[tuple[Digest, str], ...]:
    """The blob rows whose bytes cannot be read whole or do not hash to their name: content
    addressed as evidence is, no entry can name those bytes (blob rows are append-only, so
    what is junk now stays junk until the owner moves it).
    """
    junk = []
    for hexed in source.blob_digests(""):
        digest = Digest.parse("blake3:" + hexed)
        try:
            problem = blob_problem(source, digest)  # the verifier's own re-hash of a blob
        except CannotVerify as exc:
            junk.append((digest, str(exc)))
            continue
        if problem == "evidence-altered":
            junk.append((digest, "its bytes do not hash to its name"))
    return tuple(junk)


def _quarantine_blobs(conn: Any, blobs: tuple[tuple[Digest, str], ...]) -> None:
    """Copy the junk blob rows and their chunks into the quarantine tables, then delete
    them, with the blob tables' append-only triggers set aside for this transaction only.
    """
    if not blobs:
        return
    now = int(time.time())
    conn.execute(
        "CREATE TABLE IF NOT EXISTS quarantined_blobs (digest BYTEA NOT NULL, size BIGINT, chunks INTEGER,"
        " quarantined_at BIGINT NOT NULL, reason TEXT NOT NULL)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS quarantined_blob_chunks (digest BYTEA NOT NULL, idx INTEGER, data BYTEA)")
    for table in ("blobs", "blob_chunks"):
        conn.execute("ALTER TABLE %s DISABLE TRIGGER %s_append_only" % (table, table))
    for digest, why in blobs:
        conn.execute(
            "INSERT INTO quarantined_blobs SELECT digest, size, chunks, %s, %s FROM blobs WHERE digest = %s",
            (now, why[:2000], digest.value),
        )
        conn.execute(
            "INSERT INTO quarantined_blob_chunks SELECT digest, idx, data FROM blob_chunks WHERE digest = %s",
            (digest.value,),
        )
        conn.execute("DELETE FROM blob_chunks WHERE digest = %s", (digest.value,))
        conn.execute("DELETE FROM blobs WHERE digest = %s", (digest.value,))
    for table in ("blobs", "blob_chunks"):
        conn.execute("ALTER TABLE %s ENABLE TRIGGER %s_append_only" % (table, table))


def _quarantine(conn: Any, bad: int, reasons: tuple[str, ...]) -> None:
    """Copy the entries from ``bad`` on (and the checkpoints over them) into the quarantine
    tables, then delete them, the checkpoints and the tree nodes that cover them, with the
    append-only triggers set aside for exactly this transaction.
    """
    now, why = int(time.time()), "; ".join(reasons)[:2000]
    conn.execute(
        "CREATE TABLE IF NOT EXISTS quarantined_entries (seq BIGINT NOT NULL, hash BYTEA, kind TEXT,"
        " body_hash BYTEA, task TEXT, entry BYTEA, body BYTEA, prev BYTEA,"
        " quarantined_at BIGINT NOT NULL, reason TEXT NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS quarantined_checkpoints (size BIGINT NOT NULL, note TEXT,"
        " quarantined_at BIGINT NOT NULL, reason TEXT NOT NULL)"
    )
    conn.execute(
        "INSERT INTO quarantined_entries SELECT seq, hash, kind, body_hash, task, entry, body, prev, %s, %s"
        " FROM entries WHERE seq >= %s",
        (now, why, bad),
    )
    conn.execute(
        "INSERT INTO quarantined_checkpoints SELECT size, note, %s, %s FROM checkpoints WHERE size > %s",
        (now, "over entries quarantined from %d: %s" % (bad, why), bad),
    )
    for table, trigger in _TRIGGERS:
        conn.execute("ALTER TABLE %s DISABLE TRIGGER %s" % (table, trigger))
    conn.execute("DELETE FROM checkpoints WHERE size > %s", (bad,))
    # A node at (level, idx) covers leaves idx * 2^level up to (idx + 1) * 2^level - 1.
    conn.execute("DELETE FROM tree WHERE (idx + 1) * (CAST(1 AS BIGINT) << level) > %s", (bad,))
    conn.execute("DELETE FROM entries WHERE seq >= %s", (bad,))
    for table, trigger in _TRIGGERS:
        conn.execute("ALTER TABLE %s ENABLE TRIGGER %s" % (table, trigger))
    conn.execute(PG_SCHEMA)  # a store older than its guards gets them (idempotent)


@contextmanager
def _as_owner(url: str, what: str) -> Iterator[Any]:
    """A transaction on ``url`` under the writers' sequencer lock, its failures mapped: a
    missing privilege means the caller is not the owner.
    """
    psycopg = import_psycopg()
    try:
        with psycopg.connect(url, connect_timeout=10) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            yield conn
    except psycopg.errors.InsufficientPrivilege as exc:
        raise InputError(
            "%s: only the database's owner can %s (%s)" % (redact_url(url), what, first_line(exc))
        ) from None
    except psycopg.OperationalError as exc:
        raise StoreError(connect_error(url, exc)) from None
    except psycopg.Error as exc:
        raise StoreError("cannot %s on %s: %s" % (what, redact_url(url), first_line(exc))) from None
