"""Step 8, written once: the receipt's entries are in a tree whose head the ledger signed,
and the ledger only ever grew since a checkpoint the auditor kept (docs/format.md §8).

A whole ledger, a receipt's history read by proof and a bundle differ only in how they
prove entries into a checkpoint's root; each gives that as a `CheckpointProof`, and
`check_checkpoints` applies the rest (signer, witnesses, time-stamp, kept checkpoint).
"""

from __future__ import annotations

from typing import Protocol

from receipts import (
    Checkpoint,
    Keyring,
    ReceiptsError,
    Role,
    SignedNote,
    is_valid_note_signature,
    parse_checkpoint,
    parse_note,
    parse_public_key_blob,
)

from ._errors import CannotVerify
from ._policy import Transparency, audited_by, log_in_policy, witnessed
from ._result import Defect, Finding

__all__ = ["CheckpointProof", "check_checkpoints", "checkpoint_signer", "read_checkpoint"]


class CheckpointProof(Protocol):
    """How one source proves its entries into a signed checkpoint: the part of step 8 that
    differs between a whole ledger, a receipt read by proof and a bundle.
    """

    def ring_at(self, size: int) -> Keyring | None:
        """The keyring as the entries below ``size`` replay it, signatures checked.

        Args:
            size: a checkpoint's tree size.

        Returns:
            The keyring, or None when the entries replay to none. It MUST NOT include a
            change the source did not prove into a signed root.
        """
        ...

    def prove(self, checkpoint: Checkpoint, receipt_seq: int) -> list[Defect]:
        """Prove the entries the verdict rests on into ``checkpoint``'s root.

        Args:
            checkpoint: the covering checkpoint, its signer already being checked.
            receipt_seq: the receipt's position (-1: a chain audit, no receipt).

        Returns:
            One defect per entry (or tree) that is not proven; none when all are. It MUST
            NOT trust a stored tree node or index column for what it proves.
        """
        ...

    def extends(self, kept: Checkpoint, covering: Checkpoint | None) -> bool:
        """Whether the log is an extension of ``kept``.

        Args:
            kept: the checkpoint the auditor kept (`Transparency.since`).
            covering: the covering checkpoint as 8a read it (None: there is none, or it
                does not parse).

        Returns:
            True only when the kept root is proven to be a prefix of the log.

        Raises:
            CannotVerify: this source cannot prove consistency at all.
        """
        ...

    def held(self) -> int:
        """How many entries the source holds (only to say a log was cut short)."""
        ...

    def tokens(self, note: SignedNote, checkpoint: Checkpoint) -> tuple[list[tuple[str, bytes]], str]:
        """The RFC 3161 tokens the source carries for this checkpoint, each with a label,
        and why there are none when there are none. Tokens are self-authenticating: the
        pinned authority's signature over the note is what counts, not who carried them.
        """
        ...


def checkpoint_signer(ring: Keyring | None, note: SignedNote, origin: str, size: int) -> str | None:
    """The seal or admin key that signed this checkpoint while valid at its size, if any."""
    # Valid at size N: active in the keyring the first N entries replay to, the one its
    # writer signs under (format.md §9): added by an entry before N (a key added by the
    # last entry may sign at once), and not revoked by one.
    for state in ring or ():
        if not ({Role.SEAL, Role.ADMIN} & set(state.spec.roles)) or state.available_from > size:
            continue
        if state.revoked_at is not None and state.revoked_at < size:
            continue
        if is_valid_note_signature(note, origin, parse_public_key_blob(state.spec.public_key)):
            return "%s (%s)" % (state.spec.name, state.key_id)
    return None


def read_checkpoint(text: str, origin: str) -> tuple[SignedNote, Checkpoint] | str:
    """A signed checkpoint note of the log ``origin``, or why the text is not one."""
    try:
        note = parse_note(text)
        cp = parse_checkpoint(note.text)
    except ReceiptsError as exc:
        return "malformed checkpoint: %s" % exc
    if cp.origin != origin:
        return "checkpoint is for log %r, not %r" % (cp.origin, origin)
    return note, cp


