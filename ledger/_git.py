"""The few git facts the ledger needs, read with plain `git` subprocesses."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ._errors import InputError

__all__ = ["git_root", "resolve_commit"]


def _git(args: list[str], cwd: Path) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError("cannot run git: %s" % exc) from None
    if out.returncode != 0:
        raise InputError("git %s failed: %s" % (" ".join(args), out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode))
    return out.stdout.strip()


def git_root(cwd: Path) -> Path | None:
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], cwd))
    except InputError:
        return None


def resolve_commit(rev: str, cwd: Path) -> dict[str, str]:
    """The candidate fields of a revision: its commit id and tree id (both immutable)."""
    commit = _git(["rev-parse", "--verify", "--end-of-options", rev + "^{commit}"], cwd)
    tree = _git(["rev-parse", "--verify", "--end-of-options", commit + "^{tree}"], cwd)
    return {"commit": commit, "tree": tree}
