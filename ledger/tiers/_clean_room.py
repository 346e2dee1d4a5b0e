"""The clean room: the deterministic tier's checks run in a fresh checkout of the
candidate, not in the tree the agent left.

A clone of the repository (none of its working files)
checked out at the candidate commit, so untracked files, caches and build output are
absent; the contract's protected paths and test files restored from the base revision,
so a test the agent weakened runs as it was; every harness file (conftest.py, pytest's
ini files, site's start-up files) the base's, a new one removed; the repository made
whole, with no alternates back to the real one; and every command run in a sandbox
(`_sandbox`) where one can be made, else (a contract that does not require one) with
the network cut. What was done is stated in the snapshot's ``clean_room`` document
(docs/format.md §6a).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from receipts import BASE_ENVIRONMENT, Contract, is_harness_path, thaw

from .._errors import InputError
from .._git import git
from ._harness import expected_tests, merge_pytest_tables
from ._sandbox import Sandbox, make_sandbox

__all__ = ["CleanRoom", "clean_room"]


@dataclass(frozen=True, slots=True)
class CleanRoom:
    """A clean room in use: where it is, what it restored, how its commands run."""

    folder: Path
    base: str | None
    restored: tuple[str, ...]  # paths whose candidate content was replaced by the base's
    kept_new: tuple[str, ...]  # paths the globs match that the base does not hold: the candidate's
    network_cut: bool
    network: str  # how it was cut, or why it could not be
    command_prefix: tuple[str, ...]  # what each check command runs under without a sandbox (the network cut)
    removed: tuple[str, ...] = ()  # the candidate's new harness files, taken out
    sandbox: Sandbox | None = None
    sandbox_refused: str | None = None  # why no command may run: the contract needs a sandbox and none was made
    sandbox_doc: dict[str, object] | None = None
    expected: tuple[str, ...] = ()  # the tests the restored test files define

    def document(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "base": self.base,
            "restored": list(self.restored),
            "kept_new": list(self.kept_new),
            "removed": list(self.removed),
            "network_cut": self.network_cut,
            "network": self.network,
        }
        if self.sandbox_doc is not None:
            doc["sandbox"] = self.sandbox_doc
        return doc


_PROBES = (
    # As root a network namespace needs nothing else; as anyone else, a user namespace too.
    ("--net", "--"),
    ("--user", "--map-root-user", "--net", "--"),
)


def _network_cut() -> tuple[tuple[str, ...], str]:
    """The command prefix that cuts the network here, and what it does (or why none does)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "not cut: unshare (util-linux) is not installed"
    failure = "not cut: this system refuses new network namespaces"
    for flags in _PROBES:
        prefix = (unshare, *flags)
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failure = "not cut: %s" % exc
            continue
        if done.returncode == 0:
            return prefix, "cut: each command runs in a new network namespace (unshare %s)" % " ".join(flags[:-1])
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


def _harness(
    repo: Path, folder: Path, base: str | None, at_base: dict[str, str], at_commit: dict[str, str]
) -> tuple[list[str], list[str]]:
    """Make every harness file of the room the base's (§6a): (restored, removed)."""
    restored, removed = [], []
    for path in sorted(set(at_base) | set(at_commit)):
        if not is_harness_path(path) or at_base.get(path) == at_commit.get(path):
            continue
        target = folder / path
        if path in at_commit and path.rsplit("/", 1)[-1] == "pyproject.toml":
            merged = merge_pytest_tables(
                git(repo, "cat-file", "blob", at_commit[path]),
                git(repo, "cat-file", "blob", at_base[path]) if path in at_base else None,
            )
            if merged is not None:
                target.write_bytes(merged)
                restored.append(path)
                continue
        if path in at_base:
            assert base is not None
            git(folder, "checkout", "--quiet", base, "--", path)
            restored.append(path)
        else:
            target.unlink()
            removed.append(path)
    return restored, removed


def _dissociate(folder: Path) -> None:
    """The room's repository made whole, with no alternates pointing back at the real one."""
    git(folder, "repack", "-a", "-d", "-q")
    (folder / ".git" / "objects" / "info" / "alternates").unlink(missing_ok=True)


