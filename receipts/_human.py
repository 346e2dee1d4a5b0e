"""The human tier's verdict rule (§6c): a decision is what its signed evidence says, by
the key that signed it. The runner writes the decision document; verifiers and the
lifecycle derive the verdict from it again, so a record cannot claim another.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from ._deterministic import EvidenceReader
from ._errors import FormatError
from ._model import TierRecord, Verdict

__all__ = [
    "HUMAN_DECISION_FORMAT",
    "HUMAN_DECISION_ID",
    "DECISION_METHODS",
    "HumanDecision",
    "derive_human",
    "decision_method",
]

HUMAN_DECISION_FORMAT = "receipt-ledger/human-decision/v1"
HUMAN_DECISION_ID = "human:decision"
# How a person gave a decision: answering a prompt at a terminal, or through a program (`--yes`).
DECISION_METHODS = ("interactive", "scripted")


@dataclass(frozen=True, slots=True)
class HumanDecision:
    """The human tier's one evidence document (format.md §6c), written here and read by
    `derive_human` below: who decided (``approver``, the signing key's id), what
    (``approve``), why (``note``), what they were shown, and how (``method``).

    Raises:
        FormatError: a rejection without a reason, or an unknown method.
    """

    approve: bool
    approver: str
    note: str
    shown: str
    method: str = "scripted"

    def __post_init__(self) -> None:
        if self.method not in DECISION_METHODS:
            raise FormatError("a decision is given %s" % " or ".join(DECISION_METHODS))
        if not self.approve and not self.note.strip():
            raise FormatError("a rejection needs a reason")

    def encode(self) -> bytes:
        """The document's bytes as the runner stores them (JSON, keys sorted)."""
        doc = {
            "format": HUMAN_DECISION_FORMAT,
            "decision": "approve" if self.approve else "reject",
            "approver": self.approver,
            "note": self.note,
            "shown": self.shown,
            "shown_sha256": hashlib.sha256(self.shown.encode("utf-8")).hexdigest(),
            "method": self.method,
        }
        return json.dumps(doc, sort_keys=True, indent=1).encode()


def decision_method(doc: dict[str, object]) -> str:
    """How a decision document says it was given; ``unrecorded`` for documents written
    before the method was recorded.
    """
    method = doc.get("method")
    return method if isinstance(method, str) else "unrecorded"


def derive_human(
    record: TierRecord, signer: str, read: EvidenceReader, shown_as: str | None = None
) -> tuple[Verdict, str]:
    """The verdict a human record's evidence entails, with the reason: PASS only for one
    readable decision document that says ``approve`` and names ``signer`` (the key id that
    signed the record) as its approver. Anything else is FAIL: a decision that cannot be
    read, or is someone else's, approves nothing. The reason names the person as
    ``shown_as`` (the key's name, for people) when given, and a rejection carries its note.
    """
    refs = [ref for ref in record.evidence if ref.check_id == HUMAN_DECISION_ID]
    if len(refs) != 1:
        return Verdict.FAIL, "the record holds %d decision documents; exactly one is required" % len(refs)
    doc = read(refs[0].digest, HUMAN_DECISION_FORMAT)
    if doc is None:
        return Verdict.FAIL, "its decision document is missing, altered or malformed"
    # What the document says of itself must hold: how it was given, and the digest of what was shown.
    if "method" in doc and doc.get("method") not in DECISION_METHODS:
        return Verdict.FAIL, "its decision says it was given %r, neither interactive nor scripted" % (
            doc.get("method"),
        )
    shown = doc.get("shown")
    if "shown_sha256" in doc and (
        not isinstance(shown, str) or hashlib.sha256(shown.encode("utf-8")).hexdigest() != doc.get("shown_sha256")
    ):
        return Verdict.FAIL, "its decision's shown_sha256 is not the digest of what it says was shown"
    if doc.get("approver") != signer:
        return Verdict.FAIL, "its decision names approver %r, not the key %s that signed it" % (
            doc.get("approver"),
            signer,
        )
    decision = doc.get("decision")
    who = shown_as or signer
    if decision == "approve":
        return Verdict.PASS, "approved by %s" % who
    if decision == "reject":
        note = doc.get("note")
        return Verdict.FAIL, "rejected by %s%s" % (who, ": %s" % note if isinstance(note, str) and note else "")
    return Verdict.FAIL, "its decision is %r, neither approve nor reject" % (decision,)
