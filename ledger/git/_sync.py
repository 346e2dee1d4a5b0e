"""Sharing receipts through a git remote without losing anyone's: fetch the remote's
notes into a side ref, merge them with git's ``cat_sort_uniq`` strategy (one line per
receipt, so a union loses nothing), and push without force, retrying a bounded number of
times when another writer pushed first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._errors import InputError
from .._git import git, git_complaint, git_ok, run_git
from ._notes import BUNDLE_REFS, NOTES_REF, git_identity

__all__ = ["SyncResult", "fetch_receipts", "push_receipts", "PUSH_ATTEMPTS", "fetch_refspecs"]

# Enough for a handful of jobs finishing together; each retry costs one fetch and push.
PUSH_ATTEMPTS = 8
_REJECTED = ("[rejected]", "non-fast-forward", "fetch first", "cannot lock ref", "failed to update ref", "stale info")


@dataclass(frozen=True, slots=True)
class SyncResult:
    remote: str
    notes_merged: bool  # the remote's notes were merged into ours
    pushed: bool
    attempts: int

    def as_dict(self) -> dict[str, object]:
        return {
            "remote": self.remote,
            "notes_merged": self.notes_merged,
            "pushed": self.pushed,
            "attempts": self.attempts,
        }


def _side_ref(remote: str) -> str:
    return "refs/notes/remotes/%s/receipts" % remote


def fetch_refspecs(remote: str) -> tuple[str, str]:
    """The refspecs `fetch_receipts` uses: the remote's notes into a side ref (merged after),
    its bundles as they are (a bundle for a receipt is as good as any other: it verifies).
    """
    return "+%s:%s" % (NOTES_REF, _side_ref(remote)), "+%s*:%s*" % (BUNDLE_REFS, BUNDLE_REFS)


def fetch_receipts(repo: Path, remote: str = "origin") -> SyncResult:
    """Bring the remote's receipt notes and bundles, and merge its notes into ours."""
    listed = run_git(repo, "ls-remote", "--", remote, NOTES_REF, BUNDLE_REFS + "*")
    if listed.returncode != 0:
        raise InputError("cannot reach remote %r: %s" % (remote, git_complaint(listed.stderr)))
    names = {line.split("\t", 1)[1] for line in listed.stdout.decode().splitlines() if "\t" in line}
    notes_spec, bundle_spec = fetch_refspecs(remote)
    specs = ([notes_spec] if NOTES_REF in names else []) + (
        [bundle_spec] if any(n.startswith(BUNDLE_REFS) for n in names) else []
    )
    if specs:
        done = run_git(repo, "fetch", "--quiet", "--no-write-fetch-head", remote, *specs)
        if done.returncode != 0:
            raise InputError("git fetch of receipts from %r failed: %s" % (remote, git_complaint(done.stderr)))
    if NOTES_REF not in names:
        return SyncResult(remote, False, False, 0)
    theirs = git_ok(repo, "rev-parse", "--verify", "--quiet", _side_ref(remote))
    ours = git_ok(repo, "rev-parse", "--verify", "--quiet", NOTES_REF)
    if theirs is None or theirs == ours:
        return SyncResult(remote, False, False, 0)
    if ours is None:
        git(repo, "update-ref", NOTES_REF, theirs, "0" * len(theirs))
    else:
        merged = run_git(
            repo,
            "notes",
            "--ref",
            NOTES_REF,
            "merge",
            "--quiet",
            "-s",
            "cat_sort_uniq",
            _side_ref(remote),
            env=git_identity(repo),
        )
        if merged.returncode != 0:
            raise InputError("merging the remote's receipt notes failed: %s" % git_complaint(merged.stderr))
    return SyncResult(remote, True, False, 0)


def push_receipts(repo: Path, remote: str = "origin", attempts: int = PUSH_ATTEMPTS) -> SyncResult:
    """Push our bundles, then our notes merged with the remote's, never forcing. Bundles
    go first, so a pushed note never names a bundle the remote lacks.
    """
    if git_ok(repo, "rev-parse", "--verify", "--quiet", NOTES_REF) is None:
        raise InputError("no receipts to push: %s does not exist here (run `ledger attach` first)" % NOTES_REF)
    merged_any = False
    for attempt in range(1, attempts + 1):
        merged_any = fetch_receipts(repo, remote).notes_merged or merged_any
        bundles = run_git(repo, "push", "--quiet", "--", remote, "%s*:%s*" % (BUNDLE_REFS, BUNDLE_REFS))
        if bundles.returncode != 0 and not _raced(bundles.stderr):
            raise InputError("pushing receipt bundles to %r failed: %s" % (remote, git_complaint(bundles.stderr)))
        notes = run_git(repo, "push", "--quiet", "--", remote, "%s:%s" % (NOTES_REF, NOTES_REF))
        if bundles.returncode == 0 and notes.returncode == 0:
            return SyncResult(remote, merged_any, True, attempt)
        if notes.returncode != 0 and not _raced(notes.stderr):
            raise InputError("pushing %s to %r failed: %s" % (NOTES_REF, remote, git_complaint(notes.stderr)))
    raise InputError(
        "another writer kept pushing receipts to %r first; gave up after %d attempts (run it again)"
        % (remote, attempts)
    )


def _raced(stderr: bytes) -> bool:
    text = stderr.decode("utf-8", "replace")
    return any(marker in text for marker in _REJECTED)