def _passed_names(contract: Contract, environ: Mapping[str, str]) -> list[str]:
    """The variables a command of this contract may see (`ledger.tiers._signals` gives them)."""
    names = {n for n in BASE_ENVIRONMENT if n != "VIRTUAL_ENV" or n in environ}
    for check in contract.checks:
        env = thaw(check.param("env", ()))
        names.update(str(n) for n in (env if isinstance(env, list) else ()) if str(n) in environ)
    names.update(n for n in contract.secret_env if n in environ)
    return sorted(names)


def _restore_declared(
    folder: Path, base: str, globs: tuple[str, ...], at_base: dict[str, str], at_commit: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The protected paths and test files made the base's: (restored, kept new)."""
    restored, kept_new = [], []
    for path in sorted(set(at_base) | set(at_commit)):
        if not _matches(path, globs) or is_harness_path(path):
            continue  # a harness file is `_harness`'s, whatever the globs say
        if path not in at_base:
            kept_new.append(path)
        elif at_commit.get(path) != at_base[path]:
            git(folder, "checkout", "--quiet", base, "--", path)
            restored.append(path)
    return restored, kept_new


def _make(
    repo: Path, folder: Path, contract: Contract, commit: str, base: str | None, environ: Mapping[str, str]
) -> CleanRoom:
    """Fill ``folder`` as the clean room of ``commit`` and say how its commands will run."""
    git(repo, "clone", "--quiet", "--shared", "--no-checkout", str(repo.resolve()), str(folder))
    git(folder, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit)
    at_base, at_commit = (_files_at(repo, base) if base is not None else {}), _files_at(repo, commit)
    globs = (*contract.protected_paths, *contract.test_files)
    restored: list[str] = []
    kept_new: list[str] = []
    if base is not None and globs:
        restored, kept_new = _restore_declared(folder, base, globs, at_base, at_commit)
    harness_restored, removed = _harness(repo, folder, base, at_base, at_commit)
    restored = sorted({*restored, *harness_restored})
    _dissociate(folder)
    tests = [p for p in at_base if contract.test_files and _matches(p, contract.test_files)]
    made = CleanRoom(
        folder,
        base,
        tuple(restored),
        tuple(kept_new),
        False,
        "",
        (),
        tuple(removed),
        expected=tuple(expected_tests(folder, tests)),
    )
    box = make_sandbox(environ)
    if isinstance(box, Sandbox):
        network = "cut: each command runs in a bubblewrap sandbox with a network namespace of its own"
        doc = box.document(_passed_names(contract, environ), ())
        return dataclasses.replace(made, network_cut=True, network=network, sandbox=box, sandbox_doc=doc)
    prefix, network = _network_cut()
    return dataclasses.replace(
        made,
        network_cut=bool(prefix),
        network=network,
        command_prefix=prefix,
        sandbox_refused=box if contract.sandbox else None,
        sandbox_doc={"tool": None, "error": box},
    )


@contextlib.contextmanager
def clean_room(
    repo: Path, contract: Contract, commit: str, base: str | None, environ: Mapping[str, str] | None = None
) -> Iterator[CleanRoom]:
    """A clean room for ``commit``, removed when the block ends.

    Args:
        repo: the repository holding the candidate.
        contract: its protected paths and test files are restored from ``base``; its
            policy says whether commands must run in a sandbox.
        commit: the candidate commit.
        base: the base revision (None: nothing to restore from; the room is still clean,
            and every harness file is the candidate's new one, so removed).
        environ: the runner's environment (where bwrap is, which Pythons the sandbox binds).

    Raises:
        InputError: git could not make the room.
    """
    holder = Path(tempfile.mkdtemp(prefix="receipt-ledger-clean-room-"))
    try:
        try:
            room = _make(repo, holder / "tree", contract, commit, base, dict(environ or {}))
        except InputError as exc:
            raise InputError("cannot make the clean room: %s" % exc) from None
        yield room
    finally:
        shutil.rmtree(holder, ignore_errors=True)
