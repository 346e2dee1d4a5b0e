"""Proofs a ledger gives out against its latest checkpoint: an entry's inclusion (a C2SP
tlog-proof) and the consistency of an earlier tree size. The texts are `receipts`' formats.
"""

from __future__ import annotations

from receipts import Digest, consistency_proof, consistency_proof_text, inclusion_proof, tlog_proof_text

from ._errors import InputError
from ._store import Ledger

__all__ = ["prove_inclusion", "prove_consistency"]


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
