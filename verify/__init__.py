"""verify: the auditor. Reads a ledger read-only, needs public keys only, imports
nothing from `ledger`."""

from ._errors import CannotVerify, VerificationFailed, VerifyError
from ._source import LedgerSource
from ._trust import TrustRoot, parse_allowed_signers
from ._verifier import ChainResult, Defect, Result, TierLine, verify_chain, verify_receipt, verify_receipt_strict

__all__ = [
    "CannotVerify", "ChainResult", "Defect", "LedgerSource", "Result", "TierLine", "TrustRoot",
    "VerificationFailed", "VerifyError", "parse_allowed_signers", "verify_chain", "verify_receipt",
    "verify_receipt_strict",
]
