"""Reading stored evidence back, for the writer's own decisions and displays: through
verify's one reader (which re-hashes every blob), so that `status`, `seal`, exports and
`verify` never see different facts. Also the one lookup of a record's snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any, BinaryIO

from receipts import SNAPSHOT_FORMAT, Digest, EvidenceReader, LadderReceipt, Tier, TierRecord
from verify import SMALL_BLOB, CannotVerify, evidence_reader, read_blob, read_evidence

from .._errors import InputError, StoreError
from .._layout import hash_prefix
from ..store._ledger import Store

__all__ = [
    "TAIL_BYTES",
    "blob_tail",
    "last_lines",
    "resolve_blob",
    "evidence_bytes",
    "evidence_json",
    "record_evidence",
    "snapshot_of",
    "receipt_snapshot",
    "candidate_snapshot",
    "store_evidence_reader",
]


TAIL_BYTES = 8 << 10  # what is kept of a failing check's output to show why it failed


def blob_tail(handle: BinaryIO | None) -> bytes:
    """The last `TAIL_BYTES` of a stored blob, read through once and never held whole
    (shown to a person, never decided on); empty when there is none.
    """
    if handle is None:
        return b""
    tail = b""
    with handle:
        while chunk := handle.read(1 << 16):
            tail = (tail + chunk)[-TAIL_BYTES:]
    return tail


def last_lines(parts: Iterable[bytes], lines: int = 15) -> str:
    """The last ``lines`` lines of the outputs ``parts`` (stdout, then stderr), as text."""
    text = "".join(part.decode("utf-8", "replace") for part in parts)
    return "\n".join(text.strip().splitlines()[-lines:])


def evidence_bytes(store: Store, digest: Digest, limit: int | None = SMALL_BLOB) -> bytes | None:
    """A stored blob's bytes, only if they still hash to ``digest`` (and fit ``limit``)."""
    return read_blob(store.reader, digest, limit)


def evidence_json(store: Store, digest: Digest, fmt: str) -> dict[str, Any] | None:
    """A stored JSON evidence document of format ``fmt``, or None."""
    return read_evidence(store.reader, digest, fmt)


def store_evidence_reader(store: Store) -> EvidenceReader:
    """The one reader bound to a store, as the verdict rules in `receipts` take it."""
    return evidence_reader(store.reader)


def record_evidence(store: Store, record: TierRecord, check_id: str, fmt: str) -> dict[str, Any] | None:
    """The record's first evidence document named ``check_id`` that reads as ``fmt``."""
    for ref in record.evidence:
        if ref.check_id == check_id:
            doc = evidence_json(store, ref.digest, fmt)
            if doc is not None:
                return doc
    return None


def snapshot_of(store: Store, record: TierRecord) -> dict[str, Any] | None:
    """The candidate snapshot a deterministic record stored (commit, tree, base, diff...)."""
    return record_evidence(store, record, "snapshot", SNAPSHOT_FORMAT)


def receipt_snapshot(store: Store, receipt: LadderReceipt) -> dict[str, Any] | None:
    """The snapshot of the deterministic record a receipt binds, if it has one."""
    slot = receipt.entry(Tier.DETERMINISTIC)
    for digest in slot.records if slot else ():
        record = store.record(digest)
        if record is not None:
            return snapshot_of(store, record)
    return None


def candidate_snapshot(
    store: Store, task: str, candidate: Digest, config: Digest | None = None
) -> tuple[TierRecord, dict[str, Any] | None] | None:
    """The latest deterministic record of ``task`` on ``candidate`` (under ``config`` if
    given), with its snapshot; None if the tier has not run on it.
    """
    latest = None
    for row in store.records_for(task):
        rec = row.record
        if (
            rec.tier is Tier.DETERMINISTIC
            and rec.input_hash == candidate
            and (config is None or rec.config_hash == config)
        ):
            latest = rec
    return None if latest is None else (latest, snapshot_of(store, latest))


def copy_blob(store: Store, digest: Digest, out: IO[bytes]) -> None:
    """Stream a stored blob to ``out`` whole (`InputError` if it is not stored)."""
    handle = store.reader.open_blob(digest)
    if handle is None:
        raise InputError("no evidence blob %s in the blob store" % digest)
    with handle:
        while chunk := handle.read(1 << 20):
            out.write(chunk)
    out.flush()


def blob_preview(store: Store, digest: Digest, max_lines: int, max_bytes: int = 64 * 1024) -> tuple[str, str | None]:
    """A stored blob's first lines as text for reading (undecodable bytes replaced), and a
    note saying how much was left out (None when the blob was shown whole).

    Raises:
        InputError: the blob is not stored.
    """
    handle = store.reader.open_blob(digest)
    if handle is None:
        raise InputError("no evidence blob %s in the blob store" % digest)
    shown, parts = 0, list[str]()
    with handle:
        for n, line in enumerate(handle):
            if n >= max_lines or shown >= max_bytes:
                size = os.fstat(handle.fileno()).st_size
                return "".join(parts), "… truncated: %d of %d bytes shown; --full for all" % (shown, size)
            parts.append(line.decode("utf-8", "replace"))
            shown += len(line)
    return "".join(parts), None


def resolve_blob(store: Store, text: str) -> Digest:
    """A blob's digest from its full text or a unique prefix of at least 8 hex digits, read
    as `hash_prefix` reads an entry's (as tables print it). `InputError` for no match,
    several, or text of another form.
    """
    prefix = hash_prefix(text)
    if prefix is None:
        raise InputError(
            "a blob is named blake3:<hex>, in full or by at least 8 of its first hex digits: %r" % text[:80]
        )
    if len(prefix) == 64:
        return Digest.parse("blake3:" + prefix)
    try:
        found = store.reader.blob_digests(prefix)
    except CannotVerify as exc:
        raise StoreError(str(exc)) from None
    if len(found) != 1:
        raise InputError(
            "%s names %s" % (text, "no stored blob" if not found else "%d blobs: give more digits" % len(found))
        )
    return Digest.parse("blake3:" + found[0])
