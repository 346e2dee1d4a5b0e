"""SCITT signed statements and their COSE receipts, read and checked (docs/format.md §15):
COSE_Sign1 (RFC 9052) with EdDSA or ES256, and RFC 9942 receipts whose verifiable data
structure is 1 (RFC 9162, SHA-256). Pure: the caller supplies the bytes and the keys.

A receipt is a COSE_Sign1 by the transparency service over the Merkle root (the payload,
detached), its protected header naming the structure (label 395) and its unprotected
header carrying the inclusion proofs (label 396, key -1), each the CBOR array
``[tree size, leaf index, [path hashes]]``. The leaf is the RFC 9162 leaf hash of
``SHA-256(signed statement bytes)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2

from ._errors import FormatError
from ._merkle import inclusion_root, leaf_hash

__all__ = [
    "Sign1",
    "decode_sign1",
    "verify_sign1",
    "read_cose_key",
    "encode_sign1",
    "receipt_statement",
    "ScittVerdict",
    "verify_scitt",
    "COSE_VDS_RFC9162",
    "RECEIPT_MEDIA_TYPE",
]

COSE_SIGN1_TAG = 18
HDR_ALG, HDR_CRIT, HDR_CONTENT_TYPE, HDR_KID, HDR_CWT = 1, 2, 3, 4, 15
HDR_VDS, HDR_VDP = 395, 396
VDP_INCLUSION = -1
COSE_VDS_RFC9162 = 1
ALG_EDDSA, ALG_ES256 = -8, -7
# RFC 9995, the COSE hash envelope: the payload is a hash of the preimage these name.
HDR_PAYLOAD_HASH_ALG, HDR_PREIMAGE_CONTENT_TYPE, HDR_PAYLOAD_LOCATION = 258, 259, 260
ALG_SHA256 = -16
CWT_ISS, CWT_SUB = 1, 2
RECEIPT_MEDIA_TYPE = "application/vnd.receipt-ledger.receipt+cbor"
_UNDERSTOOD = frozenset(
    {
        HDR_ALG,
        HDR_CRIT,
        HDR_CONTENT_TYPE,
        HDR_KID,
        HDR_CWT,
        HDR_VDS,
        HDR_PAYLOAD_HASH_ALG,
        HDR_PREIMAGE_CONTENT_TYPE,
        HDR_PAYLOAD_LOCATION,
    }
)
_MAX_PROOFS = 16
_MAX_PATH = 64


@dataclass(frozen=True, slots=True)
class Sign1:
    """A decoded COSE_Sign1: the protected header's bytes and map, the unprotected map,
    the payload (None when detached) and the signature.
    """

    protected: bytes
    header: Mapping[Any, Any]
    unprotected: Mapping[Any, Any]
    payload: bytes | None
    signature: bytes


def decode_sign1(data: bytes) -> Sign1:
    """A tagged COSE_Sign1.

    Raises:
        FormatError: not CBOR, not tag 18 over four members of the right types, a protected
            header that is not a map, or a critical label this reader does not understand.
    """
    try:
        item = cbor2.loads(data)
    except Exception as exc:
        raise FormatError("not CBOR: %s" % type(exc).__name__) from None
    if not isinstance(item, cbor2.CBORTag) or item.tag != COSE_SIGN1_TAG:
        raise FormatError("not a tagged COSE_Sign1 (tag 18)")
    parts = item.value
    if not isinstance(parts, Sequence) or len(parts) != 4:
        raise FormatError("a COSE_Sign1 has four members")
    protected, unprotected, payload, signature = parts
    if not isinstance(protected, bytes) or not isinstance(unprotected, Mapping) or not isinstance(signature, bytes):
        raise FormatError("a COSE_Sign1 is [bstr, map, bstr / nil, bstr]")
    if payload is not None and not isinstance(payload, bytes):
        raise FormatError("a COSE_Sign1's payload is a byte string or nil")
    try:
        header = cbor2.loads(protected) if protected else {}
    except Exception:
        raise FormatError("the protected header is not CBOR") from None
    if not isinstance(header, Mapping):
        raise FormatError("the protected header is not a map")
    crit = header.get(HDR_CRIT, ())
    if not isinstance(crit, Sequence) or any(label not in _UNDERSTOOD for label in crit):
        raise FormatError("a critical header label this reader does not understand")
    return Sign1(protected, header, unprotected, payload, signature)


def read_cose_key(data: bytes) -> object:
    """A public key as `verify_sign1` takes it: PEM (SubjectPublicKeyInfo) or one OpenSSH
    public key line, as allowed_signers and .pub files hold it.

    Raises:
        FormatError: neither.
    """
    from cryptography.hazmat.primitives import serialization

    try:
        if data.lstrip().startswith(b"ssh-"):
            return serialization.load_ssh_public_key(data.strip())
        return serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise FormatError("cannot read the public key: %s" % exc) from None


def verify_sign1(sign1: Sign1, public_key_pem: bytes, payload: bytes | None = None) -> bool:
    """True when the signature verifies over ``payload`` (default: the attached one) under
    the key (PEM, or one OpenSSH public key line), for the protected header's algorithm
    (EdDSA with Ed25519, ES256 with P-256).

    Raises:
        FormatError: the key cannot be read, or does not fit the algorithm, or there is no
            payload to check.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    content = sign1.payload if payload is None else payload
    if content is None:
        raise FormatError("the payload is detached and none was given")
    signed = cbor2.dumps(["Signature1", sign1.protected, b"", content])
    key = read_cose_key(public_key_pem)
    alg = sign1.header.get(HDR_ALG)
    try:
        if alg == ALG_EDDSA and isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(sign1.signature, signed)
        elif alg == ALG_ES256 and isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
            if len(sign1.signature) != 64:
                return False
            r, s = int.from_bytes(sign1.signature[:32], "big"), int.from_bytes(sign1.signature[32:], "big")
            key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
        else:
            raise FormatError("algorithm %r with this key is not supported (EdDSA/Ed25519, ES256/P-256)" % (alg,))
    except InvalidSignature:
        return False
    return True


