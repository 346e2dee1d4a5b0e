"""Every text format of the transparency layer, each writer beside its parser: C2SP
signed notes (Ed25519), checkpoints, witness cosignatures (tlog-cosignature v1),
inclusion proofs (tlog-proof v1) and our consistency proofs.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from dataclasses import dataclass

from ._b64 import b64decode_canonical
from ._errors import FormatError
from ._merkle import is_valid_inclusion, leaf_hash
from ._sshsig import Signer, is_valid_ed25519, parse_public_key_blob

__all__ = [
    "NoteSignature",
    "SignedNote",
    "Checkpoint",
    "note_key_id",
    "verifier_key",
    "parse_verifier_key",
    "parse_note",
    "sign_note",
    "is_valid_note_signature",
    "cosign_note",
    "cosignature_time",
    "checkpoint_text",
    "parse_checkpoint",
    "TLOG_PROOF_HEADER",
    "TlogProof",
    "tlog_proof_text",
    "parse_tlog_proof",
    "is_valid_tlog_proof",
    "CONSISTENCY_PROOF_HEADER",
    "ConsistencyProof",
    "consistency_proof_text",
    "parse_consistency_proof",
]

_DASH = "\u2014"
_MAX_NOTE = 1 << 20
_MAX_SIGNATURES = 100
ED25519_TYPE = 0x01
COSIGNATURE_TYPE = 0x04
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")


def note_key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """SHA-256(name || 0x0A || type || public key)[:4], as signed-note recommends."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


def _check_name(name: str) -> None:
    if not name or any(c.isspace() for c in name) or "+" in name:
        raise FormatError("a note key name is non-empty, with no spaces and no '+': %r" % name)


