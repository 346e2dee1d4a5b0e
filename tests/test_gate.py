"""Receipts on pull requests: git notes, verify --commit, gate, pr-comment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GIT_ENV, git, make_repo, run_cli, sealed_repo


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Built once per module: a repository whose HEAD went through the whole ladder, and the keys."""
    tmp_path = tmp_path_factory.mktemp("flow")
    repo, env, receipt = sealed_repo(tmp_path)
    assert run_cli("checkpoint", "--key", "sealer", cwd=repo, env=env).returncode == 0
    return tmp_path, receipt


@pytest.fixture
def flow(built: tuple[Path, str], tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A fresh copy of the built repository, ledger and keys for each test (tests change them)."""
    source, receipt = built
    shutil.copytree(source, tmp_path / "flow")
    return tmp_path / "flow" / "repo", {"RECEIPT_LEDGER_KEYS": str(tmp_path / "flow" / "keys"), **GIT_ENV}, receipt


def test_attach_shows_in_git_log_and_verify_commit(flow: tuple[Path, dict[str, str], str]) -> None:
    repo, env, receipt = flow
    res = run_cli("attach", receipt, cwd=repo, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == git(repo, "rev-parse", "HEAD")
    log = git(repo, "log", "-1", "--notes=receipts")
    assert "receipt-ledger: %s commit=%s" % (receipt, git(repo, "rev-parse", "HEAD")) in log
    assert "merge_eligible=true deterministic=pass judge=pass human=pass" in log
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0  # idempotent
    assert git(repo, "notes", "--ref=receipts", "show", "HEAD").count("receipt-ledger: " + receipt) == 1
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    assert git(repo, "notes", "--ref=receipts", "show", tree).count("receipt-ledger: " + receipt) == 1
    verified = run_cli("verify", "--commit", "HEAD", "--json", cwd=repo, env=env)
    assert verified.returncode == 0, verified.stderr
    [check] = json.loads(verified.stdout)
    assert check["result"]["verified"] and check["match"] == "commit"
    assert check["origin"] == "bundle refs/receipts/" + receipt.removeprefix("blake3:")


def test_gate_passes_only_for_the_exact_commit(flow: tuple[Path, dict[str, str], str]) -> None:
    repo, env, receipt = flow
    run_cli("attach", receipt, cwd=repo, env=env)
    # Issue 22: by proof alone the task's completeness is unproven, and the gate refuses.
    unproven = run_cli("gate", "--json", cwd=repo, env=env)
    doc = json.loads(unproven.stdout)
    assert unproven.returncode == 1 and doc["receipt"] is None, unproven.stdout
    assert "completeness of task TASK-1" in doc["reasons"][0] and "--audit-state" in doc["reasons"][0]
    assert doc["receipts"][0]["completeness"] == "unproven"
    # CI that can reach the store audits its chain (keeping its state) and proves it.
    state = repo.parent / "gate-audit.json"
    # Only a store the caller names: a ledger found in the checkout is the candidate's own.
    found = run_cli("gate", "--audit-state", str(state), cwd=repo, env=env)
    assert found.returncode == 2 and "candidate's own" in found.stderr and not state.exists()
    passed = run_cli("--dir", ".ledger", "gate", "--audit-state", str(state), cwd=repo, env=env)
    assert passed.returncode == 0 and "GATE PASS" in passed.stdout, passed.stdout
    assert "completeness: audited" in passed.stdout and json.loads(state.read_text())["size"] > 0
    (repo / "app.py").write_text("print('new head')\n")
    git(repo, "commit", "-qam", "TASK-1: one more change")
    head = run_cli("gate", "HEAD", "--json", cwd=repo, env=env)
    assert head.returncode == 1 and "no receipt is attached" in json.loads(head.stdout)["reasons"][0]


def test_gate_fails_on_a_stale_receipt(flow: tuple[Path, dict[str, str], str]) -> None:
    repo, env, receipt = flow
    run_cli("attach", receipt, cwd=repo, env=env)
    old = git(repo, "rev-parse", "HEAD")
    (repo / "app.py").write_text("print('tree changed after sealing')\n")
    git(repo, "commit", "-qam", "TASK-1: after the seal")
    git(repo, "notes", "--ref=receipts", "copy", old, "HEAD")  # as a rebase with notes.rewriteRef would
    stale = run_cli("gate", "HEAD", "--json", cwd=repo, env=env)
    assert stale.returncode == 1 and "stale" in json.loads(stale.stdout)["reasons"][0]
    assert run_cli("attach", receipt, "--commit", "HEAD", cwd=repo, env=env).returncode == 2  # not its candidate


def test_gate_fails_on_a_receipt_that_is_not_eligible(flow: tuple[Path, dict[str, str], str]) -> None:
    repo, env, _ = flow
    assert (
        run_cli(
            "reject", "TASK-1", "--key", "alice", "--yes", "--reason", "changed my mind", cwd=repo, env=env
        ).returncode
        == 0
    )
    receipt = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env).stdout.strip()
    assert run_cli("attach", receipt, "--key", "sealer", cwd=repo, env=env).returncode == 0
    # the earlier, eligible receipt is not attached; only the honest negative one is
    gated = run_cli("gate", "--json", cwd=repo, env=env)
    assert gated.returncode == 1 and "not merge-eligible" in json.loads(gated.stdout)["reasons"][0]


def test_pr_comment_is_markdown_with_the_ladder_and_how_to_verify(flow: tuple[Path, dict[str, str], str]) -> None:
    repo, env, receipt = flow
    text = run_cli("pr-comment", receipt[:19], cwd=repo, env=env).stdout  # a table's prefix will do
    assert text.startswith("### receipt-ledger: TASK-1 **merge-eligible**")
    assert "| deterministic | yes | ✅ pass |" in text and "ledger verify --commit" in text
    # What the action's comment says, the command says too: the goal and each check.
    goal = next(line for line in text.splitlines() if line.startswith("**Goal:**"))
    assert len(goal) > len("**Goal:** "), text
    assert "| check | status | reason |" in text and "✅ pass" in text.split("| check | status | reason |")[1], text


def test_verify_commit_without_receipts_is_a_clean_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    assert run_cli("init", cwd=repo, env=env).returncode == 0
    # main does not hold the pin yet: the working tree's copy is the candidate's, never trusted
    for args in (("verify", "--commit", "HEAD"), ("gate",)):
        refused = run_cli(*args, cwd=repo, env=env)
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert (
            refused.stderr.count("\n") == 1 and "no trust root (main has no .ledger/allowed_signers)" in refused.stderr
        )
    pin = ("--trust", ".ledger/allowed_signers")
    res = run_cli("verify", "--commit", "HEAD", *pin, cwd=repo, env=env)
    assert res.returncode == 2 and "no receipt is attached" in res.stderr
    gated = run_cli("gate", *pin, cwd=repo, env=env)
    assert gated.returncode == 1 and "GATE FAIL" in gated.stdout
    assert (
        subprocess.run(["git", "notes", "--ref=receipts", "list"], cwd=repo, capture_output=True, text=True).stdout
        == ""
    )


def test_attach_works_where_git_knows_no_identity(flow: tuple[Path, dict[str, str], str], tmp_path: Path) -> None:
    # issue 11, item 12: a fresh CI machine has no user.name or user.email.
    repo, env, receipt = flow
    bare = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    bare.update(
        HOME=str(tmp_path / "home"),
        GIT_CONFIG_NOSYSTEM="1",
        RECEIPT_LEDGER_KEYS=env["RECEIPT_LEDGER_KEYS"],
        EMAIL="",
        GIT_CONFIG_GLOBAL=str(tmp_path / "no-config"),
    )
    assert (
        subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], cwd=repo, env=bare, capture_output=True).returncode != 0
    )
    res = subprocess.run(
        [sys.executable, "-m", "ledger", "attach", receipt], cwd=repo, env=bare, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert "receipt-ledger: " + receipt in git(repo, "notes", "--ref=receipts", "show", "HEAD")


def test_advisory_mode_without_a_key_is_bad_input(flow: tuple[Path, dict[str, str], str]) -> None:
    repo, env, _ = flow
    res = run_cli("gate", "--mode", "advisory", cwd=repo, env=env)
    assert res.returncode == 2 and "pass --key" in res.stderr and "Traceback" not in res.stderr


def test_a_rollback_of_the_store_blocks_the_gate_that_audited_it(flow: tuple[Path, dict[str, str], str]) -> None:
    """Issue 22, case 10 for the gate: CI's gate keeps its audit state; deleting the store's
    newest entry and its checkpoint afterwards (a rollback no mirror saw) makes its next
    audit fail, so the gate blocks instead of passing on the shortened store."""
    import sqlite3

    repo, env, receipt = flow
    store = ("--dir", ".ledger")
    state = repo.parent / "gate-audit.json"
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0
    # A later entry (a new reviewer's key) and a checkpoint over it; the gate audits both.
    assert run_cli("keys", "generate", "bob", "--role", "human", cwd=repo, env=env).returncode == 0
    assert run_cli("checkpoint", "--key", "sealer", cwd=repo, env=env).returncode == 0
    before = run_cli(*store, "gate", "--audit-state", str(state), cwd=repo, env=env)
    assert before.returncode == 0, before.stdout
    audited = json.loads(state.read_text())["size"]
    conn = sqlite3.connect(repo / ".ledger" / "ledger.db")
    with conn:
        conn.execute("DELETE FROM checkpoints WHERE size = ?", (audited,))
        conn.execute("DELETE FROM entries WHERE seq = ?", (audited - 1,))
    conn.close()
    after = run_cli(*store, "gate", "--json", "--audit-state", str(state), cwd=repo, env=env)
    doc = json.loads(after.stdout)
    assert after.returncode == 1 and doc["receipt"] is None, after.stdout
    assert "the gate's audit of the store failed" in doc["reasons"][0], doc["reasons"]
    assert "[history-rewritten]" in doc["reasons"][0], doc["reasons"]
    assert json.loads(state.read_text())["size"] == audited  # the refusal keeps the state


def test_a_receipt_without_a_bundle_is_read_only_from_a_ledger_the_caller_names(
    flow: tuple[Path, dict[str, str], str],
) -> None:
    """Issue 22, cases 4 and 5: with no bundle in git, the gate would read the receipt from a
    ledger; one found in the checkout (or named by its config.toml) is the candidate's, and
    a private copy committed there would be walked and so proven complete. The gate reads
    only a ledger the caller names."""
    repo, env, receipt = flow
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0
    git(repo, "update-ref", "-d", "refs/receipts/" + receipt.split(":", 1)[1])
    found = run_cli("gate", "--json", cwd=repo, env=env)
    doc = json.loads(found.stdout)
    assert found.returncode == 1 and doc["receipt"] is None, found.stdout
    problem = doc["receipts"][0]["problem"]
    assert "read only from the store you name" in problem and "the candidate's own" in problem, problem
    named = run_cli("--dir", ".ledger", "gate", "--json", cwd=repo, env=env)
    checked = json.loads(named.stdout)["receipts"][0]
    assert checked["origin"] == "ledger" and checked["result"]["verified"] is True, checked


def test_a_queue_receipt_without_approvals_does_not_turn_the_reviewed_tree_red(
    flow: tuple[Path, dict[str, str], str],
) -> None:
    # The merge queue's commit holds the reviewed tree; its CI reran check, judge and seal
    # there: a new candidate with no approvals, so a receipt that is not eligible but records
    # no failure. It must not outvote the reviewed receipt of the same tree (format.md §12).
    repo, env, receipt = flow
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0
    reviewed = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "TASK-1: friendlier greeting (#7)")
    # The queue compares with the target branch, here the commit before the reviewed one.
    for args in (("check", "TASK-1", "--key", "ci", "--base", reviewed + "~1"), ("judge", "TASK-1", "--key", "judge")):
        res = run_cli(*args, cwd=repo, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
    queued = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env)
    assert queued.returncode == 0 and "merge_eligible=false" in queued.stderr, queued.stderr
    assert run_cli("attach", queued.stdout.strip(), "--key", "sealer", cwd=repo, env=env).returncode == 0
    state = repo.parent / "gate-audit.json"
    for rev in (reviewed, "HEAD"):
        gated = run_cli("--dir", ".ledger", "gate", rev, "--audit-state", str(state), "--json", cwd=repo, env=env)
        assert gated.returncode == 0 and json.loads(gated.stdout)["receipt"] == receipt, gated.stdout
    # A human rejection on that tree still decides: nothing outvotes a recorded failure.
    rejected = ("reject", "TASK-1", "--key", "alice", "--yes", "--reason", "the queue build differs")
    assert run_cli(*rejected, cwd=repo, env=env).returncode == 0
    blocking = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env).stdout.strip()
    assert run_cli("attach", blocking, "--key", "sealer", cwd=repo, env=env).returncode == 0
    for rev in (reviewed, "HEAD"):
        gated = run_cli("--dir", ".ledger", "gate", rev, "--audit-state", str(state), "--json", cwd=repo, env=env)
        doc = json.loads(gated.stdout)
        assert gated.returncode == 1 and "the newest receipt decides" in doc["reasons"][0], gated.stdout


def test_the_comment_opens_with_the_decision_and_lists_failing_checks_first() -> None:
    from ledger import pr_comment
    from verify import Result

    result = Result(
        target="blake3:" + "a" * 64,
        defects=(),
        trust="pinned",
        task_id="T-1",
        candidate="blake3:" + "b" * 64,
        derived_eligible=False,
        eligibility_reasons=("1 of 2 required human approvals",),
    )
    manifest = {
        "contract": {"goal": "friendlier greeting"},
        "checks": [
            {"id": "lint", "status": "pass", "reason": "exit code 0"},
            {"id": "tests", "status": "fail", "reason": "exit code 1"},
        ],
        "decisions": [{"decision": "approve", "name": "alice", "method": "interactive", "time": 0, "note": "fine"}],
    }
    text = pr_comment(result, "blake3:" + "a" * 64, manifest, "c" * 40)
    lines = text.splitlines()
    assert lines[0] == "### receipt-ledger: T-1 **NOT merge-eligible**"
    assert text.index("Not eligible because:") < text.index("**Goal:** friendlier greeting")
    assert text.index("| tests | ❌ fail | exit code 1 |") < text.index("| lint | ✅ pass | exit code 0 |")
    assert "- ✅ alice approved (interactive, 1970-01-01T00:00:00Z): fine" in lines
    assert "ledger verify --commit " + "c" * 40 in lines


def test_verify_commit_says_which_receipt_decides_and_why_the_others_do_not(
    flow: tuple[Path, dict[str, str], str],
) -> None:
    # Issue 46: three receipts on one commit read as three verdicts. The first line is the
    # decision the gate makes, naming its receipt; each other receipt says why it does not decide.
    repo, env, receipt = flow
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0
    rejected = ("reject", "TASK-1", "--key", "alice", "--yes", "--reason", "changed my mind")
    assert run_cli(*rejected, cwd=repo, env=env).returncode == 0
    blocking = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env).stdout.strip()
    assert run_cli("attach", blocking, "--key", "sealer", cwd=repo, env=env).returncode == 0
    shown = run_cli("verify", "--commit", "HEAD", cwd=repo, env=env)
    assert shown.returncode == 3, shown.stdout + shown.stderr  # verified, not eligible (docs/format.md §8a)
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("NOT MERGE-ELIGIBLE: decided by receipt %s" % blocking), lines[:3]
    assert (
        lines[1]
        == "  does not decide: %s is older than the deciding receipt (or sealed with it and outvoted)" % receipt
    )
    # The deciding receipt's own block comes first; the older one's follows.
    assert shown.stdout.index("receipt   " + blocking) < shown.stdout.index("receipt   " + receipt)
    doc = json.loads(run_cli("verify", "--commit", "HEAD", "--json", cwd=repo, env=env).stdout)
    assert {c["receipt"]: c["decides"] for c in doc} == {blocking: True, receipt: False}


_CONTRADICTS_A_PASS = ("not eligible", "not merge-eligible", "rejected")


def test_a_pass_reads_as_one_verdict_on_every_screen(flow: tuple[Path, dict[str, str], str]) -> None:
    # Issue 46: gate, verify and seal print the decision first, and no line under a pass
    # says the opposite ("not eligible", "unproven") of the same decision; how a receipt was
    # checked is a note, never a warning.
    repo, env, receipt = flow
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0
    state = repo.parent / "gate-audit.json"
    screens = {
        "gate": run_cli("--dir", ".ledger", "gate", "--audit-state", str(state), cwd=repo, env=env),
        "verify": run_cli("verify", receipt, cwd=repo, env=env),
        "verify --commit": run_cli("--dir", ".ledger", "verify", "--commit", "HEAD", cwd=repo, env=env),
    }
    for args in (("check", "TASK-1", "--key", "ci"), ("judge", "TASK-1", "--key", "judge")):
        assert run_cli(*args, cwd=repo, env=env).returncode == 0
    assert run_cli("approve", "TASK-1", "--key", "alice", "--yes", "--comment", "ok", cwd=repo, env=env).returncode == 0
    screens["seal"] = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env)
    for name, shown in screens.items():
        text = (shown.stdout + shown.stderr).lower()
        assert shown.returncode == 0, (name, text)
        found = [word for word in _CONTRADICTS_A_PASS if word in text]
        assert not found, (name, found, shown.stdout + shown.stderr)
        notes = [line for line in text.splitlines() if "warning: checked by" in line or "warning: bundle: " in line]
        assert not notes, (name, notes)
        # Completeness: the gate audited it (never "unproven" under its pass); a verify by
        # proof with no auditing witness says so once, as the one warning that needs action.
        assert text.count("unproven") == (
            0 if name in ("gate", "seal") else text.count("warning: completeness unproven")
        )
        assert text.count("warning: completeness unproven") <= 1, (name, text)


def test_agent_written_text_in_the_comment_pings_nobody_and_links_nowhere() -> None:
    # Issue 47: a goal, a check's reason or a note reach the pull request's comment; GitHub
    # would notify an @mention and link an address there. They read the same, inert.
    from ledger import pr_comment
    from verify import Result

    result = Result(
        target="blake3:" + "a" * 64, defects=(), trust="pinned", task_id="T-1", candidate="blake3:" + "b" * 64
    )
    hostile = "ping @octocat, see https://evil.example/x or www.evil.example and [click](javascript:alert(1))"
    manifest = {"contract": {"goal": hostile}, "checks": [{"id": "tests", "status": "fail", "reason": hostile}]}
    text = pr_comment(result, "blake3:" + "a" * 64, manifest, "c" * 40)
    assert "@octocat" not in text and "@\u2060octocat" in text
    assert "https://evil" not in text and "www.evil" not in text
    assert "](javascript:" not in text.replace("\\](javascript:", "")  # the bracket is escaped: no link
    assert text.count("\\[click\\]") == 2
