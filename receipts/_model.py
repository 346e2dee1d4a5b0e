"""The frozen data model. Encoding lives in `_codec`; this module only holds and validates."""

from __future__ import annotations

import datetime
import enum
import itertools
import re
from dataclasses import dataclass

from ._digest import Digest
from ._errors import FormatError

__all__ = [
    "FORMAT_VERSION",
    "Tier",
    "LADDER",
    "Verdict",
    "Role",
    "EvidenceRef",
    "TierRecord",
    "TierEntry",
    "LadderReceipt",
    "utc_text",
]

FORMAT_VERSION = 1
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")
_MAX_TEXT = 4096
MAX_EVIDENCE = 4096
MAX_PARENTS = 256


class Tier(enum.StrEnum):
    DETERMINISTIC = "deterministic"
    JUDGE = "judge"
    HUMAN = "human"


LADDER: tuple[Tier, ...] = (Tier.DETERMINISTIC, Tier.JUDGE, Tier.HUMAN)


class Verdict(enum.StrEnum):
    """Only PASS can make a ladder eligible. SKIP means consulted but did not rule;
    REVIEW and RETRY are the judge's and human's "not yet" answers.
    """

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    REVIEW = "review"
    RETRY = "retry"


class Role(enum.StrEnum):
    ADMIN = "admin"
    DETERMINISTIC = "deterministic"
    JUDGE = "judge"
    HUMAN = "human"
    SEAL = "seal"
    AGENT = "agent"


def check_task_id(task_id: object) -> str:
    if not isinstance(task_id, str) or _TASK_ID.fullmatch(task_id) is None:
        raise FormatError(
            "task id must be 1-128 characters of [A-Za-z0-9._:/@+-], starting alphanumeric: %r" % (task_id,)
        )
    return task_id


