"""The deterministic tier: each case runs the real runner on a real git
repository made here, with real subprocesses, and is verified by the real verifier."""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, contract_bytes, flaky_command, git, make_repo, run_cli, sign_decision
from ledger import (
    CheckRun,
    InputError,
    Ledger,
    frozen_clock,
    register_contract,
    run_deterministic,
    run_judge,
    seal_receipt,
    snapshot_of,
)
from verify import LedgerSource, TrustRoot, verify_receipt

PY = json.dumps(sys.executable)


def check(ledger: Ledger, repo: Path, contract: bytes, task: str = "TASK-1", **kw: Any) -> CheckRun:
    return run_deterministic(
        ledger, repo=repo, task_id=task, contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"], **kw
    )


def upper_tiers(ledger: Ledger, repo: Path, run: CheckRun) -> None:
    """The scripted judge and an approval by alice, on the run's candidate and contract."""
    contract = next(
        rev.contract
        for _, rev in reversed(ledger.contract_revisions(run.record.task_id))
        if rev.config_hash == run.record.config_hash
    )
    run_judge(
        ledger,
        task_id=run.record.task_id,
        contract_bytes=contract,
        candidate=run.record.input_hash,
        signer=SIGNERS["judge"],
    )
    sign_decision(ledger, repo, contract, run.record.input_hash, SIGNERS["alice"], note="ok", task=run.record.task_id)


def reasons(run: CheckRun) -> str:
    return " | ".join(run.outcome.reasons + tuple(why for _, _, why, _ in run.rows))


def blob(ledger: Ledger, run: CheckRun, check_id: str) -> bytes:
    ref = next(e for e in run.record.evidence if e.check_id == check_id)
    return ledger.blob_path(ref.digest).read_bytes()


def path_check(path: str, cid: str = "exists") -> str:
    return '\n[[checks]]\nid = "%s"\ntype = "path_exists"\npath = %s\n' % (cid, json.dumps(path))


