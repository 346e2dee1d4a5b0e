"""The clean room: the deterministic tier's checks run in a fresh checkout of the
candidate, not in the tree the agent left.

A shared clone (``git clone --shared``: the repository's objects, none of its files)
checked out at the candidate commit, so untracked files, caches and build output are
absent; the contract's protected paths and test files restored from the base revision,
so a test the agent weakened runs as it was; and, where the platform allows it, the
network cut (a new network namespace, only a loopback that is down). What was done is
stated in the snapshot's ``clean_room`` document (docs/format.md §6a).
"""

from __future__ import annotations

import contextlib
import fnmatch
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from receipts import Contract

from .._errors import InputError
from ..git._commands import git

__all__ = ["CleanRoom", "clean_room"]


@dataclass(frozen=True, slots=True)
class CleanRoom:
    """A clean room in use: where it is, what it restored, how the network stands."""

    folder: Path
    base: str | None
    restored: tuple[str, ...]  # paths whose candidate content was replaced by the base's
    kept_new: tuple[str, ...]  # paths the globs match that the base does not hold: the candidate's
    network_cut: bool
    network: str  # how it was cut, or why it could not be
    command_prefix: tuple[str, ...]  # what each check command runs under (the network cut)

    def document(self) -> dict[str, object]:
        return {
            "base": self.base,
            "restored": list(self.restored),
            "kept_new": list(self.kept_new),
            "network_cut": self.network_cut,
            "network": self.network,
        }


_PROBES = (
    # As root a network namespace needs nothing else; as anyone else, a user namespace too.
    ("unshare", "--net", "--"),
    ("unshare", "--user", "--map-root-user", "--net", "--"),
)


def _network_cut() -> tuple[tuple[str, ...], str]:
    """The command prefix that cuts the network here, and what it does (or why none does)."""
    if shutil.which("unshare") is None:
        return (), "not cut: unshare (util-linux) is not installed"
    failure = "not cut: this system refuses new network namespaces"
    for prefix in _PROBES:
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failure = "not cut: %s" % exc
            continue
        if done.returncode == 0:
            return prefix, "cut: each command runs in a new network namespace (%s)" % " ".join(prefix[:-1])
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        failure = "not cut: %s" % (said[-1] if said else "unshare failed")
    return (), failure


def _matches(path: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(path, glob) for glob in globs)


def _files_at(repo: Path, rev: str) -> dict[str, str]:
    """Every file of ``rev`` with its blob id."""
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", rev).decode("utf-8", "surrogateescape")
    found = {}
    for item in listing.split("\0"):
        if item:
            meta, _, path = item.partition("\t")
            found[path] = meta.split()[2]
    return found


@contextlib.contextmanager
def clean_room(repo: Path, contract: Contract, commit: str, base: str | None) -> Iterator[CleanRoom]:
    """A clean room for ``commit``, removed when the block ends.

    Args:
        repo: the repository holding the candidate.
        contract: its protected paths and test files are restored from ``base``.
        commit: the candidate commit.
        base: the base revision (None: nothing to restore from; the room is still clean).

    Raises:
        InputError: git could not make the room.
    """
    globs = (*contract.protected_paths, *contract.test_files)
    holder = Path(tempfile.mkdtemp(prefix="receipt-ledger-clean-room-"))
    folder = holder / "tree"
    try:
        git(repo, "clone", "--quiet", "--shared", "--no-checkout", str(repo.resolve()), str(folder))
        git(folder, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit)
        restored: list[str] = []
        kept_new: list[str] = []
        if base is not None and globs:
            at_base, at_commit = _files_at(repo, base), _files_at(repo, commit)
            for path in sorted(set(at_base) | set(at_commit)):
                if not _matches(path, globs):
                    continue
                if path not in at_base:
                    kept_new.append(path)
                elif at_commit.get(path) != at_base[path]:
                    git(folder, "checkout", "--quiet", base, "--", path)
                    restored.append(path)
        prefix, network = _network_cut()
        yield CleanRoom(folder, base, tuple(restored), tuple(kept_new), bool(prefix), network, prefix)
    except InputError as exc:
        raise InputError("cannot make the clean room: %s" % exc) from None
    finally:
        shutil.rmtree(holder, ignore_errors=True)