def check_text(value: object, what: str, *, empty_ok: bool = False, limit: int = _MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise FormatError("%s must be text" % what)
    if not empty_ok and not value:
        raise FormatError("%s must not be empty" % what)
    if len(value) > limit:
        raise FormatError("%s is longer than %d characters" % (what, limit))
    if any(ord(c) < 0x20 and c not in "\t\n" for c in value) or "\x7f" in value:
        raise FormatError("%s contains control characters" % what)
    return value


def check_time(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << 40):
        raise FormatError("%s must be a non-negative integer number of seconds" % what)
    return value


def utc_text(seconds: int) -> str:
    """A time in seconds as people read it in any log: ISO 8601, UTC (``2026-12-04T14:28:56Z``)."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_digest(value: object, what: str) -> None:
    if not isinstance(value, Digest):
        raise FormatError("%s must be a Digest" % what)


@dataclass(frozen=True, slots=True)
class EvidenceRef:
    """One piece of content-addressed evidence: which check produced it and its plain BLAKE3."""

    check_id: str
    digest: Digest
    size: int
    media_type: str

    def __post_init__(self) -> None:
        check_text(self.check_id, "evidence check id", limit=256)
        _check_digest(self.digest, "evidence digest")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not 0 <= self.size < (1 << 53):
            raise FormatError("evidence size must be a non-negative integer")
        if not isinstance(self.media_type, str) or _MEDIA_TYPE.fullmatch(self.media_type) is None:
            raise FormatError("evidence media type is not of the form type/subtype: %r" % (self.media_type,))


@dataclass(frozen=True, slots=True)
class TierRecord:
    """What one tier checked, on which candidate, under which config, and what it found.

    ``evidence_hash`` is stored, not derived, so that a verifier can name the defect
    when it does not match ``evidence``; build new records with `_codec.new_tier_record`.
    """

    task_id: str
    tier: Tier
    config_hash: Digest
    input_hash: Digest
    evidence: tuple[EvidenceRef, ...]
    evidence_hash: Digest
    verdict: Verdict
    confidence_bp: int | None
    verifier: str
    verifier_version: str
    environment: Digest
    parents: tuple[Digest, ...]
    created: int
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported tier record version %r" % (self.version,))
        check_task_id(self.task_id)
        if not isinstance(self.tier, Tier):
            raise FormatError("tier must be a Tier")
        if not isinstance(self.verdict, Verdict):
            raise FormatError("verdict must be a Verdict")
        for name in ("config_hash", "input_hash", "evidence_hash", "environment"):
            _check_digest(getattr(self, name), name)
        if not isinstance(self.evidence, tuple) or len(self.evidence) > MAX_EVIDENCE:
            raise FormatError("evidence must be a tuple of at most %d references" % MAX_EVIDENCE)
        if not all(isinstance(e, EvidenceRef) for e in self.evidence):
            raise FormatError("evidence must hold EvidenceRef values")
        if not isinstance(self.parents, tuple) or len(self.parents) > MAX_PARENTS:
            raise FormatError("parents must be a tuple of at most %d digests" % MAX_PARENTS)
        for parent in self.parents:
            _check_digest(parent, "parent")
        if self.confidence_bp is not None and (
            isinstance(self.confidence_bp, bool)
            or not isinstance(self.confidence_bp, int)
            or not 0 <= self.confidence_bp <= 10000
        ):
            raise FormatError("confidence must be an integer number of basis points in [0, 10000]")
        check_text(self.verifier, "verifier name", limit=256)
        check_text(self.verifier_version, "verifier version", limit=256)
        check_time(self.created, "created")


MAX_DECISIONS = 64


@dataclass(frozen=True, slots=True)
class TierEntry:
    """A receipt's slot for one tier: the records that ruled, or an explicit skip. The
    deterministic and judge tiers have one record; the human tier has each approving or
    rejecting key's latest decision on the candidate.
    """

    tier: Tier
    records: tuple[Digest, ...] = ()
    skip_reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tier, Tier):
            raise FormatError("tier must be a Tier")
        if not isinstance(self.records, tuple) or len(self.records) > MAX_DECISIONS:
            raise FormatError("tier entry records must be a tuple of at most %d digests" % MAX_DECISIONS)
        if bool(self.records) == (self.skip_reason is not None):
            raise FormatError("a tier entry holds either record hashes or a skip reason, not both or neither")
        for digest in self.records:
            _check_digest(digest, "tier entry record")
        if any(a.value >= b.value for a, b in itertools.pairwise(self.records)):
            # Ascending and so without repeats: one set of records has one encoding and one hash.
            raise FormatError("a tier entry lists its records in ascending digest order, each once")
        if self.tier is not Tier.HUMAN and len(self.records) > 1:
            raise FormatError("the %s tier rules with one record" % self.tier)
        if self.skip_reason is not None:
            check_text(self.skip_reason, "skip reason")


def _in_ladder_order(tiers: tuple[Tier, ...], what: str) -> None:
    positions = [LADDER.index(t) for t in tiers]
    if positions != sorted(set(positions)):
        raise FormatError("%s must be distinct tiers in ladder order" % what)


@dataclass(frozen=True, slots=True)
class LadderReceipt:
    """Binds one candidate's tier records into a `merge_eligible` claim."""

    task_id: str
    input_hash: Digest
    config_hash: Digest
    required: tuple[Tier, ...]
    entries: tuple[TierEntry, ...]
    merge_eligible: bool
    created: int
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported receipt version %r" % (self.version,))
        check_task_id(self.task_id)
        _check_digest(self.input_hash, "input_hash")
        _check_digest(self.config_hash, "config_hash")
        if not isinstance(self.required, tuple) or not all(isinstance(t, Tier) for t in self.required):
            raise FormatError("required must be a tuple of tiers")
        _in_ladder_order(self.required, "required tiers")
        if not isinstance(self.entries, tuple) or not all(isinstance(e, TierEntry) for e in self.entries):
            raise FormatError("entries must be a tuple of TierEntry")
        _in_ladder_order(tuple(e.tier for e in self.entries), "receipt entries")
        if not isinstance(self.merge_eligible, bool):
            raise FormatError("merge_eligible must be a bool")
        check_time(self.created, "created")

    def entry(self, tier: Tier) -> TierEntry | None:
        for e in self.entries:
            if e.tier is tier:
                return e
        return None
