"""Registering SCITT signed statements in the ledger (docs/format.md §3.4f and §15a): the
statement entry's body, the statement log the entries form, and the RFC 9942 receipt the
log signs for one statement. Pure: the caller supplies the statements and the signing.

The chain's own Merkle tree (§9) has entry bytes as its leaves, which a SCITT verifier
cannot rebuild from a statement. So the registered statements form a tree of their own,
the **statement log**: leaf k is ``SHA-256(0x00 || SHA-256(statement k))`` for the k-th
statement entry in chain order. It is a function of the chain, so whoever holds the chain
recomputes it, and a receipt over a root the chain does not give is a split view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import cbor2

from ._cose import (
    ALG_EDDSA,
    COSE_SIGN1_TAG,
    COSE_VDS_RFC9162,
    CWT_ISS,
    CWT_SUB,
    HDR_ALG,
    HDR_CWT,
    HDR_KID,
    HDR_VDP,
    HDR_VDS,
    VDP_INCLUSION,
    decode_sign1,
)
from ._merkle import MemoryTree, inclusion_proof, tree_root

__all__ = [
    "statement_issuer",
    "statement_subject",
    "statement_log_root",
    "cose_receipt",
]


def statement_issuer(statement: bytes) -> str | None:
    """The statement's CWT ``iss`` (who says it), None when it names none.

    Raises:
        FormatError: not a COSE_Sign1.
    """
    return _claim(statement, CWT_ISS)


def statement_subject(statement: bytes) -> str | None:
    """The statement's CWT ``sub`` (what it is about), None when it names none.

    Raises:
        FormatError: not a COSE_Sign1.
    """
    return _claim(statement, CWT_SUB)


def _claim(statement: bytes, label: int) -> str | None:
    """One text claim of the statement's protected CWT claims (label 15), or None."""
    claims = decode_sign1(statement).header.get(HDR_CWT)
    value = claims.get(label) if isinstance(claims, Mapping) else None
    return value if isinstance(value, str) else None


def statement_log_root(leaves: Sequence[bytes]) -> bytes:
    """The statement log's root over ``leaves`` (RFC 9162 MTH; SHA-256("") when empty)."""
    return tree_root(MemoryTree(leaves), len(leaves))


def cose_receipt(
    leaves: Sequence[bytes],
    index: int,
    *,
    issuer: str,
    subject: str | None,
    kid: bytes,
    sign: Callable[[bytes], bytes],
) -> bytes:
    """An RFC 9942 receipt (vds 1) that leaf ``index`` is in the statement log of
    ``leaves``: a COSE_Sign1 by the log (EdDSA) over the root, detached. Its protected
    header, in CBOR's core deterministic encoding, names alg, kid, the CWT claims ``iss``
    (the log) and ``sub`` (the registered statement's own subject, when it has one, as
    RFC 9943 §6 asks) and vds; its unprotected header carries one inclusion proof.

    Args:
        leaves: the statement log's leaf hashes, the whole tree the receipt is over.
        index: the statement's position among them.
        issuer: the log's origin.
        subject: the statement's ``sub`` (`statement_subject`), or None.
        kid: the log key's identifier, as bytes.
        sign: Ed25519 over the given bytes with the log's key.

    Raises:
        FormatError: ``index`` is not a leaf of the tree.
    """
    tree = MemoryTree(leaves)
    size = len(leaves)
    path = inclusion_proof(tree, index, size)
    claims = {CWT_ISS: issuer} if subject is None else {CWT_ISS: issuer, CWT_SUB: subject}
    header = {HDR_ALG: ALG_EDDSA, HDR_KID: kid, HDR_CWT: claims, HDR_VDS: COSE_VDS_RFC9162}
    protected = cbor2.dumps(header, canonical=True)
    root = tree_root(tree, size)
    signature = sign(cbor2.dumps(["Signature1", protected, b"", root]))
    proof = cbor2.dumps([size, index, path])
    receipt = [protected, {HDR_VDP: {VDP_INCLUSION: [proof]}}, None, signature]
    return bytes(cbor2.dumps(cbor2.CBORTag(COSE_SIGN1_TAG, receipt)))
