"""OpenSSH SSHSIG signatures over Ed25519 (PROTOCOL.sshsig), and SSH public key blobs.

Signing goes through a tiny `Signer` interface so that a key on disk, in an agent or
in hardware can all sign; this module never touches a file.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import struct
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ._b64 import b64decode_canonical
from ._errors import FormatError, SignatureError

__all__ = [
    "Signer",
    "Ed25519Signer",
    "NAMESPACE_PREFIX",
    "namespace_for",
    "public_key_blob",
    "parse_public_key_blob",
    "parse_public_key_line",
    "public_key_line",
    "fingerprint",
    "sshsig_sign",
    "sshsig_verify",
    "sshsig_public_key",
    "sshsig_namespace",
    "armor",
    "dearmor",
    "is_valid_ed25519",
    "is_weak_ed25519_key",
]

_MAGIC = b"SSHSIG"
_VERSION = 1
_KEY_TYPE = b"ssh-ed25519"
# ssh-keygen -Y sign defaults to sha512; we sign with it and accept both the spec allows.
_HASHES = {b"sha256": hashlib.sha256, b"sha512": hashlib.sha512}
_SIGN_HASH = b"sha512"
NAMESPACE_PREFIX = "receipt-ledger/"
_ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END = "-----END SSH SIGNATURE-----"
_MAX_FIELD = 1 << 16


def namespace_for(role: str) -> str:
    """The SSHSIG namespace of a role: a signature made for one role never counts for another."""
    return NAMESPACE_PREFIX + role


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise FormatError("SSH wire data is truncated")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def string(self) -> bytes:
        n = self.uint32()
        if n > _MAX_FIELD:
            raise FormatError("SSH wire string longer than %d bytes" % _MAX_FIELD)
        return self.take(n)

    def end(self) -> None:
        if self._pos != len(self._data):
            raise FormatError("trailing bytes after SSH wire data")


# Edwards25519 arithmetic, only to refuse small-order public keys (RFC 8032 §5.1.3 decoding).
_P = 2**255 - 19
_D = (-121665 * pow(121666, -1, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _decode_point(raw: bytes) -> tuple[int, int] | None:
    y = int.from_bytes(raw, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= _P:
        return None
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x = (u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P)) % _P
    if (v * x * x) % _P == (-u) % _P:
        x = (x * _SQRT_M1) % _P
    elif (v * x * x) % _P != u:
        return None
    if x == 0 and sign:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x, y


def _double(pt: tuple[int, int]) -> tuple[int, int]:
    x, y = pt
    t = _D * x * x * y * y % _P
    return (2 * x * y * pow(1 + t, -1, _P) % _P, (y * y + x * x) * pow(1 - t, -1, _P) % _P)


@functools.lru_cache(maxsize=4096)  # a ledger has few keys and checks them on every signature
def is_weak_ed25519_key(raw: bytes) -> bool:
    """True for an encoding that is not a curve point, or a point of small order (8A = 0).
    A small-order key verifies forged signatures (R = identity, S = 0 verifies any message
    under the identity key with OpenSSL), so no such key may enter a keyring.
    """
    pt = _decode_point(raw)
    if pt is None:
        return True
    for _ in range(3):
        pt = _double(pt)
    return pt == (0, 1)


@functools.lru_cache(maxsize=4096)
def _verifier(public_key: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(public_key)


def is_valid_ed25519(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """The one Ed25519 check every signature goes through: no weak keys, 64-byte signatures,
    canonical S (enforced by the library, tested with Wycheproof vectors).
    """
    if len(public_key) != 32 or len(signature) != 64 or is_weak_ed25519_key(public_key):
        return False
    try:
        _verifier(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def public_key_blob(raw: bytes) -> bytes:
    """RFC 8709 encoding of an Ed25519 public key: string "ssh-ed25519", string key."""
    if len(raw) != 32:
        raise FormatError("an Ed25519 public key is 32 bytes")
    return _string(_KEY_TYPE) + _string(raw)


@functools.lru_cache(maxsize=4096)  # as above: few keys, parsed for every signature
def parse_public_key_blob(blob: bytes) -> bytes:
    reader = _Reader(blob)
    key_type = reader.string()
    if key_type != _KEY_TYPE:
        raise FormatError(
            "unsupported key type %r: only ssh-ed25519 keys can sign" % key_type.decode("ascii", "replace")
        )
    raw = reader.string()
    reader.end()
    if len(raw) != 32:
        raise FormatError("an Ed25519 public key is 32 bytes")
    if is_weak_ed25519_key(raw):
        raise FormatError("the Ed25519 public key is not a point of large order: refused")
    return raw


def parse_public_key_line(line: str) -> tuple[bytes, str]:
    """Parse an OpenSSH public key line ``ssh-ed25519 <base64> [comment]`` into (blob, comment)."""
    parts = line.strip().split(None, 2)
    if len(parts) < 2:
        raise FormatError("not an OpenSSH public key line (expected 'ssh-ed25519 <base64> [comment]')")
    if parts[0] != _KEY_TYPE.decode():
        raise FormatError("unsupported key type %r: only ssh-ed25519 keys can sign" % parts[0])
    blob = b64decode_canonical(parts[1], "the public key")
    parse_public_key_blob(blob)
    return blob, parts[2] if len(parts) == 3 else ""


def public_key_line(blob: bytes, comment: str = "") -> str:
    parse_public_key_blob(blob)
    line = "ssh-ed25519 " + base64.b64encode(blob).decode("ascii")
    return line + (" " + comment if comment else "")


@functools.lru_cache(maxsize=4096)  # the same few keys are named on every entry
def fingerprint(blob: bytes) -> str:
    """The key id: OpenSSH's SHA256 fingerprint, as ``ssh-keygen -l`` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


