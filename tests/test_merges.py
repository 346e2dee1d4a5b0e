"""The population of merges (issue 45): every commit that reached main in the quarter,
from git, each matched to the receipts and gate decisions for its commit or tree, judged
at the time of the merge. The history here is the auditor's quarter: a clean merge, a
merge made with one of two approvals and approved after the fact, a change approved by
its own author, and a hotfix pushed with no receipt.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from docs_as_written import blocks, paragraphs, run_shell

import receipts as r
from conftest import ADMIN_ID, SIGNERS, contract_bytes, git, run_cli, sign_decision
from ledger import (
    MERGE_COLUMNS,
    CheckRun,
    Ledger,
    attach,
    frozen_clock,
    gate,
    merges,
    population,
    run_deterministic,
    run_judge,
    seal_receipt,
)
from verify import TrustRoot

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")


def _at(month: int, day: int, hour: int = 12) -> int:
    return int(datetime.datetime(2027, month, day, hour, tzinfo=datetime.UTC).timestamp())


def _commit_on(repo: Path, branch: str, name: str, when: int, author: str = "t <t@example.invalid>") -> None:
    git(repo, "checkout", "-q", "-b", branch, "main")
    (repo / "app.py").write_text("print(%r)\n" % name)
    _git_at(repo, when, author, "commit", "-qam", "%s: %s" % (branch, name))


def _git_at(repo: Path, when: int, author: str, *args: str) -> None:
    name, _, email = author.partition(" <")
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email.rstrip(">"),
        GIT_COMMITTER_NAME="merger",
        GIT_COMMITTER_EMAIL="merger@example.invalid",
        GIT_AUTHOR_DATE="@%d +0000" % when,
        GIT_COMMITTER_DATE="@%d +0000" % when,
        GIT_CONFIG_NOSYSTEM="1",
        HOME="/nonexistent",
    )
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _merge(repo: Path, branch: str, when: int) -> str:
    git(repo, "checkout", "-q", "main")
    _git_at(repo, when, "merger <merger@example.invalid>", "merge", "-q", "--no-ff", "-m", "merge " + branch, branch)
    return git(repo, "rev-parse", "HEAD")


def _task(env: tuple[Path, Ledger], task: str, when: int, approvers: tuple[str, ...]) -> tuple[bytes, r.Digest, str]:
    """The lower tiers on the checked-out branch, the approvals, and a sealed receipt."""
    repo, ledger = env
    contract = contract_bytes(task=task).replace(
        b'required_tiers = ["deterministic", "judge", "human"]',
        b'required_tiers = ["deterministic", "judge", "human"]\nhuman_approvals = 2',
    )
    with frozen_clock(when):
        run = _lower(env, contract, task)
        for who in approvers:
            sign_decision(ledger, repo, contract, run.record.input_hash, SIGNERS[who], task=task)
        _, appended = seal_receipt(ledger, task_id=task, signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    return contract, run.record.input_hash, str(appended.body_hash)


def _lower(env: tuple[Path, Ledger], contract: bytes, task: str) -> CheckRun:
    repo, ledger = env
    run = run_deterministic(
        ledger, repo=repo, task_id=task, contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    run_judge(ledger, task_id=task, contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"])
    return run


def _quarter(env: tuple[Path, Ledger]) -> dict[str, str]:
    """The quarter's history on main; returns the commits by what they are."""
    repo, ledger = env
    out = {}
    # January: a clean merge, two approvals before it.
    _commit_on(repo, "feat-1", "one", _at(1, 9))
    _task(env, "TASK-1", _at(1, 10), ("alice", "bob"))
    out["clean"] = _merge(repo, "feat-1", _at(1, 11))
    # February: merged with one of two approvals; the gate on the merge commit said no
    # (recorded, advisory); bob approved two days later and the receipt was sealed again.
    _commit_on(repo, "feat-2", "two", _at(2, 1))
    contract, candidate, early = _task(env, "TASK-2", _at(2, 2), ("alice",))
    with frozen_clock(_at(2, 2, 13)):
        attach(ledger, repo, r.Digest.parse(early), None, SIGNERS["sealer"])
    out["early"] = _merge(repo, "feat-2", _at(2, 5))
    with frozen_clock(_at(2, 5, 13)):
        gate(repo, out["early"], TRUST, mode="advisory", recorder=(ledger, SIGNERS["sealer"]), task="TASK-2")
    with frozen_clock(_at(2, 7)):
        sign_decision(ledger, repo, contract, candidate, SIGNERS["bob"], task="TASK-2")
        seal_receipt(ledger, task_id="TASK-2", signer=SIGNERS["sealer"], input_hash=candidate)
    # March: alice wrote the change and approved it herself (with bob: two approvals).
    _commit_on(repo, "feat-3", "three", _at(3, 1), author="Alice Example <alice@example.com>")
    _task(env, "TASK-3", _at(3, 2), ("alice", "bob"))
    out["self"] = _merge(repo, "feat-3", _at(3, 3))
    # A hotfix pushed straight to main, with no receipt at all.
    (repo / "hotfix.txt").write_text("urgent\n")
    git(repo, "add", "hotfix.txt")
    _git_at(repo, _at(3, 20), "ops <ops@example.invalid>", "commit", "-qm", "hotfix")
    out["hotfix"] = git(repo, "rev-parse", "HEAD")
    with frozen_clock(_at(3, 21)):
        ledger.checkpoint(SIGNERS["sealer"])
    return out


