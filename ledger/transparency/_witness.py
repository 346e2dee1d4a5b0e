"""Witnessing. A witness cosigns a log's checkpoint only after proving it extends the last
checkpoint this witness cosigned for that log (tlog-cosignature v1, Ed25519); the log then
stores the cosignatures that verify, so that verify and bundles can count them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path

from receipts import (
    Checkpoint,
    MemoryTree,
    ReceiptsError,
    SignedNote,
    Signer,
    b64decode_canonical,
    consistency_proof,
    cosign_note,
    cosignature_time,
    is_valid_consistency,
    is_valid_note_signature,
    leaf_hash,
    parse_checkpoint,
    parse_note,
)
from verify import AuditState, CannotVerify, LedgerSource, Trust, WitnessKey, verify_chain

from .. import _clock
from .._errors import InputError
from .._files import read_bounded, write_atomic, write_text_atomic
from ..keys._key_files import key_dir, read_public_key
from ..store._ledger import Ledger

__all__ = ["cosign", "add_cosignatures", "audit_store", "read_witness_state", "write_witness_state"]


def _state_file(path: Path | None) -> Path:
    return path if path is not None else key_dir().parent / "witness-state.json"


def cosign(
    *,
    source: LedgerSource,
    checkpoint: str,
    signer: Signer,
    name: str,
    log_key: bytes,
    state_path: Path | None,
    audit: tuple[Trust, Path] | None = None,
) -> str:
    """Cosign a checkpoint as witness ``name``: refused unless the log key signed it and it
    extends (by a consistency proof computed from the ledger) the last checkpoint this
    witness cosigned for that log. Updates the witness's state file; returns the note
    with the cosignature added. Raises `InputError` for every refusal. ``source`` stays
    open (the caller's).

    With ``audit`` (a trust root and the witness's audit-state file), an **auditing**
    witness: it cosigns only after a chain audit of the ledger (resumed from that state
    when it exists, format.md §8.2) passes and reaches exactly this checkpoint, and it then
    keeps the new state. Its cosignature certifies that every entry up to the checkpoint
    was audited, which no single-receipt check can prove alone (format.md §9).
    """
    try:
        note = parse_note(checkpoint)
        cp = parse_checkpoint(note.text)
    except ReceiptsError as exc:
        raise InputError("not a checkpoint: %s" % exc) from None
    if not is_valid_note_signature(note, cp.origin, log_key):
        raise InputError("refused: the checkpoint is not signed by the log key you gave")
    if audit is not None:
        _audited(source, note, *audit)
    path = _state_file(state_path)
    state = read_witness_state(path)
    seen = state.get(cp.origin)
    if seen is not None:
        _refuse_unless_extends(source, cp, seen)
    signed = note.with_signature(cosign_note(note.text, name, signer, _clock.now()))
    state[cp.origin] = (cp.size, cp.root)
    write_witness_state(path, state)
    return signed.encode()


def read_log_key(spec: str) -> bytes:
    """The log's Ed25519 public key from a key line (``ssh-ed25519 AAAA...``) or a .pub file."""
    from receipts import parse_public_key_blob

    try:
        return parse_public_key_blob(read_public_key(spec))
    except ReceiptsError as exc:
        raise InputError("the log key is not an Ed25519 key: %s" % exc) from None


def read_witness_state(path: Path) -> dict[str, tuple[int, bytes]]:
    """A witness's state: each log origin's latest cosigned (size, root); empty if none yet.
    The same file for `witness cosign` and `witness serve`.

    Raises:
        InputError: the file cannot be read, or is not such a state (naming it).
    """
    try:
        doc = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        return {
            str(origin): (int(kept["size"]), b64decode_canonical(kept["root"], "the kept root"))
            for origin, kept in doc.items()
        }
    except (OSError, ValueError, KeyError, TypeError, ReceiptsError) as exc:
        raise InputError("witness state %s is unreadable: %s" % (path, exc)) from None


def write_witness_state(path: Path, state: dict[str, tuple[int, bytes]]) -> None:
    """Keep the state atomically. It is the witness's security state: what it has cosigned
    must survive a crash, or it could be made to cosign a fork of what it vouched for.
    """
    doc = {
        origin: {"size": size, "root": base64.b64encode(root).decode("ascii")} for origin, (size, root) in state.items()
    }
    write_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _refuse_unless_extends(source: LedgerSource, cp: Checkpoint, seen: tuple[int, bytes]) -> None:
    """Refuse a checkpoint that does not extend the last one cosigned for its log (``seen``):
    smaller, or not consistent by a proof the witness computes from the ledger itself.
    """
    old_size, old_root = seen
    if cp.size < old_size:
        raise InputError(
            "refused: the checkpoint (size %d) is older than one this witness cosigned (size %d)" % (cp.size, old_size)
        )
    leaves = [leaf_hash(b) for b in source.entry_bytes(cp.size)]
    if len(leaves) < cp.size:
        raise InputError("refused: the ledger holds fewer entries than the checkpoint claims")
    proof = consistency_proof(MemoryTree(leaves), old_size, cp.size) if old_size else []
    if old_size and not is_valid_consistency(old_size, cp.size, old_root, cp.root, proof):
        raise InputError(
            "refused: the checkpoint is not consistent with the one this witness cosigned at size %d" % old_size
        )


def audit_store(
    source: LedgerSource, trust: Trust, state_file: Path, *, evidence: bool = True, reaching: str | None = None
) -> AuditState:
    """A chain audit of ``source`` resumed from ``state_file`` (a full one when the file
    does not exist yet), its new state kept there atomically when it is clean.

    Returns:
        The clean audit's state at the ledger's newest checkpoint.

    Raises:
        InputError: the ledger or the state cannot be audited, the audit found a defect (the
            first three are named), the ledger has no checkpoint to keep a state at, or (with
            ``reaching``, a checkpoint's note text) the audit did not end at that checkpoint.
            The state file is then left as it was.
    """
    try:
        resume = AuditState.from_json(read_bounded(state_file, "audit state").decode()) if state_file.exists() else None
        result = verify_chain(source, trust, resume=resume, evidence=evidence)
    except (CannotVerify, UnicodeDecodeError) as exc:
        raise InputError("the ledger cannot be audited: %s" % exc) from None
    if not result.ok:
        raise InputError(
            "the audit of the ledger failed: %s"
            % "; ".join("[%s] %s" % (d.code, d.message) for d in result.defects[:3])
        )
    if result.state is None:
        raise InputError("the ledger has no signed checkpoint: an audit keeps its state at one")
    if reaching is not None and parse_note(result.state.checkpoint).text != reaching:
        raise InputError("the checkpoint is not the ledger's newest, which is what the audit reached")
    write_text_atomic(state_file, result.state.to_json())
    return result.state


def _audited(source: LedgerSource, note: SignedNote, trust: Trust, state_file: Path) -> None:
    """A chain audit up to ``note``'s checkpoint passes, and its state is kept; else refused."""
    try:
        audit_store(source, trust, state_file, reaching=note.text)
    except InputError as exc:
        raise InputError("refused: %s" % exc) from None


def add_cosignatures(ledger: Ledger, text: str, witnesses: Sequence[WitnessKey]) -> tuple[str, ...]:
    """Store, on the ledger's own checkpoint of the same text, each named witness's
    cosignature found in the cosigned checkpoint ``text``, after it verifies against that
    witness's key. Lines of other signers are not stored. Returns the witnesses added
    (none if all were stored already); `InputError` if the text is not one of this
    ledger's checkpoints or a named witness did not validly cosign it.
    """
    try:
        note = parse_note(text)
        size = parse_checkpoint(note.text).size
    except ReceiptsError as exc:
        raise InputError("not a checkpoint: %s" % exc) from None
    stored = dict(ledger.checkpoints()).get(size)
    if stored is None or stored.text != note.text:
        raise InputError("refused: this ledger stores no checkpoint with that text at size %d" % size)
    added, current = [], stored
    for witness in witnesses:
        valid = tuple(
            sig
            for sig in note.signatures
            if cosignature_time(SignedNote(note.text, (sig,)), witness.name, witness.public_key) is not None
        )
        if not valid:
            raise InputError("refused: the checkpoint carries no valid cosignature by witness %s" % witness.name)
        new = tuple(sig for sig in valid if sig not in current.signatures)
        if new:
            current = SignedNote(current.text, current.signatures + new)
            added.append(witness.name)
    if added:
        ledger.store_cosigned(size, stored, current)
    return tuple(added)
