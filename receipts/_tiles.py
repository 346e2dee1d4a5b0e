"""The C2SP `tlog-tiles` layout of the chain's Merkle tree (docs/format.md §9a): tile
paths, which tiles a tree of a given size has, a tile's bytes from the tree's
perfect-subtree hashes, entry bundles, and the root of a tree recomputed from tiles
alone. Pure: the caller reads and writes the files.

A tile at level L, index N and width W holds the hashes of the perfect subtrees of
height 8·L at indexes N·256 … N·256 + W − 1, 32 bytes each; W is 256 for a full tile.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._errors import FormatError
from ._merkle import EMPTY_ROOT, node_hash

__all__ = [
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "Tile",
    "tiles_for_size",
    "tile_bytes",
    "entry_bundle",
    "parse_entry_bundle",
    "root_from_tiles",
    "run_root",
    "MAX_TILED_ENTRY",
]

TILE_HEIGHT = 8  # tree levels per tile level
TILE_WIDTH = 1 << TILE_HEIGHT
HASH_SIZE = 32
MAX_TILED_ENTRY = 0xFFFF  # an entry bundle prefixes each entry with a big-endian uint16 length
_PATH = re.compile(r"tile/(0|[1-9][0-9]?|entries)/((?:x[0-9]{3}/)*[0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?")


@dataclass(frozen=True, slots=True)
class Tile:
    """One tile: ``level`` is None for an entry bundle, ``width`` 256 for a full tile."""

    level: int | None
    index: int
    width: int

    def __post_init__(self) -> None:
        if self.level is not None and not 0 <= self.level <= 63:
            raise FormatError("a tile level is 0 to 63")
        if self.index < 0 or not 1 <= self.width <= TILE_WIDTH:
            raise FormatError("a tile has a non-negative index and a width of 1 to 256")

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    def path(self) -> str:
        """``tile/<L>/<N>[.p/<W>]`` (``tile/entries/…`` for a bundle), N in 3-digit groups,
        all but the last prefixed with ``x``.
        """
        groups = ["%03d" % (self.index % 1000)]
        n = self.index // 1000
        while n:
            groups.append("x%03d" % (n % 1000))
            n //= 1000
        where = "entries" if self.level is None else str(self.level)
        tail = "" if self.full else ".p/%d" % self.width
        return "tile/%s/%s%s" % (where, "/".join(reversed(groups)), tail)

    @classmethod
    def parse(cls, path: str) -> Tile:
        """The tile a path names.

        Raises:
            FormatError: the path is not a tile path in its one canonical form.
        """
        found = _PATH.fullmatch(path)
        if found is None:
            raise FormatError("not a tile path: %r" % path)
        level_text, index_text, width_text = found.groups()
        index = int("".join(part.lstrip("x") for part in index_text.split("/")))
        tile = cls(None if level_text == "entries" else int(level_text), index, int(width_text or TILE_WIDTH))
        if tile.path() != path:
            raise FormatError("not a canonical tile path: %r" % path)
        return tile


def tiles_for_size(size: int) -> list[Tile]:
    """Every hash tile and entry bundle a tree of ``size`` leaves has: the full ones, then
    at each level the partial one of width ``floor(size / 256**L) mod 256`` if not zero.
    Bundles follow level 0's layout.
    """
    out: list[Tile] = []
    level, count = 0, size
    while count:
        full, rest = divmod(count, TILE_WIDTH)
        out.extend(Tile(level, n, TILE_WIDTH) for n in range(full))
        if rest:
            out.append(Tile(level, full, rest))
        level, count = level + 1, full
    full, rest = divmod(size, TILE_WIDTH)
    out.extend(Tile(None, n, TILE_WIDTH) for n in range(full))
    if rest:
        out.append(Tile(None, full, rest))
    return out


def tile_bytes(tile: Tile, node: Callable[[int, int], bytes]) -> bytes:
    """A hash tile's bytes from ``node(height, index)``, the hash of a perfect subtree."""
    if tile.level is None:
        raise FormatError("an entry bundle is made from entries (entry_bundle)")
    height = tile.level * TILE_HEIGHT
    return b"".join(node(height, tile.index * TILE_WIDTH + i) for i in range(tile.width))


