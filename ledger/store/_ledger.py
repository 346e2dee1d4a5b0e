"""The writing side of the ledger: the chain logic, once, over a `Backend` driver
(`_sqlite` embedded, `_postgres` shared).

The chain logic (`Ledger`) reads the head, checks the keyring, signs on the client and
builds rows; a backend only locks the head, writes rows and blobs, and commits. An
append is one write transaction that holds the backend's sequencer (SQLite's write lock
taken by `BEGIN IMMEDIATE`; on the shared store, `ledger.store._postgres`, an advisory lock),
so concurrent writers queue and the chain never forks. Blobs are stored before the entry
that refers to them, so a crash leaves at worst an unreferenced blob.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar, cast

from receipts import (
    KEYRING_KINDS,
    Body,
    Checkpoint,
    ContractRevision,
    Digest,
    Entry,
    EntryKind,
    Genesis,
    KeyAdd,
    KeyRevoke,
    Keyring,
    KeySpec,
    LadderReceipt,
    NamedRetention,
    ReceiptsError,
    Role,
    SignedNote,
    Signer,
    TaskEvent,
    TierRecord,
    Waiver,
    body_hash,
    body_kind,
    checkpoint_text,
    consistency_proof,
    contract_roles,
    decode_as,
    decode_body,
    decode_entry,
    encode_body,
    entry_hash,
    fingerprint,
    is_valid_consistency,
    is_valid_note_signature,
    leaf_hash,
    named_retention,
    namespace_for,
    node_hash,
    parse_checkpoint,
    parse_note,
    parse_public_key_blob,
    replay_keyring,
    required_role,
    retention_extension,
    sign_entry,
    sign_note,
    sshsig_sign,
    tree_root,
    weakenings,
)
from verify import KEYRING_KIND_NAMES, CannotVerify, LedgerSource, StoredEntry, TrustRoot
from verify.schema import BLOB_DIR, DB_NAME, SCHEMA, blob_path

from .. import _clock
from .._errors import CommitUnknown, InputError, NoSuchHash, NotCommitted, StoreError
from .._layout import NOT_A_HASH, hash_prefix
from ._backend import Backend, LockedReads
from ._sqlite import SqliteBackend, install_staged
from ._trust_file import write_trust_file

__all__ = ["Store", "Ledger", "Appended", "RecordRow"]
_T = TypeVar("_T")
_ATTEMPTS = 3  # whole write transactions tried when a shared store's connection drops before COMMIT
# Only what is versioned with the code is let through: contracts, the shared store's
# address and this file; the chain, the evidence and private state are not.
# What of the ledger directory a team commits: its config, trust pin, contracts and sealed sets (ciphertext only).
GITIGNORE = (
    "*\n!.gitignore\n!config.toml\n!allowed_signers\n!auditing-witnesses\n!contracts/\n!contracts/**\n"
    "!sealed/\n!sealed/*.age\n"
)


class _ReadAhead:
    """The reader during one append: the questions `LockedReads` holds the answers to are
    answered from it, exactly as the queries would answer them in that transaction, and
    every other question goes to the reader. The rows are the same; only the round trips
    differ.
    """

    def __init__(self, reader: LedgerSource, reads: LockedReads) -> None:
        self._reader, self._reads = reader, reads
        self._frontier = {(level, idx): h for level, idx, h in reads.frontier}

    def head(self) -> StoredEntry | None:
        return self._reads.head

    def newest_of_task(self, task: str, upto: int, kind: str | None = None) -> StoredEntry | None:
        head = self._reads.head
        if kind is None and task == self._reads.task and head is not None and upto >= head.seq:
            return self._reads.task_newest  # nothing lies above the head
        return self._reader.newest_of_task(task, upto, kind)

    def entries_between(self, start: int, stop: int, page: int = 5000) -> Iterator[StoredEntry]:
        held = [row for row in self._reads.rows if start <= row.seq < stop]
        if [row.seq for row in held] == list(range(start, stop)):
            return iter(held)
        return self._reader.entries_between(start, stop, page)

    def tree_node(self, level: int, index: int) -> bytes | None:
        found = self._frontier.get((level, index))
        return found if found is not None else self._reader.tree_node(level, index)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


@dataclass(slots=True)
class _Cursor:
    """The head of the chain as a batch of appends moves it."""

    seq: int  # -1 before the genesis entry
    prev: Digest | None
    time: int
    ring: Digest | None
    tasks: dict[str, Digest | None]  # each task's latest entry, where known
    # Rows not yet inserted, and the tree nodes they make; flushed (in the same transaction)
    # before anything reads the entries table, so that a batch costs two executemany calls.
    rows: list[tuple[object, ...]] = field(default_factory=list)
    nodes: dict[tuple[int, int], bytes] = field(default_factory=dict)


# Bodies whose append reads nothing that an earlier entry of the same batch could change.
_DEFERRABLE = (TierRecord, LadderReceipt, TaskEvent)
_INDEX_COLUMNS = ("seq", "hash", "kind", "body_hash", "task")
_INDEX_DISAGREES = (
    "entry %d: the ledger's index disagrees with its signed entries (%s); nothing was written."
    " Run `ledger verify --chain` to see the damage"
)
_KEYRING_SEQS = "SELECT seq FROM entries WHERE kind IN (?, ?, ?) AND seq <= ? ORDER BY seq"


def _pointer(found: Digest | None, seq: int, name: str) -> Digest:
    if found is None:
        raise StoreError(_INDEX_DISAGREES % (seq, "its signed %s pointer is null" % name))
    return found


def _same_rows(indexed: list[int], signed: list[int], what: str) -> None:
    """The rows an index lists against the rows a signed chain names; the first row only
    one of them holds is named.
    """
    if indexed != signed:
        first = min(set(indexed) ^ set(signed))
        side = "the index lists it but %s does not" if first in indexed else "%s names it but the index does not"
        raise StoreError(_INDEX_DISAGREES % (first, side % what))


@dataclass(frozen=True, slots=True)
class RecordRow:
    seq: int
    digest: Digest
    record: TierRecord
    signer: str


@dataclass(frozen=True, slots=True)
class Appended:
    seq: int
    entry_hash: Digest
    body_hash: Digest
    entry: Entry


class Store(Protocol):
    """What the operations need from a ledger store. SQLite is the embedded default; a
    shared server-side store implements the same calls. ``reader`` is its read-only side,
    the same `verify.Source` an auditor reads.
    """

    reader: LedgerSource
    """The store as an auditor reads it (`verify`'s source); it MUST NOT write."""

    def append(self, body: Body, signer: Signer) -> Appended:
        """Sign and append ``body`` as the next entry, in one write transaction.

        It MUST check the signer's role against the keyring at the head and MUST NOT fork
        the chain under concurrent writers.

        Raises:
            InputError: the signer may not sign this body (the message says why).
            StoreError: the store cannot be written, or changed under the writer.
        """
        ...

    def append_unless(self, body: Body, signer: Signer, held: Callable[[], bool]) -> Appended | None:
        """`append`, unless ``held()`` says an entry already stands for ``body``: then
        nothing is written and None is returned.

        It MUST ask ``held`` inside the write transaction, after the writers' lock is taken,
        so that two writers of the same body append it once.
        """
        ...

    def find(self, digest: Digest) -> StoredEntry | None:
        """An entry by its body hash (a record or receipt hash) or its entry hash; None if absent."""
        ...

    def entries(self, task: str | None = None) -> Iterator[StoredEntry]:
        """Every entry in chain order, or one task's.

        A task's entries MUST come from its signed chain (each entry's ``task_prev``), never
        from an index column alone: a column anyone can update must not hide an entry.
        """
        ...

    def keyring(self) -> Keyring:
        """The keyring at the head, replayed from signed keyring entries (never an index)."""
        ...

    def receipt(self, digest: Digest) -> tuple[StoredEntry, LadderReceipt]:
        """The receipt with this hash (receipt or entry hash).

        Raises:
            InputError: there is no receipt with that hash.
        """
        ...

    def records_for(self, task: str) -> list[RecordRow]:
        """The task's tier records in chain order (from its signed chain), with hashes and signers."""
        ...

    def put_blob_file(self, path: Path) -> tuple[Digest, int]:
        """Store an evidence file (a regular file only); its digest and size.

        Raises:
            InputError: ``path`` is not a regular file or cannot be read.
        """
        ...

    def put_blob_stream(self, stream: BinaryIO) -> tuple[Digest, int]:
        """Store a stream's bytes by their BLAKE3 digest, durably, before any entry names them."""
        ...

    def contract_revisions(self, task: str | None = None) -> list[tuple[int, ContractRevision]]:
        """Contract revisions in chain order with their positions, of one task (signed chain) or all."""
        ...

    def latest_contract(self, task: str) -> ContractRevision | None:
        """The task's current contract revision (the newest in its signed chain), if any."""
        ...

    def waivers(self, task: str) -> list[tuple[int, Waiver, str]]:
        """The task's waivers in chain order: (position, waiver, signer key id)."""
        ...

    def bodies(self, kind: EntryKind, task: str | None = None) -> list[tuple[StoredEntry, Body, str]]:
        """Entries of one kind in chain order: (stored row, decoded body, signer key id).

        A task's MUST come from its signed chain, as `entries` says.
        """
        ...

    def record(self, digest: Digest) -> TierRecord | None:
        """The tier record with this hash (record or entry hash), if there is one."""
        ...


def _task_of(body: Body) -> str | None:
    return body.task_id if isinstance(body, (TierRecord, LadderReceipt, ContractRevision, Waiver, TaskEvent)) else None


class Ledger:
    """A ledger opened for writing: the chain's rules over a `Backend`. ``root`` is the
    local ledger directory (contracts, configuration), whichever backend holds the chain.
    """

    def __init__(self, root: Path, backend: Backend, store: str | None = None) -> None:
        self.root = root
        self.backend = backend
        self.reader = backend.reader
        self.store = store  # the shared store's URL, or None for the local one
        self._ring_cache: tuple[Digest, Keyring] | None = None
        self._task_cache: dict[str, tuple[bytes, list[StoredEntry]]] = {}  # by the head it was read at
        # The rows [low, high] had their index columns checked against their bytes by this
        # process (`_task_head_row`), or are its own; empty while high < low. Only a run
        # of rows checked without a gap lets the index answer for all of them.
        self._checked = (0, -1)
        # The head this process last committed (seq, hash, time, ring): its own bytes, which
        # the next append need not decode again.
        self._committed: tuple[int, bytes, int, Digest | None] | None = None
        self._inflight: tuple[Digest, Any] | None = None  # the last entry written, and what returns it

    # -- opening and creating ------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, read_only: bool = False, store: str | None = None) -> Ledger:
        """Open the ledger at ``root`` (or the shared ``store``, a postgresql:// URL).
        ``read_only`` opens it as an auditor does (it works on read-only media and copies;
        every write then fails cleanly).
        """
        if store is not None:
            from ._postgres import PostgresBackend

            return cls(root, PostgresBackend.open(store, read_only=read_only), store)
        if not (root / DB_NAME).is_file():
            raise InputError("no ledger at %s: run `ledger init` first" % root)
        if read_only:
            try:
                conn = LedgerSource.open(root).conn
            except CannotVerify as exc:
                raise StoreError(str(exc)) from None
            return cls(root, SqliteBackend(root, conn))
        backend = SqliteBackend.open(root)
        ledger = cls(root, backend)
        try:
            backend.conn.executescript(SCHEMA)  # tables added since the ledger was made
            ledger._sync_tree()
        except sqlite3.Error as exc:
            raise StoreError("cannot prepare ledger database %s: %s" % (root / DB_NAME, exc)) from None
        try:
            ledger.sweep_incoming()
        except OSError:
            pass  # a read-only copy: nothing could be written there either
        return ledger

    @staticmethod
    def new_genesis(admin: Signer, admin_name: str, created: int, origin: str | None = None) -> Genesis:
        try:
            return Genesis(
                ledger_id=secrets.token_hex(16),
                created=created,
                keys=(KeySpec(admin_name, (Role.ADMIN,), admin.public_key_blob),),
                log_origin=origin,
            )
        except ReceiptsError as exc:
            raise InputError("cannot create the ledger: %s" % exc) from None

    @classmethod
    def create(
        cls,
        root: Path,
        admin: Signer,
        admin_name: str,
        now: int | None = None,
        store: str | None = None,
        origin: str | None = None,
    ) -> Ledger:
        """Create the ledger with its genesis entry, all or nothing. ``root`` may already
        exist (a clone brings its versioned contracts) as long as it holds no database.
        With ``store`` the chain is created in that shared database instead; with
        ``origin`` the log carries that origin (e.g. the URL prefix its tiles are served
        at, without the scheme) instead of ``receipt-ledger/<ledger id>``.
        """
        created = _clock.now() if now is None else now
        genesis = cls.new_genesis(admin, admin_name, created, origin)
        if store is not None:
            from ._postgres import PostgresBackend

            ledger = cls(root, PostgresBackend.create(store), store)
            ledger._append(genesis, admin, seq=0, prev=None, now=created)
            root.mkdir(parents=True, exist_ok=True)  # the clone's side: contracts and config.toml
            if not (root / ".gitignore").exists():
                (root / ".gitignore").write_text(GITIGNORE)
            write_trust_file(root, admin, admin_name)
            return ledger
        if (root / DB_NAME).exists():
            raise InputError("%s already holds a ledger; refusing to initialise over it" % root)
        if root.exists() and not root.is_dir():
            raise InputError("%s exists and is not a directory" % root)
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=root.name + ".init-", dir=root.parent))
        try:
            (staging / BLOB_DIR).mkdir()
            (staging / ".gitignore").write_text(GITIGNORE)
            import sqlite_utils  # only creating a ledger needs it: keep `ledger verify` quick to start

            db = sqlite_utils.Database(staging / DB_NAME)
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript(SCHEMA)
            db.conn.close()
            ledger = cls(staging, SqliteBackend.open(staging))
            ledger._append(genesis, admin, seq=0, prev=None, now=created)
            ledger.close()  # the last connection checkpoints the WAL into ledger.db
            install_staged(staging, root)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        write_trust_file(root, admin, admin_name)
        return cls.open(root)

    def close(self) -> None:
        self.backend.close()

    # -- reading -------------------------------------------------------------------------

    def genesis_trust(self) -> TrustRoot:
        """A trust root pinning this ledger's own genesis admin. It is what the writer means
        when it re-checks its own receipts (effects, exports, statistics); an auditor pins
        a key it obtained elsewhere instead.
        """
        genesis = self.reader.by_seq(0)
        if genesis is None:
            raise StoreError("the ledger has no genesis entry")
        try:
            signer = decode_entry(genesis.entry).signer
        except ReceiptsError as exc:
            raise StoreError("the ledger's genesis entry is damaged: %s (run `ledger verify --chain`)" % exc) from None
        return TrustRoot(frozenset({signer}), "this ledger's own genesis admin %s" % signer)

    def keyring(self) -> Keyring:
        """The keyring at the head, replayed from the signed ``ring`` chain that the head names
        (reused until it moves); an index that disagrees stops the caller (`StoreError`).
        """
        return self._keyring_at(self._signed_ring(self._head_row()))

    def _head_row(self) -> StoredEntry:
        try:
            head = self.reader.head()
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None
        if head is None:
            raise StoreError("the ledger has no genesis entry")
        return head

    def checked(self, stored: StoredEntry) -> tuple[Entry, str | None]:
        """A row's signed entry and the task its body names, with the row's index columns
        (seq, hash, kind, body_hash, task) recomputed from its bytes and compared: a writer
        decides from signed data only, and an index that disagrees stops it.

        Args:
            stored: a row as the backend returned it.

        Returns:
            The decoded entry and its task (None for entries that carry none).

        Raises:
            StoreError: the row does not decode, or a column differs from its bytes (the
                message names the row and the column).
        """
        try:
            entry = decode_entry(stored.entry)
            body = decode_body(entry.kind, stored.body)
        except ReceiptsError as exc:
            raise StoreError(_INDEX_DISAGREES % (stored.seq, "it does not decode: %s" % exc)) from None
        task = _task_of(body)
        got = (entry.seq, entry_hash(stored.entry).value, entry.kind.value, entry.body_hash.value, task)
        want = (stored.seq, bytes(stored.hash), stored.kind, bytes(stored.body_hash), stored.task)
        names = [n for n, a, b in zip(_INDEX_COLUMNS, got, want, strict=True) if a != b]
        if not names and body_hash(entry.kind, stored.body) != entry.body_hash:
            names = ["body"]
        if names:
            raise StoreError(_INDEX_DISAGREES % (stored.seq, "column %s" % ", ".join(names)))
        return entry, task

    def _signed_ring(self, head: StoredEntry, entry: Entry | None = None) -> Digest:
        """The newest keyring entry as the head's signed data names it (``entry``: the head
        already `checked`).
        """
        if entry is None:
            entry, _ = self.checked(head)
        return Digest(bytes(head.hash)) if entry.kind in KEYRING_KINDS else _pointer(entry.ring, head.seq, "ring")

    def _keyring_at(self, ring_head: Digest) -> Keyring:
        if self._ring_cache is not None and self._ring_cache[0] == ring_head:
            return self._ring_cache[1]
        ring = self._replay_keyring(ring_head)
        self._ring_cache = (ring_head, ring)
        return ring

    def _replay_keyring(self, ring_head: Digest) -> Keyring:
        """Replay the keyring entries the signed ``ring`` chain from ``ring_head`` names, and
        refuse when the ``kind`` index lists others (a revocation hidden from it, or a row
        dressed up as a keyring change).
        """
        changes: list[tuple[Entry, Body]] = []
        pointer: Digest | None = ring_head
        while pointer is not None:
            stored = self._by_hash(pointer, "ring")
            entry, _ = self.checked(stored)
            if entry.kind not in KEYRING_KINDS:
                raise StoreError(_INDEX_DISAGREES % (stored.seq, "a ring pointer names it, but it is no keyring entry"))
            changes.append((entry, decode_body(entry.kind, stored.body)))
            pointer = entry.ring
        changes.reverse()
        kinds = KEYRING_KIND_NAMES
        try:
            indexed = [int(seq) for (seq,) in self.backend.sql(_KEYRING_SEQS, (*kinds, changes[-1][0].seq)).fetchall()]
        except self.backend.errors as exc:
            raise StoreError("cannot read ledger database: %s" % exc) from None
        _same_rows(indexed, [entry.seq for entry, _ in changes], "the signed ring chain")
        try:
            # Our own committed entries: replayed without re-checking signatures (verify does that).
            ring = replay_keyring(changes, verify_signatures=False)
        except (ReceiptsError, ValueError) as exc:
            raise StoreError(
                "the ledger's keyring entries are damaged: %s (run `ledger verify --chain`)" % exc
            ) from None
        if ring is None:
            raise StoreError("the ledger has no genesis entry")
        return ring

    def _by_hash(self, pointer: Digest, name: str) -> StoredEntry:
        try:
            stored = self.reader.by_hash(pointer)
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None
        if stored is None:
            raise StoreError(
                "a signed %s pointer names %s, which the ledger does not hold (run `ledger verify --chain`)"
                % (name, pointer.short())
            )
        return stored

    def task_entries(self, task: str) -> list[StoredEntry]:
        """The task's entries in chain order, read along the signed ``tprev`` chain from its
        newest entry, each row checked (`checked`); the ``task`` index must list exactly the
        same rows.

        Args:
            task: the task id.

        Returns:
            The task's stored entries, oldest first.

        Raises:
            StoreError: the index and the signed chain disagree; the message names the row.
        """
        head = self._head_row()
        cached = self._task_cache.get(task)
        if cached is not None and cached[0] == bytes(head.hash):
            return cached[1]
        found = self._task_head_row(task, head.seq)
        # The rows the index lists, read in one query: the walk takes each pointer's row from
        # here (`checked` then recomputes its hash from its bytes) and asks the store for a row
        # only when the index did not list it, which `_same_rows` then reports.
        try:
            listed = list(self.reader.iter_entries(upto=head.seq, task=task))
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None
        by_hash = {bytes(stored.hash): stored for stored in listed}
        chain: list[StoredEntry] = []
        while found is not None:
            entry, named = self.checked(found)
            if named != task:
                raise StoreError(_INDEX_DISAGREES % (found.seq, "the task chain of %s names it" % task))
            chain.append(found)
            if entry.task_prev is None:
                break
            found = by_hash.get(entry.task_prev.value) or self._by_hash(entry.task_prev, "tprev")
        chain.reverse()
        _same_rows(
            [stored.seq for stored in listed], [stored.seq for stored in chain], "the signed task chain of %s" % task
        )
        self._task_cache[task] = (bytes(head.hash), chain)
        return chain

    def _task_head_row(self, task: str, upto: int) -> StoredEntry | None:
        """The task's newest entry up to ``upto``: the index's, confirmed from signed data by
        checking every row after it (none of them may be the task's). A task the index does
        not know is taken as new: only a chain audit can prove that (format.md §8.1). Each
        row is checked once per process (a writer that lives on checks only what is new).
        """
        try:
            head = self.reader.newest_of_task(task, upto)
            if head is None:
                return None
            low, high = self._checked
            if high < low:  # nothing checked yet
                self._check_rows(head.seq, upto)
                self._checked = (head.seq, upto)
                return head
            # The checked rows stay one run [low, high]: below it the rows from the task's
            # newest on, above it everything new (a gap above it included).
            if head.seq < low:
                self._check_rows(head.seq, low - 1)
            if upto > high:
                self._check_rows(high + 1, upto)
            self._checked = (min(low, head.seq), max(high, upto))
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None
        return head

    def _check_rows(self, first: int, last: int) -> None:
        for stored in self.reader.entries_between(first, last + 1):
            self.checked(stored)

    def entries(self, task: str | None = None) -> Iterator[StoredEntry]:
        """Every entry in chain order, or a task's (`task_entries`: from signed data)."""
        if task is not None:
            yield from self.task_entries(task)
            return
        try:
            yield from self.reader.iter_entries()
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None

    def find(self, digest: Digest) -> StoredEntry | None:
        """An entry by its body hash (a record or receipt hash) or by its entry hash."""
        try:
            return self.reader.by_body_hash(digest) or self.reader.by_hash(digest)
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None

    def resolve(self, text: str) -> Digest:
        """A hash as people give it: whole (``blake3:`` and 64 hex digits), or the unique
        prefix of at least 8 hex digits that tables print (``blake3:`` optional, a trailing
        ``…`` ignored), of an entry hash or a body hash (record, receipt).

        Raises:
            InputError: not a hash, no entry starts so, or several do (they are listed).
        """
        prefix = hash_prefix(text)
        if prefix is None:
            raise InputError(NOT_A_HASH % (text[:80],))
        if len(prefix) == 64:
            return Digest.parse("blake3:" + prefix)
        low = bytes.fromhex(prefix[: len(prefix) // 2 * 2])
        try:
            rows = self.backend.sql(
                "SELECT hash, body_hash FROM entries WHERE substr(hash, 1, ?) = ? OR substr(body_hash, 1, ?) = ?",
                (len(low), low, len(low), low),
            ).fetchall()
        except self.backend.errors as exc:
            raise StoreError("cannot read ledger database: %s" % exc) from None
        matches = sorted({bytes(h).hex() for row in rows for h in row if bytes(h).hex().startswith(prefix)})
        if not matches:
            raise NoSuchHash("no entry, record or receipt hash starts with %s" % prefix)
        if len(matches) > 1:
            raise InputError(
                "%s is ambiguous: it starts %s; give more digits"
                % (prefix, ", ".join("blake3:" + m for m in matches[:10]))
            )
        return Digest.parse("blake3:" + matches[0])

    def receipt(self, digest: Digest) -> tuple[StoredEntry, LadderReceipt]:
        """The receipt with this hash (receipt hash or entry hash), or a clean refusal."""
        stored = self.find(digest)
        if stored is None or stored.kind != EntryKind.RECEIPT.value:
            raise InputError("no receipt with hash %s" % digest)
        return stored, decode_as(LadderReceipt, stored.body)

    def record(self, digest: Digest) -> TierRecord | None:
        """The tier record with this hash (record hash or entry hash), if there is one."""
        stored = self.find(digest)
        if stored is None or stored.kind != EntryKind.TIER_RECORD.value:
            return None
        return decode_as(TierRecord, stored.body)

    def bodies(self, kind: EntryKind, task: str | None = None) -> list[tuple[StoredEntry, Body, str]]:
        """Entries of one kind (of one task, or of all) in chain order: (stored, decoded body,
        signer key id). A task's come from its signed chain (`task_entries`).
        """
        if task is not None:
            rows = [stored for stored in self.task_entries(task) if stored.kind == kind.value]
        else:
            try:
                rows = list(self.reader.iter_entries(kind=kind.value))
            except CannotVerify as exc:
                raise StoreError(str(exc)) from None
        return [(stored, decode_body(kind, stored.body), decode_entry(stored.entry).signer) for stored in rows]

    def records_for(self, task: str) -> list[RecordRow]:
        """The task's tier records in chain order, with their hashes and signers."""
        return [
            RecordRow(stored.seq, Digest(stored.body_hash), body, signer)
            for stored, body, signer in self.bodies(EntryKind.TIER_RECORD, task)
            if isinstance(body, TierRecord)
        ]

    def contract_revisions(self, task: str | None = None) -> list[tuple[int, ContractRevision]]:
        """Contract revisions in chain order, of one task or of all."""
        return [
            (stored.seq, body)
            for stored, body, _ in self.bodies(EntryKind.CONTRACT, task)
            if isinstance(body, ContractRevision)
        ]

    def waivers(self, task: str) -> list[tuple[int, Waiver, str]]:
        """The task's waivers in chain order, with their signers' key ids."""
        return [
            (stored.seq, body, signer)
            for stored, body, signer in self.bodies(EntryKind.WAIVER, task)
            if isinstance(body, Waiver)
        ]

    def latest_contract(self, task: str) -> ContractRevision | None:
        """The task's current contract revision (the newest in its signed chain), if any."""
        revisions = self.contract_revisions(task)
        return revisions[-1][1] if revisions else None

    def _contract_role(self, body: ContractRevision, ring: Keyring, key_id: str) -> Role:
        try:
            new = body.parse()
        except ReceiptsError as exc:
            raise InputError(str(exc)) from None
        prev = self.latest_contract(body.task_id)
        if body.previous != (prev.config_hash if prev else None):
            raise InputError(
                "a contract revision must name the revision it replaces (the task's contract changed meanwhile)"
            )
        lowered = weakenings(prev.parse(), new) if prev else ()
        state = ring.get(key_id)
        for role in contract_roles(bool(lowered)):
            if state is not None and role in state.spec.roles:
                if lowered and not body.reason:
                    # As a waiver does: lowering the bar says why, where the auditor reads it.
                    raise InputError(
                        "refused: this revision weakens the contract of %s (%s) and gives no reason: say why"
                        " with --reason (and where the new criteria came from with --criteria-from)"
                        % (body.task_id, "; ".join(lowered))
                    )
                return role
        if lowered:
            raise InputError(
                "refused: this revision weakens the contract of %s (%s); only an admin key may sign that:"
                " `ledger contract set %s --key ADMIN-KEY --reason WHY`"
                % (body.task_id, "; ".join(lowered), body.task_id)
            )
        raise InputError(
            "refused: key %s may not record contract revisions (needs the deterministic or admin role)" % key_id
        )

    # -- writing -------------------------------------------------------------------------

    def append(self, body: Body, signer: Signer) -> Appended:
        """Sign and append ``body`` as the next entry, in one write transaction."""
        if isinstance(body, Genesis):
            raise InputError("a ledger has exactly one genesis entry")
        appended = self._sequenced(lambda: self._append(body, signer, seq=None, prev=None, now=None))
        if appended is None:  # only a `held` question, never asked here, writes nothing
            raise StoreError("the entry was not appended")
        return appended

    def append_unless(self, body: Body, signer: Signer, held: Callable[[], bool]) -> Appended | None:
        """`append`, unless ``held()``, asked in the write transaction after the lock, says
        an entry already stands for ``body`` (then None, and nothing written).
        """
        if isinstance(body, Genesis):
            raise InputError("a ledger has exactly one genesis entry")
        return self._sequenced(lambda: self._append(body, signer, seq=None, prev=None, now=None, held=held))

    def _sequenced(self, run: Callable[[], _T]) -> _T:
        """Run one whole write transaction; again, from the start, when the connection broke
        before COMMIT was sent (nothing was written), a bounded number of times. When it
        broke during COMMIT, look: the entry is there (done) or it is not (refused).
        """
        for attempt in range(1, _ATTEMPTS + 1):
            self._inflight = None
            try:
                return run()
            except NotCommitted as exc:
                if attempt == _ATTEMPTS:
                    raise StoreError("%s (gave up after %d attempts)" % (exc, _ATTEMPTS)) from None
            except CommitUnknown as exc:
                inflight = self._written_before_break()
                self._reconnect()
                if inflight is not None and self.reader.by_hash(inflight[0]) is not None:
                    result: _T = inflight[1]
                    return result
                raise StoreError("%s; the entry is not in the ledger, so it was not written" % exc) from None
            self._reconnect()
        raise AssertionError("unreachable")

    def _written_before_break(self) -> tuple[Digest, Any] | None:
        # A method, not the attribute: run() sets it, which a reader of _sequenced alone cannot see.
        return self._inflight

    def _reconnect(self) -> None:
        self._ring_cache = None
        try:
            self.backend.reconnect()
        except StoreError as exc:
            raise StoreError("%s (reconnecting after a lost connection)" % exc) from None

    def append_many(self, bodies: Sequence[Body], signer: Signer) -> list[Appended]:
        """Append several bodies signed by one key, all or nothing, in one write transaction."""
        if any(isinstance(b, Genesis) for b in bodies):
            raise InputError("a ledger has exactly one genesis entry")
        return self._sequenced(lambda: self._append_batch(bodies, signer))

    def _append_batch(self, bodies: Sequence[Body], signer: Signer) -> list[Appended]:
        with self.backend.write():
            # Within one transaction the batch knows its own head and pointers: no re-reading them per entry.
            cursor, ring = self._head(None)
            start = cursor.seq
            out = []
            for body in bodies:
                if not isinstance(body, _DEFERRABLE):
                    self._flush(cursor)
                out.append(self._append_locked(body, signer, ring, cursor))
                if isinstance(body, (KeyAdd, KeyRevoke)):
                    self._flush(cursor)
                    ring = self.keyring()
            self._flush(cursor)
            if out:
                self._inflight = (out[-1].entry_hash, out)
        self._wrote(start, cursor)
        return out

    def _head(self, task: str | None) -> tuple[_Cursor, Keyring]:
        """The head, the keyring and the task's newest entry, all from signed data (format.md
        §7b): the pointers a new entry signs never come from an index, which could otherwise
        make the writer sign past a revocation or a rejection it hid.
        """
        head = self._head_row()
        known = self._committed
        if known is not None and (known[0], known[1]) == (head.seq, bytes(head.hash)) and known[3] is not None:
            time, ring = known[2], known[3]  # the head is the row this writer committed last
        else:
            entry, _ = self.checked(head)
            time, ring = entry.time, self._signed_ring(head, entry)  # the replay names a disagreeing keyring row
        tasks: dict[str, Digest | None] = {}
        if task is not None:
            tasks[task] = self._task_head(task, head.seq)
        cursor = _Cursor(head.seq, Digest(bytes(head.hash)), time, ring, tasks)
        return cursor, self._keyring_at(ring)

    def _flush(self, cursor: _Cursor) -> None:
        if cursor.rows:
            self.backend.insert_entries(cursor.rows)
            self.backend.insert_nodes([(level, idx, h) for (level, idx), h in cursor.nodes.items()])
        cursor.rows.clear()
        cursor.nodes.clear()

    def _append(
        self,
        body: Body,
        signer: Signer,
        seq: int | None,
        prev: Digest | None,
        now: int | None,
        held: Callable[[], bool] | None = None,
    ) -> Appended | None:
        with self.backend.write():
            if seq is None and held is not None and held():
                return None  # asked under the lock: another writer's entry stands for it
            if seq is None:
                with self._reading_ahead(_task_of(body)):
                    cursor, ring = self._head(_task_of(body))
                    start = cursor.seq
                    appended = self._append_locked(body, signer, ring, cursor)
            elif not isinstance(body, Genesis) or now is None:
                raise StoreError("only a genesis entry is appended at a position of the caller's choosing")
            else:
                cursor, ring = _Cursor(-1, None, now, None, {}), Keyring.from_genesis(body)
                start = cursor.seq
                appended = self._append_locked(body, signer, ring, cursor)
            self._flush(cursor)
        self._wrote(start, cursor)
        return appended

    @contextlib.contextmanager
    def _reading_ahead(self, task: str | None) -> Iterator[None]:
        """Inside the write transaction: what the append will read, fetched at once where
        the driver can (`Backend.locked_reads`), answers the reader's questions meanwhile.
        """
        reads = self.backend.locked_reads(task, self._checked[1])
        if reads is None:
            yield
            return
        plain = self.reader
        self.reader = cast(LedgerSource, _ReadAhead(plain, reads))
        try:
            yield
        finally:
            self.reader = plain

    def _wrote(self, start: int, cursor: _Cursor) -> None:
        """After a commit: the rows after ``start`` are this writer's own, so they count as
        checked when everything before them was, and the new head is known.
        """
        low, high = self._checked
        if start == -1:  # it wrote the genesis: every row is its own
            self._checked = (0, cursor.seq)
        elif low <= high and high >= start:
            self._checked = (low, max(high, cursor.seq))
        if cursor.prev is not None:
            self._committed = (cursor.seq, cursor.prev.value, cursor.time, cursor.ring)

    def _append_locked(self, body: Body, signer: Signer, ring: Keyring, cursor: _Cursor) -> Appended:
        """Sign one entry and queue its row and tree nodes on ``cursor``; the caller holds
        the write transaction and flushes the cursor.
        """
        kind = body_kind(body)
        body_bytes = encode_body(body)
        bhash = body_hash(kind, body_bytes)
        key_id = fingerprint(signer.public_key_blob)
        task = _task_of(body)
        # Never date an entry before its predecessor: verify rejects time running backwards.
        seq, prev, now = cursor.seq + 1, cursor.prev, max(_clock.now(), cursor.time) if cursor.seq >= 0 else cursor.time
        role = (
            self._contract_role(body, ring, key_id) if isinstance(body, ContractRevision) else required_role(kind, body)
        )
        try:
            ring.authorize(key_id, role, seq, now)
            if isinstance(body, KeyAdd):
                ring.with_added(body.key, seq)
            elif isinstance(body, KeyRevoke):
                ring.with_revoked(body.key_id, seq, body.reason)
        except ReceiptsError as exc:
            raise InputError("refused: %s" % exc) from None
        if task is not None and task not in cursor.tasks:
            self._flush(cursor)  # the lookup below reads the entries table
            cursor.tasks[task] = self._task_head(task, cursor.seq)
        namespace = namespace_for(role)
        entry, entry_bytes = sign_entry(
            seq=seq,
            prev=prev,
            kind=kind,
            body_hash=bhash,
            time=now,
            signer=key_id,
            ring=cursor.ring,
            task_prev=cursor.tasks[task] if task is not None else None,
            sign=lambda message: sshsig_sign(signer, namespace, message),
        )
        ehash = entry_hash(entry_bytes)
        cursor.rows.append(
            (
                seq,
                ehash.value,
                kind.value,
                bhash.value,
                task,
                entry_bytes,
                body_bytes,
                None if prev is None else prev.value,
            )
        )
        self._add_leaf(seq, leaf_hash(entry_bytes), cursor.nodes)
        cursor.seq, cursor.prev, cursor.time = seq, ehash, now
        if kind in KEYRING_KINDS:
            cursor.ring = ehash
        if task is not None:
            cursor.tasks[task] = ehash
        appended = Appended(seq, ehash, bhash, entry)
        self._inflight = (ehash, appended)
        return appended

    # -- the Merkle tree over entries --------------------------------------------------------

    def _add_leaf(self, index: int, digest: bytes, pending: dict[tuple[int, int], bytes] | None = None) -> None:
        """Store leaf ``index`` and every perfect subtree it completes (in-transaction), or
        add them to ``pending`` for the batch to insert.
        """
        level, h = 0, digest
        made = {(0, index): h}
        while index & 1:
            left = pending.get((level, index - 1)) if pending is not None else None
            h = node_hash(left if left is not None else self.node(level, index - 1), h)
            level, index = level + 1, index >> 1
            made[(level, index)] = h
        if pending is not None:
            pending.update(made)
        else:
            self.backend.insert_nodes([(lv, i, node) for (lv, i), node in made.items()])

    def node(self, level: int, index: int) -> bytes:
        try:
            found = self.reader.tree_node(level, index)
        except CannotVerify as exc:
            raise StoreError(str(exc)) from None
        if found is None:
            raise StoreError("the ledger's Merkle tree lacks node (%d, %d): the store is damaged" % (level, index))
        return found

    def _sync_tree(self) -> None:
        """Fill in tree nodes for entries appended before the tree existed (older ledgers)."""
        leaves = self.backend.sql("SELECT coalesce(max(idx) + 1, 0) FROM tree WHERE level = 0").fetchone()[0]
        if leaves >= self.reader.count():
            return
        with self.backend.write():
            leaves = self.backend.sql("SELECT coalesce(max(idx) + 1, 0) FROM tree WHERE level = 0").fetchone()[0]
            for seq, data in self.backend.sql(
                "SELECT seq, entry FROM entries WHERE seq >= ? ORDER BY seq", (leaves,)
            ).fetchall():
                self._add_leaf(seq, leaf_hash(bytes(data)))

    def tree_size(self) -> int:
        return self.reader.count()

    def root_hash(self, size: int) -> bytes:
        return tree_root(self, size)

    def origin(self) -> str:
        stored = self.reader.by_seq(0)
        if stored is None:
            raise StoreError("the ledger has no genesis entry")
        return decode_as(Genesis, stored.body).origin

    def checkpoints(self) -> list[tuple[int, SignedNote]]:
        return [(size, parse_note(note)) for size, note in self.reader.checkpoints()]

    def checkpoint(self, signer: Signer) -> SignedNote:
        """Sign the current tree head as a C2SP checkpoint and store it. Only a seal or
        admin key that is active may sign; a head inconsistent with the last one is refused.
        """
        ring = self.keyring()
        state = ring.get(fingerprint(signer.public_key_blob))
        if state is None or state.revoked_at is not None or not ({Role.SEAL, Role.ADMIN} & set(state.spec.roles)):
            raise InputError("refused: a checkpoint must be signed by an active seal or admin key of this ledger")
        origin = self.origin()
        return self._sequenced(lambda: self._checkpoint(signer, origin))

    def _checkpoint(self, signer: Signer, origin: str) -> SignedNote:
        # Under the sequencer: the head cannot move, and a checkpoint is stored only if it
        # extends the newest stored one (two writers never store two heads out of order).
        with self.backend.write():
            size = self.tree_size()
            root = self.root_hash(size)
            previous = self.checkpoints()
            if previous:
                old_size, old_note = previous[-1]
                old = parse_checkpoint(old_note.text)
                if old_size == size:
                    return old_note
                if old_size > size or not is_valid_consistency(
                    old.size, size, old.root, root, consistency_proof(self, old.size, size) if old.size else []
                ):
                    raise StoreError("the ledger is not consistent with its last checkpoint: its history was rewritten")
            named = self._retention_named(size, previous[-1] if previous else None, origin)
            text = checkpoint_text(Checkpoint(origin, size, root, (retention_extension(named),)))
            note = SignedNote(text, (sign_note(text, origin, signer),))
            self.backend.sql("INSERT INTO checkpoints (size, note) VALUES (?, ?)", (size, note.encode()))
        return note

    def _retention_named(self, size: int, previous: tuple[int, SignedNote] | None, origin: str) -> NamedRetention:
        """The retention line of the checkpoint at ``size`` (format.md §9), from signed data
        only (§7b): the previous checkpoint's line when a seal or admin key of this ledger
        signed it, then the entries since, each read by its own bytes; without such a line
        (a ledger whose checkpoints predate it) every entry is read once.
        """
        start, named = 0, NamedRetention(None, None)
        if previous is not None:
            try:
                said = named_retention(parse_checkpoint(previous[1].text).extensions)
            except ReceiptsError:
                said = None
            if said is not None and self._signed_here(previous[1], origin):
                start, named = previous[0], said
        found = self.reader.newest_retention(start, size)
        return named if found is None else NamedRetention(found.seq, entry_hash(found.entry))

    def _signed_here(self, note: SignedNote, origin: str) -> bool:
        keys = (s.spec.public_key for s in self.keyring() if {Role.SEAL, Role.ADMIN} & set(s.spec.roles))
        return any(is_valid_note_signature(note, origin, parse_public_key_blob(k)) for k in keys)

    def store_cosigned(self, size: int, old: SignedNote, new: SignedNote) -> None:
        """Replace the stored checkpoint at ``size`` by the same checkpoint with more
        signature lines, only if it is still ``old`` (two writers cannot lose each other's).
        """
        if new.text != old.text or new.signatures[: len(old.signatures)] != old.signatures:
            raise StoreError("a cosigned checkpoint keeps the text and the signatures it extends")
        try:
            with self.backend.write():
                changed = self.backend.sql(
                    "UPDATE checkpoints SET note = ? WHERE size = ? AND note = ?", (new.encode(), size, old.encode())
                ).rowcount
        except self.backend.errors as exc:
            raise StoreError("cannot store the cosigned checkpoint: %s" % exc) from None
        if changed != 1:
            raise InputError("the stored checkpoint at size %d changed meanwhile: add the cosignatures again" % size)

    def _task_head(self, task: str, upto: int) -> Digest | None:
        """The hash of the task's newest entry up to ``upto`` (in-transaction), confirmed
        from signed data (`_task_head_row`).
        """
        found = self._task_head_row(task, upto)
        return None if found is None else Digest(bytes(found.hash))

    # -- blobs ---------------------------------------------------------------------------

    def put_blob_stream(self, stream: BinaryIO) -> tuple[Digest, int]:
        """Store content by its plain BLAKE3 digest, streaming (never read whole); storing
        content already there changes nothing.
        """
        return self.backend.put_blob_stream(stream)

    def put_blob_file(self, path: Path) -> tuple[Digest, int]:
        """Store an evidence file: a regular file only (a device or a pipe could be read forever)."""
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                raise InputError("evidence %s is not a regular file" % path)
            with path.open("rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced since the check above
                    raise InputError("evidence %s is not a regular file" % path)
                return self.put_blob_stream(fh)
        except FileNotFoundError:
            raise InputError("evidence file %s does not exist" % path) from None
        except IsADirectoryError:
            raise InputError("evidence %s is a directory, not a file" % path) from None
        except PermissionError as exc:
            raise InputError("cannot read evidence file %s: %s" % (path, exc)) from None

    def sweep_incoming(self) -> list[Path]:
        """Remove the temporary blob files that writers killed mid-write left behind (their
        process is gone); returns what was removed. Live writers' files are left alone.
        """
        return self.backend.sweep_incoming()

    def blob_path(self, digest: Digest) -> Path:
        """Where the embedded store keeps a blob (a shared store keeps blobs in its database)."""
        if not isinstance(self.backend, SqliteBackend):
            raise StoreError("blobs of a shared store live in its database: read them through `reader.open_blob`")
        return blob_path(self.root, digest)