@runtime_checkable
class Signer(Protocol):
    """Anything that holds an Ed25519 private key and signs raw bytes with it."""

    @property
    def public_key_blob(self) -> bytes: ...

    def sign_raw(self, data: bytes) -> bytes: ...


class Ed25519Signer:
    """A `Signer` over an in-memory `cryptography` Ed25519 private key."""

    __slots__ = ("_key", "_blob")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self._blob = public_key_blob(key.public_key().public_bytes_raw())

    @property
    def public_key_blob(self) -> bytes:
        return self._blob

    def sign_raw(self, data: bytes) -> bytes:
        return self._key.sign(data)

    def openssh_private_bytes(self) -> bytes:
        """The key as an unencrypted OpenSSH private key file: the age identity that opens
        the sealed sets sealed to this key (§6e). Only the deterministic runner asks.
        """
        from cryptography.hazmat.primitives import serialization

        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )


@functools.lru_cache(maxsize=256)
def _signed_prefix(namespace: bytes, hash_alg: bytes) -> bytes:
    return _MAGIC + _string(namespace) + _string(b"") + _string(hash_alg)


def _signed_data(namespace: bytes, hash_alg: bytes, message: bytes) -> bytes:
    # The same few namespaces sign every entry: their constant prefix is built once.
    return _signed_prefix(namespace, hash_alg) + _string(_HASHES[hash_alg](message).digest())


@functools.lru_cache(maxsize=256)
def _blob_prefix(key_blob: bytes, namespace: bytes) -> bytes:
    return (
        _MAGIC
        + struct.pack(">I", _VERSION)
        + _string(key_blob)
        + _string(namespace)
        + _string(b"")
        + _string(_SIGN_HASH)
    )


def _check_namespace(namespace: str) -> bytes:
    if not namespace:
        raise FormatError("SSHSIG namespace must not be empty")
    return namespace.encode("utf-8")


def sshsig_sign(signer: Signer, namespace: str, message: bytes) -> bytes:
    """Return the SSHSIG blob (not armored) over ``message`` in ``namespace``."""
    ns = _check_namespace(namespace)
    raw_sig = signer.sign_raw(_signed_data(ns, _SIGN_HASH, message))
    return _blob_prefix(signer.public_key_blob, ns) + _string(_string(_KEY_TYPE) + _string(raw_sig))