@pytest.fixture
def quarter(env: tuple[Path, Ledger]) -> tuple[Path, Ledger, dict[str, str]]:
    repo, ledger = env
    return repo, ledger, _quarter(env)


def test_each_commit_on_main_is_a_row_with_its_findings(quarter: tuple[Path, Ledger, dict[str, str]]) -> None:
    repo, ledger, commits = quarter
    rows = {row.commit: row for row in merges(ledger, TRUST, repo, "main", _at(1, 1), _at(4, 1))}
    assert set(rows) == set(commits.values())
    clean, early, selfish, hotfix = (rows[commits[k]] for k in ("clean", "early", "self", "hotfix"))
    assert clean.findings == () and clean.eligible_at_merge and clean.approvals == ("alice", "bob")
    assert clean.kind == "merge" and clean.task == "TASK-1" and clean.required_approvals == 2
    # Merged with 1 of 2: not eligible then, whatever the receipt sealed after says.
    assert not early.eligible_at_merge and early.approvals == ("alice",)
    assert "not eligible at merge" in early.findings and "approved after the merge" in early.findings
    assert any(text.startswith("approval by bob at 2027-02-07") for text in early.after_merge)
    assert any(text.endswith("(eligible)") for text in early.after_merge)
    # The gate's decision on the merge commit is found (it judged that commit, not the branch's).
    assert early.gate is not None and not early.gate.startswith("pass")
    assert any(f.startswith("the gate decided") for f in early.findings)
    assert selfish.approver_is_author == ("alice",) and "approved by its author: alice" in selfish.findings
    assert selfish.author == "Alice Example <alice@example.com>" and selfish.eligible_at_merge
    assert hotfix.kind == "direct push" and hotfix.receipt is None and hotfix.task is None
    assert hotfix.findings == ("no receipt covers this commit or its tree",)
    # The period is by merge time: January alone holds the clean merge, and only the receipts
    # covering a commit of the period are verified (one here), not every receipt of the ledger.
    verified: list[int] = []
    january = merges(ledger, TRUST, repo, "main", _at(1, 1), _at(2, 1), verified.append)
    assert [row.commit for row in january] == [commits["clean"]] and len(verified) == 1
    everything: list[int] = []
    merges(ledger, TRUST, repo, "main", _at(1, 1), _at(4, 1), everything.append)
    assert len(everything) > 1


def test_the_receipt_population_shows_the_gate_decision_made_on_the_merge_commit(
    quarter: tuple[Path, Ledger, dict[str, str]],
) -> None:
    _, ledger, _ = quarter
    rows = population(ledger, TRUST, _at(1, 1), _at(4, 1))
    decided = {row.task: row.gate for row in rows if row.gate}
    # The gate ran on the merge commit (another candidate, the same tree) and named the
    # receipt that decided it: the population shows it on that receipt.
    assert decided == {"TASK-2": "would-block (advisory)"}, decided


