"""Where a ledger directory keeps the files people edit and commit: each task's completion
contract. Imports nothing beyond the standard library, so that the agent hooks, which run
on every tool call, can use it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONTRACTS_DIR", "contract_path"]

CONTRACTS_DIR = "contracts"


def contract_path(ledger_dir: Path, task: str) -> Path:
    """The file that holds ``task``'s contract under ``ledger_dir`` (it may not exist).

    A slash in a task id (``team/T-1``) becomes an underscore: the id names one file, never
    a folder.
    """
    return ledger_dir / CONTRACTS_DIR / (task.replace("/", "_") + ".toml")
