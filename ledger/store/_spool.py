"""Evidence streamed in: hashed as it is copied, and capped at what a bundle can carry."""

from __future__ import annotations

from typing import BinaryIO

from receipts import ContentHasher, Digest

from .._errors import InputError

__all__ = ["MAX_EVIDENCE", "copy_hashed"]

MAX_EVIDENCE = 1 << 30  # bytes in one evidence blob: what a bundle may carry (verify's bundle limit)
_CHUNK = 8 << 20  # large enough for BLAKE3 to use every core, small enough to bound memory


def copy_hashed(stream: BinaryIO, out: BinaryIO) -> tuple[Digest, int]:
    """Copy ``stream`` to ``out`` in chunks while hashing it.

    Returns:
        The BLAKE3 digest of what was copied, and its size.

    Raises:
        InputError: the stream holds more than `MAX_EVIDENCE` bytes.
        OSError: either side failed.
    """
    hasher = ContentHasher()
    while chunk := stream.read(_CHUNK):
        hasher.update(chunk)
        if hasher.size > MAX_EVIDENCE:
            raise InputError("evidence is larger than %d bytes, the most a bundle may carry" % MAX_EVIDENCE)
        out.write(chunk)
    return hasher.digest(), hasher.size
