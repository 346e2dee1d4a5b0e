"""`ledger publish tiles`: the chain's Merkle tree and entries as a C2SP `tlog-tiles`
folder any tile client reads (docs/format.md §9a). Only entry bytes are published: the
tree commits to them alone, so bodies and evidence stay private.

Rules a publisher keeps (so that readers never see the log change under them):
  - every tile is computed from the entries and checked against the signed checkpoint's
    root before anything is written; a ledger that does not give its root writes nothing;
  - a tile once written is never rewritten: one already there with other bytes is an
    error that names it (the folder was altered, or holds another log);
  - the checkpoint is replaced last, atomically, only by a larger or equal tree whose
    prefix gives the published root, under a lock held for the whole publish: two
    publishers never move it backwards.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    TILE_WIDTH,
    ReceiptsError,
    Tile,
    entry_bundle,
    leaf_hash,
    node_hash,
    parse_checkpoint,
    parse_note,
    root_from_tiles,
    tiles_for_size,
)
from verify import LedgerSource

from .._errors import InputError, StoreError
from .._files import create_once, write_atomic

__all__ = ["publish_tiles", "Published", "TileConflict"]

CHECKPOINT = "checkpoint"
HASH_SIZE = 32
_LOCK = ".publish.lock"


class TileConflict(StoreError):
    """A tile already published holds other bytes than the ledger gives."""


@dataclass(frozen=True, slots=True)
class Published:
    """What a publish did: the checkpoint's size, tiles written and tiles already there."""

    size: int
    written: int
    kept: int
    previous_size: int | None


def publish_tiles(source: LedgerSource, folder: Path, progress: Callable[[int, int], None] | None = None) -> Published:
    """Publish the newest signed checkpoint and every tile and entry bundle it needs.

    Args:
        source: the ledger, read-only.
        folder: the tile folder (created if absent); a static host serves it as the prefix.
        progress: told (tiles done, tiles in all).

    Returns:
        What was written and kept.

    Raises:
        InputError: the ledger has no checkpoint, or the folder's checkpoint is of another
            log or a larger tree.
        TileConflict: a published tile, or the published checkpoint's root, disagrees
            with the ledger.
        StoreError: the ledger's entries do not give its own checkpoint's root.
    """
    found = source.newest_checkpoint()
    if found is None:
        raise InputError("the ledger has no checkpoint to publish: run `ledger checkpoint --key NAME` first")
    size, note_text = found
    checkpoint = parse_checkpoint(parse_note(note_text).text)
    folder.mkdir(parents=True, exist_ok=True)
    with _publishing(folder):
        previous = _published_checkpoint(folder, checkpoint.origin, size)
        hashes = _hash_tiles(source, size)

        def read(tile: Tile) -> bytes:
            return hashes[tile]

        if root_from_tiles(size, read) != checkpoint.root:
            raise StoreError(
                "the ledger's entries do not give its checkpoint's root at size %d: run `ledger verify --chain`" % size
            )
        if previous is not None and root_from_tiles(previous[0], _prefix_reader(hashes, previous[0])) != previous[1]:
            raise TileConflict(
                "the published checkpoint (size %d) has another root than this ledger at that size:"
                " %s holds another log or a fork" % (previous[0], folder)
            )
        written, kept = _write_tiles(source, folder, size, hashes, progress)
        write_atomic(folder / CHECKPOINT, note_text.encode(), mode=0o644)
    return Published(size, written, kept, None if previous is None else previous[0])


