"""What the verifier reads: the `Source` protocol, and a ledger directory opened
read-only (its schema is `verify.schema`, shared with the writer).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Protocol

from receipts import (
    KEYRING_KINDS,
    Body,
    Checkpoint,
    CheckpointTimestamp,
    CompactRange,
    Digest,
    Entry,
    EntryKind,
    EvidenceRef,
    Genesis,
    Keyring,
    NamedRetention,
    ReceiptsError,
    RetentionPolicy,
    Role,
    SignedNote,
    StatementRegistration,
    TierRecord,
    body_hash,
    check_entry_signature,
    content_digest,
    decode_as,
    decode_body,
    decode_entry,
    entry_hash,
    leaf_hash,
    named_retention,
    parse_checkpoint,
    parse_note,
    replay_keyring,
)

from ._errors import CannotVerify, NoLedger
from ._evidence import read_blob
from ._policy import Transparency
from ._result import Defect, Finding
from ._transparency import check_checkpoints, checkpoint_signer
from .schema import BLOB_DIR, DB_NAME, blob_path

__all__ = [
    "Source",
    "StoredEntry",
    "LedgerSource",
    "SparseEntries",
    "KEYRING_KIND_NAMES",
    "keyring_changes",
    "keyring_entries",
    "ledger_transparency",
]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One row of the entries table (docs/format.md §7): the signed bytes and the index
    columns beside them, which are lookup aids only.
    """

    seq: int
    hash: bytes
    kind: str
    body_hash: bytes
    task: str | None
    entry: bytes
    body: bytes

    COLUMNS: ClassVar[str] = "seq, hash, kind, body_hash, task, entry, body"
    """The columns a query selects for `from_row`, in its order."""

    @classmethod
    def from_row(cls, row: tuple[object, ...]) -> StoredEntry:
        """A row selected as `COLUMNS`, its column types checked.

        Raises:
            CannotVerify: a column has the wrong type.
        """
        seq, h, kind, bh, task, entry, body = row
        if not (
            isinstance(seq, int)
            and isinstance(h, bytes)
            and isinstance(kind, str)
            and isinstance(bh, bytes)
            and (task is None or isinstance(task, str))
            and isinstance(entry, bytes)
            and isinstance(body, bytes)
        ):
            raise CannotVerify("ledger database row %r has columns of the wrong type" % (seq,))
        return cls(seq, h, kind, bh, task, entry, body)


def _row(row: tuple[object, ...] | None) -> StoredEntry | None:
    return None if row is None else StoredEntry.from_row(row)


class Source(Protocol):
    """What the verifier reads: a whole ledger, or the sparse copy in a bundle."""

    sparse: bool
    """True for a copy that holds only some entries (a bundle): inclusion proofs, not
    contiguity, then fix each entry's place."""

    def by_body_hash(self, digest: Digest) -> StoredEntry | None:
        """The first entry (in chain order) whose body has this hash, if any.

        The row is untrusted: the verifier re-hashes its bytes before relying on it.
        """
        ...

    def by_hash(self, digest: Digest) -> StoredEntry | None:
        """The entry whose entry hash this is, if any (untrusted, as `by_body_hash`)."""
        ...

    def iter_entries(self, upto: int | None = None, task: str | None = None) -> Iterator[StoredEntry]:
        """Entries in chain order, up to position ``upto`` (inclusive), or with this task column.

        The task column is an index, not signed data: a step that must see every entry
        of a task walks the signed chain instead.
        """
        ...

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        """The stored blob, streamed (None if it is not held); the caller re-hashes it."""
        ...

    def redacted(self, digest: Digest) -> bool:
        """True when the source says it left this blob out on purpose (a bundle's exporter
        may redact evidence no verdict is derived from); a ledger never does.
        """
        ...

    def pruned(self, record: TierRecord, ref: EvidenceRef) -> str | None:
        """Why this evidence may be gone under the ledger's retention policy, if it may."""
        ...

    def checkpoints(self) -> list[tuple[int, str]]:
        """The signed checkpoints held, as (tree size, note text), oldest first (untrusted)."""
        ...

    def count(self) -> int:
        """How many entries the source holds (a bundle: the ones it carries)."""
        ...

    def check_transparency(self, origin: str, ring: Keyring | None, receipt_seq: int, policy: Transparency) -> Finding:
        """Step 8 as this source can prove it: ``ring`` is the keyring the walk replayed
        up to the receipt.
        """
        ...


