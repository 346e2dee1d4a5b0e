"""What an auditor keeps between chain audits (docs/format.md §8, "incremental audit"): the
checkpoint it audited up to, the compact Merkle range at that size, and what the walk
needs to judge the entries after it (the keyring's entries, each task's head and latest
contract, the last entry's hash and time). Small: it grows with keyring changes and tasks,
never with entries.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from receipts import ReceiptsError

from ._errors import CannotVerify

__all__ = ["AuditState", "AUDIT_STATE_FORMAT"]

AUDIT_STATE_FORMAT = "receipt-ledger/audit-state/v1"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class AuditState:
    """A clean audit's state at the size of the checkpoint it verified. The auditor's own
    record: a resumed audit re-proves it against that checkpoint before relying on it.
    """

    origin: str
    checkpoint: str  # the signed note, as stored
    size: int
    range: tuple[bytes, ...]  # compact Merkle range of leaves [0, size)
    prev_hash: bytes  # entry hash of entry size - 1
    prev_time: int
    last_ring: bytes | None
    ring: tuple[tuple[bytes, bytes], ...]  # every keyring entry and body below size, in order
    tasks: tuple[tuple[str, bytes], ...]  # each task's newest entry hash, by task
    contracts: tuple[bytes, ...]  # each task's latest contract revision body, by task

    def __post_init__(self) -> None:
        if self.size < 1 or len(self.prev_hash) != 32 or not self.ring:
            raise CannotVerify("an audit state covers at least the genesis entry")

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "format": AUDIT_STATE_FORMAT,
                    "origin": self.origin,
                    "checkpoint": self.checkpoint,
                    "size": self.size,
                    "range": [h.hex() for h in self.range],
                    "prev_hash": self.prev_hash.hex(),
                    "prev_time": self.prev_time,
                    "last_ring": self.last_ring.hex() if self.last_ring is not None else None,
                    "ring": [[_b64(e), _b64(b)] for e, b in self.ring],
                    "tasks": {t: h.hex() for t, h in self.tasks},
                    "contracts": [_b64(c) for c in self.contracts],
                },
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str) -> AuditState:
        """Parse a state file; anything malformed is `CannotVerify` (nothing is resumed)."""
        try:
            d = json.loads(text)
            if not isinstance(d, dict) or d.get("format") != AUDIT_STATE_FORMAT:
                raise ValueError("not a %s file" % AUDIT_STATE_FORMAT)
            last_ring = d["last_ring"]
            state = cls(
                origin=_text(d["origin"]),
                checkpoint=_text(d["checkpoint"]),
                size=_int(d["size"]),
                range=tuple(_hash(h) for h in d["range"]),
                prev_hash=_hash(d["prev_hash"]),
                prev_time=_int(d["prev_time"]),
                last_ring=None if last_ring is None else _hash(last_ring),
                ring=tuple((_bytes(e), _bytes(b)) for e, b in d["ring"]),
                tasks=tuple(sorted((_text(t), _hash(h)) for t, h in d["tasks"].items())),
                contracts=tuple(_bytes(c) for c in d["contracts"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError, ReceiptsError) as exc:
            raise CannotVerify("the audit state is malformed: %s" % (str(exc) or type(exc).__name__)) from None
        return state


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("expected a non-negative integer")
    return value


def _hash(value: object) -> bytes:
    data = bytes.fromhex(_text(value))
    if len(data) != 32:
        raise ValueError("expected a 32-byte hash")
    return data


def _bytes(value: object) -> bytes:
    return base64.b64decode(_text(value), validate=True)
