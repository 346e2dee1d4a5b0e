"""The human tier's verdict rule (§6c): a decision is what its signed evidence says, by
the key that signed it. The runner writes the decision document; verifiers and the
lifecycle derive the verdict from it again, so a record cannot claim another."""

from __future__ import annotations

from ._deterministic import EvidenceReader
from ._model import TierRecord, Verdict

__all__ = ["HUMAN_DECISION_FORMAT", "HUMAN_DECISION_ID", "derive_human"]

HUMAN_DECISION_FORMAT = "receipt-ledger/human-decision/v1"
HUMAN_DECISION_ID = "human:decision"


def derive_human(record: TierRecord, signer: str, read: EvidenceReader) -> tuple[Verdict, str]:
    """The verdict a human record's evidence entails, with the reason: PASS only for one
    readable decision document that says ``approve`` and names ``signer`` (the key id that
    signed the record) as its approver. Anything else is FAIL: a decision that cannot be
    read, or is someone else's, approves nothing."""
    refs = [ref for ref in record.evidence if ref.check_id == HUMAN_DECISION_ID]
    if len(refs) != 1:
        return Verdict.FAIL, "the record holds %d decision documents; exactly one is required" % len(refs)
    doc = read(refs[0].digest, HUMAN_DECISION_FORMAT)
    if doc is None:
        return Verdict.FAIL, "its decision document is missing, altered or malformed"
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
