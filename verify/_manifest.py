"""The part of a bundle's ``manifest.json`` that anyone acts on before re-rendering it
(format.md §10): its format, the receipt it names, the entries it holds and the evidence
it declares redacted. Written here and read here: the exporter writes these fields with
`ManifestClaims.as_dict`, and the bundle's reader parses them with `ManifestClaims.parse`.
The manifest is not signed, so every claim read is checked against the signed entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["BUNDLE_FORMAT", "ManifestClaims", "Redaction"]

BUNDLE_FORMAT = "receipt-ledger/bundle/v1"


@dataclass(frozen=True, slots=True)
class Redaction:
    """One evidence item a bundle leaves out, named by its record's tier, its evidence name,
    digest and size; ``reason`` is the exporter's word for evidence already pruned.
    """

    tier: str
    check: str
    digest: str
    size: int
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The item as the manifest's ``redacted`` list holds it."""
        item: dict[str, Any] = {"tier": self.tier, "check": self.check, "digest": self.digest, "size": self.size}
        if self.reason is not None:
            item["reason"] = self.reason
        return item

    @classmethod
    def from_dict(cls, item: object) -> Redaction | None:
        """The item, if it has exactly this shape (None otherwise: it declares nothing)."""
        if not isinstance(item, dict) or set(item) - {"tier", "check", "digest", "size", "reason"}:
            return None
        tier, check, digest, size = item.get("tier"), item.get("check"), item.get("digest"), item.get("size")
        reason = item.get("reason")
        if not (isinstance(tier, str) and isinstance(check, str) and isinstance(digest, str)):
            return None
        if not isinstance(size, int) or isinstance(size, bool) or not (reason is None or isinstance(reason, str)):
            return None
        return cls(tier, check, digest, size, reason)


@dataclass(frozen=True, slots=True)
class ManifestClaims:
    """What a manifest claims about its bundle."""

    receipt: str
    entries: tuple[int, ...]
    redacted: tuple[Redaction, ...] = ()
    format: str = BUNDLE_FORMAT

    def as_dict(self) -> dict[str, Any]:
        """These fields as the manifest document holds them."""
        return {
            "format": self.format,
            "receipt": self.receipt,
            "entries": list(self.entries),
            "redacted": [r.as_dict() for r in self.redacted],
        }

    @classmethod
    def parse(cls, data: bytes) -> ManifestClaims | None:
        """The claims of a manifest's bytes; None when it is not a JSON object with a string
        format and receipt and a list of entry positions. Redaction items of another shape
        are dropped (they declare nothing).
        """
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        if not isinstance(doc, dict):
            return None
        fmt, receipt, entries = doc.get("format"), doc.get("receipt"), doc.get("entries")
        listed = doc.get("redacted")
        if not isinstance(fmt, str) or not isinstance(receipt, str) or not isinstance(entries, list):
            return None
        if not all(isinstance(e, int) and not isinstance(e, bool) for e in entries):
            return None
        return cls(receipt, tuple(entries), _redactions(listed), fmt)

    @classmethod
    def redactions_of(cls, data: bytes) -> tuple[Redaction, ...]:
        """Only the redactions a manifest declares (a draft manifest holds nothing else)."""
        try:
            doc = json.loads(data)
        except ValueError:
            return ()
        return _redactions(doc.get("redacted") if isinstance(doc, dict) else None)


def _redactions(listed: object) -> tuple[Redaction, ...]:
    """The well-formed items of a ``redacted`` list (nothing if it is not a list)."""
    if not isinstance(listed, list):
        return ()
    return tuple(r for r in (Redaction.from_dict(item) for item in listed) if r is not None)
