"""verify: the auditor. Reads a ledger read-only, needs public keys only, imports
nothing from `ledger`."""

from ._bundle import BundleSource
from ._errors import CannotVerify, VerificationFailed, VerifyError
from ._source import LedgerSource
from ._transparency import TlogProof, Transparency, WitnessKey, parse_tlog_proof, tlog_proof_text, verify_tlog_proof
from ._trust import TrustRoot, parse_allowed_signers
from ._verifier import ChainResult, Defect, Result, TierLine, verify_chain, verify_receipt, verify_receipt_strict

__all__ = [
    "BundleSource", "CannotVerify", "ChainResult", "TlogProof", "Transparency", "WitnessKey", "parse_tlog_proof", "tlog_proof_text", "verify_tlog_proof", "Defect", "LedgerSource", "Result", "TierLine", "TrustRoot",
    "VerificationFailed", "VerifyError", "parse_allowed_signers", "verify_chain", "verify_receipt",
    "verify_receipt_strict",
]
