"""The AI agents' side: their hooks (`_hooks`, imported on every tool call, so it imports
little) and installing them (`_install`, with the Claude Code plugin in `plugins/`). The
agents' own records taken as evidence (provenance, tool-call traces) are the ladder's
(`ledger.ladder._provenance`, `ledger.ladder._traces`): the tier runners read them.
"""