def test_a_passing_run_verifies_and_its_verdict_is_rederived(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    run = check(ledger, repo, contract_bytes(extra=path_check("app.py")))
    assert run.outcome.verdict is r.Verdict.PASS, reasons(run)
    assert run.snapshot.strength == "strong" and run.snapshot.files == ("app.py",)
    assert blob(ledger, run, "check:tests:stdout") == b"1 passed\n"
    upper_tiers(ledger, repo, run)
    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    result = verify_receipt(
        LedgerSource.open(tmp_path / "ledger"), str(sealed.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    assert result.ok and result.derived_eligible, result.defects


def test_a_claimed_file_that_does_not_exist_fails(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    run = check(ledger, repo, contract_bytes(extra=path_check("docs/claimed.md")))
    assert run.outcome.verdict is r.Verdict.FAIL and "docs/claimed.md does not exist" in reasons(run)


def test_a_file_only_in_a_worktree_does_not_count(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    (wt / "only-here.txt").write_text("x\n")
    run = check(ledger, repo, contract_bytes(extra=path_check(str(wt / "only-here.txt"))))
    assert run.outcome.verdict is r.Verdict.FAIL
    facts = json.loads(blob(ledger, run, "check:exists"))["facts"]
    assert facts["translated_from"] == str(wt / "only-here.txt") and facts["checked"] == "only-here.txt"
    # The same worktree path passes once the file is in the main checkout.
    (repo / "only-here.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: add it")
    assert (
        check(ledger, repo, contract_bytes(extra=path_check(str(wt / "only-here.txt")))).outcome.verdict
        is r.Verdict.PASS
    )


def test_a_path_outside_the_repository_fails(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    for n, path in enumerate(("../outside.txt", "/etc/hostname", ".git/HEAD")):
        task = "OUT-%d" % n
        run = check(ledger, repo, contract_bytes(task=task, extra=path_check(path)), task=task)
        assert run.outcome.verdict is r.Verdict.FAIL and "outside the repository" in reasons(run), path


def test_tests_that_exit_1_fail(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    run = check(ledger, repo, contract_bytes(command="raise SystemExit(1)"))
    assert run.outcome.verdict is r.Verdict.FAIL and "exit code 1" in reasons(run)


def test_the_latest_run_counts(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    flag = tmp_path / "break-the-tests"
    contract = contract_bytes(command="import pathlib, sys; sys.exit(pathlib.Path(%r).exists())" % str(flag))
    first = check(ledger, repo, contract)
    flag.write_text("now failing")
    second = check(ledger, repo, contract)
    assert (first.outcome.verdict, second.outcome.verdict) == (r.Verdict.PASS, r.Verdict.FAIL)
    assert first.record.input_hash == second.record.input_hash
    receipt, _ = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=second.record.input_hash)
    det = receipt.entry(r.Tier.DETERMINISTIC)
    assert det is not None and det.records == (second.appended.body_hash,) and not receipt.merge_eligible


def test_evidence_deleted_after_the_run_is_caught(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    run = check(ledger, repo, contract_bytes())
    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    ref = next(e for e in run.record.evidence if e.check_id == "check:tests")
    os.unlink(ledger.blob_path(ref.digest))
    result = verify_receipt(
        LedgerSource.open(tmp_path / "ledger"), str(sealed.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    codes = {d.code for d in result.defects}
    assert {"evidence-missing", "verdict-not-entailed"} <= codes


def test_dropping_the_failing_check_needs_an_admin_and_is_flagged(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    strict = contract_bytes(command="raise SystemExit(1)", extra=path_check("app.py"))
    assert check(ledger, repo, strict).outcome.verdict is r.Verdict.FAIL
    text = strict.decode()
    start = text.index("[[checks]]")
    lenient = (
        (text[:start] + text[text.index("[[checks]]", start + 1) :])
        .replace('evidence_required = ["tests"]\n', "")
        .encode()
    )
    with pytest.raises(
        InputError,
        match="weakens the contract.*check tests was dropped.*`ledger contract set TASK-1 --key ADMIN-KEY --reason WHY`",
    ):
        check(ledger, repo, lenient)
    # Even an admin says why: a weakening without a reason is refused before it is signed.
    with pytest.raises(InputError, match="weakens the contract of TASK-1.*gives no reason: say why with --reason"):
        register_contract(ledger, "TASK-1", lenient, SIGNERS["admin"])
    register_contract(ledger, "TASK-1", lenient, SIGNERS["admin"], reason="the tests check moves to CI")
    run = check(ledger, repo, lenient)
    assert run.outcome.verdict is r.Verdict.PASS
    upper_tiers(ledger, repo, run)
    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    result = verify_receipt(
        LedgerSource.open(tmp_path / "ledger"), str(sealed.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    assert result.ok, result.defects
    assert (
        len(result.weakenings) == 1
        and "admin (" in result.weakenings[0]
        and "check tests was dropped" in result.weakenings[0]
    )
    cli = run_cli("--dir", str(tmp_path / "ledger"), "verify", str(sealed.body_hash))
    assert cli.returncode == 0 and "WEAKENING:" in cli.stdout


def test_a_changed_check_command_is_a_weakening(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    check(ledger, repo, contract_bytes(command="raise SystemExit(1)"))
    with pytest.raises(InputError, match="check tests was changed"):
        check(ledger, repo, contract_bytes(command="print('PASS')"))


def test_an_empty_diff_on_a_code_task_fails(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    run = check(ledger, repo, contract_bytes(), base="HEAD")
    assert run.outcome.verdict is r.Verdict.FAIL and "empty diff" in reasons(run)


def test_a_manager_task_does_not_borrow_its_childrens_work(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    (repo / "child.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "CHILD-7: the child's change")
    contract = contract_bytes(task="MGR-1", owned=(), extra=path_check("child.py"))
    run = check(ledger, repo, contract, task="MGR-1")
    assert all(status == "pass" for _, status, _, _ in run.rows)  # its signals are satisfied ...
    assert run.outcome.verdict is r.Verdict.FAIL and "nothing is attributed to MGR-1" in reasons(
        run
    )  # ... by others' work


def test_weak_attribution_through_owned_files_passes_with_a_warning(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    (repo / "app.py").write_text("print('v2')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "unrelated message")
    run = check(ledger, repo, contract_bytes())
    assert run.snapshot.strength == "weak" and run.outcome.verdict is r.Verdict.PASS
    assert any("weak attribution" in w for w in run.outcome.warnings)


def test_research_and_planning_tasks(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    research = check(ledger, repo, contract_bytes(task="RES-1", kind="research", owned=()), task="RES-1")
    assert research.outcome.verdict is r.Verdict.PASS and "needs human review" in research.outcome.warnings[0]
    planning = contract_bytes(task="PLAN-1", kind="planning", owned=()).decode()
    plan = planning[: planning.index("[[checks]]")].replace('evidence_required = ["tests"]\n', "").encode()
    assert check(ledger, repo, plan, task="PLAN-1").outcome.verdict is r.Verdict.FAIL
    child = (
        contract_bytes(task="SUB-1")
        .decode()
        .replace('goal = "a test task"', 'goal = "a test task"\nparent = "PLAN-1"')
        .encode()
    )
    register_contract(ledger, "SUB-1", child, SIGNERS["ci"])
    run = check(ledger, repo, plan, task="PLAN-1")
    assert run.outcome.verdict is r.Verdict.PASS and run.snapshot.subtasks == ("SUB-1",)


def test_a_secret_in_test_output_is_redacted(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    token = "ghp_" + "a1B2" * 9
    contract = contract_bytes(command="import os; print('token', os.environ['API_TOKEN']); print('gh', %r)" % token)
    contract = contract.replace(
        b'evidence_required = ["tests"]', b'evidence_required = ["tests"]\nsecret_env = ["API_TOKEN"]'
    )
    run = check(ledger, repo, contract, environ=dict(os.environ, API_TOKEN="hunter2-very-secret"))
    stored = blob(ledger, run, "check:tests:stdout")
    assert b"hunter2-very-secret" not in stored and token.encode() not in stored
    assert b"[REDACTED:env:API_TOKEN]" in stored and b"[REDACTED:github-token]" in stored
    redactions = json.loads(blob(ledger, run, "check:tests"))["facts"]["redactions"]
    assert {(x["what"], x["lines"][0]) for x in redactions} == {("env:API_TOKEN", 1), ("github-token", 2)}
    assert run.outcome.verdict is r.Verdict.PASS


def test_an_unknown_check_type_is_refused_before_anything_is_signed(env: tuple[Path, Ledger]) -> None:
    # A typo signed once would be a weakening only an admin could correct: it is bad input
    # instead, naming the line and the nearest type, and nothing is registered or run.
    repo, ledger = env
    before = sum(1 for _ in ledger.entries())
    with pytest.raises(
        InputError,
        match=r"c\.toml:\d+: checks\[1\]\.type: 'test_pass' is not a check type; did you mean 'test_passes'\?",
    ):
        check(ledger, repo, contract_bytes(extra='\n[[checks]]\nid = "typo"\ntype = "test_pass"\n'))
    assert sum(1 for _ in ledger.entries()) == before


def test_an_unknown_type_in_a_signed_contract_still_fails_closed() -> None:
    # Contracts signed before (or by another writer) are judged by the rule, which fails
    # what it cannot evaluate.
    contract = r.parse_contract(contract_bytes(extra='\n[[checks]]\nid = "vibes"\ntype = "looks_good"\n'))
    check_ = contract.check("vibes")
    assert check_ is not None
    result = {"id": "vibes", "type": "looks_good", "declared": r.declared_params(check_), "facts": {}}
    ok, why = r.derive_check(check_, result)
    assert not ok and "unknown signal type 'looks_good'" in why


def test_a_command_that_hangs_is_killed_at_its_timeout(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    pidfile = tmp_path / "child.pid"
    # Neither the command nor its grandchild ever ends by itself: only the timeout can end them.
    hang = (
        "import subprocess, sys, signal; p = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()']); "
        "open(%r, 'w').write(str(p.pid)); signal.pause()" % str(pidfile)
    )
    contract = contract_bytes(command=hang).replace(b"check_timeout_s = 20", b"check_timeout_s = 1")
    run = check(ledger, repo, contract)
    assert run.outcome.verdict is r.Verdict.FAIL and "timed out after 1" in reasons(run)
    # The grandchild went with its process group: wait for its exit (a pidfd turns readable), not for a time.
    child = int(pidfile.read_text())
    try:
        fd = os.pidfd_open(child)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        ready, _, _ = select.select([fd], [], [], 300)  # a bound for a broken kill only; a working one answers at once
    finally:
        os.close(fd)
    assert ready, "the grandchild outlived its command's timeout"


def test_a_dirty_tree_is_refused_or_included(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    clean = check(ledger, repo, contract_bytes())
    (repo / "app.py").write_text("print('uncommitted')\n")
    with pytest.raises(InputError, match="uncommitted changes"):
        check(ledger, repo, contract_bytes())
    dirty = check(ledger, repo, contract_bytes(), allow_dirty=True)
    assert dirty.record.input_hash != clean.record.input_hash
    assert any(e.check_id == "dirty" for e in dirty.record.evidence)


def test_file_contains_absence_schema_and_hash_signals(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    (repo / "data.json").write_text('{"name": "x", "size": 3}\n')
    (repo / "schema.json").write_text(
        '{"type": "object", "required": ["name"], "properties": {"size": {"type": "integer"}}}\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: data")
    digest = str(r.content_digest((repo / "data.json").read_bytes()))
    extra = (
        '\n[[checks]]\nid = "has-print"\ntype = "file_contains"\npath = "app.py"\nregex = "print\\\\("\n'
        '\n[[checks]]\nid = "no-todo"\ntype = "absence_verified"\nliteral = "TODO"\npaths = ["*.py"]\n'
        '\n[[checks]]\nid = "schema"\ntype = "schema_valid"\npath = "data.json"\nschema = "schema.json"\n'
        '\n[[checks]]\nid = "pinned"\ntype = "hash_stable"\npath = "data.json"\ndigest = "%s"\n'
        '\n[[checks]]\nid = "rebuild"\ntype = "hash_stable"\npath = "data.json"\ncommand = [%s, "-c", "pass"]\n'
    ) % (digest, PY)
    run = check(ledger, repo, contract_bytes(extra=extra))
    assert run.outcome.verdict is r.Verdict.PASS, reasons(run)
    coverage = json.loads(blob(ledger, run, "check:no-todo:coverage"))
    assert [f["path"] for f in coverage["files"]] == ["app.py"]
    (repo / "app.py").write_text("# TODO\n")
    (repo / "data.json").write_text('{"size": "big"}\n')
    git(repo, "commit", "-qam", "TASK-1: worse")
    bad = check(ledger, repo, contract_bytes(extra=extra))
    failed = {cid for cid, status, _, _ in bad.rows if status == "fail"}
    assert failed == {"has-print", "no-todo", "schema", "pinned"}, reasons(bad)
    assert "app.py:1" in reasons(bad)


def test_an_absence_claim_without_coverage_fails(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    extra = '\n[[checks]]\nid = "no-secret"\ntype = "absence_verified"\nliteral = "secret"\npaths = ["*.nothing"]\n'
    run = check(ledger, repo, contract_bytes(extra=extra))
    assert run.outcome.verdict is r.Verdict.FAIL and "covered no files" in reasons(run)


def test_ledger_check_cli_prints_the_table_and_exit_codes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    (tmp_path / "good.toml").write_bytes(contract_bytes())
    (tmp_path / "bad.toml").write_bytes(contract_bytes(task="TASK-2", command="raise SystemExit(3)"))
    assert run_cli("init", cwd=repo, env=keys).returncode == 0
    assert run_cli("keys", "generate", "ci", "--role", "deterministic", cwd=repo, env=keys).returncode == 0
    good = run_cli("check", "TASK-1", "--contract", str(tmp_path / "good.toml"), "--key", "ci", cwd=repo, env=keys)
    assert good.returncode == 0, good.stderr
    assert "tests" in good.stdout and "deterministic PASS" in good.stdout
    bad = run_cli(
        "check", "TASK-2", "--contract", str(tmp_path / "bad.toml"), "--key", "ci", "--json", cwd=repo, env=keys
    )
    assert bad.returncode == 1 and json.loads(bad.stdout)["checks"][0]["reason"] == "exit code 3"
    # issue 11, item 12: the digests printed are ones `ledger blob` takes: whole in --json, a prefix in the table.
    digest = json.loads(bad.stdout)["checks"][0]["evidence"]
    assert len(digest) == 71 and run_cli("blob", digest, cwd=repo, env=keys).returncode == 0
    shown = next(line for line in good.stdout.splitlines() if line.strip().startswith("tests"))
    prefix = shown.split()[2]
    assert prefix.startswith("blake3:") and len(prefix) < 71
    assert run_cli("blob", prefix, cwd=repo, env=keys).returncode == 0
    # Read as an entry's hash is: blake3: optional, a trailing ellipsis as tables cut it.
    assert run_cli("blob", prefix.removeprefix("blake3:") + "…", cwd=repo, env=keys).returncode == 0
    assert run_cli("blob", "blake3:ab", cwd=repo, env=keys).returncode == 2
    broken = tmp_path / "broken.toml"
    broken.write_bytes(contract_bytes().replace(b"check_timeout_s = 20", b'check_timeout_s = "soon"'))
    res = run_cli("check", "TASK-1", "--contract", str(broken), "--key", "ci", cwd=repo, env=keys)
    line = broken.read_text().splitlines().index('check_timeout_s = "soon"') + 1
    assert res.returncode == 2 and "broken.toml:%d: budgets.check_timeout_s: has the wrong type" % line in res.stderr


def test_stale_evidence_is_not_eligible(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    contract = contract_bytes().replace(b"[budgets]", b"[freshness]\nmax_evidence_age_s = 60\n\n[budgets]")
    run = check(ledger, repo, contract)
    upper_tiers(ledger, repo, run)
    fresh, _ = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    assert fresh.merge_eligible
    with frozen_clock(time.time() + 3600):  # an hour later
        stale, sealed = seal_receipt(
            ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash
        )
    assert not stale.merge_eligible
    result = verify_receipt(
        LedgerSource.open(tmp_path / "ledger"), str(sealed.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    assert result.ok and any("s old; the contract allows 60 s" in x for x in result.eligibility_reasons)


def test_large_output_is_stored_whole_and_shown_truncated(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    run = check(ledger, repo, contract_bytes(command="print('\\n'.join(str(i) for i in range(5000)))"))
    stored = blob(ledger, run, "check:tests:stdout")
    assert stored.count(b"\n") == 5000
    ref = next(e for e in run.record.evidence if e.check_id == "check:tests:stdout")
    shown = run_cli("--dir", str(tmp_path / "ledger"), "blob", str(ref.digest))
    assert shown.returncode == 0 and shown.stdout.count("\n") == 200 and "truncated" in shown.stderr
    whole = run_cli("--dir", str(tmp_path / "ledger"), "blob", str(ref.digest), "--full")
    assert whole.stdout.encode() == stored


def test_a_ci_checkout_diffs_against_origin_main_and_a_guess_says_so(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    # issue 11, item 12: a detached HEAD with no local main silently fell back to HEAD~1.
    repo, ledger = env
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "app.py").write_text("print('one')\n")
    git(repo, "commit", "-qam", "TASK-1: one")
    (repo / "app.py").write_text("print('two')\n")
    git(repo, "commit", "-qam", "TASK-1: two")
    git(repo, "push", "-q", str(origin), "feature")
    ci = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(origin), str(ci))
    git(ci, "checkout", "-q", "--detach", "origin/feature")
    git(ci, "branch", "-q", "-D", "main")
    git(ci, "remote", "set-head", "origin", "-d")  # as a checkout that fetched only the pull request
    run = check(ledger, ci, contract_bytes())
    snap = snapshot_of(ledger, run.record)
    assert snap is not None
    assert snap["base_source"] == "merge-base with origin/main" and snap["base"] == git(repo, "rev-parse", "main")
    assert not any("fell back" in w for w in run.outcome.warnings)
    lone = make_repo(tmp_path / "lone", message="TASK-1: add app")
    git(lone, "branch", "-q", "-m", "main", "work")
    guessed = check(ledger, lone, contract_bytes())
    assert any("fell back to HEAD~1" in w for w in guessed.outcome.warnings)


def test_what_the_checks_create_does_not_make_the_next_check_dirty(env: tuple[Path, Ledger]) -> None:
    # issue 11, item 12: a pytest check left __pycache__/ behind and the next check refused the tree.
    repo, ledger = env
    writes = "import pathlib; pathlib.Path('__pycache__').mkdir(exist_ok=True); pathlib.Path('__pycache__/x.pyc').write_text('c'); print('1 passed')"
    contract = contract_bytes(command=writes)
    first = check(ledger, repo, contract)
    assert (repo / "__pycache__" / "x.pyc").exists()
    second = check(ledger, repo, contract)  # no uncommitted-changes refusal
    assert second.record.input_hash == first.record.input_hash
    (repo / "notes.txt").write_text("the user's own new file\n")
    with pytest.raises(InputError, match="uncommitted changes"):
        check(ledger, repo, contract)


def test_a_flaky_check_is_run_as_often_as_declared_and_every_attempt_is_kept(
    env: tuple[Path, Ledger], tmp_path: Path
) -> None:
    # A test that fails one run in three: with runs = 3 the record keeps all three attempts,
    # and the verdict follows the declared policy (all of them by default, or min_passes).
    repo, ledger = env
    flaky = flaky_command(tmp_path / "runs")
    strict = check(ledger, repo, contract_bytes(command=flaky, extra="runs = 3\n"))
    assert strict.outcome.verdict is r.Verdict.FAIL
    assert "tests: passed 2 of 3 runs (needs 3); run 2: exit code 1" in strict.outcome.reasons, reasons(strict)
    attempts = [e.check_id for e in strict.record.evidence if e.check_id.startswith("check:tests")]
    assert attempts == [
        *("check:tests#1:stdout", "check:tests#1:stderr", "check:tests#1"),
        *("check:tests#2:stdout", "check:tests#2:stderr", "check:tests#2"),
        *("check:tests#3:stdout", "check:tests#3:stderr", "check:tests#3"),
    ]
    assert blob(ledger, strict, "check:tests#2:stdout") == b"run 2\n"
    assert json.loads(blob(ledger, strict, "check:tests#3"))["attempt"] == 3
    (tmp_path / "runs").unlink()
    lenient_contract = contract_bytes(command=flaky, extra="runs = 3\nmin_passes = 2\n")
    # fewer passes: a weakening
    register_contract(ledger, "TASK-1", lenient_contract, SIGNERS["admin"], "c.toml", reason="2 of 3 will do")
    lenient = check(ledger, repo, lenient_contract)
    assert lenient.outcome.verdict is r.Verdict.PASS, reasons(lenient)
    assert "tests is flaky: passed 2 of 3 runs (needs 2)" in lenient.outcome.warnings
    # The verifier's rule reads the same attempts; one dropped fails the check, whatever passed.
    contract = r.parse_contract(lenient_contract)

    def read(digest: r.Digest, fmt: str) -> dict[str, Any] | None:
        return r.parse_evidence_json(ledger.blob_path(digest).read_bytes(), fmt)

    assert r.rederive_deterministic(lenient.record, contract, read).verdict is r.Verdict.PASS
    kept = tuple(e for e in lenient.record.evidence if e.check_id != "check:tests#3")
    dropped = r.TierRecord(**{**_fields(lenient.record), "evidence": kept, "evidence_hash": r.evidence_list_hash(kept)})
    outcome = r.rederive_deterministic(dropped, contract, read)
    assert outcome.verdict is r.Verdict.FAIL
    assert "tests: attempt 3 of 3 not recorded" in outcome.reasons


def _fields(record: r.TierRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}
