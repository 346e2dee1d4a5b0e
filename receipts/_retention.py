"""Retention (issue 16): a policy, signed by an admin into the chain, that lets evidence
no verdict is derived from be deleted once it is old enough, except for tasks under a
legal hold. The chain, its tree and its checkpoints are never pruned; every verdict still
re-derives from the documents that stay.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._digest import Digest
from ._errors import FormatError
from ._model import FORMAT_VERSION, EvidenceRef, TierRecord, check_task_id

__all__ = [
    "RetentionPolicy",
    "CheckpointTimestamp",
    "TIMESTAMP_MEDIA_TYPE",
    "RETENTION_EXTENSION",
    "NamedRetention",
    "retention_extension",
    "named_retention",
]


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Evidence older than ``evidence_max_age_s`` (by its record's ``created``) may be
    removed, unless a verdict is derived from it or its task is in ``holds``.
    """

    evidence_max_age_s: int
    holds: tuple[str, ...] = ()
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported retention policy version %r" % (self.version,))
        age = self.evidence_max_age_s
        if isinstance(age, bool) or not isinstance(age, int) or not 0 < age < (1 << 53):
            raise FormatError("evidence_max_age_s must be a positive number of seconds")
        if not isinstance(self.holds, tuple) or list(self.holds) != sorted(set(self.holds)):
            raise FormatError("legal holds are task ids, sorted and each once")
        for task in self.holds:
            check_task_id(task)

    def removable(self, record: TierRecord, ref: EvidenceRef, now: int) -> bool:
        """Whether this policy lets ``ref`` of ``record`` be gone at time ``now``."""
        # Imported here: every decode of an entry loads this module, and the verdict rules
        # behind is_derivation_input are only needed when something may be pruned.
        from ._inputs import is_derivation_input

        return (
            not is_derivation_input(record.tier, ref)
            and record.task_id not in self.holds
            and record.created + self.evidence_max_age_s <= now
        )


RETENTION_EXTENSION = "receipt-ledger/retention"


@dataclass(frozen=True, slots=True)
class NamedRetention:
    """What a checkpoint's retention line says (format.md §9): the newest retention policy
    entry below its size that an admin validly signed, by position and entry hash, or
    that there is none (``seq`` and ``entry`` both None).
    """

    seq: int | None
    entry: Digest | None

    def __post_init__(self) -> None:
        if (self.seq is None) != (self.entry is None):
            raise FormatError("a retention line names both a position and an entry hash, or neither")
        if self.seq is not None and (isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 1):
            raise FormatError("a retention line's position is a positive integer (the genesis is no policy)")


def retention_extension(named: NamedRetention) -> str:
    """The checkpoint extension line for ``named``: ``receipt-ledger/retention SEQ blake3:HEX``
    or ``receipt-ledger/retention none``.
    """
    if named.seq is None or named.entry is None:
        return RETENTION_EXTENSION + " none"
    return "%s %d %s" % (RETENTION_EXTENSION, named.seq, named.entry)


def named_retention(extensions: tuple[str, ...]) -> NamedRetention | None:
    """The retention line among a checkpoint's extension lines; None when it carries none
    (a checkpoint signed before the line existed). Other extension lines are ignored.

    Raises:
        FormatError: a line starting with the prefix is malformed, or there are two.
    """
    lines = [e for e in extensions if e == RETENTION_EXTENSION or e.startswith(RETENTION_EXTENSION + " ")]
    if not lines:
        return None
    if len(lines) > 1:
        raise FormatError("a checkpoint carries one retention line at most")
    words = lines[0].split(" ")
    if words[1:] == ["none"]:
        return NamedRetention(None, None)
    if len(words) != 3 or not words[1].isascii() or not words[1].isdigit() or words[1] != str(int(words[1])):
        raise FormatError("a retention line is `%s none` or `%s SEQ blake3:HEX`" % ((RETENTION_EXTENSION,) * 2))
    return NamedRetention(int(words[1]), Digest.parse(words[2]))


TIMESTAMP_MEDIA_TYPE = "application/timestamp-reply"


@dataclass(frozen=True, slots=True)
class CheckpointTimestamp:
    """An RFC 3161 time-stamp over a checkpoint: the checkpoint's tree ``size``, the
    content digest of its signed text (what the authority stamped, by its SHA-256), and
    the content digest and size of the authority's response, stored as a blob.
    """

    size: int
    checkpoint: Digest
    token: Digest
    token_size: int
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported timestamp version %r" % (self.version,))
        for value, what in ((self.size, "size"), (self.token_size, "token size")):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < (1 << 53):
                raise FormatError("a timestamp's %s is a positive integer" % what)
        if not isinstance(self.checkpoint, Digest) or not isinstance(self.token, Digest):
            raise FormatError("a timestamp names its checkpoint and token by Digest")
