"""The contract's tool policy applied to an agent's tool calls: one decision per call.
Pure: the same rule decides a whole trace (`ledger trace`) and one call at a time.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._quickschema import quick_errors
from ._toolpolicy import ToolPolicy, thaw

__all__ = [
    "APPROVED",
    "REJECTED",
    "REQUIRES_HUMAN",
    "WRITE_TOOLS",
    "ToolDecision",
    "decide_tool_call",
    "decide_tool_calls",
    "written_path",
]

APPROVED, REJECTED, REQUIRES_HUMAN = "approved", "rejected", "requires_human"
# The tools that write one named file, and the argument that names it (the names Claude
# Code uses; Codex writes through its shell tool, whose command no rule here can read).
WRITE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The policy's decision on the call at ``step`` (counted from 1)."""

    step: int
    tool: str | None  # None when the line is not a tool call at all
    decision: str  # approved, rejected or requires_human
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"step": self.step, "tool": self.tool, "decision": self.decision, "reason": self.reason}


def written_path(tool: str, args: Any, root: str = "") -> str | None:
    """The repository-relative path a write tool writes (``root`` is the repository's
    absolute path, for tools that give absolute paths), or None for other tools.
    """
    name = WRITE_TOOLS.get(tool)
    value = args.get(name) if name is not None and isinstance(args, dict) else None
    if not isinstance(value, str) or not value:
        return None
    path = posixpath.normpath(value)
    if root and posixpath.isabs(path):
        path = posixpath.relpath(path, posixpath.normpath(root))
    return path


def _schema_problem(schema: Any, args: Any) -> str | None:
    """The first way ``args`` fails ``schema``, or None when they pass."""
    quick = quick_errors(schema, args)
    if quick is not None:
        return quick[0] if quick else None
    import jsonschema  # a schema beyond the quick subset pays for the full compiler

    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(args), key=str)
    return errors[0].message if errors else None


def decide_tool_call(
    policy: ToolPolicy, step: int, tool: str, args: Any, protected: Sequence[str] = (), root: str = ""
) -> ToolDecision:
    """One call against the policy: denied tools, the allow-list, the step limit, the
    tool's argument schema and a write to one of the ``protected`` path globs each reject;
    an otherwise allowed tool may need a human.
    """
    decision, reason = APPROVED, "allowed by the contract's tool policy"
    schema = dict(policy.schemas).get(tool)
    if tool in policy.denied:
        decision, reason = REJECTED, "tool %s is denied" % tool
    elif policy.allowed and tool not in policy.allowed:
        decision, reason = REJECTED, "tool %s is not among the allowed tools" % tool
    elif policy.max_steps is not None and step > policy.max_steps:
        decision, reason = REJECTED, "step %d is over the limit of %d" % (step, policy.max_steps)
    elif schema is not None:
        problem = _schema_problem(thaw(schema), args)
        if problem is not None:
            decision, reason = REJECTED, "arguments fail the %s schema: %s" % (tool, problem)
    if decision == APPROVED and protected:
        path = written_path(tool, args, root)
        hit = next((g for g in protected if path is not None and fnmatch.fnmatchcase(path, g)), None)
        if hit is not None:
            decision, reason = REJECTED, "%s writes %s, a protected path (%s)" % (tool, path, hit)
    if decision == APPROVED and tool in policy.requires_human:
        decision, reason = REQUIRES_HUMAN, "tool %s needs a human's approval" % tool
    return ToolDecision(step, tool, decision, reason)


def decide_tool_calls(
    policy: ToolPolicy, lines: Sequence[bytes], protected: Sequence[str] = (), root: str = ""
) -> tuple[ToolDecision, ...]:
    """A JSON Lines trace, one call a line (``{"tool": ..., "arguments": ...}``): one
    decision per line; a line that is not a tool call is rejected.
    """
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
        decisions.append(decide_tool_call(policy, step, tool, args, protected, root))
    return tuple(decisions)
