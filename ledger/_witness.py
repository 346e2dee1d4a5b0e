"""A witness: cosign a log's checkpoint only after proving it extends the last
checkpoint this witness cosigned for that log (tlog-cosignature v1, Ed25519)."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path

from receipts import (
    MemoryTree,
    ReceiptsError,
    Signer,
    b64decode_canonical,
    consistency_proof,
    cosign_note,
    is_valid_consistency,
    is_valid_note_signature,
    leaf_hash,
    parse_checkpoint,
    parse_note,
)
from verify import LedgerSource

from . import _clock
from ._errors import InputError
from ._keys import key_dir

__all__ = ["cosign"]


def _state_file(path: Path | None) -> Path:
    return path if path is not None else key_dir().parent / "witness-state.json"


def cosign(
    *, ledger_dir: Path, checkpoint: str, signer: Signer, name: str, log_key: bytes, state_path: Path | None
) -> str:
    """Cosign a checkpoint as witness ``name``: refused unless the log key signed it and it
    extends (by a consistency proof computed from the ledger) the last checkpoint this
    witness cosigned for that log. Updates the witness's state file; returns the note
    with the cosignature added. Raises `InputError` for every refusal."""
    try:
        note = parse_note(checkpoint)
        cp = parse_checkpoint(note.text)
    except ReceiptsError as exc:
        raise InputError("not a checkpoint: %s" % exc) from None
    if not is_valid_note_signature(note, cp.origin, log_key):
        raise InputError("refused: the checkpoint is not signed by the log key you gave")
    path = _state_file(state_path)
    try:
        state = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as exc:
        raise InputError("cannot read witness state %s: %s" % (path, exc)) from None
    if not isinstance(state, dict):
        raise InputError("witness state %s is not a JSON object" % path)
    seen = state.get(cp.origin)
    if seen is not None:
        try:
            old_size, old_root = int(seen["size"]), b64decode_canonical(seen["root"], "the kept root")
        except (KeyError, TypeError, ValueError, ReceiptsError):
            raise InputError("witness state %s is corrupt for log %r" % (path, cp.origin)) from None
        if cp.size < old_size:
            raise InputError(
                "refused: the checkpoint (size %d) is older than one this witness cosigned (size %d)"
                % (cp.size, old_size)
            )
        # The witness computes the proof from the ledger and checks it against both roots.
        source = LedgerSource.open(ledger_dir)
        try:
            leaves = [leaf_hash(b) for b in source.entry_bytes(cp.size)]
        finally:
            source.close()
        if len(leaves) < cp.size:
            raise InputError("refused: the ledger holds fewer entries than the checkpoint claims")
        tree = MemoryTree(leaves)
        proof = consistency_proof(tree, old_size, cp.size) if old_size else []
        if old_size and not is_valid_consistency(old_size, cp.size, old_root, cp.root, proof):
            raise InputError(
                "refused: the checkpoint is not consistent with the one this witness cosigned at size %d" % old_size
            )
    signed = note.with_signature(cosign_note(note.text, name, signer, _clock.now()))
    state[cp.origin] = {"size": cp.size, "root": base64.b64encode(cp.root).decode("ascii")}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".witness-")
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return signed.encode()