def check_checkpoints(
    proof: CheckpointProof, covering: tuple[int, str] | None, origin: str, receipt_seq: int, policy: Transparency
) -> Finding:
    """Step 8 over one source.

    Steps:
      8a. the covering checkpoint is this log's and signed by a seal or admin key valid at its size;
      8b. the entries are proven into its root, as the source proves them;
      8c. a kept checkpoint (``policy.since``) is one of this log, signed, and the log extends it;
      8e. witnesses, auditing witnesses and time-stamps are counted, and some checkpoint
          covering the receipt meets the witness quorum.
    (8d, completeness, is the caller's: it needs the auditing witnesses found here.)

    Args:
        proof: how the source proves entries into a root.
        covering: the newest stored checkpoint that covers the receipt (the size it is
            filed under, its note), or None.
        origin: the log's name, from its genesis entry.
        receipt_seq: the receipt's position (-1: a chain audit, any checkpoint covers).
        policy: what the auditor asks.

    Returns:
        The defects and warnings, the line describing the checkpoint used, and the
        auditing witnesses that certified it.

    Raises:
        CannotVerify: the kept checkpoint is not one of this log, or the source cannot
            prove consistency with it.
    """
    # 8c. A kept checkpoint that is not one, or is another log's, is bad input.
    kept = read_checkpoint(policy.since, origin) if policy.since is not None else None
    if isinstance(kept, str):
        raise CannotVerify("--since: %s" % kept)
    # 8a, 8b, and 8e for the covering checkpoint.
    read = read_checkpoint(covering[1], origin) if covering is not None else None
    if isinstance(read, str):
        found, quorum = Finding((Defect("checkpoint-malformed", read),)), None
    elif covering is not None and read is not None:
        found, quorum = _covering(proof, covering[0], read, origin, receipt_seq, policy)
    elif policy.require_checkpoint:
        found, quorum = Finding((Defect("no-checkpoint", "no signed checkpoint covers entry %d" % receipt_seq),)), None
    else:
        said = "no signed checkpoint covers this receipt yet: transparency not checked (run `ledger checkpoint`)"
        found, quorum = Finding(warnings=(said,)), None
    # 8c.
    newest = read[1] if isinstance(read, tuple) else None
    also, kept_quorum = (Finding(), None) if kept is None else _kept(proof, kept, newest, origin, receipt_seq, policy)
    # 8e. Any one covering checkpoint that meets the quorum suffices (a kept one is proven a prefix).
    quorums = [q for q in (quorum, kept_quorum) if q is not None]
    short = quorums[0] if quorums else [_no_quorum(receipt_seq, policy)]
    used = found.checkpoint
    if also.checkpoint is not None:
        used = also.checkpoint if used is None else "%s; kept checkpoint %s" % (used, also.checkpoint)
    return Finding(
        (*found.defects, *also.defects, *(short if policy.wants_quorum and all(quorums) else ())),
        found.warnings,
        used,
        max(found.certified_by, also.certified_by, key=len),
        found.notes,
    )


def _covering(
    proof: CheckpointProof,
    filed: int,
    read: tuple[SignedNote, Checkpoint],
    origin: str,
    receipt_seq: int,
    policy: Transparency,
) -> tuple[Finding, list[Defect] | None]:
    note, cp = read
    defects = []
    # 8a. Signed by a key valid at its size, and filed under the size it signs.
    signer = checkpoint_signer(proof.ring_at(cp.size), note, origin, cp.size)
    if signer is None or cp.size != filed:
        message = "the checkpoint at size %d is not signed by a valid seal or admin key of this ledger"
        defects.append(Defect("checkpoint-signature", message % filed))
    # 8b. The entries, proven into its root.
    defects += proof.prove(cp, receipt_seq)
    # 8e. Witnesses, auditing witnesses, time-stamp; a tlog-policy's log lines bind it whatever its quorum.
    quorum, used = witnessed(note, cp.size, signer, policy)
    defects += log_in_policy(note, policy)
    # 8f. The log as published to everyone holds this checkpoint's tree.
    if policy.published is not None:
        defects += policy.published.covers(cp.size, cp.root)
    tokens, why = proof.tokens(note, cp)
    stamped, said, line = _timestamps(tokens, note.text, cp.size, policy, why)
    return Finding(
        (*defects, *stamped),
        tuple(said),
        "%s; %s" % (used, line) if line else used,
        audited_by(note, policy) if cp.size > receipt_seq else (),
    ), quorum


def _timestamps(
    tokens: list[tuple[str, bytes]], text: str, size: int, policy: Transparency, why: str
) -> tuple[list[Defect], list[str], str | None]:
    """`verify._tsa.timestamp_finding`, its reader loaded only when there is a token or a
    pinned authority (with neither there is nothing to find).
    """
    if not tokens and not policy.tsa_roots:
        return [], [], None
    from ._tsa import timestamp_finding

    return timestamp_finding(tokens, text, size, policy, why)


def _kept(
    proof: CheckpointProof,
    kept: tuple[SignedNote, Checkpoint],
    covering: Checkpoint | None,
    origin: str,
    receipt_seq: int,
    policy: Transparency,
) -> tuple[Finding, list[Defect] | None]:
    note, cp = kept
    defects = []
    signer = checkpoint_signer(proof.ring_at(cp.size), note, origin, cp.size)
    if signer is None:
        defects.append(
            Defect(
                "since-checkpoint", "the checkpoint you kept is not signed by a valid seal or admin key of this ledger"
            )
        )
    if not proof.extends(cp, covering):
        defects.append(
            Defect(
                "history-rewritten",
                "the ledger is not an extension of the checkpoint you kept at size %d: its history was rewritten%s"
                % (cp.size, " or cut short" if proof.held() < cp.size else ""),
            )
        )
    if cp.size <= receipt_seq:
        return Finding(tuple(defects)), None  # it does not cover the receipt: its witnesses do not count
    quorum, line = witnessed(note, cp.size, signer, policy)
    return Finding(tuple(defects), (), line, audited_by(note, policy)), quorum


def _no_quorum(receipt_seq: int, policy: Transparency) -> Defect:
    return Defect(
        "witness-quorum",
        "no checkpoint covering entry %d carries the witness cosignatures required (%s)"
        % (receipt_seq, policy.quorum_text()),
    )
