"""Where published tiles live: one interface (`TileStore`), a folder and an S3 bucket
behind it. The publishing rules are written once, in `_tiles`; a driver only keeps these
promises.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from .._errors import InputError, StoreError
from .._files import create_once, write_atomic

__all__ = ["TileStore", "DirTileStore", "S3TileStore", "open_tile_store", "CHECKPOINT"]

CHECKPOINT = "checkpoint"


class TileStore(Protocol):
    """A place tiles are published to, named relative to the log's prefix
    (``checkpoint``, ``tile/0/000``, ``tile/entries/001.p/7``).
    """

    def where(self) -> str:
        """The place, as the user named it (for messages)."""
        ...

    def create(self, name: str, data: bytes) -> bool:
        """Create ``name`` holding ``data``, all at once.

        MUST NOT replace an existing object, even one written a moment ago by another
        publisher; MUST return False then (and True when this call created it).
        """
        ...

    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``, or None if absent. MUST return them as stored."""
        ...

    def read_checkpoint(self) -> tuple[bytes, Any] | None:
        """The published checkpoint and a version token for `swap_checkpoint`, or None."""
        ...

    def swap_checkpoint(self, expected: Any, data: bytes) -> bool:
        """Replace the checkpoint with ``data`` only if it is still the version
        ``expected`` (None: only if there is none).

        MUST be atomic against other publishers (compare-and-swap); MUST return False,
        changing nothing, when the checkpoint is no longer that version.
        """
        ...


class DirTileStore:
    """A folder a static host serves. The checkpoint is swapped under a lock on a file
    beside it, so publishers on one machine never interleave the compare and the swap.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def where(self) -> str:
        return str(self.folder)

    def create(self, name: str, data: bytes) -> bool:
        if (self.folder / name).exists():
            return False
        try:
            return create_once(self.folder / name, data, mode=0o644)  # served to anyone
        except OSError as exc:
            raise StoreError("cannot write %s: %s" % (self.folder / name, exc.strerror or exc)) from None

    def read(self, name: str) -> bytes | None:
        path = self.folder / name
        return path.read_bytes() if path.is_file() else None

    def read_checkpoint(self) -> tuple[bytes, Any] | None:
        data = self.read(CHECKPOINT)
        return None if data is None else (data, data)

    def swap_checkpoint(self, expected: Any, data: bytes) -> bool:
        with self._locked():
            if self.read(CHECKPOINT) != expected:
                return False
            write_atomic(self.folder / CHECKPOINT, data, mode=0o644)
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".publish.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class S3TileStore:
    """An S3 bucket (or a compatible server) under a key prefix, through boto3 (the `s3`
    extra). Write-once by ``If-None-Match: *``, the checkpoint swapped by ``If-Match`` on
    its ETag: S3's own conditional writes, so any number of publishers anywhere are safe.
    The endpoint and credentials are boto3's usual ones (``AWS_ENDPOINT_URL``, ...).
    """

    def __init__(self, bucket: str, prefix: str) -> None:
        try:
            import boto3
            import botocore.exceptions
        except ImportError:
            raise InputError("publishing to S3 needs the s3 extra: pip install 'receipt-ledger[s3]'") from None
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.client: Any = boto3.client("s3")
        self._errors = botocore.exceptions

    def where(self) -> str:
        return "s3://%s/%s" % (self.bucket, self.prefix)

    def _key(self, name: str) -> str:
        return "%s/%s" % (self.prefix, name) if self.prefix else name

    def _put(self, name: str, data: bytes, **condition: str) -> bool:
        media = "text/plain; charset=utf-8" if name == CHECKPOINT else "application/octet-stream"
        cache = "no-cache" if name == CHECKPOINT else "public, max-age=31536000, immutable"
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self._key(name), Body=data, ContentType=media, CacheControl=cache, **condition
            )
        except self._errors.ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (409, 412):  # the precondition failed: someone else's object is there
                return False
            raise StoreError("cannot write %s to %s: %s" % (name, self.where(), exc)) from None
        except self._errors.BotoCoreError as exc:
            raise StoreError("cannot reach %s: %s" % (self.where(), exc)) from None
        return True

    def create(self, name: str, data: bytes) -> bool:
        return self._put(name, data, IfNoneMatch="*")

    def read(self, name: str) -> bytes | None:
        found = self._get(name)
        return None if found is None else found[0]

    def _get(self, name: str) -> tuple[bytes, str] | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
        except self._errors.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreError("cannot read %s from %s: %s" % (name, self.where(), exc)) from None
        except self._errors.BotoCoreError as exc:
            raise StoreError("cannot reach %s: %s" % (self.where(), exc)) from None
        return bytes(answer["Body"].read()), str(answer["ETag"])

    def read_checkpoint(self) -> tuple[bytes, Any] | None:
        return self._get(CHECKPOINT)

    def swap_checkpoint(self, expected: Any, data: bytes) -> bool:
        if expected is None:
            return self._put(CHECKPOINT, data, IfNoneMatch="*")
        return self._put(CHECKPOINT, data, IfMatch=str(expected))


def open_tile_store(target: str) -> TileStore:
    """``s3://BUCKET/PREFIX`` or a folder.

    Raises:
        InputError: an s3 URL without a bucket, or the s3 extra missing.
    """
    if target.startswith("s3://"):
        parts = urlsplit(target)
        if not parts.netloc:
            raise InputError("an S3 target is s3://BUCKET/PREFIX")
        return S3TileStore(parts.netloc, parts.path)
    return DirTileStore(Path(target))
