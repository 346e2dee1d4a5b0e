"""The one evidence reader: a blob's bytes or JSON, returned only if they still hash to
the digest that names them. The verifier re-derives verdicts through it, and the writer
(`ledger`) reads its own evidence through it too, so both sides see the same facts.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Protocol

from receipts import ContentHasher, Digest, EvidenceReader, ReceiptsError, parse_evidence_json

__all__ = ["Blobs", "SMALL_BLOB", "read_blob", "read_evidence", "evidence_reader", "blob_problem"]

SMALL_BLOB = 4 << 20  # evidence read whole to re-derive a verdict (JSON, replies) is at most this
_CHUNK = 1 << 20


class Blobs(Protocol):
    """What the evidence reader needs of a source (every `verify.Source` has it)."""

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        """The stored blob named ``digest``, opened for reading, or None when it is absent.

        Raises:
            CannotVerify: the blob store cannot be read.
        """
        ...


def read_blob(source: Blobs, digest: Digest, limit: int | None = SMALL_BLOB) -> bytes | None:
    """The blob's bytes; None if it is missing, larger than ``limit`` (None: no limit), or
    no longer hashes to ``digest``.
    """
    handle = source.open_blob(digest)
    if handle is None:
        return None
    hasher, parts, size = ContentHasher(), [], 0
    with handle:
        while chunk := handle.read(_CHUNK):
            size += len(chunk)
            if limit is not None and size > limit:
                return None
            hasher.update(chunk)
            parts.append(chunk)
    return b"".join(parts) if hasher.digest() == digest else None


def read_evidence(source: Blobs, digest: Digest, fmt: str) -> dict[str, Any] | None:
    """A JSON evidence document of format ``fmt``; None if unreadable as such (see `read_blob`)."""
    data = read_blob(source, digest)
    if data is None:
        return None
    try:
        return parse_evidence_json(data, fmt)
    except ReceiptsError:
        return None


def evidence_reader(source: Blobs) -> EvidenceReader:
    """`read_evidence` bound to a source, as the verdict rules in `receipts` take it."""
    return lambda digest, fmt: read_evidence(source, digest, fmt)


def blob_problem(source: Blobs, digest: Digest, size: int | None = None) -> str | None:
    """Stream a blob through BLAKE3: None if it hashes to ``digest`` (and has ``size``, when
    given), else the defect code: ``evidence-missing`` or ``evidence-altered``.
    """
    handle = source.open_blob(digest)
    if handle is None:
        return "evidence-missing"
    hasher = ContentHasher()
    with handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return None if hasher.digest() == digest and size in (None, hasher.size) else "evidence-altered"
