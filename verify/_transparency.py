"""Step 8: the receipt's entries are in a tree whose head the ledger signed, and the
ledger only ever grew since a checkpoint the auditor kept."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from receipts import (
    KEYRING_KINDS,
    Body,
    Checkpoint,
    CompactRange,
    Entry,
    Keyring,
    ReceiptsError,
    Role,
    SignedNote,
    cosignature_time,
    decode_body,
    decode_entry,
    is_valid_note_signature,
    leaf_hash,
    parse_checkpoint,
    parse_note,
    parse_public_key_blob,
    parse_public_key_line,
    replay_keyring,
)

from ._errors import CannotVerify
from ._result import Defect, Finding
from ._tsa import ledger_tokens, timestamp_finding

if TYPE_CHECKING:
    from ._source import LedgerSource

__all__ = [
    "Transparency",
    "WitnessKey",
    "ledger_transparency",
    "checkpoint_signer",
    "witnessed",
    "read_checkpoint",
    "keyring_entries",
]


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness the auditor trusts: its name and raw 32-byte Ed25519 key."""

    name: str
    public_key: bytes

    @classmethod
    def parse(cls, value: str) -> WitnessKey:
        """``NAME ssh-ed25519 AAAA...`` or ``NAME PATH.pub``. Raises `CannotVerify`."""
        name, _, line = value.strip().partition(" ")
        if not name or not line:
            raise CannotVerify("a witness is 'NAME ssh-ed25519 AAAA...' (or 'NAME PATH.pub')")
        if not line.startswith("ssh-"):
            try:
                line = Path(line).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CannotVerify("cannot read witness key %s: %s" % (line, exc)) from None
        try:
            blob, _ = parse_public_key_line(line)
            return cls(name, parse_public_key_blob(blob))
        except ReceiptsError as exc:
            raise CannotVerify("witness key of %s: %s" % (name, exc)) from None


@dataclass(frozen=True, slots=True)
class Transparency:
    """What the auditor asks of the log beyond the chain itself."""

    since: str | None = None  # a checkpoint note the auditor kept
    require_checkpoint: bool = False
    witnesses: tuple[WitnessKey, ...] = ()
    quorum: int = 0
    tsa_roots: tuple[bytes, ...] = ()  # PEM certificates of the time-stamping authorities the auditor pins
    # Auditing witnesses (§9): their cosignature on a covering checkpoint certifies that every
    # entry up to it passed a chain audit, which is what proves a task complete (§8.1a).
    auditors: tuple[WitnessKey, ...] = ()
    audited_quorum: int = 0
    # With auditors, an uncertified task is a defect (`completeness-unproven`); a caller that
    # can prove completeness another way (the gate auditing the store) asks only to be told.
    require_complete: bool = True

    def __post_init__(self) -> None:
        if self.quorum > len(self.witnesses) or self.audited_quorum > len(self.auditors):
            raise CannotVerify("a quorum needs at least that many trusted keys")


def keyring_entries(source: LedgerSource, upto: int) -> Iterator[tuple[Entry, Body]]:
    # By the kind column, as before: a forged column is the chain walk's to report.
    kinds = sorted(k.value for k in KEYRING_KINDS)
    found = [e for kind in kinds for e in source.iter_entries(upto=upto - 1, kind=kind)]
    for stored in sorted(found, key=lambda e: e.seq):
        try:
            entry = decode_entry(stored.entry)
            yield entry, decode_body(entry.kind, stored.body)
        except ReceiptsError:
            continue  # the chain walk reports it; an undecodable change grants nothing here


def checkpoint_signer(ring: Keyring | None, note: SignedNote, origin: str, size: int) -> str | None:
    """The seal or admin key that signed this checkpoint while valid at its size, if any."""
    for state in ring or ():
        if not ({Role.SEAL, Role.ADMIN} & set(state.spec.roles)) or state.available_from > max(size - 1, 0):
            continue
        if state.revoked_at is not None and state.revoked_at < size - 1:
            continue
        if is_valid_note_signature(note, origin, parse_public_key_blob(state.spec.public_key)):
            return "%s (%s)" % (state.spec.name, state.key_id)
    return None


def witnessed(note: SignedNote, size: int, signer: str | None, policy: Transparency) -> tuple[list[Defect], str]:
    """The witness quorum's defect (if the trusted witnesses whose cosignature verifies are
    too few), and the one line that describes the checkpoint used."""
    names = [w.name for w in policy.witnesses if cosignature_time(note, w.name, w.public_key) is not None]
    defects = []
    if len(names) < policy.quorum:
        defects.append(
            Defect(
                "witness-quorum",
                "the checkpoint has %d valid witness cosignature(s); %d are required" % (len(names), policy.quorum),
            )
        )
    return defects, "size %d signed by %s; witnessed by %s" % (
        size,
        signer or "nobody valid",
        ", ".join(names) or "none",
    )


def audited_by(note: SignedNote, policy: Transparency) -> tuple[str, ...]:
    """The auditing witnesses whose cosignature on this checkpoint verifies."""
    return tuple(w.name for w in policy.auditors if cosignature_time(note, w.name, w.public_key) is not None)