@contextlib.contextmanager
def _publishing(folder: Path) -> Iterator[None]:
    """The folder's publish lock, held for the whole publish (compare, then swap)."""
    with open(folder / _LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _published_checkpoint(folder: Path, origin: str, size: int) -> tuple[int, bytes] | None:
    """The size and root of the checkpoint the folder serves, if any; refused when it is
    another log's or larger than the one to publish.
    """
    path = folder / CHECKPOINT
    if not path.exists():
        return None
    try:
        old = parse_checkpoint(parse_note(path.read_bytes()).text)
    except (OSError, ReceiptsError) as exc:
        raise InputError("%s is not a checkpoint this command published: %s" % (path, exc)) from None
    if old.origin != origin:
        raise InputError("%s serves log %s, not %s: publish each log to its own folder" % (folder, old.origin, origin))
    if old.size > size:
        raise InputError(
            "%s already serves a checkpoint of size %d: publishing size %d would move it backwards"
            % (folder, old.size, size)
        )
    return old.size, old.root


def _hash_tiles(source: LedgerSource, size: int) -> dict[Tile, bytes]:
    """Every hash tile of the tree of ``size`` leaves, computed from the entries: a full
    tile's root becomes one hash of the level above. (At a million entries: 32 MB.)
    """
    pending: list[list[bytes]] = []  # per level, the hashes of its unfinished tile
    done: list[int] = []  # per level, the full tiles made
    tiles: dict[Tile, bytes] = {}

    def push(level: int, digest: bytes) -> None:
        if len(pending) == level:
            pending.append([])
            done.append(0)
        pending[level].append(digest)
        if len(pending[level]) == TILE_WIDTH:
            row, pending[level] = pending[level], []
            tiles[Tile(level, done[level], TILE_WIDTH)] = b"".join(row)
            done[level] += 1
            push(level + 1, _subtree_root(row))

    for stored in source.entries_between(0, size):
        push(0, leaf_hash(stored.entry))
    for level, row in enumerate(pending):
        if row:
            tiles[Tile(level, done[level], len(row))] = b"".join(row)
    return tiles


def _subtree_root(hashes: list[bytes]) -> bytes:
    layer = hashes
    while len(layer) > 1:
        layer = [node_hash(layer[i], layer[i + 1]) for i in range(0, len(layer), 2)]
    return layer[0]


def _prefix_reader(hashes: dict[Tile, bytes], size: int) -> Callable[[Tile], bytes]:
    """Tiles of the tree of ``size`` leaves (at most the larger tree's), cut from the larger
    tree's: a tile of the smaller tree is a prefix of the one at the same place.
    """
    by_place = {(t.level, t.index): data for t, data in hashes.items()}

    def read(tile: Tile) -> bytes:
        return by_place[(tile.level, tile.index)][: tile.width * HASH_SIZE]

    return read


def _write_tiles(
    source: LedgerSource,
    folder: Path,
    size: int,
    hashes: dict[Tile, bytes],
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int]:
    """Write each tile not yet there (write-once), check each one that is; bundles are
    made from the entries, each checked against its level-0 hash. Returns (written, kept).
    """
    plan = tiles_for_size(size)
    level_zero = _prefix_reader(hashes, size)
    written = kept = 0
    bundle: list[bytes] = []
    entries = source.entries_between(0, size)
    for done, tile in enumerate(plan, 1):
        if tile.level is None:
            bundle = [next(entries).entry for _ in range(tile.width)]
            leaves = b"".join(leaf_hash(e) for e in bundle)
            if leaves != level_zero(Tile(0, tile.index, tile.width)):
                raise StoreError("the ledger's entries changed while publishing: run `ledger verify --chain`")
            data = entry_bundle(bundle)
        else:
            data = hashes[tile]
        if _write_once(folder / tile.path(), data):
            written += 1
        else:
            kept += 1
        if progress is not None:
            progress(done, len(plan))
    return written, kept


def _write_once(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True if written. An existing
    file with other bytes (also one a racing publisher just made) is a `TileConflict`.
    """
    if not path.exists():
        try:
            if create_once(path, data, mode=0o644):  # served to anyone
                return True
        except OSError as exc:
            raise StoreError("cannot write tile %s: %s" % (path, exc.strerror or exc)) from None
    if path.read_bytes() != data:
        raise TileConflict(
            "published tile %s differs from the ledger: the folder was altered; nothing is rewritten" % path
        )
    return False
