"""The ladder's three tier runners: each evaluates its tier for real, stores what
happened as evidence, and appends a signed tier record.

- deterministic: runs the contract's checks on a snapshot of the candidate;
- judge: asks an independent model, recording the exact request and reply;
- human: signs a person's decision on the exact candidate, after showing it.
"""

from ._deterministic import CheckRun, run_deterministic
from ._human import decide
from ._judge import JudgeRun, run_judge

__all__ = ["run_deterministic", "CheckRun", "run_judge", "JudgeRun", "decide"]
