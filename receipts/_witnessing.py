"""The C2SP witness protocol and quorum policy, as texts and rules (docs/format.md §9b):
the `add-checkpoint` request body (writer and parser side by side), the witness's
decision on it from its kept state, and the `tlog-policy` file with its quorum rule.
Pure: the caller keeps the state, signs and talks HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._b64 import b64decode_canonical
from ._errors import FormatError, ReceiptsError
from ._formats import (
    COSIGNATURE_TYPE,
    ED25519_TYPE,
    Checkpoint,
    SignedNote,
    cosignature_time,
    is_valid_note_signature,
    parse_checkpoint,
    parse_note,
    parse_verifier_key,
)
from ._merkle import is_valid_consistency

__all__ = [
    "AddCheckpoint",
    "add_checkpoint_body",
    "parse_add_checkpoint",
    "WitnessAnswer",
    "witness_decision",
    "TlogPolicy",
    "parse_tlog_policy",
    "SIZE_MEDIA_TYPE",
]

SIZE_MEDIA_TYPE = "text/x.tlog.size"
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_MAX_PROOF = 63


@dataclass(frozen=True, slots=True)
class AddCheckpoint:
    """An `add-checkpoint` request: the size the log believes the witness holds, the
    consistency proof from it, and the signed checkpoint (as sent, and parsed).
    """

    old: int
    proof: tuple[bytes, ...]
    signed: SignedNote
    checkpoint: Checkpoint  # the note's text, parsed


def add_checkpoint_body(old: int, proof: Sequence[bytes], note: str) -> bytes:
    """The request body: ``old N``, one base64 hash per line, a blank line, the checkpoint."""
    import base64

    if old < 0 or len(proof) > _MAX_PROOF:
        raise FormatError("an add-checkpoint request has a non-negative old size and at most 63 proof lines")
    lines = ["old %d\n" % old] + [base64.b64encode(h).decode("ascii") + "\n" for h in proof]
    return ("".join(lines) + "\n" + note).encode("utf-8")


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """The request a body holds.

    Raises:
        FormatError: the body is not an old-size line, up to 63 proof hashes of 32 bytes,
            a blank line and a signed checkpoint.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError("an add-checkpoint request is UTF-8 text") from None
    head, sep, note = text.partition("\n\n")
    lines = head.split("\n")
    if not sep or not lines[0].startswith("old ") or _SIZE.fullmatch(lines[0][4:]) is None:
        raise FormatError("an add-checkpoint request starts with 'old N' and ends its proof with a blank line")
    proof = tuple(b64decode_canonical(line, "a consistency proof line") for line in lines[1:])
    if len(proof) > _MAX_PROOF or any(len(h) != 32 for h in proof):
        raise FormatError("a consistency proof has at most 63 hashes of 32 bytes")
    signed = parse_note(note)
    return AddCheckpoint(int(lines[0][4:]), proof, signed, parse_checkpoint(signed.text))


@dataclass(frozen=True, slots=True)
class WitnessAnswer:
    """What the witness answers: the HTTP status, why, the size it holds (409), and the
    state to keep (a 200 only).
    """

    status: int
    reason: str
    size: int | None = None
    keep: tuple[int, bytes] | None = None


def witness_decision(
    request: AddCheckpoint, log_keys: Mapping[str, Sequence[bytes]], held: Mapping[str, tuple[int, bytes]]
) -> WitnessAnswer:
    """The witness's rules, in the spec's order, on one request.

    Args:
        request: the parsed request.
        log_keys: each known origin's trusted Ed25519 keys.
        held: each origin's latest cosigned (size, root).

    Returns:
        404 unknown origin, 403 no trusted signature, 400 old size above the checkpoint's
        or a proof from size 0, 409 (with the held size) old size not the held one or the
        same size with another root, 422 a proof that does not verify, else 200 and the
        state to keep.
    """
    note, checkpoint = request.signed, request.checkpoint
    keys = log_keys.get(checkpoint.origin)
    if not keys:
        return WitnessAnswer(404, "unknown log %s" % checkpoint.origin)
    if not any(is_valid_note_signature(note, checkpoint.origin, key) for key in keys):
        return WitnessAnswer(403, "no signature by a trusted key of %s" % checkpoint.origin)
    if request.old > checkpoint.size:
        return WitnessAnswer(400, "old size %d is above the checkpoint's %d" % (request.old, checkpoint.size))
    size, root = held.get(checkpoint.origin, (0, b""))
    if request.old != size:
        return WitnessAnswer(409, "this witness holds size %d, not %d" % (size, request.old), size)
    if request.old == 0:
        if request.proof:
            return WitnessAnswer(400, "a proof from size 0 is empty")
    elif request.old == checkpoint.size:
        if checkpoint.root != root:
            return WitnessAnswer(409, "another root at the size this witness holds: a fork", size)
    elif not is_valid_consistency(request.old, checkpoint.size, root, checkpoint.root, list(request.proof)):
        return WitnessAnswer(422, "the consistency proof from size %d does not verify" % request.old)
    return WitnessAnswer(200, "cosigned", keep=(checkpoint.size, checkpoint.root))


