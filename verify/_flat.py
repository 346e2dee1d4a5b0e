"""A receipt checked on a ledger the way a bundle is checked (docs/format.md §8, "by
proof"): only the entries the receipt depends on are read, and each is proven into the
newest signed checkpoint by an inclusion proof built from the stored Merkle tree. The
stored nodes are not trusted: a wrong one makes a proof fail against the signed root.
"""

from __future__ import annotations

from typing import BinaryIO

from receipts import (
    CachedNodes,
    Checkpoint,
    Digest,
    EvidenceRef,
    Keyring,
    ReceiptsError,
    SignedNote,
    TierRecord,
    consistency_proof,
    decode_entry,
    inclusion_proof,
    is_valid_consistency,
    is_valid_inclusion,
    leaf_hash,
    named_retention,
    parse_checkpoint,
    parse_note,
    replay_keyring,
)

from ._policy import Transparency
from ._result import Defect, Finding
from ._source import KEYRING_KIND_NAMES, LedgerSource, SparseEntries, StoredEntry, keyring_changes
from ._transparency import check_checkpoints

__all__ = ["FlatSource", "MissingNode", "StoredNodes", "flat_source"]


class MissingNode(Exception):
    pass


class StoredNodes:
    """The ledger's stored tree nodes; a missing one means the tree cannot prove anything."""

    def __init__(self, ledger: LedgerSource) -> None:
        self.ledger = ledger

    def node(self, level: int, index: int) -> bytes:
        found = self.ledger.tree_node(level, index)
        if found is None:
            raise MissingNode()
        return found


class FlatSource(SparseEntries):
    """The receipt's history inside a whole ledger, read as a bundle would hold it: the
    task's entries up to the receipt, every keyring entry up to the checkpoint, and their
    proofs. Evidence is read from the ledger's blob store.
    """

    def __init__(
        self,
        ledger: LedgerSource,
        entries: dict[int, StoredEntry],
        checkpoint: tuple[int, str],
        proofs: dict[int, list[bytes]],
        consistency: list[bytes] | None,
        broken: list[Defect],
    ) -> None:
        self.ledger = ledger
        self.entries = entries
        self.size, self.checkpoint_text = checkpoint
        self.proofs = proofs
        self.consistency = consistency
        self.broken = broken
        self.retention_unproven = False
        self._rings: dict[int, Keyring | None] = {}
        try:
            self.named = named_retention(parse_checkpoint(parse_note(self.checkpoint_text).text).extensions)
        except ReceiptsError:
            self.named = None  # `flat_source` reported the malformed line

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        return self.ledger.open_blob(digest)

    def redacted(self, digest: Digest) -> bool:
        return False

    def pruned(self, record: TierRecord, ref: EvidenceRef) -> str | None:
        # The checkpoint's retention line names the policy in force at its size, and that
        # entry was read and proven (§8.1). A policy the ledger holds beyond it, or a line
        # the checkpoint lacks, is proven newest only by a walk: say so, and the verifier walks.
        # The keyring this source proved is the ledger's whole keyring when nothing follows
        # the checkpoint (it holds every keyring entry below it, by index and by both chains).
        ring = self.ring_at(self.size) if self.ledger.count() == self.size else None
        why = self.ledger.pruned(record, ref, ring)
        newest = self.ledger.retention(ring)
        if why is not None and (self.named is None or newest is None or newest[0] != self.named.seq):
            self.retention_unproven = True
        return why

    def checkpoints(self) -> list[tuple[int, str]]:
        return [(self.size, self.checkpoint_text)]

    def count(self) -> int:
        return self.ledger.count()

    def check_transparency(self, origin: str, ring: Keyring | None, receipt_seq: int, policy: Transparency) -> Finding:
        # Step 8 with this source's proofs (§8.1); a back-pointer to nowhere found while
        # gathering the entries comes first.
        found = check_checkpoints(self, (self.size, self.checkpoint_text), origin, receipt_seq, policy)
        others = max(self.count() - len(self.entries), 0)
        unread = (
            "the ledger holds no other entry"
            if others == 0
            else "the ledger's other %s not read (`ledger verify --chain` audits %s)"
            % ("entry was" if others == 1 else "%d entries were" % others, "it" if others == 1 else "them")
        )
        said = (
            "checked by proof: %d entries of the receipt's task and keyring proven into the checkpoint; %s"
            % (len(self.entries), unread),
        )
        return Finding(
            (*self.broken, *found.defects), found.warnings, found.checkpoint, found.certified_by, (*said, *found.notes)
        )

    # -- how entries are proven into a checkpoint (`verify._transparency.CheckpointProof`) --

    def ring_at(self, size: int) -> Keyring | None:
        if size not in self._rings:
            self._rings[size] = _keyring_upto(self.entries, size)
        return self._rings[size]

    def prove(self, checkpoint: Checkpoint, receipt_seq: int) -> list[Defect]:
        # Every entry read is proven at its position into the signed root.
        message = "entry %d is not proven into the checkpoint at size %d (the entry or the stored tree was altered)"
        return [
            Defect("inclusion", message % (seq, checkpoint.size))
            for seq, stored in sorted(self.entries.items())
            if not is_valid_inclusion(leaf_hash(stored.entry), seq, checkpoint.size, self.proofs[seq], checkpoint.root)
        ]

    def extends(self, kept: Checkpoint, covering: Checkpoint | None) -> bool:
        return (
            covering is not None
            and self.consistency is not None
            and is_valid_consistency(kept.size, covering.size, kept.root, covering.root, self.consistency)
        )

    def held(self) -> int:
        return self.count()

    def tokens(self, note: SignedNote, checkpoint: Checkpoint) -> tuple[list[tuple[str, bytes]], str]:
        return self.ledger.timestamp_tokens(note.text, checkpoint.size)


