"""Checkpoints and the proofs a ledger gives out against its latest one: signing a
checkpoint (time-stamped when an authority is named), an entry's inclusion (a C2SP
tlog-proof) and the consistency of an earlier tree size. The texts are `receipts`' formats.
"""

from __future__ import annotations

from receipts import (
    Digest,
    SignedNote,
    Signer,
    consistency_proof,
    consistency_proof_text,
    inclusion_proof,
    tlog_proof_text,
)

from .._errors import InputError
from ..store._ledger import Appended, Ledger

__all__ = ["prove_inclusion", "prove_consistency", "latest_checkpoint", "sign_checkpoint", "checkpoint_vkey"]


def prove_inclusion(ledger: Ledger, digest: Digest) -> str:
    """The tlog-proof of the entry with this hash (entry, record or receipt hash)."""
    stored = ledger.find(digest)
    if stored is None:
        raise InputError("no entry with hash %s" % digest)
    checkpoints = ledger.checkpoints()
    if not checkpoints or checkpoints[-1][0] <= stored.seq:
        raise InputError("entry %d is not yet covered by a checkpoint: run `ledger checkpoint --key NAME`" % stored.seq)
    size, note = checkpoints[-1]
    return tlog_proof_text(stored.seq, inclusion_proof(ledger, stored.seq, size), note.encode())


def prove_consistency(ledger: Ledger, old_size: int) -> str:
    """The consistency proof from tree size ``old_size`` to the latest checkpoint."""
    checkpoints = ledger.checkpoints()
    if old_size < 1 or not checkpoints or checkpoints[-1][0] < old_size:
        raise InputError("no checkpoint at or beyond size %d" % old_size)
    size, note = checkpoints[-1]
    return consistency_proof_text(old_size, size, consistency_proof(ledger, old_size, size), note.encode())


def latest_checkpoint(ledger: Ledger) -> SignedNote:
    """The newest signed checkpoint.

    Raises:
        InputError: the ledger has none yet.
    """
    stored = ledger.checkpoints()
    if not stored:
        raise InputError("this ledger has no checkpoint yet: run `ledger checkpoint --key NAME`")
    return stored[-1][1]


def checkpoint_vkey(ledger: Ledger, public_key_blob: bytes) -> str:
    """The signed-note verifier key of the log (its origin, this Ed25519 key), for tile
    clients and witnesses (Go's ``note.NewVerifier`` reads it).

    Raises:
        InputError: not an Ed25519 key, or the ledger has a checkpoint and this key's
            signature is not on the newest one (a vkey for the wrong key helps nobody).
    """
    from receipts import ReceiptsError, is_valid_note_signature, parse_public_key_blob, verifier_key

    try:
        raw = parse_public_key_blob(public_key_blob)
    except ReceiptsError as exc:
        raise InputError("the log key is not an Ed25519 key: %s" % exc) from None
    origin = ledger.origin()
    stored = ledger.checkpoints()
    if stored and not is_valid_note_signature(stored[-1][1], origin, raw):
        raise InputError(
            "this key did not sign the newest checkpoint (size %d): give the log's seal key" % stored[-1][0]
        )
    return verifier_key(origin, raw)


def sign_checkpoint(ledger: Ledger, signer: Signer, tsa_url: str | None = None) -> tuple[SignedNote, Appended | None]:
    """Sign the current tree head as a checkpoint and, when ``tsa_url`` names a time-stamping
    authority, have it time-stamp that checkpoint (the stamp's entry comes after it).

    Returns:
        The checkpoint, and the time-stamp's entry (None without an authority).

    Raises:
        InputError: the key may not sign checkpoints, or the authority's reply does not check out.
    """
    from receipts import parse_checkpoint

    from ._tsa import check_tsa_url, timestamp_checkpoint

    if tsa_url is not None:
        check_tsa_url(tsa_url)  # a bad address is refused before the checkpoint is written
    note = ledger.checkpoint(signer)
    if tsa_url is None:
        return note, None
    return note, timestamp_checkpoint(ledger, signer, tsa_url, note, parse_checkpoint(note.text).size)
