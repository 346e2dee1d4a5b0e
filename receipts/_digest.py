"""BLAKE3 digests, with one derive-key context per object type."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import blake3

from ._errors import FormatError

__all__ = ["Digest", "Domain", "domain_hash", "content_digest", "ContentHasher", "DIGEST_SIZE"]

DIGEST_SIZE = 32
_TEXT = re.compile(r"blake3:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, order=True)
class Digest:
    """A 32-byte BLAKE3 output, written ``blake3:<64 lowercase hex>`` in text."""

    value: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.value, bytes) or len(self.value) != DIGEST_SIZE:
            raise FormatError("a digest is exactly %d bytes" % DIGEST_SIZE)

    @classmethod
    def parse(cls, text: str) -> Digest:
        if not isinstance(text, str) or _TEXT.fullmatch(text) is None:
            raise FormatError("not a hash of the form blake3:<64 lowercase hex digits>: %r" % (text,))
        return cls(bytes.fromhex(text[7:]))

    @property
    def hex(self) -> str:
        return self.value.hex()

    def short(self) -> str:
        return "blake3:" + self.value.hex()[:12]

    def __str__(self) -> str:
        return "blake3:" + self.value.hex()


class Domain(enum.Enum):
    """Derive-key contexts. Each string is fixed forever; a new meaning gets a new string."""

    TIER_RECORD = "receipt-ledger 2026-12-02 tier-record v1"
    LADDER_RECEIPT = "receipt-ledger 2026-12-02 ladder-receipt v1"
    EVIDENCE_LIST = "receipt-ledger 2026-12-02 evidence-list v1"
    CHAIN_ENTRY = "receipt-ledger 2026-12-02 chain-entry v1"
    GENESIS = "receipt-ledger 2026-12-02 genesis v1"
    KEY_ADD = "receipt-ledger 2026-12-02 key-add v1"
    KEY_REVOKE = "receipt-ledger 2026-12-02 key-revoke v1"
    CANDIDATE = "receipt-ledger 2026-12-02 candidate v1"
    CONFIG = "receipt-ledger 2026-12-02 config v1"
    ENVIRONMENT = "receipt-ledger 2026-12-02 environment v1"
    CONTRACT_REVISION = "receipt-ledger 2026-12-02 contract-revision v1"
    WAIVER = "receipt-ledger 2026-12-02 waiver v1"
    EVENT = "receipt-ledger 2026-12-02 event v1"
    RETENTION = "receipt-ledger 2026-12-03 retention v1"
    TIMESTAMP = "receipt-ledger 2026-12-03 timestamp v1"
    STATEMENT = "receipt-ledger 2026-12-05 statement v1"


def domain_hash(domain: Domain, data: bytes) -> Digest:
    return Digest(blake3.blake3(data, derive_key_context=domain.value).digest())


def content_digest(data: bytes) -> Digest:
    """Plain (unkeyed) BLAKE3 of raw content, so that ``b3sum`` gives the same answer."""
    return Digest(blake3.blake3(data).digest())


class ContentHasher:
    """Incremental plain BLAKE3 for streamed content; multi-threaded on large updates."""

    __slots__ = ("_h", "size")

    def __init__(self) -> None:
        self._h = blake3.blake3(max_threads=blake3.blake3.AUTO)
        self.size = 0

    def update(self, chunk: bytes) -> None:
        self._h.update(chunk)
        self.size += len(chunk)

    def digest(self) -> Digest:
        return Digest(self._h.digest())
