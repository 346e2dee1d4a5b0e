"""HEAD's commit and tree read from the repository's files, without starting git: the
Stop hook names its candidate on every stop, and a git process is most of what that costs.

Only the plainest case is read here, and anything else is left to git (None): a
repository whose ``.git`` is a folder owned by this user, no ``GIT_*`` variable in the
environment that could change what git reads, no replace refs, grafts or reftable, HEAD
on a branch whose ref is a loose file or a line of ``packed-refs`` (or detached at a
commit), and the commit a loose object. The object's bytes are hashed and must give its
id, so what is read is the commit git would read; an id of another length (SHA-256
repositories) goes to git.
"""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from collections.abc import Mapping
from pathlib import Path

__all__ = ["head_candidate"]

# Variables git reads that cannot change which commit HEAD names or what it holds (the
# network, identities, editors, tracing); any other GIT_* variable sends the reading to git.
_HARMLESS = (
    *("GIT_SSL_", "GIT_HTTP_", "GIT_PROXY_", "GIT_SSH", "GIT_ASKPASS", "GIT_TERMINAL_PROMPT"),
    *("GIT_AUTHOR_", "GIT_COMMITTER_", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_TRACE"),
)
_SHA1 = re.compile(rb"[0-9a-f]{40}")
_BRANCH = re.compile(rb"ref: (refs/heads/[^\s]+)\n?")


def head_candidate(repo: Path, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The candidate fields of HEAD in the work tree ``repo`` (its commit and tree ids, as
    `resolve_commit` gives them), or None when git must be asked.
    """
    if any(name.startswith("GIT_") and not name.startswith(_HARMLESS) for name in environ):
        return None
    dot = repo / ".git"
    try:
        if not dot.is_dir() or dot.stat().st_uid != os.getuid():
            return None  # a linked work tree, or a folder git would call of dubious ownership
        if any((dot / name).exists() for name in ("commondir", "info/grafts", "reftable", "refs/replace")):
            return None
        try:
            packed = (dot / "packed-refs").read_bytes()
        except FileNotFoundError:
            packed = b""
        if b"refs/replace/" in packed:
            return None
        commit = _head_id(dot, packed)
        if commit is None:
            return None
        tree = _tree_of(dot, commit)
    except (OSError, ValueError, zlib.error):
        return None
    return None if tree is None else {"commit": commit.decode(), "tree": tree.decode()}


def _head_id(dot: Path, packed: bytes) -> bytes | None:
    head = (dot / "HEAD").read_bytes()
    if _SHA1.fullmatch(head.rstrip(b"\n")):
        return head.rstrip(b"\n")  # detached
    branch = _BRANCH.fullmatch(head)
    if branch is None:
        return None
    name = branch.group(1)
    if b".." in name or b"/." in name or b"//" in name or name.endswith((b"/", b".lock")):
        return None  # no ref git would accept
    loose = dot / os.fsdecode(name)
    if loose.is_file():
        found = loose.read_bytes().rstrip(b"\n")
        return found if _SHA1.fullmatch(found) else None  # a symbolic ref: git's to follow
    for line in packed.splitlines():
        if line.endswith(b" " + name) and _SHA1.fullmatch(line[:40]) and len(line) == 41 + len(name):
            return line[:40]
    return None  # an unborn branch


def _tree_of(dot: Path, commit: bytes) -> bytes | None:
    path = dot / "objects" / commit[:2].decode() / commit[2:].decode()
    try:
        data = zlib.decompress(path.read_bytes())
    except FileNotFoundError:
        return None  # packed: git reads packs
    if hashlib.sha1(data, usedforsecurity=False).hexdigest().encode() != commit:
        return None
    header, _, body = data.partition(b"\0")
    if header != b"commit %d" % len(body) or not body.startswith(b"tree "):
        return None
    tree = body[5:45]
    return tree if _SHA1.fullmatch(tree) and body[45:46] == b"\n" else None
