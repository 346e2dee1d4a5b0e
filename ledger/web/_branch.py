"""The target branch as git holds it, for the pages that start from the branch: the
commits page lists its first-parent commits with their receipt (or its absence), and a
search for a commit on it finds the receipt through the commit's tree, as the gate does.
Git is asked only for hex a visitor typed, never for a name: a query cannot become an
option or a ref expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .._errors import InputError
from .._git import run_git
from ..keys._trust import qualified_branch

__all__ = ["Branch", "BranchCommit"]

_HEX = re.compile(r"[0-9a-f]{7,64}")


@dataclass(frozen=True, slots=True)
class BranchCommit:
    """One commit of the branch's first-parent line."""

    commit: str
    tree: str
    time: int  # committer time: when it reached the branch
    subject: str


@dataclass(frozen=True, slots=True)
class Branch:
    """A branch of a repository (``repo`` None: no repository was given)."""

    repo: Path | None
    name: str

    @property
    def why_not(self) -> str:
        """Why the branch's commits cannot be listed, in words (empty when they can)."""
        if self.repo is None:
            return "No repository was given (--repo): receipts are listed by their candidate's commit."
        if self._ref() is None:
            return "Branch %s is not in %s: receipts are listed by their candidate's commit." % (self.name, self.repo)
        return ""

    def _ref(self) -> str | None:
        if self.repo is None:
            return None
        try:
            ref = qualified_branch(self.repo, self.name)
        except InputError:
            return None
        found = run_git(self.repo, "rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}")
        return ref if found.returncode == 0 else None

    def commits(self, skip: int, count: int) -> list[BranchCommit] | None:
        """``count`` commits of the first-parent line, newest first, after the newest
        ``skip``; None when there is no repository or no such branch.
        """
        ref = self._ref()
        if ref is None or self.repo is None:
            return None
        listed = run_git(
            self.repo,
            "log",
            "--first-parent",
            "--skip=%d" % skip,
            "--max-count=%d" % count,
            "--format=%H%x00%T%x00%ct%x00%s%x1e",
            "--end-of-options",
            ref,
            "--",
        )
        if listed.returncode != 0:
            return None
        found = []
        for record in listed.stdout.decode(errors="replace").split("\x1e"):
            parts = record.strip("\n").split("\x00")
            if len(parts) == 4:
                found.append(BranchCommit(parts[0], parts[1], int(parts[2]), parts[3]))
        return found

    def trees_named(self, text: str) -> tuple[str, ...]:
        """The tree of the commit ``text`` names (hex digits, 7 or more), if the repository
        holds one: a squash or rebase merge on the branch has its candidate's tree.
        """
        needle = text.strip().lower()
        if self.repo is None or _HEX.fullmatch(needle) is None:
            return ()
        found = run_git(self.repo, "rev-parse", "--verify", "--quiet", "--end-of-options", needle + "^{tree}")
        tree = found.stdout.decode(errors="replace").strip()
        return (tree,) if found.returncode == 0 and _HEX.fullmatch(tree) else ()
