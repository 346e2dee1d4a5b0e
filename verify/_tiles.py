"""An audit of a published tile log (C2SP tlog-tiles, docs/format.md §9a) from its files
alone: the checkpoint's signature under the log's verifier key, every tile's length,
every entry bundle against its level-0 hashes, every full tile against the hash the
level above holds for it, and the root recomputed from the tiles against the signed one.
Read-only: a folder, or an http(s) prefix the auditor names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    TILE_WIDTH,
    Checkpoint,
    ReceiptsError,
    Tile,
    is_valid_note_signature,
    leaf_hash,
    parse_checkpoint,
    parse_entry_bundle,
    parse_note,
    parse_verifier_key,
    root_from_tiles,
    run_root,
    tiles_for_size,
)

from ._errors import CannotVerify
from ._result import Defect

__all__ = ["TileAudit", "audit_tiles", "tile_reader", "PublishedLog"]

_HASH = 32
_MAX_TILE = 1 << 24  # a bundle of 256 entries of at most 64 KiB each


@dataclass(frozen=True, slots=True)
class TileAudit:
    """What the audit found: the checkpoint's size, the tiles read, and each defect."""

    size: int
    tiles: int
    defects: tuple[Defect, ...]

    @property
    def ok(self) -> bool:
        return not self.defects


def tile_reader(where: str) -> Callable[[str], bytes | None]:
    """Reads ``name`` under a folder or an http(s) prefix: its bytes, or None if absent.

    Raises (when called):
        CannotVerify: the prefix cannot be read for another reason than absence.
    """
    if where.startswith(("http://", "https://")):
        import urllib.error  # only a reader of published tiles pays for the HTTP client
        import urllib.request

        prefix = where.rstrip("/") + "/"

        def fetch(name: str) -> bytes | None:
            try:
                with urllib.request.urlopen(prefix + name, timeout=30) as answer:
                    return bytes(answer.read(_MAX_TILE + 1))
            except urllib.error.HTTPError as exc:
                if exc.code in (403, 404):  # S3 answers 403 for a missing key without list rights
                    return None
                raise CannotVerify("cannot read %s%s: HTTP %d" % (prefix, name, exc.code)) from None
            except (urllib.error.URLError, OSError) as exc:
                raise CannotVerify("cannot read %s%s: %s" % (prefix, name, exc)) from None

        return fetch
    folder = Path(where)

    def read(name: str) -> bytes | None:
        path = folder / name
        try:
            if not path.is_file():
                return None
            with path.open("rb") as f:  # bounded as over HTTP: a huge file is not read whole
                return f.read(_MAX_TILE + 1)
        except OSError as exc:
            raise CannotVerify("cannot read %s: %s" % (path, exc)) from None

    return read


def audit_tiles(read: Callable[[str], bytes | None], log_vkey: str) -> TileAudit:
    """Audit the tile log ``read`` gives against the log's verifier key (what the auditor
    kept and asks besides is `verify.audit_tiles_under`).

    Steps:
      1. the checkpoint parses and carries a valid signature of the vkey's key, under its
         name, the checkpoint's origin;
      2. every tile the size calls for is there, of its width's length;
      3. every entry bundle holds its width of entries whose leaf hashes are the level-0
         tile's, and every full tile's root is the hash the level above holds for it;
      4. the root recomputed from the tiles is the signed root.

    Raises:
        CannotVerify: the vkey is not a log's verifier key, the checkpoint is absent or
            unreadable, or a tile cannot be read.
    """
    # 1. The checkpoint.
    try:
        checkpoint, signed = _published_checkpoint(read, log_vkey)
    except ReceiptsError as exc:
        return TileAudit(0, 0, (Defect("checkpoint-malformed", "the published checkpoint: %s" % exc),))
    defects = []
    if not signed:
        defects.append(Defect("checkpoint-signature", "the published checkpoint is not signed by the vkey's key"))
    # 2. and 3. The tiles and bundles.
    tiles, found = _read_tiles(read, checkpoint.size, defects)
    # 4. The root.
    if not defects:
        if root_from_tiles(checkpoint.size, tiles.__getitem__) != checkpoint.root:
            defects.append(Defect("tile-altered", "the tiles do not give the signed root at size %d" % checkpoint.size))
    return TileAudit(checkpoint.size, found, tuple(defects))


def _published_checkpoint(read: Callable[[str], bytes | None], log_vkey: str) -> tuple[Checkpoint, bool]:
    """The published checkpoint, and whether the log's key (the vkey's, under its name,
    which must be the checkpoint's origin) signed it.

    Raises:
        CannotVerify: the vkey is not a log's verifier key, or no checkpoint is published.
        ReceiptsError: the published checkpoint does not parse.
    """
    try:
        name, key, sig_type = parse_verifier_key(log_vkey)
    except ReceiptsError as exc:
        raise CannotVerify("the log's verifier key: %s" % exc) from None
    if sig_type != 0x01:
        raise CannotVerify("the log's verifier key is of type 0x01 (0x04 is a witness's)")
    data = read("checkpoint")
    if data is None:
        raise CannotVerify("no checkpoint is published there (or it is not readable: a private bucket answers 403)")
    note = parse_note(data)
    checkpoint = parse_checkpoint(note.text)
    return checkpoint, checkpoint.origin == name and is_valid_note_signature(note, name, key)


