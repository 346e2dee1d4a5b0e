"""`ledger pull`: a read-only mirror of a shared ledger, in a local SQLite ledger.

A pull copies what is new (entries, blobs, checkpoints) and proves before it writes that
the shared log only grew: the entries it already holds are still the shared store's
prefix (the hash chain through the last one it holds), and the newest shared checkpoint
extends the last one it kept (an RFC 6962 consistency proof from the shared store's own
tree, checked against both roots). A rewritten history, even one re-signed by someone
holding the database and an admin key, fails one of the two and nothing is written. So
does a store rolled back behind what the mirror saw: every checkpoint the mirror kept
must still be on the store (which refuses to delete one), or the pull names the rollback.
A mirror that never saw the lost entries cannot tell; witnesses and monitors can.

Pull checks structure, not signatures: `ledger verify --chain` on the mirror does that,
with only public keys.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import (
    Digest,
    EntryKind,
    Genesis,
    ReceiptsError,
    body_hash,
    consistency_proof,
    decode_as,
    decode_entry,
    entry_hash,
    is_valid_consistency,
    leaf_hash,
    parse_checkpoint,
    parse_note,
    tree_root,
)
from verify import CannotVerify, LedgerSource, NoLedger, PostgresSource, StoredEntry
from verify.schema import BLOB_DIR, DB_NAME, SCHEMA, blob_path

from .._errors import InputError, StoreError
from ._ledger import GITIGNORE, Ledger
from ._sqlite import SqliteBackend, install_staged

__all__ = ["PullResult", "pull"]

_BATCH = 5000  # entries per insert batch: bounded memory, few round trips


@dataclass(frozen=True, slots=True)
class PullResult:
    """What a pull found and did. With defects nothing was written."""

    mirror: str
    first: bool  # the mirror was new: there was no kept checkpoint to prove against
    entries_before: int
    entries_after: int
    blobs_copied: int
    checkpoints_copied: int
    proven: tuple[int, int] | None  # (kept size, shared checkpoint size) of the consistency proof
    defects: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # blob rows not copied (they do not hash to their name), and why

    @property
    def ok(self) -> bool:
        return not self.defects

    def as_dict(self) -> dict[str, Any]:
        return {
            "mirror": self.mirror,
            "ok": self.ok,
            "first_pull": self.first,
            "entries_before": self.entries_before,
            "entries_after": self.entries_after,
            "blobs_copied": self.blobs_copied,
            "checkpoints_copied": self.checkpoints_copied,
            "consistency_proof": None if self.proven is None else {"from": self.proven[0], "to": self.proven[1]},
            "defects": list(self.defects),
            "skipped_blobs": list(self.skipped),
        }


class _Refused(Exception):
    """A finding that stops the pull (the shared log did not only grow)."""


class _RemoteTree:
    def __init__(self, source: PostgresSource) -> None:
        self._source = source

    def node(self, level: int, index: int) -> bytes:
        found = self._source.tree_node(level, index)
        if found is None:
            raise _Refused("the shared store's Merkle tree lacks node (%d, %d)" % (level, index))
        return found


def _open_remote(url: str) -> PostgresSource:
    try:
        return PostgresSource.open_url(url)
    except CannotVerify as exc:
        if isinstance(exc, NoLedger):
            raise InputError(str(exc)) from None
        raise StoreError(str(exc)) from None


def _new_mirror(to: Path) -> Path:
    if (to.exists() and not to.is_dir()) or (to.is_dir() and any(p.name != ".gitignore" for p in to.iterdir())):
        raise InputError("%s is neither a mirror (no %s) nor an empty directory" % (to, DB_NAME))
    to.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=to.name + ".pull-", dir=to.parent))
    (staging / BLOB_DIR).mkdir()
    (staging / ".gitignore").write_text(GITIGNORE)
    conn = sqlite3.connect(staging / DB_NAME)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA)
    conn.close()
    return staging


def pull(url: str, to: Path, progress: Callable[[int], None] | None = None) -> PullResult:
    """Bring the mirror at ``to`` up to date with the shared ledger at ``url`` (creating it
    on the first pull). Refusals come back as defects, with nothing written; a store that
    cannot be read raises `StoreError`.
    """
    remote = _open_remote(url)
    staging = None if (to / DB_NAME).is_file() else _new_mirror(to)
    work = staging if staging is not None else to
    try:
        mirror = Ledger(work, SqliteBackend.open(work))
        try:
            # One snapshot of the shared store: entries, tree and checkpoints agree.
            remote.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                result = _pull(remote, mirror, str(to), staging is not None, progress)
            finally:
                remote.conn.execute("ROLLBACK")
        finally:
            mirror.close()
        if staging is not None and result.ok:
            install_staged(staging, to)
            staging = None
        return result
    except (CannotVerify, sqlite3.Error) as exc:
        raise StoreError("cannot pull %s: %s" % (url, exc)) from None
    finally:
        remote.close()
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _pull(
    remote: PostgresSource, mirror: Ledger, name: str, first: bool, progress: Callable[[int], None] | None
) -> PullResult:
    local = mirror.reader
    n, total = local.count(), remote.count()
    kept = local.checkpoints()
    blobs, skipped = 0, list[str]()
    try:
        _same_prefix(remote, local, n, total)
        blobs = _copy_blobs(remote, mirror, skipped)
        copied, proven = 0, None
        with mirror.backend.write():
            _copy_entries(remote, mirror, n, total, progress)
            copied, proven = _copy_checkpoints(remote, mirror, kept, total)
    except _Refused as exc:
        return PullResult(name, first, n, n, blobs, 0, None, (str(exc),))
    return PullResult(name, first, n, total, blobs, copied, proven, (), tuple(skipped))


def _same_prefix(remote: PostgresSource, local: LedgerSource, n: int, total: int) -> None:
    """The shared store still holds the mirror's entries: same ledger, not shorter, and the
    same hash at the mirror's head (the chain's `prev` links cover everything before it).
    """
    if n == 0:
        return
    if total < n:
        raise _Refused(
            "the shared ledger holds %d entries, fewer than the %d this mirror holds: it was cut" % (total, n)
        )
    for seq in sorted({0, n - 1}):
        mine, theirs = local.by_seq(seq), remote.by_seq(seq)
        if mine is None or theirs is None or mine.hash != theirs.hash:
            raise _Refused(
                "entry %d of the shared ledger differs from this mirror's copy: its history was rewritten" % seq
                if seq
                else "the shared store holds another ledger (its genesis entry differs from this mirror's)"
            )


def _copy_entries(
    remote: PostgresSource, mirror: Ledger, n: int, total: int, progress: Callable[[int], None] | None
) -> None:
    head = mirror.reader.by_seq(n - 1) if n else None
    prev: bytes | None = None if head is None else head.hash
    rows: list[tuple[object, ...]] = []
    nodes: dict[tuple[int, int], bytes] = {}
    expected = n

    def flush() -> None:
        mirror.backend.insert_entries(rows)
        mirror.backend.insert_nodes([(lv, i, h) for (lv, i), h in nodes.items()])
        if progress is not None:
            progress(len(rows))
        rows.clear()
        nodes.clear()

    for stored in remote.entries_between(n, total):
        try:
            entry = decode_entry(stored.entry)
            kind = EntryKind(stored.kind)
            sound = (
                stored.seq == expected
                and entry.seq == expected
                and (entry.prev.value if entry.prev is not None else None) == prev
                and entry_hash(stored.entry).value == stored.hash
                and entry.kind == kind
                and body_hash(kind, stored.body) == entry.body_hash
                and bytes(stored.body_hash) == entry.body_hash.value
            )
        except (ReceiptsError, ValueError):
            sound = False
        if not sound:
            raise _Refused(
                "entry %d of the shared ledger does not extend the chain (seq, prev or hashes disagree)" % expected
            )
        rows.append((stored.seq, stored.hash, stored.kind, stored.body_hash, stored.task, stored.entry, stored.body))
        mirror._add_leaf(stored.seq, leaf_hash(stored.entry), nodes)
        prev, expected = stored.hash, expected + 1
        if len(rows) >= _BATCH:
            flush()
    flush()
    if expected != total:
        raise _Refused("the shared ledger has a gap: entry %d is missing" % expected)


def _copy_checkpoints(
    remote: PostgresSource, mirror: Ledger, kept: list[tuple[int, str]], total: int
) -> tuple[int, tuple[int, int] | None]:
    """Copy the newer checkpoints, each only if its root is the mirror's own root at its
    size, after proving the newest consistent with the last one kept.
    """
    origin = decode_as(Genesis, _genesis(mirror).body).origin
    last = kept[-1][0] if kept else 0
    theirs = remote.checkpoints()
    newer = [(size, note) for size, note in theirs if size > last]
    # The store refuses to delete a checkpoint; one this mirror kept and the store lacks
    # means the store was rolled back behind what the mirror saw (its admin's power).
    held = {size for size, _ in theirs}
    lost = [size for size, _ in kept if size not in held]
    if lost:
        raise _Refused(
            "the shared ledger no longer holds the checkpoint at size %d that this mirror kept (its newest is %s):"
            " it was rolled back" % (lost[-1], max(held) if held else "none")
        )
    mine = dict(kept)
    for size, note in theirs:
        if size in mine and note != mine[size]:
            # A kept checkpoint may only have gained cosignature lines since it was pulled.
            if not note.startswith(mine[size]):
                raise _Refused("the shared ledger's checkpoint at size %d changed since this mirror kept it" % size)
            mirror.backend.sql("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))
    proven = None
    if kept and newer:
        old = parse_checkpoint(parse_note(kept[-1][1]).text)
        size, note = newer[-1]
        new = parse_checkpoint(parse_note(note).text)
        proof = consistency_proof(_RemoteTree(remote), old.size, new.size)
        if not is_valid_consistency(old.size, new.size, old.root, new.root, proof):
            raise _Refused(
                "the shared ledger's checkpoint at size %d is not consistent with the checkpoint this mirror kept"
                " at size %d: its history was rewritten" % (new.size, old.size)
            )
        proven = (old.size, new.size)
    for size, note in newer:
        try:
            cp = parse_checkpoint(parse_note(note).text)
        except ReceiptsError as exc:
            raise _Refused("the shared ledger's checkpoint at size %d is malformed: %s" % (size, exc)) from None
        if cp.origin != origin or cp.size != size or size > total or tree_root(mirror, size) != cp.root:
            raise _Refused(
                "the shared ledger's checkpoint at size %d does not match the entries: its history was rewritten" % size
            )
        mirror.backend.sql("INSERT INTO checkpoints (size, note) VALUES (?, ?)", (size, note))
    return len(newer), proven


def _genesis(mirror: Ledger) -> StoredEntry:
    found = mirror.reader.by_seq(0)
    if found is None:
        raise _Refused("the shared ledger has no genesis entry")
    return found


def _copy_blobs(remote: PostgresSource, mirror: Ledger, skipped: list[str]) -> int:
    """Copy every blob the mirror lacks, re-hashed on the way. Before the entries: a crash
    leaves at worst unreferenced blobs. A row that cannot be read or does not hash to its
    name is not copied and is named in ``skipped``: the writer role can add such a row, and
    it must not stop every mirror (issue 47); an entry that names it is then missing its
    evidence, which the mirror's own verification reports.
    """
    copied = 0
    for digest in remote.blob_digests(""):
        d = Digest.parse("blake3:" + digest)
        if blob_path(mirror.root, d).exists():
            continue
        handle = remote.open_blob(d)
        if handle is None:
            skipped.append("%s: listed on the shared store but cannot be read" % d)
            continue
        with handle:
            got, _ = mirror.backend.put_blob_stream(handle)
        if got != d:  # its bytes stay only under their own digest, where nothing names them
            skipped.append("%s: its bytes on the shared store hash to %s, not to its name" % (d, got))
            continue
        copied += 1
    return copied
