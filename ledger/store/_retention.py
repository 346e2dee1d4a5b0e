"""Retention (issue 16): an admin signs a policy into the chain; `prune` deletes the
evidence blobs it lets go, and nothing else. Entries, the tree and checkpoints stay, and
every verdict still re-derives from the documents that stay (`receipts.is_derivation_input`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from receipts import Digest, EntryKind, EvidenceRef, ReceiptsError, RetentionPolicy, Signer, TierRecord, decode_as
from verify.schema import blob_path

from .. import _clock
from .._errors import InputError
from ._ledger import Appended, Ledger

__all__ = ["set_retention", "prune", "PruneReport"]


def set_retention(ledger: Ledger, signer: Signer, max_age_s: int, holds: Sequence[str] = ()) -> Appended:
    """Append a retention policy (the newest one is in force); only an admin key may sign it."""
    try:
        policy = RetentionPolicy(max_age_s, tuple(sorted(set(holds))))
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None
    return ledger.append(policy, signer)


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What `prune` removed (or, in a dry run, would remove), under which policy."""

    policy_entry: int
    dry_run: bool
    removed: tuple[tuple[str, str, int], ...]  # (task, digest, size)
    held: int  # blobs kept because their task is under a legal hold

    @property
    def bytes(self) -> int:
        return sum(size for _, _, size in self.removed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy_entry": self.policy_entry,
            "dry_run": self.dry_run,
            "removed": [{"task": t, "digest": d, "size": n} for t, d, n in self.removed],
            "bytes": self.bytes,
            "held": self.held,
        }


def prune(ledger: Ledger, dry_run: bool = False, now: int | None = None) -> PruneReport:
    """Delete every evidence blob the newest valid retention policy lets go: a blob goes only
    when every record that names it lets it go (the store is content-addressed). Refuses
    (`InputError`) without a policy, and on the shared store, whose blobs are append-only.
    """
    if ledger.store is not None:
        raise InputError("prune works on an embedded ledger: the shared store keeps its blobs append-only")
    # Deleting is decided from signed data only: every row is read and checked against its
    # bytes, so a policy or record hidden from the index stops the prune instead.
    uses: dict[Digest, list[tuple[TierRecord, EvidenceRef]]] = {}
    newest_policy = None
    for stored in ledger.reader.entries_between(0, ledger.reader.count()):
        entry, _task = ledger.checked(stored)
        if entry.kind is EntryKind.RETENTION:
            newest_policy = stored.seq
        elif entry.kind is EntryKind.TIER_RECORD:
            record = decode_as(TierRecord, stored.body)
            for ref in record.evidence:
                uses.setdefault(ref.digest, []).append((record, ref))
    found = ledger.reader.retention()
    if found is None and newest_policy is None:
        raise InputError("no retention policy: set one first (`ledger retention set --max-age-days N --key ADMIN`)")
    if found is None or found[0] != newest_policy:
        raise InputError(
            "refusing to prune: the newest retention policy (entry %s) is not validly signed by an admin key"
            % newest_policy
        )
    seq, policy, _signer = found
    at = _clock.now() if now is None else now
    removed, held = [], 0
    unheld = dataclasses.replace(policy, holds=())
    for digest, named in sorted(uses.items(), key=lambda item: item[0].value):
        if not all(policy.removable(record, ref, at) for record, ref in named):
            held += all(unheld.removable(record, ref, at) for record, ref in named)  # old enough, but held
            continue
        path = blob_path(ledger.root, digest)
        if not path.exists():
            continue
        removed.append((named[0][0].task_id, str(digest), named[0][1].size))
        if not dry_run:
            path.unlink()
    return PruneReport(seq, dry_run, tuple(removed), held)