def _csv(repo: Path, ledger: Ledger) -> str:
    ledger.close()
    base = ("--dir", str(ledger.root), "report", "--merges", "main", "--trust", ADMIN_ID)
    out = run_cli(*base, "--from", "2027-01-01", "--to", "2027-03-31", "--csv", cwd=repo)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_cli_csv_flags_what_the_auditor_looks_for(quarter: tuple[Path, Ledger, dict[str, str]]) -> None:
    repo, ledger, commits = quarter
    table = list(csv.DictReader(io.StringIO(_csv(repo, ledger))))
    assert list(table[0]) == list(MERGE_COLUMNS)
    flagged = {row["commit"]: row["findings"] for row in table}
    assert flagged[commits["hotfix"]] == "no receipt covers this commit or its tree"
    assert "not eligible at merge" in flagged[commits["early"]]
    assert "approved after the merge" in flagged[commits["early"]]
    assert "approved by its author: alice" in flagged[commits["self"]]
    assert flagged[commits["clean"]] == ""
    assert {row["merged_at_utc"] for row in table} == {
        "2027-01-11T12:00:00",
        "2027-02-05T12:00:00",
        "2027-03-03T12:00:00",
        "2027-03-20T12:00:00",
    }


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice Calc is installed by .ci/run")
def test_the_csv_opens_with_dates_as_dates_in_libreoffice(
    quarter: tuple[Path, Ledger, dict[str, str]], tmp_path: Path
) -> None:
    repo, ledger, _ = quarter
    sheet = tmp_path / "merges.csv"
    sheet.write_text(_csv(repo, ledger))
    profile = tmp_path / "lo-profile"  # its own profile: two runs at once never share one
    subprocess.run(
        ["soffice", "-env:UserInstallation=" + profile.as_uri(), "--headless", "--convert-to", "fods", str(sheet)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    fods = tmp_path / "merges.fods"
    for column in ("merged_at_utc", "receipt_sealed_at_utc"):
        types = _column_types(fods, MERGE_COLUMNS.index(column))
        # The hotfix has no receipt: its sealed-at cell is empty, every other one a date.
        assert types == (["date"] * 4 if column == "merged_at_utc" else ["date", "date", "date", ""]), (column, types)


def _column_types(fods: Path, column: int) -> list[str]:
    ns = {
        "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
        "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    }
    rows = ET.parse(fods).getroot().findall(".//table:table-row", ns)[1:]
    found = []
    for row in rows:
        cells = []
        for cell in row.findall("table:table-cell", ns):
            repeat = int(cell.get("{%s}number-columns-repeated" % ns["table"], "1"))
            cells += [cell.get("{%s}value-type" % ns["office"], "")] * min(repeat, 64)
        if any(cells):
            found.append(cells[column] if column < len(cells) else "")
    return found


def test_the_sample_is_reproducible_and_exports_its_bundles(
    quarter: tuple[Path, Ledger, dict[str, str]], tmp_path: Path
) -> None:
    repo, ledger, _ = quarter
    ledger.close()
    base = ("--dir", str(ledger.root), "report", "--merges", "main", "--trust", ADMIN_ID)
    period = ("--from", "2027-01-01", "--to", "2027-03-31")
    drawn = [
        [
            row["commit"]
            for row in json.loads(run_cli(*base, *period, "--sample", "2", "--seed", seed, "--json", cwd=repo).stdout)
        ]
        for seed in ("q1", "q1", "other")
    ]
    assert drawn[0] == drawn[1] and len(drawn[0]) == 2
    exported = run_cli(
        *base, *period, "--sample", "4", "--seed", "q1", "--export-sample", str(tmp_path / "s"), "--json", cwd=repo
    )
    assert exported.returncode == 0, exported.stderr
    bundles = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert len(bundles) == 3 and "no receipt to export" in exported.stderr  # the hotfix has none
    for bundle in bundles:
        checked = run_cli("verify", "--bundle", str(tmp_path / "s" / bundle), "--trust", ADMIN_ID)
        assert checked.returncode in (0, 3) and "VERIFIED" in checked.stdout, checked.stdout + checked.stderr


def test_bad_input_is_one_line_and_exit_2(quarter: tuple[Path, Ledger, dict[str, str]]) -> None:
    repo, ledger, _ = quarter
    ledger.close()
    base = ("--dir", str(ledger.root), "report", "--trust", ADMIN_ID, "--from", "2027-01-01", "--to", "2027-03-31")
    for args, said in (
        (("--merges", "nosuch"), "cannot read the history of refs/heads/nosuch"),
        (("--merges", "HEAD~1"), "--merges takes a branch"),
        (("--merges", "main", "--sample", "0"), "--sample takes a positive number"),
        (("--sample", "2"), "--sample draws from --merges"),
        (("--merges", "main", "--csv", "--json"), "choose --csv or --json"),
    ):
        out = run_cli(*base, *args, cwd=repo)
        assert out.returncode == 2 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_the_compliance_page_runs_as_written(quarter: tuple[Path, Ledger, dict[str, str]]) -> None:
    repo, ledger, commits = quarter
    ledger.close()
    (block,) = blocks("compliance.md", "The auditor's quarter", "sh")
    path = "%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", ""))
    env = dict(os.environ, PATH=path, LEDGER_DIR=str(ledger.root))
    signers = run_cli("keys", "export-allowed-signers", env=env, cwd=repo)
    assert signers.returncode == 0, signers.stderr
    (repo / "allowed_signers").write_text(signers.stdout)
    for _heading, paragraph in paragraphs(block):
        done = run_shell(paragraph, repo, env)
        assert done.returncode == 0, done.stderr
    table = list(csv.DictReader(io.StringIO((repo / "merges.csv").read_text())))
    assert {row["commit"] for row in table} == set(commits.values())
    sampled = json.loads((repo / "sample.json").read_text())
    assert len(sampled) == 4  # fewer rows than asked: all of them
    assert len(list((repo / "sample").iterdir())) == 3  # the hotfix has no receipt to export
