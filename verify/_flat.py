"""A receipt checked on a ledger the way a bundle is checked (docs/format.md §8, "by
proof"): only the entries the receipt depends on are read, and each is proven into the
newest signed checkpoint by an inclusion proof built from the stored Merkle tree. The
stored nodes are not trusted: a wrong one makes a proof fail against the signed root."""

from __future__ import annotations

from typing import BinaryIO

from receipts import (
    KEYRING_KINDS,
    CachedNodes,
    Digest,
    EvidenceRef,
    Keyring,
    ReceiptsError,
    TierRecord,
    consistency_proof,
    decode_body,
    decode_entry,
    inclusion_proof,
    is_valid_consistency,
    is_valid_inclusion,
    leaf_hash,
    parse_checkpoint,
    parse_note,
    replay_keyring,
)

from ._errors import CannotVerify
from ._result import Defect, Finding
from ._source import LedgerSource, SparseEntries, StoredEntry
from ._transparency import Transparency, audited_by, checkpoint_signer, read_checkpoint, witnessed
from ._tsa import ledger_tokens, timestamp_finding

__all__ = ["FlatSource", "MissingNode", "StoredNodes", "flat_source"]

_KEYRING = tuple(sorted(k.value for k in KEYRING_KINDS))


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
    proofs. Evidence is read from the ledger's blob store."""

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
        self.excused_by_retention = False

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        return self.ledger.open_blob(digest)

    def redacted(self, digest: Digest) -> bool:
        return False

    def pruned(self, record: TierRecord, ref: EvidenceRef) -> str | None:
        # The policy in force is the newest retention entry, which only a walk proves newest
        # (no signed pointer names it): say so, and the verifier walks instead (§8.1).
        why = self.ledger.pruned(record, ref)
        if why is not None:
            self.excused_by_retention = True
        return why

    def checkpoints(self) -> list[tuple[int, str]]:
        return [(self.size, self.checkpoint_text)]

    def count(self) -> int:
        return self.ledger.count()

    def check_transparency(self, origin: str, ring: Keyring | None, receipt_seq: int, policy: Transparency) -> Finding:
        # 8a. (By proof, §8.1.) The checkpoint is this log's and signed by a seal or admin key valid
        # at its size, judged on the keyring replayed (signatures checked) up to that size.
        defects = list(self.broken)
        read = read_checkpoint(self.checkpoint_text, origin)
        if isinstance(read, str):
            return Finding((*defects, Defect("checkpoint-malformed", read)))
        note, cp = read
        at_size = _keyring_upto(self.entries, cp.size)
        signer = checkpoint_signer(at_size, note, origin, cp.size)
        if signer is None or cp.size != self.size:
            defects.append(
                Defect(
                    "checkpoint-signature",
                    "the checkpoint at size %d is not signed by a valid seal or admin key of this ledger" % self.size,
                )
            )
        # 8b. Every entry read is proven at its position into the signed root.
        for seq, stored in sorted(self.entries.items()):
            if not is_valid_inclusion(leaf_hash(stored.entry), seq, cp.size, self.proofs[seq], cp.root):
                defects.append(
                    Defect(
                        "inclusion",
                        "entry %d is not proven into the checkpoint at size %d (the entry or the stored tree was altered)"
                        % (seq, cp.size),
                    )
                )
        quorums = [witnessed(note, cp.size, signer, policy)]
        certified = audited_by(note, policy)
        tokens, why = ledger_tokens(self.ledger, note.text, cp.size)
        stamped, stamp_said, stamp_line = timestamp_finding(tokens, note.text, cp.size, policy, why)
        defects += stamped
        # 8c. A checkpoint the auditor kept is consistent with this one.
        if policy.since is not None:
            kept = read_checkpoint(policy.since, origin)
            if isinstance(kept, str):
                raise CannotVerify("--since: %s" % kept)
            kept_note, kept_cp = kept
            if checkpoint_signer(_keyring_upto(self.entries, kept_cp.size), kept_note, origin, kept_cp.size) is None:
                defects.append(
                    Defect(
                        "since-checkpoint",
                        "the checkpoint you kept is not signed by a valid seal or admin key of this ledger",
                    )
                )
            if self.consistency is None or not is_valid_consistency(
                kept_cp.size, cp.size, kept_cp.root, cp.root, self.consistency
            ):
                defects.append(
                    Defect(
                        "history-rewritten",
                        "the ledger is not an extension of the checkpoint you kept at size %d: its history was rewritten"
                        % kept_cp.size,
                    )
                )
            if kept_cp.size > receipt_seq:
                quorums.append(witnessed(kept_note, kept_cp.size, None, policy))
                certified = max(certified, audited_by(kept_note, policy), key=len)
        used = quorums[0][1] + ("; %s" % stamp_line if stamp_line else "")
        if policy.quorum and all(q for q, _ in quorums):
            defects += quorums[0][0]
        said = (
            "checked by proof: %d entries of the receipt's task and keyring proven into the checkpoint; the ledger's"
            " other %d entries were not read (`ledger verify --chain` audits them)"
            % (len(self.entries), max(self.count() - len(self.entries), 0)),
        )
        return Finding(tuple(defects), (*said, *stamp_said), used, certified)


def _keyring_upto(entries: dict[int, StoredEntry], size: int) -> Keyring | None:
    changes = []
    for seq in sorted(entries):
        stored = entries[seq]
        if seq < size and stored.kind in _KEYRING:
            try:
                entry = decode_entry(stored.entry)
                changes.append((entry, decode_body(entry.kind, stored.body)))
            except ReceiptsError:
                continue  # the walk names an entry that does not decode; it grants nothing
    return replay_keyring(changes, verify_signatures=True)


def flat_source(ledger: LedgerSource, receipt: StoredEntry, policy: Transparency) -> FlatSource | str:
    """The receipt's history in ``ledger`` with its proofs, or why it cannot be checked by
    proof (no signed checkpoint covers the receipt; the stored tree lacks nodes)."""
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
    for kind in _KEYRING:
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
