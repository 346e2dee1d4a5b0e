"""The `ledger` command's entry point. `ledger hook <event>` runs on every tool call an
agent makes, so it goes straight to the hook without loading the CLI (click and the
library); everything else is the CLI.
"""

from __future__ import annotations

import gc
import sys

__all__ = ["main"]


def main() -> None:
    # A command is a short process that loads some 20,000 objects which live until it
    # exits (modules, classes, functions), and little cyclic garbage while it loads them
    # (a few hundred objects: the classes `dataclass(slots=True)` replaces, kept until
    # exit); a collection then walks all of them to free almost nothing. Collections
    # resume once the command's code is loaded, over what it makes from then on.
    gc.disable()
    try:
        _run(sys.argv[1:])
    finally:
        # The interpreter's last collections at exit would walk the same objects again,
        # to free memory the process returns to the system anyway.
        gc.freeze()


def _run(args: list[str]) -> None:
    if len(args) == 2 and args[0] == "hook":
        from .agents._events import HOOK_EVENTS as EVENTS

        if args[1] in EVENTS:
            from .agents._resident import run

            _loaded()
            sys.exit(run(args[1]))
    from .cli import main as cli_main

    _loaded()
    cli_main()


def _loaded() -> None:
    # What start-up loaded is set apart from later collections, which it would only slow.
    gc.freeze()
    gc.enable()
