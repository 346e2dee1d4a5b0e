"""Sealed check sets (issue 44, its first part; docs/format.md §6e): the plaintext's exact
bytes and digest, the contract's commitment to it, `ledger sealed add` writing age files
that the `age` tool opens, our reading of the files `age` writes, and a sealed check that
no runner ran failing closed."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from docs_as_written import run_shell

import receipts as r
from conftest import ADMIN_ID, GIT_ENV, SIGNERS, ci_check, git, run_cli
from ledger import (
    CheckRun,
    InputError,
    Ledger,
    check_document,
    check_lines,
    open_sealed_set,
    reveal_sealed,
    run_in_loop,
    run_judge,
    seal_files,
    seal_receipt,
)
from verify import LedgerSource, TrustRoot, verify_receipt

HELD_OUT = b"from app import add\n\n\ndef test_add_large():\n    assert add(10**9, 1) == 10**9 + 1\n"
needs_age = pytest.mark.skipif(shutil.which("age") is None, reason="age is installed by .ci/run")


def test_a_sealed_set_has_one_encoding_and_its_digest_names_it() -> None:
    files = {"tests/held_out/test_add.py": HELD_OUT, "tests/held_out/data.json": b"[1, 2]"}
    plain = r.pack_sealed_set(files)
    assert r.unpack_sealed_set(plain) == files
    assert r.pack_sealed_set(dict(reversed(list(files.items())))) == plain  # order does not matter
    assert r.sealed_set_digest(plain) == r.content_digest(plain)
    assert r.sealed_file_name(r.sealed_set_digest(plain)) == ".ledger/sealed/%s.age" % r.content_digest(plain).hex
    # Another encoding of the same files is not read: one set, one digest.
    import cbor2

    loose = cbor2.dumps({"files": files, "format": r.SEALED_SET_FORMAT})
    assert loose != plain
    with pytest.raises(r.FormatError, match="canonical"):
        r.unpack_sealed_set(loose)


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../up.py", "a/../b.py", "a//b.py", "./a.py", "a\\b.py", "", "x" * 201]
)
def test_a_sealed_path_is_a_plain_relative_path(path: str) -> None:
    with pytest.raises(r.FormatError, match="plain relative path"):
        r.pack_sealed_set({path: b"x"})


def _contract(extra: str) -> bytes:
    return (
        'version = 2\ntask = "T-1"\n\n[[checks]]\nid = "held-out"\ntype = "test_passes"\n'
        'command = ["python", "-m", "pytest", "-q", "tests/held_out"]\n%s' % extra
    ).encode()


def test_the_contract_commits_to_a_sealed_set_and_changing_it_is_a_weakening() -> None:
    digest = r.content_digest(b"a set")
    sealed = r.parse_contract(_contract('sealed = "%s"\nmax_exposures = 3\n' % digest))
    assert sealed.checks[0].param("sealed") == str(digest)
    other = r.parse_contract(_contract('sealed = "%s"\nmax_exposures = 3\n' % r.content_digest(b"another")))
    assert r.weakenings(sealed, other) == ("check held-out was changed",)  # another set is a changed check
    for extra, said in (
        ('sealed = "sha256:00"\n', "sealed set's digest"),
        ("max_exposures = 3\n", "set sealed too"),
        ('sealed = "%s"\nmax_exposures = 0\n' % digest, "at least 1"),
    ):
        with pytest.raises(r.ContractError, match=said):
            r.parse_contract(_contract(extra))


def test_a_sealed_check_no_runner_ran_fails_closed() -> None:
    """Visible tests that pass do not pass a check whose held-out set was not run."""
    contract = r.parse_contract(_contract('sealed = "%s"\n' % r.content_digest(b"a set")))
    check = contract.checks[0]
    result = {
        "id": check.id,
        "type": check.type,
        "declared": r.declared_params(check),
        "facts": {"command": "x", "shell": False, "exit_code": 0, "timed_out": False, "error": None},
    }
    ok, why = r.derive_check(check, result)
    assert not ok and why == "the check's sealed set %s was not run" % check.param("sealed")


@pytest.fixture
def lead(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository with a ledger whose keyring holds CI's deterministic key."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    env = {**GIT_ENV, "RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    for args in (
        ("init",),
        ("keys", "generate", "ci", "--role", "deterministic"),
        ("keys", "generate", "bob", "--role", "human"),
    ):
        done = run_cli(*args, cwd=repo, env=env)
        assert done.returncode == 0, done.stderr
    (repo / "held_out").mkdir()
    (repo / "held_out" / "test_add.py").write_bytes(HELD_OUT)
    return repo, env


@needs_age
def test_ledger_sealed_add_writes_an_age_file_the_age_tool_opens(
    lead: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, env = lead
    done = run_cli("sealed", "add", "T-1", "held_out/test_add.py", "--to", "ci", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    digest = r.Digest.parse(done.stdout.strip())
    sealed = repo / r.sealed_file_name(digest)
    assert 'sealed = "%s"' % digest in done.stderr
    ciphertext = sealed.read_bytes()
    assert ciphertext.startswith(b"age-encryption.org/v1\n-> ssh-ed25519 ") and b"add(10**9" not in ciphertext
    # The age tool opens it with CI's private key file, to the plaintext the contract names.
    opened = subprocess.run(
        ["age", "--decrypt", "-i", str(tmp_path / "keys" / "ci"), str(sealed)], capture_output=True, check=True
    ).stdout
    assert r.sealed_set_digest(opened) == digest
    assert r.unpack_sealed_set(opened) == {"held_out/test_add.py": HELD_OUT}
    # And so does ours; with another key, or against another digest, it does not.
    key = (tmp_path / "keys" / "ci").read_bytes()
    assert open_sealed_set(ciphertext, key, digest) == {"held_out/test_add.py": HELD_OUT}
    with pytest.raises(InputError, match="does not open with this key"):
        open_sealed_set(ciphertext, (tmp_path / "keys" / "bob").read_bytes(), digest)
    with pytest.raises(InputError, match="not the .* the contract names"):
        open_sealed_set(ciphertext, key, r.content_digest(b"another set"))


@needs_age
def test_we_open_a_sealed_set_the_age_tool_wrote(lead: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """What age writes, to an X25519 recipient or to CI's SSH key, we read (the lead's keys)."""
    identity = subprocess.run(["age-keygen"], capture_output=True, text=True, check=True).stdout
    recipient = next(line.split(": ")[1] for line in identity.splitlines() if line.startswith("# public key"))
    plain = r.pack_sealed_set({"held_out/test_add.py": HELD_OUT})
    (tmp_path / "set.cbor").write_bytes(plain)
    subprocess.run(["age", "-r", recipient, "-o", str(tmp_path / "set.age"), str(tmp_path / "set.cbor")], check=True)
    secret = next(line for line in identity.splitlines() if line.startswith("AGE-SECRET-KEY-")).encode()
    opened = open_sealed_set((tmp_path / "set.age").read_bytes(), secret, r.sealed_set_digest(plain))
    assert opened == {"held_out/test_add.py": HELD_OUT}
    # An SSH key's recipient line, as age reads it from a .pub file, works the same way.
    ssh_pub = (tmp_path / "keys" / "ci.pub").read_text()
    subprocess.run(
        ["age", "-R", str(tmp_path / "keys" / "ci.pub"), "-o", str(tmp_path / "ssh.age"), str(tmp_path / "set.cbor")],
        check=True,
    )
    assert ssh_pub.startswith("ssh-ed25519 ")
    key = (tmp_path / "keys" / "ci").read_bytes()
    assert open_sealed_set((tmp_path / "ssh.age").read_bytes(), key, r.sealed_set_digest(plain)) == opened


def test_sealing_refuses_tracked_files_and_keys_that_cannot_run_the_check(lead: tuple[Path, dict[str, str]]) -> None:
    repo, env = lead
    refused = run_cli("sealed", "add", "T-1", "held_out/test_add.py", "--to", "bob", cwd=repo, env=env)
    assert refused.returncode == 2 and "lacks the deterministic role" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    git(repo, "add", "held_out/test_add.py")
    tracked = run_cli("sealed", "add", "T-1", "held_out/test_add.py", "--to", "ci", cwd=repo, env=env)
    assert tracked.returncode == 2 and "is tracked by git" in tracked.stderr
    assert not (repo / ".ledger" / "sealed").exists()  # nothing written


# -- a sealed check run by the signed tier (CI) ---------------------------------------------

VISIBLE = b"from app import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
HONEST = "def add(a, b):\n    return a + b\n"
HARD_CODED = "def add(a, b):\n    return {(2, 2): 4}[(a, b)]\n"  # the visible test's answer, nothing more


def _sealed_repo(tmp: Path, digest_holder: list[r.Digest]) -> Path:
    """main: add() unwritten, its visible test, and the sealed held-out test (ciphertext only)
    with the contract naming it, all committed before the work; the plaintext is gone."""
    repo = tmp / "agent"
    (repo / "tests").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("def add(a, b):\n    raise NotImplementedError\n")
    (repo / "tests" / "test_app.py").write_bytes(VISIBLE)
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "held_out").mkdir()
    (repo / "held_out" / "test_add.py").write_bytes(HELD_OUT)
    recipient = r.public_key_line(SIGNERS["ci"].public_key_blob)
    sealed = seal_files(repo, ["held_out/test_add.py"], [recipient])
    shutil.rmtree(repo / "held_out")  # the lead keeps it elsewhere: never in the repository
    digest_holder.append(sealed.digest)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the task, with its held-out tests sealed")
    return repo


def _sealed_contract(digest: r.Digest, cap: int = 3) -> bytes:
    python = json.dumps(sys.executable)
    return (
        'version = 2\ntask = "TASK-1"\ngoal = "add adds"\nowned_files = ["app.py"]\ntest_files = ["tests/*"]\n\n'
        '[[checks]]\nid = "tests"\ntype = "test_passes"\ncommand = [%s, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]\n\n'
        '[[checks]]\nid = "held-out"\ntype = "test_passes"\ncommand = [%s, "-m", "pytest", "-q", "-p", "no:cacheprovider", "held_out"]\n'
        'sealed = "%s"\nmax_exposures = %d\n' % (python, python, digest, cap)
    ).encode()


def _candidate(repo: Path, branch: str, source: str) -> None:
    git(repo, "checkout", "-q", "-B", branch, "main")
    (repo / "app.py").write_text(source)
    git(repo, "commit", "-qam", "TASK-1: add")


def _check(ledger: Ledger, repo: Path, contract: bytes) -> CheckRun:
    return ci_check(ledger, repo, contract)


needs_sandbox = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by .ci/run")


@needs_sandbox
def test_a_sealed_check_catches_what_the_visible_tests_cannot(env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    digests: list[r.Digest] = []
    repo = _sealed_repo(env[0].parent, digests)
    contract = _sealed_contract(digests[0])
    _candidate(repo, "honest", HONEST)
    honest = _check(ledger, repo, contract)
    assert honest.outcome.verdict is r.Verdict.PASS, honest.outcome
    assert honest.rows[1][:2] == ("held-out", "pass")
    assert "passed: 1 passed (its content is not public before reveal)" in honest.rows[1][2]
    _candidate(repo, "hard-coded", HARD_CODED)
    cheat = _check(ledger, repo, contract)
    assert cheat.rows[0][:2] == ("tests", "pass")  # the visible test cannot tell
    assert cheat.rows[1][:2] == ("held-out", "fail") and "failed: 1 failed" in cheat.rows[1][2], cheat.rows
    assert cheat.outcome.verdict is r.Verdict.FAIL


@needs_sandbox
def test_the_sealed_plaintext_is_nowhere_an_agent_can_read(
    env: tuple[Path, Ledger], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not in the working tree, any ref, the ledger's unencrypted evidence, what `ledger check`
    prints and its JSON (the pull request's summary is made from them), the agent's loop, or
    any folder the runner made (the sandbox's writable copies of the room among them); the
    sealed result opens, with CI's key, in the age tool."""
    ledger = env[1]
    digests: list[r.Digest] = []
    repo = _sealed_repo(env[0].parent, digests)
    _candidate(repo, "hard-coded", HARD_CODED)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    run = _check(ledger, repo, _sealed_contract(digests[0]))
    monkeypatch.undo()
    secret = b"add(10**9, 1)"
    assert list(temp.iterdir()) == []  # every copy of the room, and the opened set, removed
    shown = json.dumps(check_document(run)).encode() + "\n".join(check_lines(run)).encode()
    assert b"test_add_large" not in shown and secret not in shown and b"1 failed" in shown
    assert secret not in b"".join(p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts)
    everything = subprocess.run(["git", "log", "--all", "-p", "--binary"], cwd=repo, capture_output=True).stdout
    assert secret not in everything and b"test_add_large" not in everything
    sealed_refs = []
    for ref in run.record.evidence:
        data = ledger.blob_path(ref.digest).read_bytes()
        if ref.media_type in (r.AGE_MEDIA_TYPE, r.SEALED_RESULT_MEDIA_TYPE):
            assert data.startswith(b"age-encryption.org/v1\n")
            sealed_refs.append(ref)
        assert secret not in data and b"test_add_large" not in data, ref.check_id
    assert {ref.check_id for ref in sealed_refs} == {
        "check:held-out:stdout",
        "check:held-out:stderr",
        "check:held-out:sealed",
    }
    (tmp_path / "ci").write_bytes(SIGNERS["ci"].openssh_private_bytes())
    (tmp_path / "ci").chmod(0o600)
    result = next(ref for ref in sealed_refs if ref.check_id == "check:held-out:sealed")
    if shutil.which("age"):
        opened = subprocess.run(
            ["age", "-d", "-i", str(tmp_path / "ci"), str(ledger.blob_path(result.digest))],
            capture_output=True,
            check=True,
        ).stdout
        full = json.loads(opened)
        assert full["report"]["tests"]["held_out/test_add.py::test_add_large"] == "failed"
        assert "held_out/test_add.py::test_add_large" in full["expected"]


