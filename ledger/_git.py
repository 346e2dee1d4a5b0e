"""The one way the ledger runs git: plain `git` subprocesses in a repository, with one
error shape (`InputError`, the last line git printed). Also the candidate a revision
names.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from receipts import Digest, FormatError, candidate_hash

from ._errors import InputError

__all__ = [
    "run_git",
    "git",
    "git_complaint",
    "git_to_file",
    "git_text",
    "git_ok",
    "git_root",
    "resolve_commit",
    "resolve_candidate",
]

# A bound for a hung git (a lock, a credential prompt), not a measure of speed.
_GIT_TIMEOUT_S = 300


def run_git(
    repo: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git ARGS`` in ``repo``; the caller reads the return code. Raises `InputError`
    only if git cannot run at all.
    """
    try:
        return subprocess.run(
            ["git", *args],
            cwd=repo,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            input=b"" if stdin is None else stdin,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError("cannot run git: %s" % exc) from None


def git_to_file(repo: Path, out: BinaryIO, *args: str) -> bool:
    """Stream ``git ARGS``'s output into ``out`` (an object may be larger than memory
    should hold). False if git failed (the object is absent).
    """
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=repo,
            stdout=out,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=_GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError("cannot run git: %s" % exc) from None
    return done.returncode == 0


def git_complaint(stderr: bytes) -> str:
    """The line of git's stderr that says what went wrong: its first ``fatal:`` or
    ``error:`` line (git often follows it with advice), else its last line.
    """
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").strip().splitlines() if line.strip()]
    return next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "no message")


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> bytes:
    """Git's standard output; `InputError` with git's complaint if it failed."""
    out = run_git(repo, *args, env=env, stdin=stdin)
    if out.returncode != 0:
        raise InputError("git %s failed: %s" % (" ".join(args[:3]), git_complaint(out.stderr)))
    return out.stdout


def git_text(repo: Path, *args: str) -> str:
    return git(repo, *args).decode("utf-8", "replace").strip()


def git_ok(repo: Path, *args: str) -> str | None:
    """Git's trimmed output, or None if it failed or printed nothing."""
    try:
        return git_text(repo, *args) or None
    except InputError:
        return None


def git_root(cwd: Path) -> Path | None:
    """The top of the git work tree holding ``cwd``, or None outside one."""
    found = git_ok(cwd, "rev-parse", "--show-toplevel")
    return None if found is None else Path(found)


def resolve_commit(rev: str, cwd: Path) -> dict[str, str]:
    """The candidate fields of a revision: its commit id and tree id (both immutable)."""
    # One git process for both (a Stop hook pays for each): a revision that names no
    # commit fails on its first name, as --verify would.
    if rev.startswith("-"):  # no revision starts with a dash; an option would
        raise InputError("not a revision: %r" % rev)
    found = git_text(cwd, "rev-parse", rev + "^{commit}", rev + "^{commit}^{tree}").split()
    if len(found) != 2:
        raise InputError("git rev-parse %s: expected a commit and its tree, got %r" % (rev, found))
    return {"commit": found[0], "tree": found[1]}


def resolve_candidate(spec: str, cwd: Path) -> Digest:
    """``blake3:<hex>`` is taken as a candidate hash; anything else is a git revision."""
    if spec.startswith("blake3:"):
        try:
            return Digest.parse(spec)
        except FormatError as exc:
            raise InputError(str(exc)) from None
    return candidate_hash(resolve_commit(spec, cwd))
