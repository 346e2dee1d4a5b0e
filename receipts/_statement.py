"""A registered SCITT statement as a chain entry's body (format.md §15a): decoding one
needs only this; the COSE and receipt machinery (`_cose`, `_registration`) loads when a
statement is checked or registered, not whenever a chain is read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ._errors import FormatError
from ._merkle import leaf_hash
from ._model import FORMAT_VERSION

__all__ = ["StatementRegistration", "MAX_STATEMENT_BYTES", "statement_leaf"]

MAX_STATEMENT_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class StatementRegistration:
    """A SCITT signed statement registered in the chain: its exact bytes, a tagged
    COSE_Sign1 of at most 64 KiB (checked here; its signature is the registrar's
    policy, checked before the entry is written).
    """

    statement: bytes
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported statement registration version %r" % (self.version,))
        if not isinstance(self.statement, bytes) or not 0 < len(self.statement) <= MAX_STATEMENT_BYTES:
            raise FormatError("a registered statement is 1 to %d bytes" % MAX_STATEMENT_BYTES)
        from ._cose import decode_sign1

        decode_sign1(self.statement)

    @property
    def leaf(self) -> bytes:
        return statement_leaf(self.statement)


def statement_leaf(statement: bytes) -> bytes:
    """The statement log's leaf hash for ``statement`` (RFC 9162 leaf of its SHA-256)."""
    return leaf_hash(hashlib.sha256(statement).digest())
