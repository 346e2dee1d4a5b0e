"""The ladder's three tier runners: each evaluates its tier for real, stores what
happened as evidence, and appends a signed tier record.

- deterministic: runs the contract's checks on a snapshot of the candidate;
- judge: asks an independent model, recording the exact request and reply;
- human: signs a person's decision on the exact candidate, after showing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from receipts import lazy_names

if TYPE_CHECKING:
    from ._deterministic import CheckRun, LoopRun, run_advisory, run_deterministic, run_in_loop
    from ._human import decide, decision_caveats
    from ._judge import JudgeRun, run_judge

__all__ = [
    "run_deterministic",
    "run_advisory",
    "run_in_loop",
    "LoopRun",
    "CheckRun",
    "run_judge",
    "JudgeRun",
    "decide",
    "decision_caveats",
]

# Loaded on first use: an agent hook imports the redactor alone, not the runners.
_WHERE = {
    "run_deterministic": "_deterministic",
    "run_advisory": "_deterministic",
    "run_in_loop": "_deterministic",
    "LoopRun": "_deterministic",
    "CheckRun": "_deterministic",
    "decide": "_human",
    "decision_caveats": "_human",
    "run_judge": "_judge",
    "JudgeRun": "_judge",
}


if not TYPE_CHECKING:  # type checkers see the imports above
    __getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__, globals())
