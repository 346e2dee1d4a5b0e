"""Step 8: the receipt's entries are in a tree whose head the ledger signed, and the
ledger only ever grew since a checkpoint the auditor kept."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from receipts import (
    KEYRING_KINDS,
    Checkpoint,
    FormatError,
    Genesis,
    KeyAdd,
    Keyring,
    KeyRevoke,
    MemoryTree,
    ReceiptsError,
    Role,
    SignedNote,
    b64decode_canonical,
    decode_body,
    decode_entry,
    entry_signed_bytes,
    leaf_hash,
    namespace_for,
    parse_checkpoint,
    parse_note,
    parse_public_key_blob,
    sshsig_verify,
    tree_root,
    verify_cosignature,
    verify_inclusion,
    verify_note,
)

from ._source import LedgerSource

__all__ = ["Transparency", "WitnessKey", "TlogProof", "parse_tlog_proof", "tlog_proof_text", "verify_tlog_proof", "check_transparency", "checkpoint_signer"]

PROOF_HEADER = "c2sp.org/tlog-proof@v1"


@dataclass(frozen=True, slots=True)
class WitnessKey:
    name: str
    public_key: bytes  # raw 32-byte Ed25519


@dataclass(frozen=True, slots=True)
class Transparency:
    """What the auditor asks of the log beyond the chain itself."""

    since: str | None = None  # a checkpoint note the auditor kept
    require_checkpoint: bool = False
    witnesses: tuple[WitnessKey, ...] = ()
    quorum: int = 0


def _full_keyring(source: LedgerSource, upto: int) -> Keyring | None:
    """The keyring replayed from every validly signed keyring entry with seq < upto."""
    ring: Keyring | None = None
    for stored in source.iter_entries(upto=upto - 1):
        if stored.kind not in {k.value for k in KEYRING_KINDS}:
            continue
        try:
            entry = decode_entry(stored.entry)
            body = decode_body(entry.kind, stored.body)
            if isinstance(body, Genesis):
                ring = Keyring.from_genesis(body)
            if ring is None:
                return None
            state = ring.authorize(entry.signer, Role.ADMIN, entry.seq, entry.time)
            sshsig_verify(state.spec.public_key, namespace_for(Role.ADMIN), entry_signed_bytes(entry), entry.signature)
            if isinstance(body, KeyAdd):
                ring = ring.with_added(body.key, entry.seq)
            elif isinstance(body, KeyRevoke):
                ring = ring.with_revoked(body.key_id, entry.seq, body.reason)
        except (ReceiptsError, ValueError):
            continue  # the chain walk reports it; an unverifiable change grants nothing here
    return ring


def checkpoint_signer(ring: Keyring | None, note: SignedNote, origin: str, size: int) -> str | None:
    """The seal or admin key that signed this checkpoint while valid at its size, if any."""
    for state in ring or ():
        if not ({Role.SEAL, Role.ADMIN} & set(state.spec.roles)) or state.available_from > max(size - 1, 0):
            continue
        if state.revoked_at is not None and state.revoked_at < size - 1:
            continue
        if verify_note(note, origin, parse_public_key_blob(state.spec.public_key)):
            return "%s (%s)" % (state.spec.name, state.key_id)
    return None


def _read_checkpoint(text: str, origin: str) -> tuple[SignedNote, Checkpoint] | str:
    try:
        note = parse_note(text)
        cp = parse_checkpoint(note.text)
    except ReceiptsError as exc:
        return "malformed checkpoint: %s" % exc
    if cp.origin != origin:
        return "checkpoint is for log %r, not %r" % (cp.origin, origin)
    return note, cp


def check_transparency(source: LedgerSource, origin: str, receipt_seq: int, policy: Transparency) -> tuple[list[tuple[str, str]], list[str], str | None]:
    """(defects as (code, message), warnings, a one-line description of the checkpoint used)."""
    defects: list[tuple[str, str]] = []
    warnings: list[str] = []
    stored = [(size, text) for size, text in source.checkpoints() if size > receipt_seq]
    kept = _read_checkpoint(policy.since, origin) if policy.since is not None else None
    if isinstance(kept, str):
        return [("since-checkpoint", kept)], warnings, None
    sizes = [size for size, _ in stored[-1:]] + ([kept[1].size] if kept else [])
    count = source.count()
    leaves = [leaf_hash(b) for b in source.entry_bytes(min(max(sizes, default=0), count))]
    tree = MemoryTree(leaves) if leaves else None
    ring = _full_keyring(source, max(max(sizes, default=0), receipt_seq + 1))

    def root_at(size: int) -> bytes | None:
        if size > len(leaves):
            return None
        return tree_root(tree, size) if tree is not None else tree_root(MemoryTree([]), 0)

    used = None
    if not stored:
        if policy.require_checkpoint:
            defects.append(("no-checkpoint", "no signed checkpoint covers entry %d" % receipt_seq))
        else:
            warnings.append("no signed checkpoint covers this receipt yet: transparency not checked (run `ledger checkpoint`)")
    else:
        size, text = stored[-1]
        read = _read_checkpoint(text, origin)
        if isinstance(read, str):
            defects.append(("checkpoint-malformed", read))
        else:
            note, cp = read
            signer = checkpoint_signer(ring, note, origin, cp.size)
            if signer is None or cp.size != size:
                defects.append(("checkpoint-signature", "the checkpoint at size %d is not signed by a valid seal or admin key of this ledger" % size))
            if root_at(cp.size) != cp.root:
                defects.append(("checkpoint-root", "the ledger's entries do not hash to the root its checkpoint at size %d signed%s" % (
                    cp.size, " (it holds only %d entries)" % count if count < cp.size else "")))
            witnessed = [w.name for w in policy.witnesses if verify_cosignature(note, w.name, w.public_key) is not None]
            if len(witnessed) < policy.quorum:
                defects.append(("witness-quorum", "the checkpoint has %d valid witness cosignature(s); %d are required" % (len(witnessed), policy.quorum)))
            used = "size %d signed by %s; witnessed by %s" % (cp.size, signer or "nobody valid", ", ".join(witnessed) or "none")
    if kept is not None:
        note, cp = kept
        if checkpoint_signer(ring, note, origin, cp.size) is None:
            defects.append(("since-checkpoint", "the checkpoint you kept is not signed by a valid seal or admin key of this ledger"))
        if root_at(cp.size) != cp.root:
            defects.append(("history-rewritten", "the ledger is not an extension of the checkpoint you kept at size %d: its history was rewritten%s" % (
                cp.size, " or cut short" if count < cp.size else "")))
    return defects, warnings, used


@dataclass(frozen=True, slots=True)
class TlogProof:
    index: int
    proof: tuple[bytes, ...]
    checkpoint_note: str
    extra: bytes | None = None


def tlog_proof_text(index: int, proof: Sequence[bytes], checkpoint_note: str) -> str:
    """Render a C2SP tlog-proof: the inverse of parse_tlog_proof."""
    lines = [PROOF_HEADER, "index %d" % index, *(base64.b64encode(h).decode("ascii") for h in proof)]
    return "\n".join(lines) + "\n\n" + checkpoint_note


def parse_tlog_proof(text: str) -> TlogProof:
    """Parse a C2SP tlog-proof; raises ReceiptsError's FormatError on malformed input."""
    lines = text.split("\n")
    if not lines or lines[0] != PROOF_HEADER:
        raise FormatError("not a %s proof" % PROOF_HEADER)
    pos, extra = 1, None
    try:
        if lines[pos].startswith("extra "):
            extra = b64decode_canonical(lines[pos][6:], "the proof's extra data")
            pos += 1
        if not lines[pos].startswith("index ") or not lines[pos][6:].isdigit() or (lines[pos][6:] != "0" and lines[pos][6] == "0"):
            raise FormatError("the proof's index line is malformed")
        index = int(lines[pos][6:])
        pos += 1
        hashes = []
        while lines[pos]:
            raw = b64decode_canonical(lines[pos], "a proof hash")
            if len(raw) != 32:
                raise FormatError("a proof hash is 32 bytes")
            hashes.append(raw)
            pos += 1
    except IndexError:
        raise FormatError("the proof is truncated") from None
    except ValueError:  # str.isdigit admits digits int() refuses, such as superscripts
        raise FormatError("the proof's index line is malformed") from None
    return TlogProof(index, tuple(hashes), "\n".join(lines[pos + 1 :]), extra)


def verify_tlog_proof(proof: TlogProof, entry: bytes, checkpoint: Checkpoint) -> bool:
    return verify_inclusion(leaf_hash(entry), proof.index, checkpoint.size, proof.proof, checkpoint.root)