def encode_sign1(header: Mapping[int, Any], payload: bytes, sign: Callable[[bytes], bytes]) -> bytes:
    """A tagged COSE_Sign1: the protected header in CBOR's core deterministic encoding, an
    empty unprotected header, the payload attached, and ``sign`` over the Sig_structure.
    """
    protected = cbor2.dumps(dict(header), canonical=True)
    signature = sign(cbor2.dumps(["Signature1", protected, b"", payload]))
    return bytes(cbor2.dumps(cbor2.CBORTag(COSE_SIGN1_TAG, [protected, {}, payload, signature])))


def receipt_statement(
    receipt_bytes: bytes, issuer: str, subject: str, location: str, kid: bytes, sign: Callable[[bytes], bytes]
) -> bytes:
    """A SCITT signed statement about a ladder receipt (EdDSA): CWT claims ``iss`` and
    ``sub`` in the protected header, and an RFC 9995 hash envelope over the receipt's
    canonical bytes (SHA-256, their media type, where they live).
    """
    header = {
        HDR_ALG: ALG_EDDSA,
        HDR_KID: kid,
        HDR_CWT: {CWT_ISS: issuer, CWT_SUB: subject},
        HDR_PAYLOAD_HASH_ALG: ALG_SHA256,
        HDR_PREIMAGE_CONTENT_TYPE: RECEIPT_MEDIA_TYPE,
        HDR_PAYLOAD_LOCATION: location,
    }
    return encode_sign1(header, hashlib.sha256(receipt_bytes).digest(), sign)


@dataclass(frozen=True, slots=True)
class ScittVerdict:
    """A statement and its receipt checked: ``failure`` None when both hold, else one of
    BAD_STATEMENT_SIGNATURE, UNSUPPORTED_VDS, TAMPERED_INCLUSION_PATH, MALFORMED (and,
    checked against a ledger's statement log, SPLIT_VIEW). When both hold, ``root`` is
    the root the log signed.
    """

    failure: str | None
    detail: str
    tree_size: int | None = None
    leaf_index: int | None = None
    root: bytes | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def verify_scitt(statement: bytes, receipt: bytes, issuer_key_pem: bytes, log_key_pem: bytes) -> ScittVerdict:
    """Check a signed statement and an RFC 9942 receipt for it, offline, from public keys.

    Steps:
      1. the statement decodes and its signature verifies under the issuer's key;
      2. the receipt decodes and names verifiable data structure 1 in its protected header
         (anything else is UNSUPPORTED_VDS, said as such, never guessed at);
      3. each inclusion proof gives a root for the statement's leaf, and the receipt's
         signature verifies over that root under the log's key (else the path or the
         receipt was tampered with).
    """
    try:
        # 1. The statement.
        signed = decode_sign1(statement)
        if not verify_sign1(signed, issuer_key_pem):
            return ScittVerdict("BAD_STATEMENT_SIGNATURE", "the statement's signature does not verify")
        # 2. The receipt's structure.
        sealed = decode_sign1(receipt)
        if sealed.payload is not None:
            # An attached root would be checked as given and bind nothing to the leaf.
            return ScittVerdict("MALFORMED", "a receipt's payload (the root) must be detached")
        vds = sealed.header.get(HDR_VDS)
        if vds != COSE_VDS_RFC9162:
            return ScittVerdict(
                "UNSUPPORTED_VDS", "verifiable data structure %r is not supported (only 1, RFC 9162)" % (vds,)
            )
        # 3. Each proof, into a root the log signed.
        proofs = _inclusion_proofs(sealed)
        leaf = leaf_hash(hashlib.sha256(statement).digest())
        for size, index, path in proofs:
            root = inclusion_root(leaf, index, size, path)
            if root is None or not verify_sign1(sealed, log_key_pem, root):
                return ScittVerdict(
                    "TAMPERED_INCLUSION_PATH",
                    "the receipt's signature does not verify over the root its proof gives (size %d, index %d)"
                    % (size, index),
                    size,
                    index,
                )
        size, index, path = proofs[0]
        return ScittVerdict(None, "statement and receipt verify", size, index, inclusion_root(leaf, index, size, path))
    except FormatError as exc:
        return ScittVerdict("MALFORMED", str(exc))


def _inclusion_proofs(receipt: Sign1) -> list[tuple[int, int, list[bytes]]]:
    vdp = receipt.unprotected.get(HDR_VDP)
    proofs = vdp.get(VDP_INCLUSION) if isinstance(vdp, Mapping) else None
    if not isinstance(proofs, Sequence) or not 0 < len(proofs) <= _MAX_PROOFS:
        raise FormatError("the receipt carries no inclusion proof (label 396, key -1)")
    out = []
    for blob in proofs:
        if not isinstance(blob, bytes):
            raise FormatError("an inclusion proof is a byte string")
        try:
            size, index, path = cbor2.loads(blob)
        except Exception:
            raise FormatError("an inclusion proof is the CBOR array [size, index, [path]]") from None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (size, index)):
            raise FormatError("an inclusion proof's size and index are integers")
        if not isinstance(path, Sequence) or len(path) > _MAX_PATH or not all(isinstance(h, bytes) for h in path):
            raise FormatError("an inclusion proof's path is at most 64 byte strings")
        out.append((size, index, list(path)))
    return out
