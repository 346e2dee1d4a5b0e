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

__all__ = ["RetentionPolicy", "CheckpointTimestamp", "TIMESTAMP_MEDIA_TYPE"]


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
