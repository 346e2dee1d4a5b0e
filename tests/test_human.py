"""The human tier and waivers, on real repositories with the real runners."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, cli_repo_with_lower_tiers, contract_bytes, git, run_cli, sign_decision
from ledger import (
    CheckRun,
    InputError,
    Ledger,
    frozen_clock,
    run_deterministic,
    run_judge,
    seal_receipt,
    waive_check,
)
from verify import LedgerSource, TrustRoot, verify_receipt


def two_approvals() -> bytes:
    base = contract_bytes().decode()
    assert "[policy]\n" in base
    return base.replace("[policy]\n", "[policy]\nhuman_approvals = 2\n").encode()


def lower_tiers(env: tuple[Path, Ledger], contract: bytes) -> CheckRun:
    repo, ledger = env
    run = run_deterministic(
        ledger, repo=repo, task_id="TASK-1", contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
    )
    return run


def vote(env: tuple[Path, Ledger], contract: bytes, candidate: r.Digest, who: str, approve: bool) -> None:
    repo, ledger = env
    sign_decision(ledger, repo, contract, candidate, SIGNERS[who], approve=approve, note="because")


def sealed(env: tuple[Path, Ledger], candidate: r.Digest) -> tuple[r.LadderReceipt, Any]:
    _, ledger = env
    receipt, appended = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=candidate)
    result = verify_receipt(
        LedgerSource.open(ledger.root), str(appended.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    assert result.ok, result.defects
    return receipt, result


def test_an_approval_of_candidate_a_does_not_approve_candidate_b(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    contract = contract_bytes()
    a = lower_tiers(env, contract)
    vote(env, contract, a.record.input_hash, "alice", True)
    (repo / "app.py").write_text("print('changed after approval')\n")
    git(repo, "commit", "-qam", "TASK-1: later change")
    b = lower_tiers(env, contract)
    receipt, result = sealed(env, b.record.input_hash)
    assert not receipt.merge_eligible and result.tiers[2].status == "skip"
    assert len(result.stale) == 1 and "approval by SHA256:" in result.stale[0]
    receipt_a, result_a = sealed(env, a.record.input_hash)
    assert receipt_a.merge_eligible and not result_a.stale


def test_the_same_human_approving_twice_counts_once(env: tuple[Path, Ledger]) -> None:
    contract = two_approvals()
    run = lower_tiers(env, contract)
    vote(env, contract, run.record.input_hash, "alice", True)
    vote(env, contract, run.record.input_hash, "alice", True)
    receipt, result = sealed(env, run.record.input_hash)
    assert not receipt.merge_eligible and "1 of 2 required human approvals" in result.eligibility_reasons
    assert r.approvals_shortfall(result.eligibility_reasons) == (1, 2)  # the rule's reason, read back
    vote(env, contract, run.record.input_hash, "bob", True)
    receipt, _ = sealed(env, run.record.input_hash)
    assert receipt.merge_eligible and len(receipt.entry(r.Tier.HUMAN).records) == 2  # type: ignore[union-attr]


def test_a_reject_blocks_until_the_same_key_approves(env: tuple[Path, Ledger]) -> None:
    contract = contract_bytes()
    run = lower_tiers(env, contract)
    vote(env, contract, run.record.input_hash, "alice", False)
    vote(env, contract, run.record.input_hash, "bob", True)
    receipt, result = sealed(env, run.record.input_hash)
    assert not receipt.merge_eligible and any(
        x.startswith("tier human verdict is fail by") for x in result.eligibility_reasons
    )
    vote(env, contract, run.record.input_hash, "alice", True)
    receipt, _ = sealed(env, run.record.input_hash)
    assert receipt.merge_eligible


def test_a_waiver_lets_a_named_failing_check_pass_until_it_expires(
    env: tuple[Path, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ledger = env
    contract = contract_bytes(command="raise SystemExit(1)")
    failing = lower_tiers(env, contract)
    assert failing.outcome.verdict is r.Verdict.FAIL
    with pytest.raises(InputError, match="admin"):
        waive_check(ledger, SIGNERS["ci"], "TASK-1", "tests", "flaky on CI, tracked in #12", int(time.time()) + 3600)
    waive_check(ledger, SIGNERS["admin"], "TASK-1", "tests", "flaky on CI, tracked in #12", int(time.time()) + 3600)
    run = lower_tiers(env, contract)
    assert run.outcome.verdict is r.Verdict.PASS and run.outcome.waived == ("tests",)
    vote(env, contract, run.record.input_hash, "alice", True)
    receipt, result = sealed(env, run.record.input_hash)
    assert receipt.merge_eligible and len(result.waivers) == 1 and "flaky on CI" in result.waivers[0]
    with frozen_clock(time.time() + 7200), pytest.raises(InputError, match="waiver of tests that has expired"):
        seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)


def test_waive_refuses_unknown_checks_and_past_expiry(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    lower_tiers(env, contract_bytes())
    with pytest.raises(InputError, match="no check 'nope'"):
        waive_check(ledger, SIGNERS["admin"], "TASK-1", "nope", "x", int(time.time()) + 60)
    with pytest.raises(InputError, match="future"):
        waive_check(ledger, SIGNERS["admin"], "TASK-1", "tests", "x", int(time.time()) - 60)


def test_approve_shows_what_is_signed_and_needs_confirmation(tmp_path: Path) -> None:
    repo, keys = cli_repo_with_lower_tiers(tmp_path)
    refused = run_cli("approve", "TASK-1", "--key", "alice", cwd=repo, env=keys)
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    ok = run_cli("approve", "TASK-1", "--key", "alice", "--yes", "--comment", "read it", cwd=repo, env=keys)
    assert ok.returncode == 0, ok.stderr
    assert (
        "APPROVE TASK-1" in ok.stderr
        and "deterministic" in ok.stderr
        and "judge" in ok.stderr
        and "file changed" in ok.stderr
    )
    no_reason = run_cli("reject", "TASK-1", "--key", "alice", "--yes", "--reason", " ", cwd=repo, env=keys)
    assert no_reason.returncode == 2 and "needs a reason" in no_reason.stderr
    waived = run_cli(
        "waive", "TASK-1", "tests", "--key", "admin", "--reason", "flaky", "--expires", "2999-01-01", cwd=repo, env=keys
    )
    assert waived.returncode == 0, waived.stderr
    bad_date = run_cli(
        "waive", "TASK-1", "tests", "--key", "admin", "--reason", "flaky", "--expires", "soon", cwd=repo, env=keys
    )
    assert bad_date.returncode == 2 and "--expires" in bad_date.stderr


def test_verify_rejects_a_pass_leaning_on_an_expired_waiver(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    contract = contract_bytes(command="raise SystemExit(1)")
    lower_tiers(env, contract)
    waive_check(ledger, SIGNERS["admin"], "TASK-1", "tests", "flaky", int(time.time()) + 60)
    run = lower_tiers(env, contract)
    vote(env, contract, run.record.input_hash, "alice", True)
    honest, _ = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    assert honest.merge_eligible
    # A forger holding the seal key skips the sealer's expiry check: the same receipt, sealed an hour later.
    later = int(time.time()) + 3600
    with frozen_clock(later):
        appended = ledger.append(dataclasses.replace(honest, created=later), SIGNERS["sealer"])
    result = verify_receipt(
        LedgerSource.open(ledger.root), str(appended.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    assert [d.code for d in result.defects] == ["waiver-expired"]


def test_the_approval_screen_shows_what_is_being_approved(tmp_path: Path) -> None:
    # Issue 46: the goal, each check as recorded on this candidate, the approvals required
    # and who gave them, and what will not count, all before the question.
    repo, keys = cli_repo_with_lower_tiers(tmp_path)
    first = run_cli("approve", "TASK-1", "--key", "alice", "--yes", "--comment", "read it", cwd=repo, env=keys)
    assert first.returncode == 0, first.stderr
    screen = first.stderr.split("approval recorded")[0]
    lines = screen.splitlines()
    assert lines[0] == "APPROVE TASK-1: a test task", lines
    assert any(line.split() == ["tests", "pass"] for line in lines), screen
    assert "approvals: 1 required; given by nobody yet" in lines, screen
    assert "WILL NOT COUNT" not in screen
    # alice's approval is on the next screen, named; a stale one says it will not count.
    again = run_cli("reject", "TASK-1", "--key", "alice", "--yes", "--reason", "second look", cwd=repo, env=keys)
    assert "approvals: 1 required; given by alice" in again.stderr, again.stderr
    (repo / "app.py").write_text("print('changed after the checks')\n")
    git(repo, "commit", "-qam", "TASK-1: a later change")
    older = run_cli(
        "approve",
        "TASK-1",
        "--key",
        "alice",
        "--yes",
        "--input",
        "HEAD~1",
        "--comment",
        "the checked one",
        cwd=repo,
        env=keys,
    )
    assert older.returncode == 0, older.stderr
    ok = run_cli("check", "TASK-1", "--key", "ci", cwd=repo, env=keys)
    assert ok.returncode == 0, ok.stderr
    stale = run_cli("approve", "TASK-1", "--key", "alice", "--yes", "--input", "HEAD~1", cwd=repo, env=keys)
    assert "WILL NOT COUNT: this approval is for candidate" in stale.stderr.split("approval recorded")[0], stale.stderr


def test_the_approval_screen_says_when_the_change_edits_a_contract(tmp_path: Path) -> None:
    repo, keys = cli_repo_with_lower_tiers(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()

    def screen_after(edit_contract: bool) -> str:
        if edit_contract:
            path = repo / ".ledger" / "contracts" / "TASK-1.toml"
            path.write_bytes(path.read_bytes() + b"\n# the candidate touches its own contract\n")
        (repo / "app.py").write_text("print(%r)\n" % ("edit" if edit_contract else "plain"))
        git(repo, "commit", "-qam", "TASK-1: a change")
        for args in (("check", "TASK-1", "--key", "ci", "--base", base), ("judge", "TASK-1", "--key", "judge")):
            done = run_cli(*args, cwd=repo, env=keys)
            assert done.returncode in (0, 1), done.stderr
        return run_cli("approve", "TASK-1", "--key", "alice", "--yes", cwd=repo, env=keys).stderr

    assert "EDITS A CONTRACT" not in screen_after(False)
    assert "THIS CHANGE EDITS A CONTRACT under .ledger/contracts/" in screen_after(True)