class SparseEntries:
    """Lookups over the entries a sparse copy holds (a bundle, or a receipt's history read
    by proof), by sequence number in ``entries``.
    """

    sparse = True
    entries: dict[int, StoredEntry]

    def by_body_hash(self, digest: Digest) -> StoredEntry | None:
        return next((e for _, e in sorted(self.entries.items()) if e.body_hash == digest.value), None)

    def by_hash(self, digest: Digest) -> StoredEntry | None:
        return next((e for e in self.entries.values() if e.hash == digest.value), None)

    def iter_entries(self, upto: int | None = None, task: str | None = None) -> Iterator[StoredEntry]:
        for seq in sorted(self.entries):
            if (upto is None or seq <= upto) and (task is None or self.entries[seq].task == task):
                yield self.entries[seq]


class LedgerSource:
    """A ledger directory opened read-only. Every SQLite failure becomes `CannotVerify`.

    Every query goes through `_rows`, so that a store speaking another SQL dialect (the
    shared PostgreSQL store, `verify.PostgresSource`) reads with the same queries.
    """

    sparse = False  # every entry is here; a bundle holds only some

    def __init__(self, conn: Any, root: Path | None) -> None:
        self.conn = conn
        self.root = root
        self._policy: tuple[int, tuple[int, RetentionPolicy, str] | None] | None = None  # (ledger size, policy)

    @classmethod
    def open(cls, root: Path) -> LedgerSource:
        db = root / DB_NAME
        if not db.is_file():
            raise NoLedger("no ledger at %s (missing %s)" % (root, DB_NAME))
        uri = "file:%s?mode=ro" % db.resolve().as_posix()
        try:
            conn = cls._connect(uri)
        except sqlite3.OperationalError as exc:
            # On read-only media SQLite cannot create its WAL index; the immutable mode reads
            # the main file only, which is complete exactly when no WAL data is waiting.
            wal = db.with_name(db.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise CannotVerify(
                    "cannot read %s (%s), and its write-ahead log holds changes that a read-only copy cannot"
                    " include: copy the ledger somewhere writable to verify it" % (db, exc)
                ) from None
            try:
                conn = cls._connect(uri + "&immutable=1")
            except sqlite3.Error as exc2:
                raise CannotVerify("cannot read ledger database %s: %s" % (db, exc2)) from None
        except sqlite3.Error as exc:
            raise CannotVerify("cannot read ledger database %s: %s" % (db, exc)) from None
        return cls(conn, root)

    @staticmethod
    def _connect(uri: str) -> sqlite3.Connection:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT max(seq) FROM entries").fetchone()
        return conn

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> LedgerSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, args: tuple[object, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of one query (``?`` placeholders); a database failure is `CannotVerify`."""
        try:
            yield from self.conn.execute(sql, args)
        except sqlite3.Error as exc:
            raise CannotVerify("cannot read ledger database: %s" % exc) from None

    def _one(self, sql: str, args: tuple[object, ...]) -> StoredEntry | None:
        return _row(next(iter(self._rows(sql, args)), None))

    def by_seq(self, seq: int) -> StoredEntry | None:
        return self._one("SELECT %s FROM entries WHERE seq = ?" % StoredEntry.COLUMNS, (seq,))

    def by_hash(self, digest: Digest) -> StoredEntry | None:
        return self._one("SELECT %s FROM entries WHERE hash = ?" % StoredEntry.COLUMNS, (digest.value,))

    def by_body_hash(self, digest: Digest) -> StoredEntry | None:
        return self._one(
            "SELECT %s FROM entries WHERE body_hash = ? ORDER BY seq LIMIT 1" % StoredEntry.COLUMNS, (digest.value,)
        )

    def head(self) -> StoredEntry | None:
        return self._one("SELECT %s FROM entries ORDER BY seq DESC LIMIT 1" % StoredEntry.COLUMNS, ())

    def newest_of_task(self, task: str, upto: int, kind: str | None = None) -> StoredEntry | None:
        """The newest entry whose ``task`` column (and ``kind``, if given) match, at or below
        ``upto``: one indexed probe. The columns are lookup aids: callers check the bytes.
        """
        args: tuple[object, ...]
        if kind is None:
            sql, args = "task = ? AND seq <= ?", (task, upto)
        else:
            sql, args = "task = ? AND kind = ? AND seq <= ?", (task, kind, upto)
        return self._one("SELECT %s FROM entries WHERE %s ORDER BY seq DESC LIMIT 1" % (StoredEntry.COLUMNS, sql), args)

    def count(self) -> int:
        # seq runs 0..n-1 without gaps (verify checks it), so the newest seq is the count,
        # found by the primary key instead of a scan.
        for (n,) in self._rows("SELECT max(seq) FROM entries"):
            return 0 if n is None else int(n) + 1
        return 0

    def rows_below(self, size: int) -> int:
        """How many entries are stored below ``size`` (a scan of the key, not of the rows)."""
        for (n,) in self._rows("SELECT count(*) FROM entries WHERE seq < ?", (size,)):
            return int(n)
        return 0

    def iter_entries(
        self, upto: int | None = None, task: str | None = None, kind: str | None = None
    ) -> Iterator[StoredEntry]:
        where: list[str] = []
        args: list[object] = []
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if upto is not None:
            where.append("seq <= ?")
            args.append(upto)
        if task is not None:
            where.append("task = ?")
            args.append(task)
        sql = "SELECT %s FROM entries %s ORDER BY seq" % (
            StoredEntry.COLUMNS,
            ("WHERE " + " AND ".join(where)) if where else "",
        )
        for row in self._rows(sql, tuple(args)):
            yield StoredEntry.from_row(row)

    def entries_between(self, start: int, stop: int, page: int = 5000) -> Iterator[StoredEntry]:
        """Entries with start <= seq < stop in order, a page at a time: memory stays bounded
        however many there are.
        """
        while start < stop:
            rows = list(
                self._rows(
                    "SELECT %s FROM entries WHERE seq >= ? AND seq < ? ORDER BY seq LIMIT ?" % StoredEntry.COLUMNS,
                    (start, stop, page),
                )
            )
            if not rows:
                return
            for row in rows:
                yield StoredEntry.from_row(row)
            start = int(rows[-1][0]) + 1

    def redacted(self, digest: Digest) -> bool:
        return False  # a ledger redacts nothing: one that is missing is missing

    def _signed(self, kind: EntryKind, role: Role) -> list[tuple[int, Body, str]]:
        """Entries of a ledger-wide ``kind`` whose signature verifies, by a key with ``role``
        as the keyring stood at each: (seq, body, signer). The others grant nothing; the
        chain walk reports them.
        """
        return self._valid(list(self.iter_entries(kind=kind.value)), kind, role)

    def newest_retention(self, start: int, stop: int) -> StoredEntry | None:
        """The newest entry with start <= seq < stop that is a retention policy by its own
        signed bytes (not the kind column) and validly signed by an admin key as the keyring
        stood at it: what a checkpoint's retention line names (format.md §9).
        """
        rows = [s for s in self.entries_between(start, stop) if _kind_of(s) is EntryKind.RETENTION]
        valid = {seq for seq, _, _ in self._valid(rows, EntryKind.RETENTION, Role.ADMIN)}
        return next((s for s in reversed(rows) if s.seq in valid), None)

    def _valid(
        self, rows: list[StoredEntry], kind: EntryKind, role: Role, ring: Keyring | None = None
    ) -> list[tuple[int, Body, str]]:
        if not rows:
            return []
        # One replay past the last of them: a key's authority at a seq is judged by when it
        # was added and revoked, which a longer replay does not change (as step 8's proof).
        ring = ring or self._ring_below(rows[-1].seq)
        found = []
        for stored in rows:
            try:
                entry = decode_entry(stored.entry)
                body = decode_body(kind, stored.body)
                if ring is None or entry.seq != stored.seq or entry.body_hash != body_hash(kind, stored.body):
                    continue
                state = check_entry_signature(ring, entry, (role,))
            except ReceiptsError:
                continue
            found.append((stored.seq, body, "%s (%s)" % (state.spec.name, state.key_id)))
        return found

    def _ring_below(self, size: int) -> Keyring | None:
        try:
            return replay_keyring(keyring_entries(self, size), verify_signatures=True)
        except ReceiptsError:
            return None

    def retention(self, ring: Keyring | None = None) -> tuple[int, RetentionPolicy, str] | None:
        """The newest retention policy validly signed by an admin key (as the keyring stood
        at its entry), with its seq and signer; None when the ledger has none (format.md
        §3.4d). Each way of finding one can only add a candidate, so hiding the newest takes
        defeating all three: below the newest checkpoint, the entry its signed retention line
        names; after it (or everywhere, when it has no line), the entries by their own bytes;
        and the kind column. Read only when evidence is missing.

        Args:
            ring: the keyring of every entry the ledger holds, replayed with its signatures
                checked, when the caller has one; otherwise it is replayed here.
        """
        size = self.count()  # a writer's reader lives on while policies are appended
        if self._policy is None or self._policy[0] != size:
            ring = ring or self._ring_below(size)  # one replay serves every candidate and the checkpoint
            start, named = self._named_by_checkpoint(ring)
            found = {s.seq: s for s in self.iter_entries(kind=EntryKind.RETENTION.value)}
            found.update((s.seq, s) for s in named)
            found.update((s.seq, s) for s in self.entries_between(start, size) if _kind_of(s) is EntryKind.RETENTION)
            rows = [found[seq] for seq in sorted(found)]
            policies = [
                (s, b, who)
                for s, b, who in (self._valid(rows, EntryKind.RETENTION, Role.ADMIN, ring) if ring else [])
                if isinstance(b, RetentionPolicy)
            ]
            self._policy = (size, policies[-1] if policies else None)
        return self._policy[1]

    def _named_by_checkpoint(self, ring: Keyring | None) -> tuple[int, list[StoredEntry]]:
        """The newest checkpoint's size and the policy entry its retention line names, when a
        seal or admin key of the ledger signed it and the entry is a policy by its bytes;
        (0, []) otherwise, and the caller reads every entry.
        """
        newest, genesis = self.newest_checkpoint(), self.by_seq(0)
        if newest is None or genesis is None:
            return 0, []
        try:
            note = parse_note(newest[1])
            named = named_retention(parse_checkpoint(note.text).extensions)
            origin = decode_as(Genesis, genesis.body).origin
        except ReceiptsError:
            return 0, []
        if named is None or checkpoint_signer(ring, note, origin, newest[0]) is None:
            return 0, []
        if named.seq is None:
            return newest[0], []
        found = self.named_policy(named, newest[0])
        return (newest[0], [found]) if found is not None else (0, [])

    def named_policy(self, named: NamedRetention, size: int) -> StoredEntry | None:
        """The entry a checkpoint of ``size``'s retention line names, if the ledger holds it
        there: below that size, with that entry hash, a retention entry by its own bytes.
        """
        found = self.by_seq(named.seq) if named.seq is not None and named.seq < size else None
        if found is None or entry_hash(found.entry) != named.entry or _kind_of(found) is not EntryKind.RETENTION:
            return None
        return found

    def timestamp_tokens(self, note_text: str, size: int) -> tuple[list[tuple[str, bytes]], str]:
        """The time-stamp tokens this ledger recorded for the checkpoint of ``size`` whose
        signed text is ``note_text`` (by a valid seal key, over that exact text, their blobs
        re-hashing), each with its label; and why there are none, if none.
        """
        digest = content_digest(note_text.encode("utf-8"))
        tokens, why = [], "no time-stamp was recorded for it"
        for seq, stamp, signer in self.timestamps():
            if stamp.size != size:
                continue
            token = read_blob(self, stamp.token, limit=1 << 20) if stamp.checkpoint == digest else None
            if token is None:
                why = "entry %d's time-stamp is over other text, or its token is missing or altered" % seq
                continue
            tokens.append(("entry %d, recorded by %s" % (seq, signer), token))
        return tokens, why

    def statements(self) -> list[tuple[int, StatementRegistration]]:
        """The statement log (§15a): registered SCITT statements in chain order, each
        recorded by a seal key; an entry that is not does not count (the chain walk
        reports it).
        """
        return [
            (s, b) for s, b, _ in self._signed(EntryKind.STATEMENT, Role.SEAL) if isinstance(b, StatementRegistration)
        ]

    def timestamps(self) -> list[tuple[int, CheckpointTimestamp, str]]:
        """RFC 3161 time-stamps over checkpoints, each recorded by a seal key (§9)."""
        return [
            (s, b, who)
            for s, b, who in self._signed(EntryKind.TIMESTAMP, Role.SEAL)
            if isinstance(b, CheckpointTimestamp)
        ]

    def pruned(self, record: TierRecord, ref: EvidenceRef, ring: Keyring | None = None) -> str | None:
        found = self.retention(ring)
        if found is None or not found[1].removable(record, ref, int(time.time())):
            return None
        seq, policy, signer = found
        return "removed under the retention policy of entry %d (evidence older than %s may go; signed by %s)%s" % (
            seq,
            days_text(policy.evidence_max_age_s),
            signer,
            "; this evidence was %s old" % days_text(int(time.time()) - record.created),
        )

    def checkpoints(self) -> list[tuple[int, str]]:
        """Stored checkpoint notes, by tree size (an older ledger may have none)."""
        if not self._has_checkpoints():
            return []
        return [(int(size), str(note)) for size, note in self._rows("SELECT size, note FROM checkpoints ORDER BY size")]

    def newest_checkpoint(self) -> tuple[int, str] | None:
        """The stored checkpoint of the largest tree size, if any."""
        if not self._has_checkpoints():
            return None
        for size, note in self._rows("SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1"):
            return int(size), str(note)
        return None

    def _has_checkpoints(self) -> bool:
        # A ledger made before checkpoints existed has no table: it has no checkpoint (§7).
        return bool(list(self._rows("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'")))

    def check_transparency(self, origin: str, ring: Keyring | None, receipt_seq: int, policy: Transparency) -> Finding:
        # The whole ledger is here: the checkpoints' own keyring is replayed past the receipt.
        return ledger_transparency(self, origin, receipt_seq, policy)

    def entry_bytes(self, upto: int) -> Iterator[bytes]:
        """Entry bytes in sequence order, for seq < upto: the Merkle tree's leaves."""
        for (data,) in self._rows("SELECT entry FROM entries WHERE seq < ? ORDER BY seq", (upto,)):
            yield bytes(data)

    def tree_node(self, level: int, index: int) -> bytes | None:
        """A stored Merkle tree node (docs/format.md §7); None if absent. Untrusted: a
        verifier recomputes what it relies on.
        """
        for (h,) in self._rows("SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)):
            return bytes(h)
        return None

    def blob_digests(self, prefix: str) -> list[str]:
        """The hex digests of stored blobs that start with ``prefix`` (at least 2 hex digits)."""
        assert self.root is not None
        return sorted(p.name for p in (self.root / BLOB_DIR / prefix[:2]).glob(prefix + "*") if len(p.name) == 64)

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        assert self.root is not None
        try:
            return blob_path(self.root, digest).open("rb")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CannotVerify("cannot read evidence blob %s: %s" % (digest, exc)) from None


# The keyring kinds as the `kind` column spells them, in one fixed order (for queries).
KEYRING_KIND_NAMES = tuple(sorted(k.value for k in KEYRING_KINDS))


def keyring_changes(rows: Iterable[StoredEntry], below: int | None = None) -> list[tuple[Entry, Body]]:
    """The one way keyring entries are gathered for replay: the keyring rows among ``rows``
    (those below position ``below`` when given), in chain order, decoded. A row that does
    not decode grants nothing and is skipped: the chain walk reports it.
    """
    changes = []
    for stored in sorted(rows, key=lambda e: e.seq):
        if stored.kind in KEYRING_KIND_NAMES and (below is None or stored.seq < below):
            try:
                entry = decode_entry(stored.entry)
                changes.append((entry, decode_body(entry.kind, stored.body)))
            except ReceiptsError:
                continue
    return changes


def _kind_of(stored: StoredEntry) -> EntryKind | None:
    """An entry's kind by its own signed bytes (the kind column is not signed)."""
    try:
        return decode_entry(stored.entry).kind
    except ReceiptsError:
        return None  # the chain walk reports an entry that does not decode


def keyring_entries(source: LedgerSource, upto: int) -> list[tuple[Entry, Body]]:
    """The keyring's changes below ``upto``, by the kind column (a forged column is the chain
    walk's to report).
    """
    return keyring_changes(e for kind in KEYRING_KIND_NAMES for e in source.iter_entries(upto=upto - 1, kind=kind))


class _WholeLedger:
    """Step 8's proof on a whole ledger: every root is recomputed from the entries."""

    def __init__(
        self, source: LedgerSource, sizes: set[int], upto: int, roots: dict[int, bytes] | None, ring: Keyring | None
    ) -> None:
        self.source = source
        self.count = source.count()
        self.roots = _roots(source, sizes, self.count) if roots is None else roots
        # One replay past every size asked about: a key's validity at a size is judged by
        # its available_from and revoked_at, which a longer replay does not change.
        self.ring = replay_keyring(keyring_entries(source, upto), verify_signatures=True) if ring is None else ring

    def ring_at(self, size: int) -> Keyring | None:
        return self.ring

    def _root_at(self, size: int) -> bytes | None:
        return self.roots.get(size) if size <= self.count else None

    def prove(self, checkpoint: Checkpoint, receipt_seq: int) -> list[Defect]:
        if self._root_at(checkpoint.size) == checkpoint.root:
            return []
        held = " (it holds only %d entries)" % self.count if self.count < checkpoint.size else ""
        message = "the ledger's entries do not hash to the root its checkpoint at size %d signed%s"
        return [Defect("checkpoint-root", message % (checkpoint.size, held))]

    def extends(self, kept: Checkpoint, covering: Checkpoint | None) -> bool:
        return self._root_at(kept.size) == kept.root

    def held(self) -> int:
        return self.count

    def tokens(self, note: SignedNote, checkpoint: Checkpoint) -> tuple[list[tuple[str, bytes]], str]:
        return self.source.timestamp_tokens(note.text, checkpoint.size)


def _roots(source: LedgerSource, sizes: set[int], count: int) -> dict[int, bytes]:
    """The tree's root at each size that the ledger reaches, its leaves folded into a
    compact range as they stream past (memory does not grow with the ledger).
    """
    leaves = CompactRange()
    roots = {0: leaves.root()} if 0 in sizes else {}
    for data in source.entry_bytes(min(max(sizes, default=0), count)):
        leaves.append(leaf_hash(data))
        if leaves.size in sizes:
            roots[leaves.size] = leaves.root()
    return roots


def ledger_transparency(
    source: LedgerSource,
    origin: str,
    receipt_seq: int,
    policy: Transparency,
    roots: dict[int, bytes] | None = None,
    ring: Keyring | None = None,
) -> Finding:
    """Step 8 on a whole ledger (`verify._transparency.check_checkpoints`).

    Args:
        source: the ledger.
        origin: its log's name.
        receipt_seq: the receipt's position (-1: a chain audit).
        policy: what the auditor asks.
        roots: roots by size, when a chain audit folded them as it walked.
        ring: the keyring, when a chain audit replayed it as it walked.

    Returns:
        What step 8 found.

    Raises:
        CannotVerify: the ledger cannot be read, or the kept checkpoint is not one of this log.
    """
    stored = [(size, text) for size, text in source.checkpoints() if size > receipt_seq]
    sizes = {size for size, _ in stored[-1:]}
    if policy.since is not None:
        try:
            sizes.add(parse_checkpoint(parse_note(policy.since).text).size)
        except ReceiptsError:
            pass  # step 8c refuses it
    proof = _WholeLedger(source, sizes, max(max(sizes, default=0), receipt_seq + 1), roots, ring)
    return check_checkpoints(proof, stored[-1] if stored else None, origin, receipt_seq, policy)


def days_text(seconds: int) -> str:
    """A duration as people read it: whole days, or hours under two days."""
    if seconds >= 2 * 86400:
        return "%d days" % (seconds // 86400)
    return "%d hours" % max(seconds // 3600, 0)
