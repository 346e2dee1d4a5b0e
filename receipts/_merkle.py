"""RFC 6962 / RFC 9162 Merkle trees over the chain's entries: hashing, proofs, and
their verification. Roots and proofs are computed from the hashes of perfect subtrees
(a complete subtree of 2**level leaves starting at index * 2**level), so a store that
keeps those can answer in O(log n) lookups instead of reading every leaf.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol

from ._errors import FormatError

__all__ = [
    "EMPTY_ROOT",
    "leaf_hash",
    "node_hash",
    "Nodes",
    "MemoryTree",
    "CompactRange",
    "CachedNodes",
    "tree_root",
    "inclusion_proof",
    "consistency_proof",
    "is_valid_inclusion",
    "inclusion_root",
    "is_valid_consistency",
]

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class Nodes(Protocol):
    """Hashes of perfect subtrees: ``node(level, index)`` covers leaves
    [index * 2**level, (index + 1) * 2**level).
    """

    def node(self, level: int, index: int) -> bytes: ...


class MemoryTree:
    """All perfect-subtree hashes of a list of leaf hashes, built in O(n)."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.levels: list[list[bytes]] = [list(leaves)]
        while len(self.levels[-1]) > 1:
            below = self.levels[-1]
            self.levels.append([node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)])

    @property
    def size(self) -> int:
        return len(self.levels[0])

    def node(self, level: int, index: int) -> bytes:
        return self.levels[level][index]


class CachedNodes:
    """A `Nodes` that asks its source once per node: proofs into one tree share the
    subtrees along its right edge, and a store answers each with a query.
    """

    __slots__ = ("source", "memo")

    def __init__(self, source: Nodes) -> None:
        self.source = source
        self.memo: dict[tuple[int, int], bytes] = {}

    def node(self, level: int, index: int) -> bytes:
        found = self.memo.get((level, index))
        if found is None:
            found = self.memo[(level, index)] = self.source.node(level, index)
        return found


class CompactRange:
    """The hashes of the perfect subtrees that cover leaves [0, size), largest first: one
    per set bit of ``size``, so at most 64. Enough to extend the tree leaf by leaf and to
    compute its root at any size reached, without keeping the leaves (RFC 9162 §2.1.4's
    consistency, proven by the one who folds the leaves in).
    """

    __slots__ = ("size", "hashes")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if size < 0 or len(hashes) != bin(size).count("1") or any(len(h) != 32 for h in hashes):
            raise FormatError("a compact range of size %d has one 32-byte hash per set bit of its size" % size)
        self.size = size
        self.hashes = list(hashes)

    def append(self, leaf: bytes) -> None:
        """Add the next leaf hash; equal-sized subtrees merge as in a binary counter."""
        self.hashes.append(leaf)
        self.size += 1
        carry = self.size
        while not carry & 1:
            right = self.hashes.pop()
            self.hashes[-1] = node_hash(self.hashes[-1], right)
            carry >>= 1

    def root(self) -> bytes:
        """RFC 6962 MTH of the leaves so far: the subtrees folded from the right."""
        if not self.hashes:
            return EMPTY_ROOT
        root = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            root = node_hash(left, root)
        return root

    def copy(self) -> CompactRange:
        return CompactRange(self.size, tuple(self.hashes))


def _split(size: int) -> int:
    """The largest power of two smaller than ``size`` (size > 1)."""
    return 1 << ((size - 1).bit_length() - 1)


def _subtree(nodes: Nodes, start: int, end: int) -> bytes:
    size = end - start
    if size & (size - 1) == 0 and start % size == 0:
        return nodes.node(size.bit_length() - 1, start // size)
    k = _split(size)
    return node_hash(_subtree(nodes, start, start + k), _subtree(nodes, start + k, end))


def tree_root(nodes: Nodes, size: int) -> bytes:
    if size < 0:
        raise FormatError("a tree size is not negative")
    return EMPTY_ROOT if size == 0 else _subtree(nodes, 0, size)


def inclusion_proof(nodes: Nodes, index: int, size: int) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(index, D[size])."""
    if not 0 <= index < size:
        raise FormatError("leaf %d is not in a tree of size %d" % (index, size))

    def path(m: int, start: int, end: int) -> list[bytes]:
        if end - start == 1:
            return []
        k = _split(end - start)
        if m < k:
            return path(m, start, start + k) + [_subtree(nodes, start + k, end)]
        return path(m - k, start + k, end) + [_subtree(nodes, start, start + k)]

    return path(index, 0, size)


def consistency_proof(nodes: Nodes, old: int, new: int) -> list[bytes]:
    """RFC 6962 §2.1.2 PROOF(old, D[new])."""
    if not 0 < old <= new:
        raise FormatError("no consistency proof from size %d to size %d" % (old, new))

    def sub(m: int, start: int, end: int, whole: bool) -> list[bytes]:
        if m == end - start:
            return [] if whole else [_subtree(nodes, start, end)]
        k = _split(end - start)
        if m <= k:
            return sub(m, start, start + k, whole) + [_subtree(nodes, start + k, end)]
        return sub(m - k, start + k, end, False) + [_subtree(nodes, start, start + k)]

    return sub(old, 0, new, True)


def inclusion_root(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    """The root an RFC 9162 §2.1.3.2 inclusion path gives for ``leaf`` at ``index`` in a
    tree of ``size``, or None when the path cannot belong to such a tree.
    """
    if not 0 <= index < size or any(len(p) != 32 for p in proof) or len(leaf) != 32:
        return None
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def is_valid_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2."""
    return len(root) == 32 and inclusion_root(leaf, index, size, proof) == root


def is_valid_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2. Both roots are 32-byte hashes, and the empty tree has exactly one
    root (SHA-256 of nothing): a tree of size 0 is consistent only as that root.
    """
    if len(old_root) != 32 or len(new_root) != 32 or any(len(p) != 32 for p in proof) or not 0 <= old <= new:
        return False
    if old == 0:
        return not proof and old_root == EMPTY_ROOT and (new > 0 or new_root == EMPTY_ROOT)
    if old == new:
        return not proof and old_root == new_root
    if not 0 < old < new or not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0
