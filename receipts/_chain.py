"""Chain entries: the signed, hash-linked envelope around every body in the ledger."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ._digest import Digest, Domain
from ._errors import FormatError
from ._model import FORMAT_VERSION, check_time

__all__ = ["EntryKind", "Entry", "BODY_DOMAIN", "KEYRING_KINDS", "TASK_ENTRY_KINDS"]

_KEY_ID = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


class EntryKind(enum.StrEnum):
    GENESIS = "genesis"
    KEY_ADD = "key_add"
    KEY_REVOKE = "key_revoke"
    TIER_RECORD = "tier_record"
    RECEIPT = "receipt"
    CONTRACT = "contract"
    WAIVER = "waiver"
    EVENT = "event"
    RETENTION = "retention"
    TIMESTAMP = "timestamp"
    STATEMENT = "statement"


BODY_DOMAIN: dict[EntryKind, Domain] = {
    EntryKind.GENESIS: Domain.GENESIS,
    EntryKind.KEY_ADD: Domain.KEY_ADD,
    EntryKind.KEY_REVOKE: Domain.KEY_REVOKE,
    EntryKind.TIER_RECORD: Domain.TIER_RECORD,
    EntryKind.RECEIPT: Domain.LADDER_RECEIPT,
    EntryKind.CONTRACT: Domain.CONTRACT_REVISION,
    EntryKind.WAIVER: Domain.WAIVER,
    EntryKind.EVENT: Domain.EVENT,
    EntryKind.RETENTION: Domain.RETENTION,
    EntryKind.TIMESTAMP: Domain.TIMESTAMP,
    EntryKind.STATEMENT: Domain.STATEMENT,
}

KEYRING_KINDS = frozenset({EntryKind.GENESIS, EntryKind.KEY_ADD, EntryKind.KEY_REVOKE})  # what a `ring` pointer names
TASK_ENTRY_KINDS = frozenset(
    {EntryKind.CONTRACT, EntryKind.WAIVER, EntryKind.TIER_RECORD, EntryKind.RECEIPT, EntryKind.EVENT}
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One link of the chain. ``signature`` is an SSHSIG blob over the entry's signed bytes
    (everything but the signature) in the namespace of the role the kind requires.
    """

    seq: int
    prev: Digest | None
    kind: EntryKind
    body_hash: Digest
    time: int
    signer: str
    signature: bytes
    # Back-pointers that let a sparse copy (a bundle) prove it left nothing out: the latest
    # keyring entry before this one, and the previous entry of the same task.
    ring: Digest | None = None
    task_prev: Digest | None = None
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported entry version %r" % (self.version,))
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or not 0 <= self.seq < (1 << 53):
            raise FormatError("entry sequence number must be a non-negative integer")
        if (self.prev is None) != (self.seq == 0):
            raise FormatError("only entry 0 (genesis) has no previous entry")
        if self.prev is not None and not isinstance(self.prev, Digest):
            raise FormatError("prev must be a Digest")
        if not isinstance(self.kind, EntryKind):
            raise FormatError("kind must be an EntryKind")
        if (self.kind is EntryKind.GENESIS) != (self.seq == 0):
            raise FormatError("the genesis entry is entry 0, and only it")
        if (self.ring is None) != (self.seq == 0) or (self.ring is not None and not isinstance(self.ring, Digest)):
            raise FormatError("every entry after genesis names the latest keyring entry before it")
        if self.task_prev is not None and not isinstance(self.task_prev, Digest):
            raise FormatError("task_prev must be a Digest")
        if not isinstance(self.body_hash, Digest):
            raise FormatError("body hash must be a Digest")
        check_time(self.time, "entry time")
        if not isinstance(self.signer, str) or _KEY_ID.fullmatch(self.signer) is None:
            raise FormatError("signer must be an OpenSSH SHA256 key fingerprint")
        if not isinstance(self.signature, bytes) or not 0 < len(self.signature) <= 1024:
            raise FormatError("signature must be an SSHSIG blob")