def entry_bundle(entries: Sequence[bytes]) -> bytes:
    """Entries, each prefixed by its length as a big-endian uint16.

    Raises:
        FormatError: an entry is longer than 65,535 bytes (the bundle cannot hold it).
    """
    parts = []
    for entry in entries:
        if len(entry) > MAX_TILED_ENTRY:
            raise FormatError("an entry of %d bytes does not fit an entry bundle (65535 at most)" % len(entry))
        parts.append(struct.pack(">H", len(entry)) + entry)
    return b"".join(parts)


def parse_entry_bundle(data: bytes, width: int) -> tuple[bytes, ...]:
    """The ``width`` entries of a bundle.

    Raises:
        FormatError: the bundle does not hold exactly ``width`` length-prefixed entries.
    """
    entries, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise FormatError("an entry bundle ends inside a length prefix")
        (length,) = struct.unpack_from(">H", data, at)
        if at + 2 + length > len(data):
            raise FormatError("an entry bundle ends inside an entry")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    if len(entries) != width:
        raise FormatError("an entry bundle of width %d holds %d entries" % (width, len(entries)))
    return tuple(entries)


def root_from_tiles(size: int, read: Callable[[Tile], bytes]) -> bytes:
    """The root of a tree of ``size`` leaves computed from its hash tiles alone, each
    tile's length checked; ``read`` returns a tile's bytes (and raises if it cannot).

    The tree splits by the one bits of ``size`` into perfect subtrees, largest first; a
    subtree of height h is a hash of the tile at level h // 8 when h is a multiple of 8,
    else the root of 2**(h % 8) consecutive hashes of that level's tile.

    Raises:
        FormatError: a tile has the wrong length.
    """
    if size == 0:
        return EMPTY_ROOT
    cache: dict[Tile, bytes] = {}

    def hashes_of(level: int, index: int) -> bytes:
        count = size // TILE_WIDTH**level
        tile_index = index // TILE_WIDTH
        width = min(TILE_WIDTH, count - tile_index * TILE_WIDTH)
        tile = Tile(level, tile_index, width)
        if tile not in cache:
            data = read(tile)
            if len(data) != width * HASH_SIZE:
                raise FormatError("tile %s holds %d bytes, not %d" % (tile.path(), len(data), width * HASH_SIZE))
            cache[tile] = data
        return cache[tile]

    def subtree(height: int, index: int) -> bytes:
        level, below = divmod(height, TILE_HEIGHT)
        first = index << below
        data = hashes_of(level, first)
        at = first % TILE_WIDTH
        return run_root(data[at * HASH_SIZE : (at + (1 << below)) * HASH_SIZE])

    parts, start = [], 0
    for height in range(size.bit_length() - 1, -1, -1):
        if size >> height & 1:
            parts.append(subtree(height, start >> height))
            start += 1 << height
    root = parts[-1]
    for part in reversed(parts[:-1]):
        root = node_hash(part, root)
    return root


def run_root(hashes: bytes) -> bytes:
    """The Merkle root over a run of 2**k concatenated 32-byte hashes (a full tile's, or
    part of one): the hash of the perfect subtree they are the bottom of.

    Raises:
        FormatError: the run is not a power of two of whole hashes.
    """
    count, rest = divmod(len(hashes), HASH_SIZE)
    if rest or count == 0 or count & (count - 1):
        raise FormatError("a run of %d bytes is not a power of two of 32-byte hashes" % len(hashes))
    layer = [hashes[i : i + HASH_SIZE] for i in range(0, len(hashes), HASH_SIZE)]
    while len(layer) > 1:
        layer = [node_hash(layer[i], layer[i + 1]) for i in range(0, len(layer), 2)]
    return layer[0]