@dataclass(frozen=True, slots=True)
class TlogPolicy:
    """A C2SP `tlog-policy`: the accepted logs' keys by origin, the witnesses' keys by
    their note names, the groups and the quorum.
    """

    logs: Mapping[str, tuple[bytes, ...]]
    witnesses: Mapping[str, tuple[str, bytes]]  # policy name -> (note key name, key)
    groups: Mapping[str, tuple[int, tuple[str, ...]]]  # name -> (threshold, members)
    quorum: str  # a witness or group name, or "none"
    witness_urls: Mapping[str, str]  # policy name -> submission prefix, where given

    def witnessed(self, note: SignedNote) -> tuple[bool, tuple[str, ...]]:
        """Whether the checkpoint's valid cosignatures meet the quorum, and the policy
        names of the witnesses whose cosignature verifies.
        """
        signed = tuple(
            name
            for name, (key_name, key) in self.witnesses.items()
            if cosignature_time(note, key_name, key) is not None
        )
        return self._met(self.quorum, frozenset(signed)), signed

    def names_log_of(self, note: SignedNote) -> bool:
        """Whether the checkpoint is of a log this policy names (its origin is a `log`
        line's name) and one of that log's keys signed it; a policy with no `log` line
        names any log.
        """
        if not self.logs:
            return True
        origin = note.text.split("\n", 1)[0]
        return any(is_valid_note_signature(note, origin, key) for key in self.logs.get(origin, ()))

    def _met(self, name: str, signed: frozenset[str]) -> bool:
        if name == "none":
            return True
        if name in self.witnesses:
            return name in signed
        threshold, members = self.groups[name]
        return sum(self._met(m, signed) for m in members) >= threshold


def parse_tlog_policy(text: str) -> TlogPolicy:
    """A policy file, every rule of the spec applied.

    Raises:
        FormatError: naming the line: a bad character, an unknown keyword, a bad or
            duplicate key, a name used before it is defined or twice in a group, a bad
            threshold, or not exactly one quorum line.
    """
    built = _PolicyBuilder()
    for number, raw in enumerate(text.split("\n"), 1):
        if any((c < "\x20" and c != "\t") or c == "\x7f" for c in raw):
            raise FormatError("policy line %d: a control character" % number)
        words = raw.replace("\t", " ").split()
        if not words or words[0].startswith("#"):
            continue
        try:
            built.line(words[0], words[1:])
        except ReceiptsError as exc:
            raise FormatError("policy line %d: %s" % (number, exc)) from None
    if built.quorum is None:
        raise FormatError("a policy has exactly one quorum line")
    return TlogPolicy(built.logs, built.witnesses, built.groups, built.quorum, built.urls)


class _PolicyBuilder:
    """The policy as its lines define it, one line at a time (names only backwards)."""

    def __init__(self) -> None:
        self.logs: dict[str, tuple[bytes, ...]] = {}
        self.witnesses: dict[str, tuple[str, bytes]] = {}
        self.groups: dict[str, tuple[int, tuple[str, ...]]] = {}
        self.quorum: str | None = None
        self.urls: dict[str, str] = {}
        self.keys: set[bytes] = set()

    def line(self, kind: str, args: list[str]) -> None:
        if kind == "log" and 1 <= len(args) <= 2:
            name, key, sig_type = parse_verifier_key(args[0])
            _fresh_key(key, self.keys, sig_type, ED25519_TYPE)
            self.logs[name] = (*self.logs.get(name, ()), key)
        elif kind == "witness" and 2 <= len(args) <= 3:
            _fresh_name(args[0], self.witnesses, self.groups)
            key_name, key, sig_type = parse_verifier_key(args[1])
            _fresh_key(key, self.keys, sig_type, COSIGNATURE_TYPE)
            self.witnesses[args[0]] = (key_name, key)
            if len(args) == 3:
                self.urls[args[0]] = args[2]
        elif kind == "group" and len(args) >= 3:
            _fresh_name(args[0], self.witnesses, self.groups)
            self.groups[args[0]] = _group(args[1], args[2:], self.witnesses, self.groups)
        elif kind == "quorum" and len(args) == 1:
            if self.quorum is not None:
                raise FormatError("a second quorum line")
            if args[0] != "none" and args[0] not in self.witnesses and args[0] not in self.groups:
                raise FormatError("quorum %s is not defined on a line above" % args[0])
            self.quorum = args[0]
        else:
            raise FormatError("not a log, witness, group or quorum line")


def _fresh_name(name: str, witnesses: Mapping[str, object], groups: Mapping[str, object]) -> None:
    if name == "none" or name in witnesses or name in groups:
        raise FormatError("name %s is reserved or already defined" % name)


def _fresh_key(key: bytes, seen: set[bytes], sig_type: int, want: int) -> None:
    if sig_type != want:
        raise FormatError("a %s key has signature type 0x%02x" % ("log" if want == ED25519_TYPE else "witness", want))
    if key in seen:
        raise FormatError("a duplicate key")
    seen.add(key)


def _group(
    threshold: str, members: list[str], witnesses: Mapping[str, object], groups: Mapping[str, object]
) -> tuple[int, tuple[str, ...]]:
    for member in members:
        if member not in witnesses and member not in groups:
            raise FormatError("group member %s is not defined on a line above" % member)
    if len(set(members)) != len(members):
        raise FormatError("a group lists a member twice")
    count = {"all": len(members), "any": 1}.get(threshold)
    if count is None:
        if _SIZE.fullmatch(threshold) is None or not 1 <= int(threshold) <= len(members):
            raise FormatError("a group's threshold is all, any, or 1 to its number of members")
        count = int(threshold)
    return count, tuple(members)
