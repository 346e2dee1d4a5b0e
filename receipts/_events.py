"""Task events: what happened around the ladder, as signed chain entries.

"The model stopped", "the agent proposed an answer", "a merge-eligible receipt verified"
and "the change took effect" are different events; each is recorded, none implies
another.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ._digest import Digest
from ._errors import FormatError
from ._model import FORMAT_VERSION, EvidenceRef, Role, check_task_id, check_time

__all__ = ["EventType", "TaskEvent", "EVENT_ROLES", "EffectOutcome"]

_FIELD = re.compile(r"[a-z][a-z0-9_]{0,31}")


class EventType(enum.StrEnum):
    MODEL_STOPPED = "model_stopped"
    ANSWER_PROPOSED = "answer_proposed"  # the agent's claim: recorded, never evidence of success
    TRACE = "trace"  # an agent's tool-call log and the policy's decision on each call
    SUCCESS_VERIFIED = "success_verified"  # a merge-eligible receipt for the candidate verified
    GATE_DECISION = "gate_decision"
    EFFECT_BEGIN = "effect_begin"
    EFFECT_RESULT = "effect_result"  # confirmed, failed or unknown; a confirm is effect_committed
    PROVENANCE = "provenance"  # an agent's own record of what it wrote (Agent Trace, git-ai, Entire)
    SEALED_REVEALED = "sealed_revealed"  # a sealed set's plaintext and its runs' results, made public (§6e)


class EffectOutcome(enum.StrEnum):
    CONFIRMED = "confirmed"
    FAILED = "failed"
    UNKNOWN = "unknown"


EVENT_ROLES: dict[EventType, Role] = {
    EventType.MODEL_STOPPED: Role.AGENT,
    EventType.ANSWER_PROPOSED: Role.AGENT,
    EventType.TRACE: Role.DETERMINISTIC,  # the runner's policy decisions, not the agent's own
    EventType.SUCCESS_VERIFIED: Role.SEAL,
    EventType.GATE_DECISION: Role.SEAL,
    EventType.EFFECT_BEGIN: Role.SEAL,
    EventType.EFFECT_RESULT: Role.SEAL,
    # The agent's declaration of authorship: signed as submitted, never evidence of success.
    EventType.PROVENANCE: Role.AGENT,
    # Only the role that opened the set may reveal it: what it ran, as it ran it.
    EventType.SEALED_REVEALED: Role.DETERMINISTIC,
}


@dataclass(frozen=True, slots=True)
class TaskEvent:
    task_id: str
    type: EventType
    candidate: Digest | None
    fields: tuple[tuple[str, str], ...]  # sorted (name, text value) pairs
    evidence: tuple[EvidenceRef, ...]
    created: int
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported event version %r" % (self.version,))
        check_task_id(self.task_id)
        if not isinstance(self.type, EventType):
            raise FormatError("event type must be an EventType")
        if self.candidate is not None and not isinstance(self.candidate, Digest):
            raise FormatError("event candidate must be a Digest")
        if not isinstance(self.fields, tuple) or len(self.fields) > 32:
            raise FormatError("an event has at most 32 fields")
        names = [n for n, _ in self.fields]
        if names != sorted(set(names)):
            raise FormatError("event fields are distinct and sorted by name")
        for name, value in self.fields:
            if _FIELD.fullmatch(name) is None or not isinstance(value, str) or len(value) > 4096:
                raise FormatError("event field %r is not a short lowercase name with a text value" % (name,))
        if not isinstance(self.evidence, tuple) or not all(isinstance(e, EvidenceRef) for e in self.evidence):
            raise FormatError("event evidence must be a tuple of EvidenceRef")
        check_time(self.created, "created")

    def field(self, name: str, default: str | None = None) -> str | None:
        return dict(self.fields).get(name, default)
