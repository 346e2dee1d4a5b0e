"""The action's `attest` input: what `actions/attest` is handed to put the verification
result in GitHub's attestation store (docs/ci.md). The subject is the receipt's bundle as
git carries it (the bytes the gate verified, which an auditor fetches); the predicate is
the in-toto Simple Verification Result v0.2 of that verification (format.md §13b).
GitHub's action signs it with the workflow's identity (Sigstore); we sign nothing here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from receipts import ContractRevision, Digest, EntryKind, LadderReceipt, ReceiptsError, config_hash, decode_as
from verify import Result, Source

from .. import _clock
from .._errors import InputError
from .._files import write_atomic
from ..exports._intoto import SVR_PREDICATE_TYPE, svr_predicate

__all__ = ["ATTEST_KINDS", "Attestation", "attest_kind", "prepare_attestation"]

ATTEST_KINDS = ("none", "svr")
ATTEST_FOLDER = "receipt-ledger-attest"


@dataclass(frozen=True, slots=True)
class Attestation:
    """The files `actions/attest` reads: the subject, the predicate, and its type."""

    subject: Path
    predicate: Path
    predicate_type: str


def attest_kind(text: str) -> str:
    """The `attest` input, checked before anything runs.

    Raises:
        InputError: not one of ATTEST_KINDS.
    """
    kind = text.strip() or "none"
    if kind not in ATTEST_KINDS:
        raise InputError("the action's `attest` input takes %s, not %r" % (" or ".join(ATTEST_KINDS), kind))
    return kind


def prepare_attestation(
    runner_temp: Path, bundle: Path, source: Source, result: Result, receipt_hash: str
) -> Attestation:
    """Write the subject (a copy of ``bundle``) and the SVR predicate of ``result`` under
    ``runner_temp``. Only a verified result is attested: its receipt and contract are then
    the bundle's, checked.

    Raises:
        InputError: the result did not verify, or the bundle lacks what it verified.
    """
    if not result.ok:
        raise InputError("the receipt did not verify: nothing is attested")
    stored = source.by_body_hash(Digest.parse(receipt_hash))
    if stored is None:
        raise InputError("the bundle lacks the receipt it verified")
    try:
        receipt = decode_as(LadderReceipt, stored.body)
        revisions = (
            decode_as(ContractRevision, entry.body)
            for entry in source.iter_entries(task=receipt.task_id)
            if entry.kind == EntryKind.CONTRACT.value
        )
        contract = next((r.contract for r in revisions if config_hash(r.contract) == receipt.config_hash), None)
    except ReceiptsError as exc:
        raise InputError("the bundle's receipt or contract does not decode: %s" % exc) from None
    if contract is None:
        raise InputError("the bundle lacks the receipt's contract")
    folder = runner_temp / ATTEST_FOLDER
    subject = folder / ("receipt-%s.bundle.zip" % Digest.parse(receipt_hash).hex[:16])
    predicate_path = folder / "predicate.json"
    predicate = svr_predicate(result, receipt, receipt_hash, contract, _clock.now())
    try:
        folder.mkdir(exist_ok=True)
        write_atomic(subject, bundle.read_bytes())
        write_atomic(predicate_path, (json.dumps(predicate, indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise InputError("cannot write the attestation's files under %s: %s" % (folder, exc)) from None
    return Attestation(subject, predicate_path, SVR_PREDICATE_TYPE)
