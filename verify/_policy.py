"""What the auditor asks of the log beyond the chain itself (docs/format.md §8 step 8, §9):
the witnesses it trusts and their quorum, the auditing witnesses whose cosignature proves
a task complete, the time-stamping authorities it pins, and a checkpoint it kept.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from receipts import (
    ReceiptsError,
    SignedNote,
    cosignature_time,
    parse_public_key_blob,
    parse_public_key_line,
)

from ._errors import CannotVerify
from ._result import Defect

if TYPE_CHECKING:  # the tile reader loads urllib, and a tlog-policy its parser: only where asked
    from receipts import TlogPolicy

    from ._tiles import PublishedLog

__all__ = ["Transparency", "WitnessKey", "witnessed", "log_in_policy", "audited_by", "cosignature_statuses"]


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness the auditor trusts: its name and raw 32-byte Ed25519 key."""

    name: str
    public_key: bytes

    @classmethod
    def parse(cls, value: str) -> WitnessKey:
        """A witness from the command line.

        Args:
            value: ``NAME ssh-ed25519 AAAA...`` or ``NAME PATH.pub``.

        Returns:
            The witness.

        Raises:
            CannotVerify: the value names no witness, or its key cannot be read.
        """
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
    # A C2SP tlog-policy (`verify --policy FILE`): its quorum over its witnesses, besides
    # any `quorum` of `witnesses` above.
    tlog_policy: TlogPolicy | None = None
    # The log as published in tiles: the covering checkpoint must be its prefix (8f).
    published: PublishedLog | None = None
    # With auditors, an uncertified task is a defect (`completeness-unproven`); a caller that
    # can prove completeness another way (the gate auditing the store) asks only to be told.
    require_complete: bool = True

    @property
    def wants_quorum(self) -> bool:
        """Whether some witness cosignature is required (a count, or a policy's quorum)."""
        return self.quorum > 0 or (self.tlog_policy is not None and self.tlog_policy.quorum != "none")

    def quorum_text(self) -> str:
        parts = ["%d of --witness" % self.quorum] if self.quorum else []
        if self.tlog_policy is not None:
            parts.append("the policy's quorum %s" % self.tlog_policy.quorum)
        return " and ".join(parts) or "none"

    def __post_init__(self) -> None:
        if self.quorum > len(self.witnesses) or self.audited_quorum > len(self.auditors):
            raise CannotVerify("a quorum needs at least that many trusted keys")
        # A quorum counts parties: a witness given twice, or one key under two names, would
        # let one cosigner count twice (§8.1a, §9).
        for what, keys in (("witnesses", self.witnesses), ("auditing witnesses", self.auditors)):
            for field in ("name", "public_key"):
                if len({getattr(k, field) for k in keys}) != len(keys):
                    raise CannotVerify(
                        "the %s: one %s is given twice (each witness counts once toward a quorum)"
                        % (what, "name" if field == "name" else "key")
                    )


def witnessed(note: SignedNote, size: int, signer: str | None, policy: Transparency) -> tuple[list[Defect], str]:
    """The witness quorum's defect (if the trusted witnesses whose cosignature verifies are
    too few), and the one line that describes the checkpoint used.
    """
    names = [w.name for w in policy.witnesses if cosignature_time(note, w.name, w.public_key) is not None]
    defects = []
    if len(names) < policy.quorum:
        defects.append(
            Defect(
                "witness-quorum",
                "the checkpoint has %d valid witness cosignature(s); %d are required" % (len(names), policy.quorum),
            )
        )
    if policy.tlog_policy is not None:
        met, signed = policy.tlog_policy.witnessed(note)
        names += [n for n in signed if n not in names]
        if not met:
            defects.append(
                Defect(
                    "witness-quorum",
                    "the checkpoint's valid cosignatures (%s) do not meet the policy's quorum %s"
                    % (", ".join(signed) or "none", policy.tlog_policy.quorum),
                )
            )
    return defects, "size %d signed by %s; witnessed by %s" % (
        size,
        signer or "nobody valid",
        ", ".join(names) or "none",
    )


def log_in_policy(note: SignedNote, policy: Transparency) -> list[Defect]:
    """`log-not-in-policy` unless a tlog-policy's ``log`` lines name the checkpoint's origin
    and one of their keys signed it; checked whatever the quorum (``quorum none`` too).
    """
    if policy.tlog_policy is None or policy.tlog_policy.names_log_of(note):
        return []
    return [
        Defect(
            "log-not-in-policy",
            "the checkpoint's log %r is not one the policy's log lines name, or none of their keys signed it"
            % note.text.split("\n", 1)[0],
        )
    ]


def audited_by(note: SignedNote, policy: Transparency) -> tuple[str, ...]:
    """The auditing witnesses whose cosignature on this checkpoint verifies."""
    return tuple(w.name for w in policy.auditors if cosignature_time(note, w.name, w.public_key) is not None)


def cosignature_statuses(note: SignedNote, policy: Transparency) -> tuple[tuple[str, str], ...]:
    """What each signature line after the log's says, checked against the keys the auditor
    trusts: ``(name, status)`` with status ``verified`` (and the cosignature's UTC time),
    ``does not verify`` (a trusted name whose signature fails its key), or ``untrusted``
    (no key was given for that name: nothing was checked).

    Args:
        note: the signed checkpoint, its first signature the log's.
        policy: the witnesses and auditing witnesses the auditor trusts.

    Returns:
        One pair per cosignature line, in the note's order.
    """
    keys: dict[str, list[bytes]] = {}
    for w in (*policy.witnesses, *policy.auditors):
        keys.setdefault(w.name, []).append(w.public_key)
    for key_name, key in policy.tlog_policy.witnesses.values() if policy.tlog_policy else ():
        keys.setdefault(key_name, []).append(key)
    out = []
    for line in note.signatures[1:]:
        trusted = keys.get(line.name)
        if not trusted:
            out.append((line.name, "untrusted"))
            continue
        times = [t for key in trusted if (t := cosignature_time(note, line.name, key)) is not None]
        stamp = datetime.datetime.fromtimestamp(times[0], datetime.UTC).strftime("%Y-%m-%d %H:%M UTC") if times else ""
        out.append((line.name, "verified " + stamp if times else "does not verify"))
    return tuple(out)