@dataclass(frozen=True, slots=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        return "%s %s %s\n" % (_DASH, self.name, base64.b64encode(self.key_id + self.signature).decode("ascii"))


@dataclass(frozen=True, slots=True)
class SignedNote:
    text: str  # ends with a newline
    signatures: tuple[NoteSignature, ...]

    def encode(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)

    def with_signature(self, sig: NoteSignature) -> SignedNote:
        return SignedNote(self.text, self.signatures + (sig,))


def parse_note(data: str | bytes) -> SignedNote:
    if isinstance(data, bytes):
        if len(data) > _MAX_NOTE:
            raise FormatError("note larger than %d bytes" % _MAX_NOTE)
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("a note is UTF-8 text") from None
    if len(data) > _MAX_NOTE:
        raise FormatError("note larger than %d bytes" % _MAX_NOTE)
    if any(ord(c) < 0x20 and c != "\n" for c in data) or "\x7f" in data:
        raise FormatError("a note holds no control characters but newlines")
    split = data.rfind("\n\n")
    if split < 0 or not data.endswith("\n"):
        raise FormatError("a note is text, a blank line, and signature lines, each ending in a newline")
    text, block = data[: split + 1], data[split + 2 :]
    sigs = []
    for line in block[:-1].split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _DASH:
            raise FormatError("malformed note signature line: %r" % line[:80])
        _check_name(parts[1])
        raw = b64decode_canonical(parts[2], "a note signature")
        if len(raw) < 5:
            raise FormatError("note signature too short")
        sigs.append(NoteSignature(parts[1], raw[:4], raw[4:]))
    if not sigs or len(sigs) > _MAX_SIGNATURES:
        raise FormatError("a note carries 1 to %d signatures" % _MAX_SIGNATURES)
    return SignedNote(text, tuple(sigs))


def sign_note(text: str, name: str, signer: Signer) -> NoteSignature:
    _check_name(name)
    raw = parse_public_key_blob(signer.public_key_blob)
    return NoteSignature(name, note_key_id(name, ED25519_TYPE, raw), signer.sign_raw(text.encode("utf-8")))


def is_valid_note_signature(note: SignedNote, name: str, public_key: bytes) -> bool:
    """True if a signature line with this name and key id verifies. Lines of other keys
    are ignored; a matching line that fails makes the whole note fail.
    """
    key_id = note_key_id(name, ED25519_TYPE, public_key)
    matching = [s for s in note.signatures if s.name == name and s.key_id == key_id]
    return bool(matching) and all(
        len(s.signature) == 64 and is_valid_ed25519(public_key, s.signature, note.text.encode("utf-8"))
        for s in matching
    )


def verifier_key(name: str, public_key: bytes, sig_type: int = ED25519_TYPE) -> str:
    """The signed-note verifier key ``<name>+<hex key id>+<base64(type || key)>`` that Go's
    ``note.NewVerifier`` parses: type 0x01 for a log's Ed25519 key (its name the origin),
    0x04 for a witness's cosignature key (tlog-cosignature).
    """
    _check_name(name)
    if len(public_key) != 32 or sig_type not in (ED25519_TYPE, COSIGNATURE_TYPE):
        raise FormatError("a verifier key here is a 32-byte Ed25519 key of type 0x01 or 0x04")
    key_id = note_key_id(name, sig_type, public_key)
    return "%s+%s+%s" % (name, key_id.hex(), base64.b64encode(bytes([sig_type]) + public_key).decode("ascii"))


def parse_verifier_key(text: str) -> tuple[str, bytes, int]:
    """The name, Ed25519 key and signature type of a verifier key, its id recomputed.

    Raises:
        FormatError: not a verifier key of type 0x01 or 0x04 in its canonical form.
    """
    parts = text.strip().split("+", 2)  # base64 may hold "+", the name and id never do
    if len(parts) != 3 or len(parts[1]) != 8:
        raise FormatError("a verifier key is NAME+HEX8+BASE64")
    raw = b64decode_canonical(parts[2], "a verifier key")
    if len(raw) != 33 or raw[0] not in (ED25519_TYPE, COSIGNATURE_TYPE):
        raise FormatError("a verifier key here holds an Ed25519 key of type 0x01 or 0x04 (32 bytes)")
    if verifier_key(parts[0], raw[1:], raw[0]) != text.strip():
        raise FormatError("the verifier key's id does not match its name and key")
    return parts[0], raw[1:], raw[0]


def _cosigned_message(text: str, timestamp: int) -> bytes:
    return ("cosignature/v1\ntime %d\n" % timestamp).encode("ascii") + text.encode("utf-8")


def cosign_note(text: str, name: str, signer: Signer, timestamp: int) -> NoteSignature:
    _check_name(name)
    if not 0 <= timestamp < (1 << 63):
        raise FormatError("cosignature timestamp out of range")
    raw = parse_public_key_blob(signer.public_key_blob)
    sig = signer.sign_raw(_cosigned_message(text, timestamp))
    return NoteSignature(name, note_key_id(name, COSIGNATURE_TYPE, raw), struct.pack(">Q", timestamp) + sig)


def cosignature_time(note: SignedNote, name: str, public_key: bytes) -> int | None:
    """The timestamp of this witness's valid cosignature on the note, or None."""
    key_id = note_key_id(name, COSIGNATURE_TYPE, public_key)
    for s in note.signatures:
        if s.name == name and s.key_id == key_id and len(s.signature) == 72:
            (timestamp,) = struct.unpack(">Q", s.signature[:8])
            if timestamp < (1 << 63) and is_valid_ed25519(
                public_key, s.signature[8:], _cosigned_message(note.text, timestamp)
            ):
                return int(timestamp)
    return None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()


def checkpoint_text(cp: Checkpoint) -> str:
    return "%s\n%d\n%s\n%s" % (
        cp.origin,
        cp.size,
        base64.b64encode(cp.root).decode("ascii"),
        "".join(e + "\n" for e in cp.extensions),
    )


def parse_checkpoint(text: str) -> Checkpoint:
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "" or any(not line for line in lines[:-1]):
        raise FormatError("a checkpoint is at least three non-empty lines")
    origin, size, root = lines[0], lines[1], lines[2]
    if _SIZE.fullmatch(size) is None:
        raise FormatError("checkpoint tree size is not a decimal without leading zeros")
    raw = b64decode_canonical(root, "the checkpoint root hash")
    if len(raw) != 32:
        raise FormatError("checkpoint root hash is not 32 bytes")
    return Checkpoint(origin, int(size), raw, tuple(lines[3:-1]))


TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1"
CONSISTENCY_PROOF_HEADER = "receipt-ledger/consistency-proof@v1"


def _decimal(text: str, what: str) -> int:
    if _SIZE.fullmatch(text) is None:
        raise FormatError("%s is not a decimal without leading zeros" % what)
    return int(text)


def _hash_lines(lines: list[str], pos: int) -> tuple[tuple[bytes, ...], int]:
    """Base64 hash lines from ``pos`` up to the blank line that ends them."""
    hashes = []
    while lines[pos]:
        raw = b64decode_canonical(lines[pos], "a proof hash")
        if len(raw) != 32:
            raise FormatError("a proof hash is 32 bytes")
        hashes.append(raw)
        pos += 1
    return tuple(hashes), pos


@dataclass(frozen=True, slots=True)
class TlogProof:
    """A C2SP tlog-proof: an entry's inclusion proof and the checkpoint it is against."""

    index: int
    proof: tuple[bytes, ...]
    checkpoint_note: str
    extra: bytes | None = None


def tlog_proof_text(index: int, proof: tuple[bytes, ...] | list[bytes], checkpoint_note: str) -> str:
    """Render a C2SP tlog-proof: the inverse of `parse_tlog_proof`."""
    lines = [TLOG_PROOF_HEADER, "index %d" % index, *(base64.b64encode(h).decode("ascii") for h in proof)]
    return "\n".join(lines) + "\n\n" + checkpoint_note


def parse_tlog_proof(text: str) -> TlogProof:
    """Parse a C2SP tlog-proof. Raises `FormatError` on anything but the one canonical form."""
    lines = text.split("\n")
    if lines[0] != TLOG_PROOF_HEADER:
        raise FormatError("not a %s proof" % TLOG_PROOF_HEADER)
    pos, extra = 1, None
    try:
        if lines[pos].startswith("extra "):
            extra = b64decode_canonical(lines[pos][6:], "the proof's extra data")
            pos += 1
        if not lines[pos].startswith("index "):
            raise FormatError("the proof's index line is malformed")
        index = _decimal(lines[pos][6:], "the proof's index")
        hashes, pos = _hash_lines(lines, pos + 1)
    except IndexError:
        raise FormatError("the proof is truncated") from None
    return TlogProof(index, hashes, "\n".join(lines[pos + 1 :]), extra)


def is_valid_tlog_proof(proof: TlogProof, entry: bytes, checkpoint: Checkpoint) -> bool:
    """True if ``entry`` is the leaf at ``proof.index`` of the tree the checkpoint signed."""
    return is_valid_inclusion(leaf_hash(entry), proof.index, checkpoint.size, proof.proof, checkpoint.root)


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    """RFC 6962 consistency proof from tree size ``old`` to the checkpoint's size ``new``."""

    old: int
    new: int
    proof: tuple[bytes, ...]
    checkpoint_note: str


def consistency_proof_text(old: int, new: int, proof: tuple[bytes, ...] | list[bytes], checkpoint_note: str) -> str:
    """Render a consistency proof: the inverse of `parse_consistency_proof`."""
    lines = [
        CONSISTENCY_PROOF_HEADER,
        "old %d" % old,
        "new %d" % new,
        *(base64.b64encode(h).decode("ascii") for h in proof),
    ]
    return "\n".join(lines) + "\n\n" + checkpoint_note


def parse_consistency_proof(text: str) -> ConsistencyProof:
    """Parse a consistency proof. Raises `FormatError` on anything but the canonical form."""
    lines = text.split("\n")
    if lines[0] != CONSISTENCY_PROOF_HEADER:
        raise FormatError("not a %s proof" % CONSISTENCY_PROOF_HEADER)
    try:
        if not lines[1].startswith("old ") or not lines[2].startswith("new "):
            raise FormatError("the proof's size lines are malformed")
        old, new = _decimal(lines[1][4:], "the old size"), _decimal(lines[2][4:], "the new size")
        hashes, pos = _hash_lines(lines, 3)
    except IndexError:
        raise FormatError("the proof is truncated") from None
    if old > new:
        raise FormatError("the old size %d is larger than the new size %d" % (old, new))
    return ConsistencyProof(old, new, hashes, "\n".join(lines[pos + 1 :]))
