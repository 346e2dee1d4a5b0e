"""The candidate snapshot: what exactly is being verified, and what of it is this task's."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from receipts import SNAPSHOT_FORMAT, Contract, Digest, candidate_hash, content_digest

from .._errors import InputError
from .._git import git, git_ok, git_text

__all__ = ["Snapshot", "take_snapshot", "worktree_roots", "untracked", "remember_check_outputs"]

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
    base_source: str = ""
    clean_room: dict[str, object] | None = None  # what the clean room did (`_clean_room`), when the checks ran in one

    def document(self, diff_digest: Digest, dirty_digest: Digest | None) -> dict[str, object]:
        return {
            "format": SNAPSHOT_FORMAT,
            "commit": self.commit,
            "tree": self.tree,
            "base": self.base,
            "base_source": self.base_source,
            "diff": str(diff_digest),
            "diff_empty": not self.diff,
            "dirty": None if dirty_digest is None else str(dirty_digest),
            "candidate": str(self.candidate),
            "attribution": {"strength": self.strength, "commits": list(self.commits), "files": list(self.files)},
            "subtasks": list(self.subtasks),
            "changed_files": list(self.changed),
            **({"process": self.process} if self.process is not None else {}),
            **({"clean_room": self.clean_room} if self.clean_room is not None else {}),
        }


BASE_FALLBACK = "fallback: HEAD~1 (no main branch to compare with: pass --base)"


def _default_base(repo: Path) -> tuple[str | None, str]:
    """The base to diff against and where it came from. A CI checkout often has a detached
    HEAD and only remote branches, so those count too; the last resort says so.
    """
    head = git_text(repo, "rev-parse", "HEAD")
    tip_of = None
    for ref in ("origin/HEAD", "main", "master", "origin/main", "origin/master"):
        mb = git_ok(repo, "merge-base", "HEAD", ref)
        if mb and mb != head:
            return mb, "merge-base with %s" % ref
        tip_of = tip_of or (ref if mb == head else None)
    if git_ok(repo, "rev-parse", "--is-shallow-repository") == "true":
        # A shallow clone (actions/checkout's default depth 1) hides the history: its "first
        # commit" would make the whole repository the diff.
        raise InputError(
            "the checkout is shallow and holds no base to compare with: fetch the target branch's history"
            " (actions/checkout with fetch-depth: 0) or pass --base"
        )
    parent = git_ok(repo, "rev-parse", "--verify", "--quiet", "HEAD~1")
    if parent is None:
        return None, "none (the first commit)"
    # On the tip of the main branch, its last commit is the change; without any main branch it is a guess.
    return parent, "HEAD~1 (HEAD is the tip of %s)" % tip_of if tip_of else BASE_FALLBACK


def _names_task(message: str, task: str) -> bool:
    return re.search(r"(?<![A-Za-z0-9_-])%s(?![A-Za-z0-9_])" % re.escape(task), message) is not None


def _status(repo: Path) -> list[bytes]:
    return [e for e in git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all").split(b"\0") if e]


def untracked(repo: Path) -> set[bytes]:
    """Untracked, not ignored files, as git names them (repository-relative)."""
    return {e[3:] for e in _status(repo) if e.startswith(b"?? ")}


def _outputs_file(repo: Path) -> Path:
    # In the git directory, not the work tree: the list must not make the tree dirty itself.
    found = Path(git_text(repo, "rev-parse", "--git-path", "receipt-ledger-check-outputs"))
    return found if found.is_absolute() else repo / found


def _check_outputs(repo: Path) -> set[bytes]:
    try:
        return set(_outputs_file(repo).read_bytes().split(b"\0")) - {b""}
    except FileNotFoundError:
        return set()


def remember_check_outputs(repo: Path, before: set[bytes]) -> tuple[str, ...]:
    """Note the untracked files that appeared while the checks ran (caches, reports), so
    that the next run does not take them for uncommitted work. Returns them.
    """
    created = untracked(repo) - before
    if created:
        with _outputs_file(repo).open("ab") as out:
            out.write(b"".join(path + b"\0" for path in sorted(created)))
    return tuple(sorted(p.decode("utf-8", "replace") for p in created))


# The ledger's own files, new after `ledger init` until the team commits them: they
# configure the ledger, never the candidate, so they do not make the tree dirty.
_LEDGER_FILES = {b".ledger/.gitignore", b".ledger/config.toml", b".ledger/allowed_signers"}


def _dirty_state(repo: Path) -> bytes | None:
    outputs = _check_outputs(repo) | _LEDGER_FILES
    entries = [e for e in _status(repo) if not (e.startswith(b"?? ") and e[3:] in outputs)]
    if not entries:
        return None
    status = b"".join(e + b"\0" for e in entries)
    parts = [b"status\0" + status, b"diff\0" + git(repo, "diff", "HEAD", "--binary")]
    for entry in entries:
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
    base_commit: str | None
    if base:
        base_commit, base_source = git_text(repo, "rev-parse", "--verify", base + "^{commit}"), "given: %s" % base
    else:
        base_commit, base_source = _default_base(repo)
    return dataclasses.replace(
        _attributed(repo, contract, commit, tree, base_commit, dirty, subtasks), base_source=base_source
    )


def _attributed(
    repo: Path,
    contract: Contract,
    commit: str,
    tree: str,
    base_commit: str | None,
    dirty: bytes | None,
    subtasks: tuple[str, ...],
) -> Snapshot:
    """The diff against the base, and which of it is this task's work (strong, weak or none)."""
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
