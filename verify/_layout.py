"""The bundle's layout (format.md §10): every member's name, written once, for the
exporter that writes a bundle and the reader that checks one.
"""

from __future__ import annotations

import re

from receipts import Digest

__all__ = ["BundleLayout"]


class BundleLayout:
    """The names of a bundle's members, and which names a bundle may hold at all."""

    MANIFEST = "manifest.json"
    CHECKPOINT = "checkpoint"
    CHECKPOINT_TOKEN = "checkpoint.tsr"
    ALLOWED_SIGNERS = "allowed_signers"
    REPORT_MD = "report.md"
    REPORT_HTML = "report.html"
    BLOB_PREFIX = "blobs/"

    _ALLOWED = re.compile(
        r"(manifest\.json|checkpoint|checkpoint\.tsr|report\.html|report\.md|allowed_signers|"
        r"entries/[0-9]{1,15}\.(entry|body)|proofs/[0-9]{1,15}\.tlog-proof|blobs/[0-9a-f]{64})"
    )
    _ENTRY = re.compile(r"entries/([0-9]{1,15})\.entry")
    _PROOF = re.compile(r"proofs/([0-9]{1,15})\.tlog-proof")

    @staticmethod
    def entry(seq: int) -> str:
        """The member holding entry ``seq``'s canonical bytes."""
        return "entries/%d.entry" % seq

    @staticmethod
    def body(seq: int) -> str:
        """The member holding entry ``seq``'s body bytes."""
        return "entries/%d.body" % seq

    @staticmethod
    def proof(seq: int) -> str:
        """The member holding entry ``seq``'s tlog-proof against the bundle's checkpoint."""
        return "proofs/%d.tlog-proof" % seq

    @classmethod
    def blob(cls, digest: Digest) -> str:
        """The member holding the evidence blob with this digest."""
        return cls.BLOB_PREFIX + digest.hex

    @classmethod
    def allowed(cls, name: str) -> bool:
        """Whether a bundle may hold a member of this name (anything else is refused)."""
        return cls._ALLOWED.fullmatch(name) is not None

    @classmethod
    def entry_seq(cls, name: str) -> int | None:
        """The position an entry member holds, or None for any other member."""
        found = cls._ENTRY.fullmatch(name)
        return int(found.group(1)) if found else None

    @classmethod
    def proof_seq(cls, name: str) -> int | None:
        """The position a proof member proves, or None for any other member."""
        found = cls._PROOF.fullmatch(name)
        return int(found.group(1)) if found else None
