"""The human tier's verdict rule (§6c): a decision is what its signed evidence says, by
the key that signed it. The runner writes the decision document; verifiers and the
lifecycle derive the verdict from it again, so a record cannot claim another.
"""

from __future__ import annotations

import hashlib

from ._deterministic import EvidenceReader
from ._model import TierRecord, Verdict

__all__ = ["HUMAN_DECISION_FORMAT", "HUMAN_DECISION_ID", "DECISION_METHODS", "derive_human", "decision_method"]

HUMAN_DECISION_FORMAT = "receipt-ledger/human-decision/v1"
HUMAN_DECISION_ID = "human:decision"
# How a person gave a decision: answering a prompt at a terminal, or through a program (`--yes`).
DECISION_METHODS = ("interactive", "scripted")


def decision_method(doc: dict[str, object]) -> str:
    """How a decision document says it was given; ``unrecorded`` for documents written
    before the method was recorded.
    """
    method = doc.get("method")
    return method if isinstance(method, str) else "unrecorded"


def derive_human(record: TierRecord, signer: str, read: EvidenceReader) -> tuple[Verdict, str]:
    """The verdict a human record's evidence entails, with the reason: PASS only for one
    readable decision document that says ``approve`` and names ``signer`` (the key id that
    signed the record) as its approver. Anything else is FAIL: a decision that cannot be
    read, or is someone else's, approves nothing.
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
    if decision == "approve":
        return Verdict.PASS, "approved by %s" % signer
    if decision == "reject":
        return Verdict.FAIL, "rejected by %s" % signer
    return Verdict.FAIL, "its decision is %r, neither approve nor reject" % (decision,)
