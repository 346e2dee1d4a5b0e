"""The clean room (`ledger check --clean-room`): the checks run in a fresh checkout of the
candidate with the protected paths and test files restored from the base, so a test the
agent weakened in its own tree fails on its real assertion; the record says what was
restored, and the verifier re-derives the verdict from it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import receipts as r
from conftest import ADMIN_ID, SIGNERS, ci_check, git, sign_decision
from ledger import CheckRun, Ledger, run_judge, seal_receipt
from verify import LedgerSource, TrustRoot, verify_receipt

TEST = "from app import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
SKIPPED = "import pytest\nfrom app import add\n\n\n@pytest.mark.skip\ndef test_add():\n    assert add(2, 2) == 4\n"


def _repo(tmp: Path) -> Path:
    """main: a correct add() and its test; task-1: add() broken and its test skipped."""
    repo = tmp / "agent"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "tests").mkdir()
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "tests" / "test_app.py").write_text(TEST)
    (repo / ".gitignore").write_text("*.pyc\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    git(repo, "checkout", "-qb", "task-1")
    (repo / "app.py").write_text("def add(a, b):\n    return a * b + 1\n")
    (repo / "tests" / "test_app.py").write_text(SKIPPED)
    (repo / "stale.pyc").write_bytes(b"left behind")  # ignored by git: absent from the clean room
    git(repo, "add", "app.py", "tests/test_app.py")
    git(repo, "commit", "-qm", "TASK-1: a faster add")
    return repo


def _contract(paths: str) -> bytes:
    return (
        'version = 1\ntask = "TASK-1"\ngoal = "add adds"\nowned_files = ["app.py"]\n%s\n'
        '[policy]\nrequired_tiers = ["deterministic", "judge", "human"]\n\n'
        '[judge]\nbackend = "command"\ncommand = [%s, "-c", "print(\'{\\"verdict\\": \\"accept\\", \\"confidence\\": 0.9}\')"]\n\n'
        '[[checks]]\nid = "tests"\ntype = "test_passes"\n'
        'command = [%s, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]\n'
        % (paths, json.dumps(sys.executable), json.dumps(sys.executable))
    ).encode()


def _check(ledger: Ledger, repo: Path, contract: bytes, clean_room: bool) -> CheckRun:
    return ci_check(ledger, repo, contract, clean_room=clean_room)


def _snapshot(ledger: Ledger, run: CheckRun) -> dict[str, object]:
    ref = next(e for e in run.record.evidence if e.check_id == "snapshot")
    loaded = json.loads(ledger.blob_path(ref.digest).read_bytes())
    assert isinstance(loaded, dict)
    return loaded


def test_a_skipped_protected_test_fails_on_its_assertion_in_the_clean_room(env: tuple[Path, Ledger]) -> None:
    tmp = env[0].parent
    repo, ledger = _repo(tmp), env[1]
    contract = _contract('protected_paths = ["tests/*"]')
    # In the agent's tree the test is skipped, so it "passes"; the protected-path rule refuses.
    plain = _check(ledger, repo, contract, clean_room=False)
    assert plain.outcome.verdict is r.Verdict.FAIL
    assert plain.rows[0][1] == "pass"
    assert plain.outcome.reasons == ("integrity: the candidate changes protected path tests/test_app.py",)
    assert "clean_room" not in _snapshot(ledger, plain)
    # In the clean room the test is the base's again: it runs and fails on the real assertion.
    room = _check(ledger, repo, contract, clean_room=True)
    assert room.outcome.verdict is r.Verdict.FAIL
    # Sandboxed, the run is judged by its report: the restored test ran, and failed.
    assert room.rows[0][:3] == (
        "tests",
        "fail",
        "tests/test_app.py::test_add failed; no test passed besides the control: nothing was shown to work",
    )
    out = ledger.blob_path(next(e.digest for e in room.record.evidence if e.check_id == "check:tests:stdout"))
    assert "assert 5 == 4" in out.read_text() and "2 failed" in out.read_text()  # the test and the control
    snap = _snapshot(ledger, room)
    said = snap["clean_room"]
    assert isinstance(said, dict)
    assert (said["base"], said["restored"], said["kept_new"]) == (
        git(repo, "rev-parse", "main"),
        ["tests/test_app.py"],
        [],
    )
    assert isinstance(said["network_cut"], bool) and str(said["network"]).startswith(
        "cut: " if said["network_cut"] else "not cut: "
    )
    assert room.record.input_hash == plain.record.input_hash  # the same candidate, checked where it cannot cheat
    assert (repo / "stale.pyc").exists() and (
        repo / "tests" / "test_app.py"
    ).read_text() == SKIPPED  # the tree untouched
    # The verifier re-derives the fail from what the record holds.
    contract_bytes = contract
    run_judge(
        ledger,
        task_id="TASK-1",
        contract_bytes=contract_bytes,
        candidate=room.record.input_hash,
        signer=SIGNERS["judge"],
    )
    sign_decision(ledger, repo, contract_bytes, room.record.input_hash, SIGNERS["alice"], note="ok", task="TASK-1")
    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=room.record.input_hash)
    result = verify_receipt(
        LedgerSource.open(ledger.root), str(sealed.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t")
    )
    assert result.ok, result.defects
    assert result.claimed_eligible is False and result.derived_eligible is False
    (deterministic,) = [line for line in result.tiers if line.tier is r.Tier.DETERMINISTIC]
    assert deterministic.derived == "fail"


def test_a_contract_that_requires_the_clean_room_gets_one_and_its_record_must_show_it(env: tuple[Path, Ledger]) -> None:
    tmp = env[0].parent
    repo, ledger = _repo(tmp), env[1]
    # The test file is declared, not protected: only the clean room catches the skip marker.
    contract = _contract('test_files = ["tests/*"]').replace(b"[policy]\n", b"[policy]\nclean_room = true\n")
    run = _check(ledger, repo, contract, clean_room=False)  # the policy asks for it
    assert run.outcome.verdict is r.Verdict.FAIL and run.rows[0][:2] == ("tests", "fail"), run.outcome
    parsed = r.parse_contract(contract)
    snap = _snapshot(ledger, run)
    assert r.derive_deterministic(parsed, {}, snap).reasons[0] == "tests: no recorded result"
    # A record whose checks ran in the agent's tree does not satisfy such a contract...
    outside = {k: v for k, v in snap.items() if k != "clean_room"}
    assert (
        "the contract requires a clean-room run; these checks ran in the working tree"
        in r.derive_deterministic(parsed, {}, outside).reasons
    )
    # ...nor one whose clean room left a changed test file as the agent wrote it.
    room = dict(snap["clean_room"])  # type: ignore[call-overload]
    unrestored = {**snap, "clean_room": {**room, "restored": []}}
    assert (
        "clean room: tests/test_app.py changed but was not restored from the base"
        in r.derive_deterministic(parsed, {}, unrestored).reasons
    )
