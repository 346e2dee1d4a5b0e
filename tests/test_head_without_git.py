"""The Stop hook's candidate read from the repository's files (`ledger.head_candidate`): in
every shape a repository takes, it is git's answer or no answer (git is asked then).
"""

from __future__ import annotations

import zlib
from pathlib import Path

from conftest import git, make_repo
from ledger import head_candidate, resolve_commit


def _gits(repo: Path) -> dict[str, str]:
    return resolve_commit("HEAD", repo)


def test_a_fresh_commit_on_a_branch_is_read_as_git_reads_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert head_candidate(repo, {}) == _gits(repo)
    (repo / "app.py").write_text("print('again')\n")
    git(repo, "commit", "-qam", "TASK-1: again")
    assert head_candidate(repo, {}) == _gits(repo)


def test_a_packed_ref_and_a_detached_head_are_read_and_packed_objects_go_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert head_candidate(repo, {}) == _gits(repo)
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    assert head_candidate(repo, {}) == _gits(repo)
    git(repo, "checkout", "-q", "main")
    git(repo, "gc", "-q")  # the commit now lives in a pack
    assert head_candidate(repo, {}) is None


def test_what_git_could_read_differently_is_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert head_candidate(repo, {"GIT_SSL_CAINFO": "/etc/ssl/ca.pem", "GIT_AUTHOR_NAME": "a"}) == _gits(repo)
    assert head_candidate(repo, {"GIT_DIR": str(tmp_path / "elsewhere")}) is None
    assert head_candidate(repo, {"GIT_CONFIG_PARAMETERS": "'core.userepl'='x'"}) is None
    assert head_candidate(repo, {"GIT_REPLACE_REF_BASE": "refs/mine/"}) is None
    # A replace ref makes git read another commit in its place.
    head, other = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD~1")
    git(repo, "replace", head, other)
    assert head_candidate(repo, {}) is None
    git(repo, "pack-refs", "--all")  # the replace ref packed, the branch's ref loose again
    git(repo, "commit", "-q", "--allow-empty", "-m", "TASK-1: on top")
    assert (repo / ".git" / "refs" / "heads" / "main").is_file()
    assert head_candidate(repo, {}) is None
    # A linked work tree keeps its HEAD elsewhere.
    git(repo, "replace", "-d", head)
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"), "HEAD~1")
    assert head_candidate(tmp_path / "linked", {}) is None
    # An unborn branch.
    git(repo, "checkout", "-q", "--orphan", "fresh")
    assert head_candidate(repo, {}) is None


def test_a_loose_object_whose_bytes_do_not_give_its_id_is_not_believed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    commit = _gits(repo)["commit"]
    loose = repo / ".git" / "objects" / commit[:2] / commit[2:]
    data = zlib.decompress(loose.read_bytes())
    forged = data.replace(b"tree " + _gits(repo)["tree"].encode(), b"tree " + b"0" * 40)
    loose.chmod(0o600)
    loose.write_bytes(zlib.compress(forged))
    assert head_candidate(repo, {}) is None
    # A HEAD that names no ref git would accept is not followed either.
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/../../outside\n")
    assert head_candidate(repo, {}) is None
