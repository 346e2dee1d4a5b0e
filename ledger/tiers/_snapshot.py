"""The candidate snapshot: what exactly is being verified, and what of it is this task's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from receipts import SNAPSHOT_FORMAT, Contract, Digest, candidate_hash, content_digest

from .._errors import InputError
from .._git import git, git_ok, git_text

__all__ = ["Snapshot", "take_snapshot", "worktree_roots"]

_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def worktree_roots(repo: Path) -> list[Path]:
    """Linked worktrees of the repository (not the main checkout)."""
    roots = []
    for line in git_text(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            roots.append(Path(line[9:]))
    main = repo.resolve()
    return [r for r in roots if r.resolve() != main]


@dataclass(frozen=True, slots=True)
class Snapshot:
    commit: str
    tree: str
    base: str | None
    diff: bytes
    dirty: bytes | None
    strength: str
    commits: tuple[str, ...]
    files: tuple[str, ...]
    subtasks: tuple[str, ...] = field(default=())

    @property
    def candidate(self) -> Digest:
        fields = {"commit": self.commit, "tree": self.tree}
        if self.dirty is not None:
            fields["dirty"] = str(content_digest(self.dirty))
        return candidate_hash(fields)

    changed: tuple[str, ...] = ()
    process: dict[str, object] | None = None

    def document(self, diff_digest: Digest, dirty_digest: Digest | None) -> dict[str, object]:
        return {
            "format": SNAPSHOT_FORMAT,
            "commit": self.commit,
            "tree": self.tree,
            "base": self.base,
            "diff": str(diff_digest),
            "diff_empty": not self.diff,
            "dirty": None if dirty_digest is None else str(dirty_digest),
            "candidate": str(self.candidate),
            "attribution": {"strength": self.strength, "commits": list(self.commits), "files": list(self.files)},
            "subtasks": list(self.subtasks),
            "changed_files": list(self.changed),
            **({"process": self.process} if self.process is not None else {}),
        }


def _default_base(repo: Path) -> str | None:
    head = git_text(repo, "rev-parse", "HEAD")
    for ref in ("origin/HEAD", "main", "master"):
        mb = git_ok(repo, "merge-base", "HEAD", ref)
        if mb and mb != head:
            return mb
    return git_ok(repo, "rev-parse", "--verify", "--quiet", "HEAD~1")


def _names_task(message: str, task: str) -> bool:
    return re.search(r"(?<![A-Za-z0-9_-])%s(?![A-Za-z0-9_])" % re.escape(task), message) is not None


def _dirty_state(repo: Path) -> bytes | None:
    status = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if not status:
        return None
    parts = [b"status\0" + status, b"diff\0" + git(repo, "diff", "HEAD", "--binary")]
    for entry in status.split(b"\0"):
        if entry.startswith(b"?? "):
            path = repo / entry[3:].decode("utf-8", "surrogateescape")
            if path.is_file():
                parts.append(b"untracked\0" + entry[3:] + b"\0" + content_digest(path.read_bytes()).value)
    return b"\0\0".join(parts)


def take_snapshot(
    repo: Path, contract: Contract, base: str | None = None, allow_dirty: bool = False, subtasks: tuple[str, ...] = ()
) -> Snapshot:
    commit = git_text(repo, "rev-parse", "--verify", "HEAD^{commit}")
    tree = git_text(repo, "rev-parse", "--verify", "HEAD^{tree}")
    dirty = _dirty_state(repo)
    if dirty is not None and not allow_dirty:
        raise InputError(
            "the working tree has uncommitted changes: commit them, or pass --allow-dirty to include them in the snapshot"
        )
    base_commit = git_text(repo, "rev-parse", "--verify", base + "^{commit}") if base else _default_base(repo)
    diff = git(repo, "diff", "--binary", base_commit or _EMPTY_TREE, commit)
    changed = tuple(sorted(git_text(repo, "diff", "--name-only", base_commit or _EMPTY_TREE, commit).splitlines()))
    rng = ("%s..%s" % (base_commit, commit)) if base_commit else commit
    log = git_text(repo, "log", "--format=%H%x00%B%x1e", rng)
    strong = tuple(
        c
        for c, _, msg in (e.strip().partition("\0") for e in log.split("\x1e") if e.strip())
        if _names_task(msg, contract.task_id)
    )
    files: set[str] = set()
    if strong:
        for c in strong:
            files.update(git_text(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "--root", c).splitlines())
        return Snapshot(
            commit, tree, base_commit, diff, dirty, "strong", strong, tuple(sorted(files)), subtasks, changed
        )
    if contract.owned_files:
        owned = ["--", *contract.owned_files]
        last = git_text(repo, "log", "-1", "--format=%H", rng, *owned)
        if last:
            owned_changed = git_text(
                repo, "diff", "--name-only", base_commit or _EMPTY_TREE, commit, *owned
            ).splitlines()
            return Snapshot(
                commit, tree, base_commit, diff, dirty, "weak", (last,), tuple(sorted(owned_changed)), subtasks, changed
            )
    return Snapshot(commit, tree, base_commit, diff, dirty, "none", (), (), subtasks, changed)
