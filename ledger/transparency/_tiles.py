"""`ledger publish tiles`: the chain's Merkle tree and entries as C2SP `tlog-tiles` in a
folder or an S3 bucket any tile client reads (docs/format.md §9a). Only entry bytes are
published: the tree commits to them alone, so bodies and evidence stay private.

Rules a publisher keeps (so that readers never see the log change under them), written
once here over any `TileStore`:
  - every tile is computed from the entries and checked against the signed checkpoint's
    root before anything is written; a ledger that does not give its root writes nothing;
  - a tile once written is never rewritten: one already there with other bytes is an
    error that names it (the store was altered, or holds another log);
  - the checkpoint is replaced last, by compare-and-swap on the one read, and only by a
    larger or equal tree whose prefix gives the published root: two publishers never
    move it backwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from receipts import (
    TILE_WIDTH,
    ReceiptsError,
    Tile,
    entry_bundle,
    leaf_hash,
    parse_checkpoint,
    parse_note,
    root_from_tiles,
    run_root,
    tiles_for_size,
)
from verify import LedgerSource

from .._errors import InputError, StoreError
from ._tile_stores import TileStore

__all__ = ["publish_tiles", "Published", "TileConflict"]

HASH_SIZE = 32


class TileConflict(StoreError):
    """A tile already published holds other bytes than the ledger gives."""


@dataclass(frozen=True, slots=True)
class Published:
    """What a publish did: the checkpoint's size, tiles written and tiles already there."""

    size: int
    written: int
    kept: int
    previous_size: int | None


def publish_tiles(
    source: LedgerSource, store: TileStore, progress: Callable[[int, int], None] | None = None
) -> Published:
    """Publish the newest signed checkpoint and every tile and entry bundle it needs.

    Steps:
      1. every hash tile computed from the entries, its root checked against the signed
         checkpoint's: a ledger that does not give its own root writes nothing;
      2. the published checkpoint read: another log's, or a larger tree, is refused; one
         whose root is not this tree's prefix of its size is a fork (`TileConflict`);
      3. every tile and bundle created where absent, compared where present;
      4. the checkpoint swapped in only if it is still the one read in step 2 (else back
         to step 2: a racing publisher moved it).

    Args:
        source: the ledger, read-only.
        store: where the tiles go (`open_tile_store`).
        progress: told (tiles done, tiles in all).

    Returns:
        What was written and kept.

    Raises:
        InputError: the ledger has no checkpoint, or the published one is of another log
            or a larger tree.
        TileConflict: a published tile, or the published checkpoint's root, disagrees
            with the ledger.
        StoreError: the ledger's entries do not give its own checkpoint's root, or the
            store cannot be written.
    """
    found = source.newest_checkpoint()
    if found is None:
        raise InputError("the ledger has no checkpoint to publish: run `ledger checkpoint --key NAME` first")
    size, note_text = found
    checkpoint = parse_checkpoint(parse_note(note_text).text)
    # 1. The tiles, from the entries, checked against the signed root.
    hashes = _hash_tiles(source, size)
    if root_from_tiles(size, hashes.__getitem__) != checkpoint.root:
        raise StoreError(
            "the ledger's entries do not give its checkpoint's root at size %d: run `ledger verify --chain`" % size
        )
    # 2. What is published now; 3. the tiles; 4. the checkpoint over the one read.
    current = store.read_checkpoint()
    previous = _checked_published(current, checkpoint.origin, size, hashes, store)
    written, kept = _write_tiles(source, store, size, hashes, progress)
    note = note_text.encode()
    for _ in range(10):
        if current is not None and current[0] == note:
            break
        if store.swap_checkpoint(None if current is None else current[1], note):
            break
        current = store.read_checkpoint()  # a racing publisher moved it: check again
        _checked_published(current, checkpoint.origin, size, hashes, store)
    else:
        raise StoreError("the checkpoint at %s kept changing while publishing: try again" % store.where())
    return Published(size, written, kept, previous)


def _checked_published(
    current: tuple[bytes, object] | None, origin: str, size: int, hashes: dict[Tile, bytes], store: TileStore
) -> int | None:
    """The published checkpoint's size (None if none), after refusing another log's, a
    larger tree's, and a fork's (a root that is not this tree's prefix of its size).
    """
    if current is None:
        return None
    old_size, old_root = _published_checkpoint(current[0], origin, size, store)
    if root_from_tiles(old_size, _prefix_reader(hashes, old_size)) != old_root:
        raise TileConflict(
            "the published checkpoint (size %d) has another root than this ledger at that size:"
            " %s holds another log or a fork" % (old_size, store.where())
        )
    return old_size


def _published_checkpoint(data: bytes, origin: str, size: int, store: TileStore) -> tuple[int, bytes]:
    """The size and root of the published checkpoint; refused when it is another log's
    or larger than the one to publish.
    """
    try:
        old = parse_checkpoint(parse_note(data).text)
    except ReceiptsError as exc:
        raise InputError("%s serves no checkpoint this command published: %s" % (store.where(), exc)) from None
    if old.origin != origin:
        raise InputError(
            "%s serves log %s, not %s: publish each log to its own place" % (store.where(), old.origin, origin)
        )
    if old.size > size:
        raise InputError(
            "%s already serves a checkpoint of size %d: publishing size %d would move it backwards"
            % (store.where(), old.size, size)
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
            push(level + 1, run_root(b"".join(row)))

    for stored in source.entries_between(0, size):
        push(0, leaf_hash(stored.entry))
    for level, row in enumerate(pending):
        if row:
            tiles[Tile(level, done[level], len(row))] = b"".join(row)
    return tiles


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
    store: TileStore,
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
        if _write_once(store, tile.path(), data):
            written += 1
        else:
            kept += 1
        if progress is not None:
            progress(done, len(plan))
    return written, kept


def _write_once(store: TileStore, name: str, data: bytes) -> bool:
    """Create tile ``name`` unless it exists; True if written. One already there with other
    bytes (also one a racing publisher just made) is a `TileConflict`.
    """
    if store.create(name, data):
        return True
    if store.read(name) != data:
        raise TileConflict(
            "published tile %s at %s differs from the ledger: it was altered; nothing is rewritten"
            % (name, store.where())
        )
    return False
