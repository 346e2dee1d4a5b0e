"""The `ledger` command's entry point. `ledger hook <event>` runs on every tool call an
agent makes, so it goes straight to the hook without loading the CLI (click and the
library); everything else is the CLI.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "hook":
        from .agents._events import HOOK_EVENTS as EVENTS

        if args[1] in EVENTS:
            from .agents._resident import run

            sys.exit(run(args[1]))
    from .cli import main as cli_main

    cli_main()
