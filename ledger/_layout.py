"""Where a ledger directory keeps the files people edit and commit (each task's completion
contract, the team's config.toml), and how a task id is found in a branch name or a
title; and where the ledger directory itself is. Imports nothing beyond the standard
library, so that the agent hooks, which run on every tool call, can use it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "CONTRACTS_DIR",
    "DEFAULT_TASK_PATTERN",
    "LEDGER_DIRNAME",
    "TRUST_FILE",
    "contract_path",
    "find_ledger_dir",
    "find_task",
    "hash_prefix",
    "task_pattern",
]

LEDGER_DIRNAME = ".ledger"
CONTRACTS_DIR = "contracts"
# The genesis admin's pin in the ledger directory (and, committed, `.ledger/` on the target branch).
TRUST_FILE = "allowed_signers"
# Letters, a dash, digits: T-1, TASK-12, ABC-123 (matched in any case, reported in capitals).
DEFAULT_TASK_PATTERN = r"[A-Za-z][A-Za-z0-9]*-[0-9]+"


def task_pattern(ledger_dir: Path) -> str:
    """The team's task-id pattern: ``task_pattern`` in ``ledger_dir``/config.toml, else the
    default. A pattern that is not a valid regular expression is refused (ValueError).
    """
    try:
        import tomllib

        with (ledger_dir / "config.toml").open("rb") as fh:
            pattern = tomllib.load(fh).get("task_pattern", DEFAULT_TASK_PATTERN)
    except (OSError, ValueError):
        return DEFAULT_TASK_PATTERN
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("task_pattern in %s is not a text pattern" % (ledger_dir / "config.toml"))
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(
            "task_pattern in %s is not a regular expression: %s" % (ledger_dir / "config.toml", exc)
        ) from None
    return pattern


def find_task(text: str, pattern: str = DEFAULT_TASK_PATTERN) -> str | None:
    """The first task id in ``text`` that stands alone (not inside a longer word or number),
    in capitals; None when there is none.
    """
    found = re.search(r"(?<![A-Za-z0-9])(%s)(?![A-Za-z0-9])" % pattern, text, re.IGNORECASE)
    return found.group(1).upper() if found else None


def contract_path(ledger_dir: Path, task: str) -> Path:
    """The file that holds ``task``'s contract under ``ledger_dir`` (it may not exist).

    A slash in a task id (``team/T-1``) becomes an underscore: the id names one file, never
    a folder.
    """
    return ledger_dir / CONTRACTS_DIR / (task.replace("/", "_") + ".toml")


def find_ledger_dir(explicit: Path | None, repo: Path | None, cwd: Path) -> Path:
    """``--dir`` if given, else ``.ledger`` at ``repo`` (the git root, `git_root`), else in
    the current directory. The caller finds the git root once and passes it on, since
    the same command asks git for it again (the trust on its target branch).
    """
    if explicit is not None:
        return explicit
    return (repo if repo is not None else cwd) / LEDGER_DIRNAME


_HASH_PREFIX = re.compile(r"(?:blake3:)?([0-9a-f]{8,64})")
# The refusal where a hash, or the prefix of one that a table printed, is asked for.
NOT_A_HASH = (
    "not a hash (blake3:<64 lowercase hex digits>) nor the prefix of one a table prints (at least 8 hex digits): %r"
)


def hash_prefix(text: str) -> str | None:
    """The hex digits of a hash as people give it (``blake3:`` optional, at least 8 digits,
    a trailing ``…`` as tables cut it), or None for text of another form.
    """
    found = _HASH_PREFIX.fullmatch(text.strip().rstrip("…"))
    return found.group(1) if found else None
