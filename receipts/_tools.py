"""The contract's tool policy applied to an agent's tool calls: one decision per call.
Pure: the same rule decides a whole trace (`ledger trace`) and one call at a time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._contract import ToolPolicy, thaw

__all__ = ["APPROVED", "REJECTED", "REQUIRES_HUMAN", "ToolDecision", "decide_tool_call", "decide_tool_calls"]

APPROVED, REJECTED, REQUIRES_HUMAN = "approved", "rejected", "requires_human"


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The policy's decision on the call at ``step`` (counted from 1)."""

    step: int
    tool: str | None  # None when the line is not a tool call at all
    decision: str  # approved, rejected or requires_human
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"step": self.step, "tool": self.tool, "decision": self.decision, "reason": self.reason}


def decide_tool_call(policy: ToolPolicy, step: int, tool: str, args: Any) -> ToolDecision:
    """One call against the policy: denied tools, the allow-list, the step limit and the
    tool's argument schema each reject; an otherwise allowed tool may need a human."""
    decision, reason = APPROVED, "allowed by the contract's tool policy"
    schema = dict(policy.schemas).get(tool)
    if tool in policy.denied:
        decision, reason = REJECTED, "tool %s is denied" % tool
    elif policy.allowed and tool not in policy.allowed:
        decision, reason = REJECTED, "tool %s is not among the allowed tools" % tool
    elif policy.max_steps is not None and step > policy.max_steps:
        decision, reason = REJECTED, "step %d is over the limit of %d" % (step, policy.max_steps)
    elif schema is not None:
        import jsonschema  # only a contract with argument schemas pays for the compiler

        plain = thaw(schema)
        errors = sorted(jsonschema.validators.validator_for(plain)(plain).iter_errors(args), key=str)
        if errors:
            decision, reason = REJECTED, "arguments fail the %s schema: %s" % (tool, errors[0].message)
    if decision == APPROVED and tool in policy.requires_human:
        decision, reason = REQUIRES_HUMAN, "tool %s needs a human's approval" % tool
    return ToolDecision(step, tool, decision, reason)


def decide_tool_calls(policy: ToolPolicy, lines: Sequence[bytes]) -> tuple[ToolDecision, ...]:
    """A JSON Lines trace, one call a line (``{"tool": ..., "arguments": ...}``): one
    decision per line; a line that is not a tool call is rejected."""
    decisions = []
    for step, raw in enumerate(lines, start=1):
        try:
            call = json.loads(raw)
            tool, args = call["tool"], call.get("arguments", call.get("args", {}))
            if not isinstance(tool, str):
                raise TypeError
        except (ValueError, KeyError, TypeError, AttributeError):
            decisions.append(ToolDecision(step, None, REJECTED, "not a tool call: %r" % raw[:80]))
            continue
        decisions.append(decide_tool_call(policy, step, tool, args))
    return tuple(decisions)
