"""Claims and the nudge, agent integrity, effects, the repair budget,
and the gate's advisory mode; on real repositories, with the real runners."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from docs_as_written import run_shell

import receipts as r
from conftest import (
    GIT_ENV,
    SIGNERS,
    contract_bytes,
    flaky_command,
    git,
    make_repo,
    run_cli,
    sign_decision,
    write_private_key,
)
from ledger import (
    CheckRun,
    InputError,
    Ledger,
    begin_effect,
    end_effect,
    ingest_trace,
    nudge,
    record_event,
    run_deterministic,
    run_judge,
    seal_receipt,
    stats,
    stats_lines,
    task_state,
)
from verify import TrustRoot

ADMIN_TRUST = TrustRoot(frozenset({r.fingerprint(SIGNERS["admin"].public_key_blob)}), "the test admin")
PROTECTED = 'protected_paths = ["test_app.py", ".ledger/contracts/*"]\n'
TOOLS = """
[tools]
allowed = ["read_file", "run_tests", "calc", "deploy"]
denied = ["shell"]
requires_human = ["deploy"]
max_steps = 50

[tools.schemas.calc]
type = "object"
required = ["expression"]
additionalProperties = false
[tools.schemas.calc.properties.expression]
type = "string"
pattern = "^[0-9+*/() .-]+$"
"""


def with_tools() -> bytes:
    return contract_bytes(top=PROTECTED, extra=TOOLS)


def check(env: tuple[Path, Ledger], contract: bytes, task: str = "TASK-1") -> CheckRun:
    repo, ledger = env
    return run_deterministic(
        ledger, repo=repo, task_id=task, contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )


def trace_file(tmp: Path, *calls: dict[str, object]) -> Path:
    path = tmp / "trace.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in calls))
    return path


def claim(env: tuple[Path, Ledger], task: str, candidate: r.Digest | None = None) -> None:
    record_event(env[1], SIGNERS["agent"], task, r.EventType.ANSWER_PROPOSED, candidate)


def full_ladder(env: tuple[Path, Ledger], contract: bytes) -> CheckRun:
    repo, ledger = env
    run = check(env, contract)
    run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
    )
    sign_decision(ledger, repo, contract, run.record.input_hash, SIGNERS["alice"], note="ok")
    seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    return run


# -- claims and the nudge --------------------------------------------------------------------


def test_a_claim_with_no_verification_is_visible_and_counted(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    candidate = r.candidate_hash({"commit": "1" * 40, "tree": "2" * 40})
    claim(env, "TASK-9", candidate)
    assert task_state(ledger, "TASK-9").state is r.State.VERIFYING
    n = nudge(ledger)
    assert (n.claims, n.unverified, n.alert) == (1, 1, False)  # fewer than 3 claims: no alert yet


def _claims(env: tuple[Path, Ledger], verified: int, unverified: int) -> None:
    for i in range(verified):
        run = check(env, contract_bytes(task="OK-%d" % i), task="OK-%d" % i)
        claim(env, "OK-%d" % i, run.record.input_hash)
        check(env, contract_bytes(task="OK-%d" % i), task="OK-%d" % i)  # verification after the claim
    for i in range(unverified):
        claim(env, "LAZY-%d" % i, r.candidate_hash({"commit": "%040d" % i, "tree": "0" * 40}))


def test_three_unverified_claims_out_of_five_alert(env: tuple[Path, Ledger]) -> None:
    _claims(env, verified=2, unverified=3)
    n = nudge(env[1])
    assert (n.claims, n.unverified, n.alert) == (5, 3, True)
    assert n.recent_unverified[0] == "LAZY-2"
    out = run_cli("--dir", str(env[1].root), "status", "--json")
    assert json.loads(out.stdout)["nudge"]["alert"] is True
    assert "ALERT" in run_cli("--dir", str(env[1].root), "status").stdout


def test_status_of_an_unknown_task_is_a_clean_error(env: tuple[Path, Ledger]) -> None:
    res = run_cli("--dir", str(env[1].root), "status", "NO-SUCH-TASK")
    assert res.returncode == 2 and res.stderr.startswith("ledger: error: task NO-SUCH-TASK has no entries")


def test_exactly_thirty_percent_does_not_alert(env: tuple[Path, Ledger]) -> None:
    _claims(env, verified=7, unverified=3)
    n = nudge(env[1])
    assert (n.claims, n.unverified, n.share, n.alert) == (10, 3, 0.3, False)
    assert nudge(env[1], threshold=0.29).alert


def test_the_nudge_reads_back_only_as_far_as_its_window_and_finds_every_run_after_it(
    env: tuple[Path, Ledger],
) -> None:
    # A session's start computes the nudge: it reads from the newest entry back, a page of
    # 500 at a time, until the window is full. Here the window's oldest claim lies more
    # than a page back, and the run that verifies it comes after every claim.
    first = check(env, contract_bytes(task="T-1"), task="T-1")
    claim(env, "T-1", first.record.input_hash)
    for _ in range(600):
        record_event(env[1], SIGNERS["agent"], "T-1", r.EventType.MODEL_STOPPED, None)
    for task in ("T-2", "T-3"):
        claim(env, task, r.candidate_hash({"commit": "3" * 40, "tree": "4" * 40}))
    check(env, contract_bytes(task="T-1"), task="T-1")  # verifies T-1's claim, after all three
    n = nudge(env[1], window=3)
    assert (n.claims, n.unverified, n.recent_unverified) == (3, 2, ("T-3", "T-2"))
    assert (nudge(env[1], window=2).claims, nudge(env[1], window=2).unverified) == (2, 2)
    assert nudge(env[1]).claims == 3  # a window larger than the ledger's claims: all of them


# -- agent integrity -------------------------------------------------------------------------


def test_a_candidate_that_edits_a_protected_test_file_fails(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    (repo / "test_app.py").write_text("assert True  # the test was made to pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: make the test pass")
    ingest_trace(
        ledger,
        SIGNERS["ci"],
        "TASK-1",
        r.parse_contract(with_tools()),
        trace_file(tmp_path, {"tool": "run_tests", "arguments": {}}),
        None,
    )
    run = check(env, with_tools())
    assert run.outcome.verdict is r.Verdict.FAIL
    assert "integrity: the candidate changes protected path test_app.py" in run.outcome.reasons
    assert task_state(ledger, "TASK-1").state is r.State.FAILED


def test_a_trace_with_a_denied_tool_fails_the_tier(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    _, ledger = env
    _, decisions = ingest_trace(
        ledger,
        SIGNERS["ci"],
        "TASK-1",
        r.parse_contract(with_tools()),
        trace_file(
            tmp_path, {"tool": "read_file", "arguments": {"path": "a"}}, {"tool": "shell", "arguments": {"cmd": "ls"}}
        ),
        None,
    )
    assert [d.decision for d in decisions] == ["approved", "rejected"] and "denied" in decisions[1].reason
    run = check(env, with_tools())
    assert (
        run.outcome.verdict is r.Verdict.FAIL
        and "integrity: the agent's trace has 1 rejected tool call(s)" in run.outcome.reasons
    )


def test_arguments_that_fail_the_tool_schema_are_rejected(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    _, ledger = env
    _, decisions = ingest_trace(
        ledger,
        SIGNERS["ci"],
        "TASK-1",
        r.parse_contract(with_tools()),
        trace_file(
            tmp_path,
            {"tool": "calc", "arguments": {"expression": "1+1"}},
            {"tool": "calc", "arguments": {"expression": "1+1; rm -rf /"}},
        ),
        None,
    )
    assert [d.decision for d in decisions] == ["approved", "rejected"]
    assert "fail the calc schema" in decisions[1].reason
    cli = run_cli(
        "--dir",
        str(ledger.root),
        "trace",
        "TASK-1",
        str(trace_file(tmp_path, {"tool": "calc", "arguments": {"expression": "2*3"}})),
        "--key",
        str(tmp_path / "nokey"),
        "--contract",
        str(_write(tmp_path / "c.toml", with_tools())),
        "--input",
        str(r.candidate_hash({"a": "b"})),
    )
    assert cli.returncode == 2  # no such key: a clean refusal, nothing recorded


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_requires_human_call_without_approval_fails_until_approved(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    repo, ledger = env
    ingest_trace(
        ledger,
        SIGNERS["ci"],
        "TASK-1",
        r.parse_contract(with_tools()),
        trace_file(tmp_path, {"tool": "deploy", "arguments": {"env": "prod"}}),
        None,
    )
    run = check(env, with_tools())
    assert run.outcome.verdict is r.Verdict.FAIL
    assert "integrity: 1 tool call(s) needed a human approval that was not recorded" in run.outcome.reasons
    sign_decision(ledger, repo, with_tools(), run.record.input_hash, SIGNERS["alice"], note="deploy is fine")
    assert check(env, with_tools()).outcome.verdict is r.Verdict.PASS


def test_a_tool_policy_without_a_trace_fails_closed(env: tuple[Path, Ledger]) -> None:
    run = check(env, with_tools())
    assert run.outcome.verdict is r.Verdict.FAIL and "no agent trace was checked" in " ".join(run.outcome.reasons)


# -- effects --------------------------------------------------------------------------------


def test_the_same_idempotency_key_begun_twice_is_refused(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    run = full_ladder(env, contract_bytes())
    begin_effect(
        ledger, SIGNERS["sealer"], "TASK-1", "merge", "merge-pr-7", "main", run.record.input_hash, trust=ADMIN_TRUST
    )
    with pytest.raises(InputError, match=r"already begun at entry \d+ \(no double send\)"):
        begin_effect(
            ledger, SIGNERS["sealer"], "TASK-1", "merge", "merge-pr-7", "main", run.record.input_hash, trust=ADMIN_TRUST
        )


def test_an_unknown_outcome_reconciles_then_confirms(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    run = full_ladder(env, contract_bytes())
    assert task_state(ledger, "TASK-1").state is r.State.READY_TO_COMMIT
    begin_effect(
        ledger, SIGNERS["sealer"], "TASK-1", "deploy", "deploy-1", "prod", run.record.input_hash, trust=ADMIN_TRUST
    )
    assert task_state(ledger, "TASK-1").state is r.State.COMMITTING
    end_effect(ledger, SIGNERS["sealer"], "deploy-1", "unknown", "timeout talking to the deployer")
    assert task_state(ledger, "TASK-1").state is r.State.RECONCILING
    end_effect(ledger, SIGNERS["sealer"], "deploy-1", "confirmed", "read back: version live")
    assert task_state(ledger, "TASK-1").state is r.State.COMMITTED_BUT_UNVERIFIED
    record_event(ledger, SIGNERS["sealer"], "TASK-1", r.EventType.SUCCESS_VERIFIED, run.record.input_hash)
    assert task_state(ledger, "TASK-1").state is r.State.VERIFIED_COMPLETE
    with pytest.raises(InputError, match="already ended"):
        end_effect(ledger, SIGNERS["sealer"], "deploy-1", "failed", "")


def test_an_effect_after_a_new_commit_is_refused(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    full_ladder(env, contract_bytes())
    (repo / "app.py").write_text("print('changed after approval')\n")
    git(repo, "commit", "-qam", "TASK-1: after approval")
    from ledger import resolve_candidate

    with pytest.raises(InputError, match="candidate changed since approval"):
        begin_effect(
            ledger,
            SIGNERS["sealer"],
            "TASK-1",
            "merge",
            "merge-2",
            "main",
            resolve_candidate("HEAD", repo),
            trust=ADMIN_TRUST,
        )


def test_an_effect_without_an_eligible_receipt_is_refused(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    run = check(env, contract_bytes())
    with pytest.raises(InputError, match="no verified, merge-eligible receipt"):
        begin_effect(
            ledger, SIGNERS["sealer"], "TASK-1", "merge", "m", "main", run.record.input_hash, trust=ADMIN_TRUST
        )


# -- the repair budget and the gate's modes ---------------------------------------------------------


def test_the_repair_budget_exhausted_blocks_the_task(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    _, ledger = env
    flag = tmp_path / "n"
    # each run fails differently (progress), so only the budget stops it
    contract = contract_bytes(
        command="import pathlib, sys; p = pathlib.Path(%r); n = int(p.read_text()) if p.exists() else 0; "
        "p.write_text(str(n + 1)); print('attempt', n); sys.exit(1)" % str(flag)
    )
    contract = contract.replace(
        b"check_timeout_s = 20", b"check_timeout_s = 20\nrepair_attempts = 3\nno_progress_after = 9"
    )
    for _ in range(2):
        check(env, contract)
        assert task_state(ledger, "TASK-1").state is r.State.REPAIRING
    check(env, contract)
    s = task_state(ledger, "TASK-1")
    assert s.state is r.State.BLOCKED and "repair budget exhausted: 3" in s.reason


def test_advisory_mode_on_a_failing_task_records_would_block(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys"), **GIT_ENV}
    for args in (("init",), ("keys", "generate", "sealer", "--role", "seal")):
        assert run_cli(*args, cwd=repo, env=keys).returncode == 0
    pin = ("--trust", ".ledger/allowed_signers")  # main does not hold the pin yet
    res = run_cli(
        "gate", *pin, "--mode", "advisory", "--key", "sealer", "--task", "TASK-1", "--json", cwd=repo, env=keys
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["decision"] == "would-block"
    log = json.loads(run_cli("log", "--json", cwd=repo, env=keys).stdout)
    assert log[-1]["kind"] == "event" and log[-1]["task"] == "TASK-1"
    shown = json.loads(run_cli("show", log[-1]["hash"], "--json", cwd=repo, env=keys).stdout)
    assert shown["body"]["fields"] == [
        ["commit", git(repo, "rev-parse", "HEAD")],
        ["decided_by", ""],  # no receipt decided: none is attached
        ["decision", "would-block"],
        ["mode", "advisory"],
        ["receipt", ""],
        ["tree", git(repo, "rev-parse", "HEAD^{tree}")],  # what it judged: a merge commit's tree is its change's
    ]
    enforce = run_cli("gate", *pin, "--json", cwd=repo, env=keys)
    assert enforce.returncode == 1 and json.loads(enforce.stdout)["decision"] == "block"


def test_stats_pass_at_k_and_pass_power_k(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    assert stats(ledger, "FIX") == []
    # five trials of one family, three of them successful (sealed eligible), two failing
    for i in range(5):
        task = "FIX@%d" % i
        contract = contract_bytes(task=task, command="print('ok')" if i < 3 else "raise SystemExit(1)")
        run = check(env, contract, task=task)
        run_judge(
            ledger, task_id=task, contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
        )
        sign_decision(ledger, env[0], contract, run.record.input_hash, SIGNERS["alice"], note="ok", task=task)
        seal_receipt(ledger, task_id=task, signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    (row,) = [s.as_dict() for s in stats(ledger, "FIX", ks=(1, 2))]
    assert (row["trials"], row["successes"]) == (5, 3)
    assert row["pass@1"] == 0.6 and row["pass@2"] == 0.9 and row["pass^2"] == 0.3
    low, high = row["success_rate_95ci"]
    assert low < 0.6 < high
    (few,) = [s.as_dict() for s in stats(ledger, "FIX", min_trials=6)]
    assert "too few trials" in few["note"] and "pass@1" not in few
    assert row["time_ms"]["deterministic"] is not None and row["time_ms"]["judge"] is not None


def test_stats_show_pass_power_k_per_check_from_every_recorded_run(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    # A check run three times that failed once, in one trial, and passed once in another.
    _, ledger = env
    flaky = contract_bytes(task="F@1", command=flaky_command(tmp_path / "runs"), extra="runs = 3\n")
    check(env, flaky, task="F@1")
    check(env, contract_bytes(task="F@2"), task="F@2")
    (row,) = stats(ledger, "F", ks=(1, 2), min_trials=1)
    assert row.as_dict()["checks"] == {"tests": {"runs": 4, "passes": 3, "pass^1": 0.75, "pass^2": 0.5}}
    assert "  check tests: 3 of 4 runs passed  pass^1=0.750  pass^2=0.500" in stats_lines([row])[0]


def test_stats_time_every_kind_of_check(env: tuple[Path, Ledger]) -> None:
    # issue 11, item 12: a contract with any non-command check used to read "not recorded".
    repo, ledger = env
    extra = '\n[[checks]]\nid = "module"\ntype = "path_exists"\npath = "app.py"\n'
    run = run_deterministic(
        ledger,
        repo=repo,
        task_id="T@1",
        contract_bytes=contract_bytes(task="T@1", extra=extra),
        source="c.toml",
        signer=SIGNERS["ci"],
    )
    assert run.outcome.verdict is r.Verdict.PASS
    (row,) = stats(ledger, "T", min_trials=1)
    assert row.time_ms["deterministic"] is not None


def test_a_trace_fifo_no_program_writes_to_is_refused_not_waited_on_for_ever(
    env: tuple[Path, Ledger], tmp_path: Path
) -> None:
    # Issue 47: `ledger trace T FIFO` blocked for ever on a FIFO with no writer. One that a
    # program writes to (process substitution) is read as before.
    _, ledger = env
    key = write_private_key(tmp_path / "keys" / "ci", "ci")
    contract = _write(tmp_path / "c.toml", with_tools())
    args = "--key %s --contract %s --input %s" % (key, contract, r.candidate_hash({"a": "b"}))
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    base = "%s -m ledger --dir %s trace TASK-1" % (shlex.quote(sys.executable), ledger.root)
    shell_env = {**os.environ, "LEDGER_FIFO_WAIT_S": "0.5"}
    refused = run_shell("%s %s %s" % (base, fifo, args), tmp_path, shell_env)
    assert refused.returncode == 2 and "is a FIFO that no program wrote to within 0.5 s" in refused.stderr, (
        refused.stderr
    )
    source = trace_file(tmp_path, {"tool": "calc", "arguments": {"expression": "2*3"}})
    # The default wait: the writer (cat) may start late on a busy machine; it is waited for.
    read = run_shell("%s <(cat %s) %s" % (base, source, args), tmp_path, dict(os.environ))
    assert read.returncode == 0 and "approved" in read.stdout, read.stdout + read.stderr
    unreadable = run_shell("%s %s %s" % (base, fifo, args), tmp_path, {**os.environ, "LEDGER_FIFO_WAIT_S": "soon"})
    assert unreadable.returncode == 2 and "LEDGER_FIFO_WAIT_S is a number of seconds" in unreadable.stderr
    assert unreadable.stderr.count("\n") == 1