def _keyring_upto(entries: dict[int, StoredEntry], size: int) -> Keyring | None:
    return replay_keyring(keyring_changes(entries.values(), below=size), verify_signatures=True)


def flat_source(ledger: LedgerSource, receipt: StoredEntry, policy: Transparency) -> FlatSource | str:
    """The receipt's history in ``ledger`` with its proofs, or why it cannot be checked by
    proof (no signed checkpoint covers the receipt; the stored tree lacks nodes).
    """
    newest = ledger.newest_checkpoint()
    if newest is None or newest[0] <= receipt.seq:
        return "no signed checkpoint covers entry %d" % receipt.seq
    size, text = newest
    entries: dict[int, StoredEntry] = {receipt.seq: receipt}
    broken: list[Defect] = []
    # The task's entries: the receipt's signed task_prev chain, and whatever the index holds
    # besides. An entry the chain skipped is then walked, and the entry after it fails 2d.
    task = receipt.task
    if task is not None:
        entries.update((e.seq, e) for e in ledger.iter_entries(upto=receipt.seq, task=task))
    # The keyring up to the checkpoint: what the index holds, and both signed ring chains
    # (from the receipt and from the checkpoint's last entry), so that neither can skip a change.
    for kind in KEYRING_KIND_NAMES:
        entries.update((e.seq, e) for e in ledger.iter_entries(upto=size - 1, kind=kind))
    # The checkpoint's last entry is read and proven too: a ledger cut short fails here.
    last = ledger.by_seq(size - 1)
    if last is None:
        broken.append(
            Defect(
                "checkpoint-root",
                "the checkpoint at size %d signed entries the ledger no longer holds (it holds %d)"
                % (size, ledger.count()),
            )
        )
    else:
        entries[last.seq] = last
    _named_retention(ledger, text, size, entries, broken)
    for start in [receipt] + ([last] if last is not None else []):
        _follow(ledger, start, "ring", entries, broken)
    _follow(ledger, receipt, "task_prev", entries, broken)
    nodes = CachedNodes(StoredNodes(ledger))
    try:
        proofs = {seq: inclusion_proof(nodes, seq, size) for seq in entries if seq < size}
        consistency = None
        if policy.since is not None:
            try:
                kept_size = parse_checkpoint(parse_note(policy.since).text).size
            except ReceiptsError:
                kept_size = 0  # step 8 reports a kept checkpoint that is not one
            if kept_size > size:
                return "the checkpoint you kept (size %d) is newer than the ledger's newest (%d)" % (kept_size, size)
            if kept_size > 0:
                consistency = consistency_proof(nodes, kept_size, size)
    except MissingNode:
        return (
            "the ledger's stored Merkle tree lacks nodes below size %d (an older ledger: open it with `ledger`)" % size
        )
    except ReceiptsError as exc:
        return str(exc)
    entries = {seq: e for seq, e in entries.items() if seq < size}
    return FlatSource(ledger, entries, (size, text), proofs, consistency, broken)


def _named_retention(
    ledger: LedgerSource, note: str, size: int, entries: dict[int, StoredEntry], broken: list[Defect]
) -> None:
    """The retention policy entry the checkpoint's retention line names, added to the
    entries read (so it is proven and its signature checked); a line that is malformed or
    names no such entry below the checkpoint's size is `checkpoint-retention`.
    """
    try:
        named = named_retention(parse_checkpoint(parse_note(note).text).extensions)
    except ReceiptsError as exc:
        broken.append(Defect("checkpoint-retention", "the checkpoint's retention line is malformed: %s" % exc))
        return
    if named is None or named.seq is None:
        return
    found = ledger.named_policy(named, size)
    if found is None:
        broken.append(
            Defect(
                "checkpoint-retention",
                "the checkpoint at size %d names entry %d as its retention policy, which the ledger does not hold there"
                % (size, named.seq),
            )
        )
        return
    entries[found.seq] = found
    _follow(ledger, found, "ring", entries, broken)


def _follow(
    ledger: LedgerSource, start: StoredEntry, pointer: str, entries: dict[int, StoredEntry], broken: list[Defect]
) -> None:
    """Add every entry a signed back-pointer chain names; a pointer to no earlier entry is a defect."""
    stored = start
    while True:
        try:
            target: Digest | None = getattr(decode_entry(stored.entry), pointer)
        except ReceiptsError:
            return  # the walk names an entry that does not decode
        if target is None:
            return
        found = ledger.by_hash(target)
        if found is None or found.seq >= stored.seq:
            broken.append(
                Defect(
                    "ring-link" if pointer == "ring" else "task-link",
                    "entry %d points (%s) to %s, which is no earlier entry of the ledger"
                    % (stored.seq, pointer, target.short()),
                    stored.seq,
                )
            )
            return
        entries[found.seq] = found
        stored = found
