"""verify: the auditor. Reads a ledger or a bundle read-only, needs public keys only,
imports nothing from `ledger`.

Entry points: `verify_receipt` (and `verify_receipt_strict`, which raises) for one
receipt, `verify_chain` for a whole ledger. Both take a `Trust`: a pinned `TrustRoot`,
or `UnsafeTrustOnFirstUse`, named for what it is and never a default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from receipts import lazy_names

if TYPE_CHECKING:
    from ._bundle import BundleSource
    from ._errors import CannotVerify, NoLedger, VerifyError
    from ._escape import csv_cell, markdown_text, terminal_text
    from ._evidence import SMALL_BLOB, blob_problem, evidence_reader, read_blob, read_evidence
    from ._exceptions import (
        EXCEPTION_KINDS,
        UNPROVEN_PREFIX,
        ExceptionNote,
        completeness_text,
        decision_headline,
        exceptions,
        headline,
    )
    from ._layout import BundleLayout
    from ._manifest import BUNDLE_FORMAT, ManifestClaims, Redaction
    from ._policy import Transparency, WitnessKey, cosignature_statuses
    from ._rendering import RENDERINGS, bundle_manifest, final_status, listed_records, report_html
    from ._report_page import exceptions_html
    from ._result import ChainResult, Defect, Finding, Result, TierLine, VerificationFailed
    from ._scitt import verify_registered
    from ._source import KEYRING_KIND_NAMES, LedgerSource, Source, StoredEntry, keyring_changes
    from ._state import AUDIT_STATE_FORMAT, AuditState
    from ._tile_policy import audit_tiles_under
    from ._tiles import PublishedLog, TileAudit, audit_tiles, tile_reader
    from ._trust import Trust, TrustRoot, UnsafeTrustOnFirstUse, parse_allowed_signers
    from ._tsa import tsa_roots
    from ._verifier import (
        METHODS,
        audited_entry,
        bundle_renderings,
        verify_chain,
        verify_receipt,
        verify_receipt_strict,
    )
    from .postgres import PostgresSource

__all__ = [
    # entry points
    "verify_receipt",
    "verify_receipt_strict",
    "verify_chain",
    "verify_registered",
    "audited_entry",
    "METHODS",
    # what they read
    "Source",
    "LedgerSource",
    "BundleSource",
    "PostgresSource",
    "BUNDLE_FORMAT",
    "BundleLayout",
    "ManifestClaims",
    "Redaction",
    "StoredEntry",
    "keyring_changes",
    "KEYRING_KIND_NAMES",
    # what they are asked
    "Trust",
    "TrustRoot",
    "UnsafeTrustOnFirstUse",
    "parse_allowed_signers",
    "Transparency",
    "tsa_roots",
    "WitnessKey",
    "cosignature_statuses",
    "TileAudit",
    "audit_tiles",
    "audit_tiles_under",
    "tile_reader",
    "PublishedLog",
    "AuditState",
    "AUDIT_STATE_FORMAT",
    # the one evidence reader (re-hashes what it returns)
    "read_blob",
    "read_evidence",
    "blob_problem",
    "evidence_reader",
    "SMALL_BLOB",
    # the bundle's renderings, re-derived (format.md §10) and the escapes they use
    "bundle_renderings",
    "RENDERINGS",
    "bundle_manifest",
    "listed_records",
    "report_html",
    "final_status",
    "csv_cell",
    "EXCEPTION_KINDS",
    "ExceptionNote",
    "completeness_text",
    "exceptions",
    "headline",
    "UNPROVEN_PREFIX",
    "decision_headline",
    "exceptions_html",
    "markdown_text",
    "terminal_text",
    # what they return and raise
    "Result",
    "ChainResult",
    "TierLine",
    "Defect",
    "Finding",
    "VerifyError",
    "CannotVerify",
    "NoLedger",
    "VerificationFailed",
]

# The names of __all__, each with the module that holds it; they load on first use
# (PEP 562), so that a writer needing one source or one error does not pay for the
# bundle reader, the renderings and the verifier on every start (the agent's hooks run
# on every tool call).
_WHERE = {
    "BundleSource": "_bundle",
    "CannotVerify": "_errors",
    "NoLedger": "_errors",
    "VerifyError": "_errors",
    "csv_cell": "_escape",
    "EXCEPTION_KINDS": "_exceptions",
    "ExceptionNote": "_exceptions",
    "completeness_text": "_exceptions",
    "exceptions": "_exceptions",
    "UNPROVEN_PREFIX": "_exceptions",
    "headline": "_exceptions",
    "decision_headline": "_exceptions",
    "exceptions_html": "_report_page",
    "markdown_text": "_escape",
    "terminal_text": "_escape",
    "SMALL_BLOB": "_evidence",
    "evidence_reader": "_evidence",
    "read_blob": "_evidence",
    "read_evidence": "_evidence",
    "blob_problem": "_evidence",
    "BundleLayout": "_layout",
    "BUNDLE_FORMAT": "_manifest",
    "ManifestClaims": "_manifest",
    "Redaction": "_manifest",
    "Transparency": "_policy",
    "WitnessKey": "_policy",
    "cosignature_statuses": "_policy",
    "TileAudit": "_tiles",
    "audit_tiles": "_tiles",
    "audit_tiles_under": "_tile_policy",
    "tile_reader": "_tiles",
    "PublishedLog": "_tiles",
    "RENDERINGS": "_rendering",
    "bundle_manifest": "_rendering",
    "final_status": "_rendering",
    "listed_records": "_rendering",
    "report_html": "_rendering",
    "ChainResult": "_result",
    "Defect": "_result",
    "Finding": "_result",
    "Result": "_result",
    "TierLine": "_result",
    "VerificationFailed": "_result",
    "KEYRING_KIND_NAMES": "_source",
    "LedgerSource": "_source",
    "Source": "_source",
    "StoredEntry": "_source",
    "keyring_changes": "_source",
    "AUDIT_STATE_FORMAT": "_state",
    "AuditState": "_state",
    "Trust": "_trust",
    "TrustRoot": "_trust",
    "UnsafeTrustOnFirstUse": "_trust",
    "parse_allowed_signers": "_trust",
    "tsa_roots": "_tsa",
    "METHODS": "_verifier",
    "audited_entry": "_verifier",
    "bundle_renderings": "_verifier",
    "verify_chain": "_verifier",
    "verify_registered": "_scitt",
    "verify_receipt": "_verifier",
    "verify_receipt_strict": "_verifier",
    "PostgresSource": "postgres",
}


if not TYPE_CHECKING:  # type checkers see the imports above, and so still catch a misspelt name
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__, globals())