def read_checkpoint(text: str, origin: str) -> tuple[SignedNote, Checkpoint] | str:
    try:
        note = parse_note(text)
        cp = parse_checkpoint(note.text)
    except ReceiptsError as exc:
        return "malformed checkpoint: %s" % exc
    if cp.origin != origin:
        return "checkpoint is for log %r, not %r" % (cp.origin, origin)
    return note, cp


def _roots(source: LedgerSource, sizes: set[int], count: int) -> dict[int, bytes]:
    """The tree's root at each size that the ledger reaches, its leaves folded into a
    compact range as they stream past (memory does not grow with the ledger)."""
    leaves = CompactRange()
    roots = {0: leaves.root()} if 0 in sizes else {}
    for data in source.entry_bytes(min(max(sizes, default=0), count)):
        leaves.append(leaf_hash(data))
        if leaves.size in sizes:
            roots[leaves.size] = leaves.root()
    return roots


def ledger_transparency(
    source: LedgerSource,
    origin: str,
    receipt_seq: int,
    policy: Transparency,
    roots: dict[int, bytes] | None = None,
    ring: Keyring | None = None,
) -> Finding:
    """Step 8 on a whole ledger: the newest checkpoint covering ``receipt_seq`` (-1: any)
    is signed by a valid seal or admin key and its root is recomputed from the entries; a
    kept checkpoint (``policy.since``) is still a prefix of the ledger. A chain audit,
    which folded the leaves and replayed the keyring as it walked, passes both in."""
    defects: list[Defect] = []
    warnings: list[str] = []
    stored = [(size, text) for size, text in source.checkpoints() if size > receipt_seq]
    kept = read_checkpoint(policy.since, origin) if policy.since is not None else None
    if isinstance(kept, str):
        # A kept checkpoint that is not one, or is another log's, is bad input: nothing was checked.
        raise CannotVerify("--since: %s" % kept)
    sizes = [size for size, _ in stored[-1:]] + ([kept[1].size] if kept else [])
    count = source.count()
    if roots is None:
        roots = _roots(source, set(sizes), count)
    if ring is None:
        ring = replay_keyring(
            keyring_entries(source, max(max(sizes, default=0), receipt_seq + 1)), verify_signatures=True
        )

    def root_at(size: int) -> bytes | None:
        return roots.get(size) if size <= count else None

    used = None
    certified: tuple[str, ...] = ()
    # Witness quorums of the checkpoints that cover the receipt: any one that meets the quorum
    # suffices (a kept checkpoint is proven to be a prefix of the newest one below).
    quorums: list[list[Defect]] = []
    if not stored:
        if policy.require_checkpoint:
            defects.append(Defect("no-checkpoint", "no signed checkpoint covers entry %d" % receipt_seq))
        else:
            warnings.append(
                "no signed checkpoint covers this receipt yet: transparency not checked (run `ledger checkpoint`)"
            )
    else:
        size, text = stored[-1]
        read = read_checkpoint(text, origin)
        if isinstance(read, str):
            defects.append(Defect("checkpoint-malformed", read))
        else:
            note, cp = read
            signer = checkpoint_signer(ring, note, origin, cp.size)
            if signer is None or cp.size != size:
                defects.append(
                    Defect(
                        "checkpoint-signature",
                        "the checkpoint at size %d is not signed by a valid seal or admin key of this ledger" % size,
                    )
                )
            if root_at(cp.size) != cp.root:
                defects.append(
                    Defect(
                        "checkpoint-root",
                        "the ledger's entries do not hash to the root its checkpoint at size %d signed%s"
                        % (cp.size, " (it holds only %d entries)" % count if count < cp.size else ""),
                    )
                )
            quorum, used = witnessed(note, cp.size, signer, policy)
            quorums.append(quorum)
            certified = audited_by(note, policy)
            tokens, why = ledger_tokens(source, note.text, cp.size)
            stamped, said, line = timestamp_finding(tokens, note.text, cp.size, policy, why)
            defects += stamped
            warnings += said
            used = "%s; %s" % (used, line) if line else used
    if kept is not None:
        note, cp = kept
        kept_signer = checkpoint_signer(ring, note, origin, cp.size)
        if cp.size > receipt_seq:
            quorum, line = witnessed(note, cp.size, kept_signer, policy)
            quorums.append(quorum)
            certified = max(certified, audited_by(note, policy), key=len)
            used = line if used is None else "%s; kept checkpoint %s" % (used, line)
        if kept_signer is None:
            defects.append(
                Defect(
                    "since-checkpoint",
                    "the checkpoint you kept is not signed by a valid seal or admin key of this ledger",
                )
            )
        if root_at(cp.size) != cp.root:
            defects.append(
                Defect(
                    "history-rewritten",
                    "the ledger is not an extension of the checkpoint you kept at size %d: its history was rewritten%s"
                    % (cp.size, " or cut short" if count < cp.size else ""),
                )
            )
    if policy.quorum and all(quorums):  # every covering checkpoint falls short, or there is none
        defects += (
            quorums[0]
            if quorums
            else [
                Defect(
                    "witness-quorum",
                    "no checkpoint covering entry %d carries the %d witness cosignature(s) required"
                    % (receipt_seq, policy.quorum),
                )
            ]
        )
    return Finding(tuple(defects), tuple(warnings), used, certified)