_U32 = struct.Struct(">I")


def _strings(data: bytes, pos: int, count: int) -> tuple[list[bytes], int]:
    """``count`` SSH wire strings from ``pos``; the same refusals as `_Reader`, without a
    method call per field (every signature of an audit is parsed here).
    """
    out = []
    for _ in range(count):
        if pos + 4 > len(data):
            raise FormatError("SSH wire data is truncated")
        (n,) = _U32.unpack_from(data, pos)
        if n > _MAX_FIELD:
            raise FormatError("SSH wire string longer than %d bytes" % _MAX_FIELD)
        pos += 4
        if pos + n > len(data):
            raise FormatError("SSH wire data is truncated")
        out.append(data[pos : pos + n])
        pos += n
    return out, pos


def _parse(sig_blob: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    if len(sig_blob) < 6 or sig_blob[:6] != _MAGIC:
        raise FormatError("SSH wire data is truncated" if len(sig_blob) < 6 else "not an SSHSIG blob (bad magic)")
    if len(sig_blob) < 10:
        raise FormatError("SSH wire data is truncated")
    if _U32.unpack_from(sig_blob, 6)[0] != _VERSION:
        raise FormatError("unsupported SSHSIG version")
    (key_blob, namespace, _reserved, hash_alg, signature), end = _strings(sig_blob, 10, 5)
    if end != len(sig_blob):
        raise FormatError("trailing bytes after SSH wire data")
    if hash_alg not in _HASHES:
        raise FormatError("unsupported SSHSIG hash algorithm %r" % hash_alg.decode("ascii", "replace"))
    (key_type, raw_sig), end = _strings(signature, 0, 2)  # the reserved field is ignored, as the spec says
    if key_type != _KEY_TYPE:
        raise FormatError("SSHSIG signature is not ssh-ed25519")
    if end != len(signature):
        raise FormatError("trailing bytes after SSH wire data")
    if len(raw_sig) != 64:
        raise FormatError("an Ed25519 signature is 64 bytes")
    return key_blob, namespace, hash_alg, raw_sig


def sshsig_namespace(sig_blob: bytes) -> str:
    """The namespace a signature claims (not yet verified)."""
    return _parse(sig_blob)[1].decode("utf-8", "replace")


def sshsig_public_key(sig_blob: bytes) -> bytes:
    """The public key blob a signature claims to be made with (not yet verified)."""
    return _parse(sig_blob)[0]


def sshsig_verify(key_blob: bytes, namespace: str, message: bytes, sig_blob: bytes) -> None:
    """Raise unless ``sig_blob`` is ``key_blob``'s SSHSIG over ``message`` in ``namespace``."""
    ns = _check_namespace(namespace)
    claimed_key, claimed_ns, hash_alg, raw_sig = _parse(sig_blob)
    if claimed_key != key_blob:
        raise SignatureError("signature was made with a different key")
    if claimed_ns != ns:
        raise SignatureError("signature namespace %r is not %r" % (claimed_ns.decode("utf-8", "replace"), namespace))
    if not is_valid_ed25519(parse_public_key_blob(key_blob), raw_sig, _signed_data(ns, hash_alg, message)):
        raise SignatureError("Ed25519 signature does not verify")


def armor(sig_blob: bytes) -> str:
    text = base64.b64encode(sig_blob).decode("ascii")
    lines = [text[i : i + 76] for i in range(0, len(text), 76)]
    return "\n".join([_ARMOR_BEGIN, *lines, _ARMOR_END]) + "\n"


def dearmor(text: str) -> bytes:
    lines = [line.strip() for line in text.strip().splitlines()]
    if len(lines) < 3 or lines[0] != _ARMOR_BEGIN or lines[-1] != _ARMOR_END:
        raise FormatError("not an armored SSH signature")
    return b64decode_canonical("".join(lines[1:-1]), "the armored SSH signature")