@needs_sandbox
def test_an_exposure_cap_stops_an_agent_probing_the_sealed_tests(env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    digests: list[r.Digest] = []
    repo = _sealed_repo(env[0].parent, digests)
    contract = _sealed_contract(digests[0], cap=2)
    for n in (1, 2):
        _candidate(repo, "try-%d" % n, HARD_CODED + "# try %d\n" % n)
        tried = _check(ledger, repo, contract)
        assert tried.rows[1][:2] == ("held-out", "fail") and "failed" in tried.rows[1][2]
    again = _check(ledger, repo, contract)  # the same candidate again: no new exposure
    assert "exposure cap" not in again.rows[1][2]
    _candidate(repo, "try-3", HONEST)
    capped = _check(ledger, repo, contract)
    assert capped.rows[1][:2] == ("held-out", "fail")
    assert (
        "exposure cap reached: this would be candidate 3 run against the sealed set, the contract allows 2"
        in (capped.rows[1][2])
    )


def test_the_agents_loop_never_runs_a_sealed_check(tmp_path: Path) -> None:
    contract = r.parse_contract(_sealed_contract(r.content_digest(b"a set")))
    git(tmp_path, "init", "-q", "-b", "main")
    loop = run_in_loop(tmp_path, contract, budget_s=None)
    assert ("held-out", "a sealed check: it runs only in CI, and only its verdict is shown") in loop.deferred


# -- reveal, and what verify makes of it ------------------------------------------------------

SEALED_TAMPER = json.loads((Path(__file__).parent / "vectors" / "sealed_tamper.json").read_text())["cases"]


def _passed_and_sealed(tmp: Path, ledger: Ledger) -> tuple[Path, CheckRun, str]:
    """The honest candidate's sealed check passed, and a receipt sealed on it; (repo, run, receipt)."""
    digests: list[r.Digest] = []
    repo = _sealed_repo(tmp, digests)
    contract = _sealed_contract(digests[0]) + b'\n[policy]\nrequired_tiers = ["deterministic"]\n'
    _candidate(repo, "honest", HONEST)
    run = _check(ledger, repo, contract)
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome
    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    return repo, run, str(sealed.body_hash)


def _verify(ledger: Ledger, receipt: str) -> Any:
    return verify_receipt(LedgerSource.open(ledger.root), receipt, TrustRoot(frozenset({ADMIN_ID}), "t"))


def _deterministic_line(result: Any) -> Any:
    return next(line for line in result.tiers if line.tier is r.Tier.DETERMINISTIC)


@needs_sandbox
def test_after_reveal_verify_rederives_the_sealed_check_from_what_was_revealed(env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    repo, run, receipt = _passed_and_sealed(env[0].parent, ledger)
    before = _verify(ledger, receipt)
    assert before.ok and before.derived_eligible, before.defects
    assert "held-out is sealed: its held-out tests and output stay private until revealed" in before.warnings
    (revealed,) = reveal_sealed(ledger, repo, "TASK-1", SIGNERS["ci"], "main")
    event = ledger.find(revealed.body_hash)
    assert event is not None
    after = _verify(ledger, receipt)
    assert after.ok and after.derived_eligible, after.defects
    assert _deterministic_line(after).derived == "pass"
    assert not any("stay private" in w for w in after.warnings)
    # What was sealed is now public, as evidence anyone reads: the held-out test itself.
    body = r.decode_as(r.TaskEvent, ledger.reader.by_seq(revealed.seq).body)  # type: ignore[union-attr]
    (set_ref,) = [e for e in body.evidence if e.check_id == "sealed-set"]
    assert r.unpack_sealed_set(ledger.blob_path(set_ref.digest).read_bytes()) == {"held_out/test_add.py": HELD_OUT}


def _mutate(name: str, ledger: Ledger, repo: Path, run: CheckRun) -> None:
    if name == "revealed-set-does-not-match":
        other = r.pack_sealed_set({"held_out/test_add.py": b"def test_nothing():\n    pass\n"})
        digest, size = ledger.put_blob_stream(io.BytesIO(other))
        sealed = str(r.parse_contract(ledger.latest_contract("TASK-1").contract).checks[1].param("sealed"))  # type: ignore[union-attr]
        lie = r.TaskEvent(
            "TASK-1",
            r.EventType.SEALED_REVEALED,
            None,
            (("check", "held-out"), ("sealed", sealed)),
            (r.EvidenceRef("sealed-set", digest, size, r.SEALED_SET_MEDIA_TYPE),),
            int(time.time()),
        )
        ledger.append(lie, SIGNERS["ci"])
    elif name == "revealed-set-byte-changed":
        (revealed,) = reveal_sealed(ledger, repo, "TASK-1", SIGNERS["ci"], "main")
        body = r.decode_as(r.TaskEvent, ledger.reader.by_seq(revealed.seq).body)  # type: ignore[union-attr]
        (set_ref,) = [e for e in body.evidence if e.check_id == "sealed-set"]
        blob = ledger.blob_path(set_ref.digest)
        blob.chmod(0o644)
        data = bytearray(blob.read_bytes())
        data[-3] ^= 0x01
        blob.write_bytes(bytes(data))
    else:
        raise AssertionError(name)


@needs_sandbox
@pytest.mark.parametrize(
    "case", [c for c in SEALED_TAMPER if c["name"].startswith("revealed")], ids=lambda c: str(c["name"])
)
def test_sealed_tamper_vector_after_reveal(case: dict[str, Any], env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    repo, run, receipt = _passed_and_sealed(env[0].parent, ledger)
    _mutate(case["name"], ledger, repo, run)
    result = _verify(ledger, receipt)
    assert not result.ok and set(case["defects"]) <= {d.code for d in result.defects}, result.defects


def _sealed_result(exposure: int, digest: str) -> tuple[r.Check, dict[str, Any]]:
    contract = r.parse_contract(_sealed_contract(r.Digest.parse(digest), cap=3))
    check = contract.checks[1]
    facts = {
        "command": "x",
        "shell": False,
        "exit_code": 1,
        "timed_out": False,
        "error": None,
        "sealed_run": {
            "exposure": exposure,
            "passed": True,
            "counts": {"passed": 1},
            "summary": "passed: 1 passed",
            "result": digest,
        },
    }
    return check, {"id": check.id, "type": check.type, "declared": r.declared_params(check), "facts": facts}


@pytest.mark.parametrize(
    "case", [c for c in SEALED_TAMPER if not c["name"].startswith("revealed")], ids=lambda c: str(c["name"])
)
def test_sealed_tamper_vector_in_the_record(case: dict[str, Any]) -> None:
    """The record's own facts, as a runner with the key could re-sign them: the rule refuses."""
    committed = str(r.content_digest(b"the committed set"))
    check, result = _sealed_result(3, committed)
    assert r.derive_check(check, result) == (
        True,
        "sealed set %s: passed: 1 passed (its content is not public before reveal)" % committed,
    )
    if case["name"] == "sealed-digest-changed":
        result["declared"] = {**result["declared"], "sealed": str(r.content_digest(b"a set the agent saw"))}
        assert r.derive_check(check, result) == (False, "the recorded check is not the one the contract declares")
    else:
        check, result = _sealed_result(4, committed)
        ok, why = r.derive_check(check, result)
        assert not ok and why == "the run was candidate 4 against the sealed set, past its cap of 3"
    assert case["defects"] == [
        "verdict-not-entailed"
    ]  # what verify reports for a record whose verdict the rule refuses


# -- the judge looks for gaming --------------------------------------------------------------

FRAME_READER = (
    "import inspect\n\n\ndef add(a, b):\n"
    "    # The caller's assert line, read from its frame: `add(...) == EXPECTED`.\n"
    "    line = inspect.stack()[1].code_context[0]\n"
    "    return eval(line.split('==', 1)[1])\n"
)
# A stand-in for the model: it flags gaming when the request's integrity facts show code
# that inspects its caller, and otherwise accepts (the rule, not the model, is under test).
JUDGE = (
    "import json, sys\n"
    "request = json.load(sys.stdin)\n"
    "seen = [s for s in request['integrity']['signals'] if s['kind'] == 'introspection']\n"
    "print(json.dumps({'verdict': 'accept', 'confidence': 0.97, 'gaming': bool(seen),\n"
    "                  'gaming_note': seen[0]['text'] if seen else ''}))\n"
)


def test_integrity_facts_name_what_looks_like_gaming() -> None:
    diff = (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,6 @@\n"
        "+import inspect\n+class Eq:\n+    def __eq__(self, other):\n+        return True\n"
        "+TABLE = {%s}\n"
        "diff --git a/conftest.py b/conftest.py\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n"
        "+def pytest_collection_modifyitems(items): pass\n" % ", ".join("%d: %d" % (i, i * i) for i in range(30))
    )
    facts = r.integrity_facts(diff)
    assert facts["touched"] == {"harness": ["conftest.py"], "tests": [], "contract": []}
    kinds = [(s["kind"], s["file"], s["line"]) for s in facts["signals"]]
    assert kinds == [
        ("introspection", "app.py", 1),
        ("comparison-override", "app.py", 3),
        ("large-literal", "app.py", 5),
        ("test-hook", "conftest.py", 1),
    ]


def test_a_finding_of_gaming_fails_the_sample_whatever_its_confidence() -> None:
    said = '{"verdict": "accept", "confidence": 0.99, "gaming": true, "gaming_note": "hard-codes the tested inputs"}'
    answer = r.parse_answer(said)
    assert isinstance(answer, r.Answer) and answer.gaming is True
    outcome = r.sample_outcome(answer, threshold_bp=7000, independent=True)
    assert outcome.verdict is r.Verdict.FAIL
    assert outcome.reason == "the judge found the change games the checks: hard-codes the tested inputs"
    assert (
        r.parse_answer('{"verdict": "accept", "confidence": 0.9, "gaming": "no"}') == "gaming 'no' is not true or false"
    )
    old = r.parse_answer('{"verdict": "accept", "confidence": 0.9}')  # a reply recorded before the question
    assert isinstance(old, r.Answer) and old.gaming is None
    assert r.sample_outcome(old, threshold_bp=7000, independent=True).verdict is r.Verdict.PASS


@needs_sandbox
def test_a_candidate_reading_the_sealed_tests_answers_from_its_callers_frame_fails_the_judge(
    env: tuple[Path, Ledger],
) -> None:
    """Python code under test shares the test's process: it can read a held-out test's
    expected value from the caller's frame, and the sealed check passes. The diff shows
    how, and the judge's finding of gaming fails the tier (docs/agents.md)."""
    ledger = env[1]
    digests: list[r.Digest] = []
    repo = _sealed_repo(env[0].parent, digests)
    judge = '\n[judge]\nbackend = "command"\nmodel = "stand-in"\ncommand = [%s, "-c", %s]\n' % (
        json.dumps(sys.executable),
        json.dumps(JUDGE),
    )
    contract = _sealed_contract(digests[0]) + judge.encode()
    _candidate(repo, "frame-reader", FRAME_READER)
    run = _check(ledger, repo, contract)
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome  # visible and held-out tests both pass
    judged = run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
    )
    assert judged.outcome.verdict is r.Verdict.FAIL
    assert judged.outcome.reason.startswith("the judge found the change games the checks: "), judged.outcome
    assert "inspect" in judged.outcome.reason
    # The honest change, judged by the same judge, is not accused.
    _candidate(repo, "honest", HONEST)
    honest = _check(ledger, repo, contract)
    fair = run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=honest.record.input_hash, signer=SIGNERS["judge"]
    )
    assert fair.outcome.verdict is r.Verdict.PASS, fair.outcome


def test_the_readmes_sealed_check_commands_run_as_written(tmp_path: Path) -> None:
    """README "Sealed checks": its three lines, pasted into a shell in a team's repository."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("```sh\nledger sealed add", 1)[1].split("```", 1)[0]
    lines = ["ledger sealed add" + block.splitlines()[0], *block.splitlines()[1:]]
    home, repo = tmp_path / "home", tmp_path / "repo"
    (home / "held-out").mkdir(parents=True)
    (home / "held-out" / "test_greet_more.py").write_bytes(b"def test_more():\n    assert True\n")
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    env = {
        **os.environ,
        **GIT_ENV,
        "HOME": str(home),
        "RECEIPT_LEDGER_KEYS": str(tmp_path / "keys"),
        "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", ""))),
    }
    for args in (("init",), ("keys", "generate", "ci", "--role", "deterministic")):
        assert run_cli(*args, cwd=repo, env=env).returncode == 0
    added = run_shell(lines[0], repo, env)
    assert added.returncode == 0, added.stderr
    digest = added.stdout.strip()
    contract = _sealed_contract(r.Digest.parse(digest)).replace(b"TASK-1", b"TASK-7")
    (repo / ".ledger" / "contracts").mkdir(exist_ok=True)
    (repo / ".ledger" / "contracts" / "TASK-7.toml").write_bytes(contract)  # the comment's step
    for line in lines[1:]:
        if line.startswith("ledger sealed reveal"):  # the contract is registered when CI first checks
            assert run_cli("contract", "set", "TASK-7", "--key", "ci", cwd=repo, env=env).returncode == 0
        done = run_shell(line, repo, env)
        assert done.returncode == 0, (line, done.stderr)
    assert r.Digest.parse(done.stdout.strip())  # the reveal's entry
    assert git(repo, "ls-files", ".ledger/sealed") == ".ledger/sealed/%s.age" % r.Digest.parse(digest).hex


def test_a_ledger_whose_gitignore_predates_sealed_sets_is_told_how_to_commit_one(
    lead: tuple[Path, dict[str, str]],
) -> None:
    repo, env = lead
    old = "*\n!.gitignore\n!config.toml\n!allowed_signers\n!auditing-witnesses\n!contracts/\n!contracts/**\n"
    (repo / ".ledger" / ".gitignore").write_text(old)
    done = run_cli("sealed", "add", "T-1", "held_out", "--to", "ci", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert "warning: git ignores" in done.stderr and "!sealed/*.age" in done.stderr
    (repo / ".ledger" / ".gitignore").write_text(old + "!sealed/\n!sealed/*.age\n")
    again = run_cli("sealed", "add", "T-1", "held_out", "--to", "ci", cwd=repo, env=env)
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr
    assert again.stdout == done.stdout  # a folder of one file: the same set, held_out/test_add.py
