"""The web view's index as an auditor meets it (issue 45): kept in a file beside the ledger
so a restarted view reads only what was appended since; rebuilt when it no longer matches
its ledger; search paged with no silent cap; the target branch's commits with their
receipt, found through their tree (a squash merge included), or its absence; the task list
naming the receipt a merge rests on."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import receipts as r
from conftest import ADMIN_ID, SIGNERS, TASK, build_sample, git, run_cli
from ledger import Ledger, web_app
from ledger.web import Branch, ChainIndex, receipt_name
from verify import LedgerSource, TrustRoot

TRUST = TrustRoot(frozenset({ADMIN_ID}), "test")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_sample(tmp_path_factory.mktemp("web-index"))


def _client(root: Path, index: ChainIndex | None = None, branch: Branch | None = None) -> TestClient:
    return TestClient(web_app(lambda: LedgerSource.open(root), TRUST, index=index, branch=branch))


def _filler(root: Path, n: int, task: str = "FILLER") -> None:
    """``n`` failing deterministic records of another task, each on a candidate of its own."""
    env = r.domain_hash(r.Domain.ENVIRONMENT, b"test")
    ledger = Ledger.open(root)
    try:
        ledger.append_many(
            [
                r.new_tier_record(
                    task_id=task,
                    tier=r.Tier.DETERMINISTIC,
                    config_hash=env,
                    input_hash=r.domain_hash(r.Domain.CANDIDATE, b"filler %d" % i),
                    evidence=(),
                    verdict=r.Verdict.FAIL,
                    verifier="test filler",
                    verifier_version="0",
                    environment=env,
                    created=int(time.time()),
                )
                for i in range(n)
            ],
            SIGNERS["ci"],
        )
    finally:
        ledger.close()


def test_a_restarted_index_reads_only_what_was_appended_since(sample: Any, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sample.root, copy)
    path = tmp_path / "index.sqlite"
    first = ChainIndex(path)
    with LedgerSource.open(copy) as source:
        assert first.update(source) == source.count()
        whole = first.rows_between(0, source.count())
    first.close()
    # A new process on the same file: every row is there before it reads the ledger at all.
    again = ChainIndex(path)
    assert again.rows_between(0, len(whole)) == whole
    receipt = again.row(sample.receipt)
    assert receipt is not None and receipt.verdict == "eligible"
    with LedgerSource.open(copy) as source:
        assert again.update(source) == 0
    _filler(copy, 3)
    with LedgerSource.open(copy) as source:
        assert again.update(source) == 3
        assert [row.task for row in again.rows_between(len(whole), source.count())] == ["FILLER"] * 3
    again.close()


def test_an_index_of_another_ledger_is_rebuilt_not_trusted(sample: Any, tmp_path: Path) -> None:
    # Two ledgers of the same length that differ in their newest entry, then a shorter one.
    one, two = tmp_path / "one", tmp_path / "two"
    for copy, task in ((one, "ONE"), (two, "TWO")):
        shutil.copytree(sample.root, copy)
        _filler(copy, 2, task)
    index = ChainIndex(tmp_path / "index.sqlite")
    with LedgerSource.open(one) as source:
        index.update(source)
    with LedgerSource.open(two) as source:
        assert index.update(source) == source.count()  # read again from the start
        assert [row.task for row in index.rows_between(source.count() - 2, source.count())] == ["TWO", "TWO"]
    with LedgerSource.open(sample.root) as source:
        assert index.update(source) == source.count() == index.count()
    assert index.summary_of("TWO") is None and index.row(sample.receipt) is not None
    index.close()


def test_serve_keeps_its_index_beside_the_ledger(sample: Any, tmp_path: Path) -> None:
    from ledger import web_index

    copy = tmp_path / "copy"
    shutil.copytree(sample.root, copy)
    index, why = web_index(copy)
    assert why is None and index.path == copy / "cache" / "web-index.sqlite"
    assert _client(copy, index).get("/").status_code == 200
    index.close()
    reopened = ChainIndex(copy / "cache" / "web-index.sqlite")
    assert reopened.count() > 0
    reopened.close()


def test_search_is_paged_and_never_cut_off_unsaid(sample: Any, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sample.root, copy)
    _filler(copy, 150)
    client = _client(copy)
    first = client.get("/search", params={"q": "filler"}).text
    assert "Results 1 to 100, newest first." in first and "older results →" in first
    assert first.count("<tr><td>") == 100
    second = client.get("/search", params={"q": "filler", "page": "1"}).text
    assert "Results 101 to 150, newest first." in second and "older results" not in second
    assert "← newer results" in second and second.count("<tr><td>") == 50
    api = client.get("/api/search", params={"q": "filler"}).json()
    assert len(api["results"]) == 100 and api["next_page"] == 1
    last = client.get("/api/search", params={"q": "filler", "page": "1"}).json()
    assert len(last["results"]) == 50 and last["next_page"] is None
    # Together the pages hold every match once, newest first.
    seqs = [row["seq"] for row in api["results"] + last["results"]]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == 150


def _squashed_branch(sample: Any, tmp_path: Path) -> tuple[Path, str, str]:
    """A clone whose `trunk` holds a squash commit of the candidate (another commit, the
    same tree) and then a hotfix nobody sealed; returns the clone and the two commits."""
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(sample.repo), str(repo))
    squash = git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD~1", "-m", "TASK-1: add app (#7)").strip()
    git(repo, "checkout", "-q", "-b", "trunk", squash)
    (repo / "hotfix.txt").write_text("pushed straight to the branch\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hotfix without a receipt")
    return repo, squash, git(repo, "rev-parse", "HEAD").strip()


def test_the_commits_page_lists_the_branch_with_each_receipt_or_its_absence(sample: Any, tmp_path: Path) -> None:
    repo, squash, hotfix = _squashed_branch(sample, tmp_path)
    client = _client(sample.root, branch=Branch(repo, "trunk"))
    page = client.get("/commits.html").text
    rows = {row.split("</code>")[0]: row for row in page.split("<tr><td><code>")[1:]}
    assert set(rows) == {squash[:12], hotfix[:12], git(repo, "rev-parse", "HEAD~2").strip()[:12]}
    assert "receipt/%s.html" % receipt_name(sample.receipt) in rows[squash[:12]] and "eligible" in rows[squash[:12]]
    assert "no receipt for this commit or its tree" in rows[hotfix[:12]]
    # Search by the commit that is on the branch finds the receipt through its tree.
    found = client.get("/search", params={"q": squash[:10]}).text
    assert "receipt/%s.html" % receipt_name(sample.receipt) in found
    assert "No result." in client.get("/search", params={"q": hotfix[:10]}).text
    # Without a repository the page says so and lists the receipts by commit.
    bare = _client(sample.root).get("/commits.html").text
    assert "No repository was given (--repo)" in bare and receipt_name(sample.receipt) in bare


def test_serve_and_site_build_take_the_branch_from_the_repository(sample: Any, tmp_path: Path) -> None:
    repo, squash, _ = _squashed_branch(sample, tmp_path)
    out = tmp_path / "site"
    done = run_cli(
        "--dir",
        str(sample.root),
        "site",
        "build",
        str(out),
        "--trust",
        ADMIN_ID,
        "--repo",
        str(repo),
        "--branch",
        "trunk",
    )
    assert done.returncode == 0, done.stderr
    page = (out / "commits.html").read_text()
    assert "Commits on trunk" in page and squash[:12] in page and "no receipt for this commit or its tree" in page


def test_the_task_list_names_the_receipt_a_merge_rests_on(sample: Any, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sample.root, copy)
    head = git(sample.repo, "rev-parse", "HEAD").strip()
    listed = _client(copy).get("/api/tasks").json()
    (task,) = [t for t in listed if t["task"] == TASK]
    assert task["eligible_receipt"] == sample.receipt == task["latest_receipt"]
    assert task["state"] == "latest receipt claims: eligible (commit %s)" % head[:12]
    # A newer receipt that is not eligible (a later candidate, not yet approved) does not
    # hide the one the merged commit rests on.
    ledger = Ledger.open(copy)
    try:
        newer = r.LadderReceipt(
            task_id=TASK,
            input_hash=r.domain_hash(r.Domain.CANDIDATE, b"a later candidate"),
            config_hash=r.domain_hash(r.Domain.CONFIG, sample.contract),
            required=r.LADDER,
            entries=(),
            merge_eligible=False,
            created=int(time.time()),
        )
        ledger.append(newer, SIGNERS["sealer"])
    finally:
        ledger.close()
    (task,) = [t for t in _client(copy).get("/api/tasks").json() if t["task"] == TASK]
    assert task["eligible_receipt"] == sample.receipt != task["latest_receipt"]
    assert task["state"].startswith(
        "merge-eligible receipt claimed for commit %s; latest receipt claims: not eligible" % head[:12]
    )


def test_an_index_file_of_an_older_layout_is_built_again(sample: Any, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "index.sqlite"
    old = sqlite3.connect(path)  # the layout before rows had a provenance column
    old.executescript(
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '2');"
        "CREATE TABLE rows(seq INTEGER PRIMARY KEY, kind TEXT); INSERT INTO rows VALUES (0, 'genesis');"
    )
    old.commit()
    old.close()
    index = ChainIndex(path)
    assert index.count() == 0
    with LedgerSource.open(sample.root) as source:
        assert index.update(source) == source.count()
    assert index.row(sample.receipt) is not None
    index.close()


def test_a_repository_that_is_not_there_is_one_line_and_exit_2(sample: Any, tmp_path: Path) -> None:
    out = tmp_path / "site"
    done = run_cli(
        "--dir", str(sample.root), "site", "build", str(out), "--trust", ADMIN_ID, "--repo", str(tmp_path / "no")
    )
    assert done.returncode == 2 and done.stderr.count("\n") <= 2 and "Traceback" not in done.stderr, done.stderr
    assert "--repo" in done.stderr and not out.exists()