def _read_tiles(read: Callable[[str], bytes | None], size: int, defects: list[Defect]) -> tuple[dict[Tile, bytes], int]:
    tiles: dict[Tile, bytes] = {}
    found = 0
    for tile in tiles_for_size(size):
        data = read(tile.path())
        if data is None:
            defects.append(Defect("tile-missing", "tile %s is not published" % tile.path()))
            continue
        found += 1
        if tile.level is None:
            _check_bundle(tile, data, tiles, defects)
            continue
        if len(data) != tile.width * _HASH:
            defects.append(
                Defect("tile-altered", "tile %s holds %d bytes, not %d" % (tile.path(), len(data), tile.width * _HASH))
            )
            continue
        tiles[tile] = data
        if tile.level > 0:
            _check_level_below(tile, data, tiles, defects)
    return tiles, found


def _check_bundle(tile: Tile, data: bytes, tiles: dict[Tile, bytes], defects: list[Defect]) -> None:
    try:
        entries = parse_entry_bundle(data, tile.width)
    except ReceiptsError as exc:
        defects.append(Defect("tile-altered", "entry bundle %s: %s" % (tile.path(), exc)))
        return
    hashes = tiles.get(Tile(0, tile.index, tile.width))
    if hashes is not None and b"".join(leaf_hash(e) for e in entries) != hashes:
        defects.append(
            Defect(
                "tile-altered",
                "entry bundle %s does not hash to tile %s" % (tile.path(), Tile(0, tile.index, tile.width).path()),
            )
        )


def _check_level_below(tile: Tile, data: bytes, tiles: dict[Tile, bytes], defects: list[Defect]) -> None:
    """Each hash of a level-L tile is the root of one full tile of level L - 1."""
    level = tile.level or 0
    for i in range(tile.width):
        below = tiles.get(Tile(level - 1, tile.index * TILE_WIDTH + i, TILE_WIDTH))
        if below is None:
            continue
        if run_root(below) != data[i * _HASH : (i + 1) * _HASH]:
            below_path = Tile(level - 1, tile.index * TILE_WIDTH + i, TILE_WIDTH).path()
            defects.append(
                Defect("tile-altered", "tile %s is not the hash %d of tile %s" % (below_path, i, tile.path()))
            )


class _Absent(Exception):
    """A tile the published size calls for is not there (its path is kept by the reader)."""


@dataclass(frozen=True, slots=True)
class PublishedLog:
    """The log as published in tiles (``where``: a folder or an http(s) prefix), and its
    verifier key: `verify HASH --tiles WHERE --log-vkey VKEY` asks that the checkpoint
    a receipt is proven into is a prefix of what the log shows everyone (step 8f).
    """

    where: str
    log_vkey: str

    def covers(self, size: int, root: bytes) -> list[Defect]:
        """Defects unless the published log, its checkpoint signed by the vkey's key, has
        at least ``size`` entries and ``root`` at that size. The published log's own faults
        are defects, as `audit_tiles` finds them: a checkpoint that does not parse or is not
        signed (`not-published`), a tile its size calls for that is absent (`tile-missing`).

        Raises:
            CannotVerify: no checkpoint is published there, a tile or the checkpoint cannot
                be read (an error other than its absence), or the vkey is not a log's.
        """
        read = tile_reader(self.where)
        try:
            published, signed = _published_checkpoint(read, self.log_vkey)
        except ReceiptsError as exc:
            return [Defect("not-published", "the checkpoint published at %s does not parse: %s" % (self.where, exc))]
        if not signed:
            return [
                Defect("not-published", "the checkpoint published at %s is not signed by the vkey's key" % self.where)
            ]
        if published.size < size:
            message = "the log published at %s has %d entries, short of the checkpoint's %d" % (
                self.where,
                published.size,
                size,
            )
            return [Defect("not-published", message)]
        widths: dict[tuple[int | None, int], int] = {
            (t.level, t.index): t.width for t in tiles_for_size(published.size)
        }

        absent: list[str] = []

        def prefix(tile: Tile) -> bytes:
            path = Tile(tile.level, tile.index, widths[(tile.level, tile.index)]).path()
            data = read(path)
            if data is None:
                absent.append(path)
                raise _Absent
            return data[: tile.width * _HASH]

        try:
            recomputed = root_from_tiles(size, prefix)
        except _Absent:
            return [Defect("tile-missing", "tile %s is not published at %s" % (absent[0], self.where))]
        if recomputed != root:
            message = "the log published at %s has another root at size %d than the checkpoint: a split view" % (
                self.where,
                size,
            )
            return [Defect("split-view", message)]
        return []
