"""The hook events, as `ledger hook EVENT` names them and as the agents do. A module of
its own because the entry point reads it on every tool call, before it imports anything.
"""

__all__ = ["HOOK_EVENTS"]

HOOK_EVENTS = {
    "session-start": "SessionStart",
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
    "stop": "Stop",
    "subagent-stop": "SubagentStop",
    "session-end": "SessionEnd",
}
