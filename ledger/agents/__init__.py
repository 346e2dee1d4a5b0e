"""The AI agents' side: their hooks (`_hooks`, imported on every tool call, so it imports
little), installing them (`_install`, with the Claude Code plugin in `plugins/`), and
their tool-call traces decided against the contract's tool policy (`_traces`).
"""
