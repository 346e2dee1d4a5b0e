"""`ledger demo`: the main job end to end, in a throwaway workspace.

Until the tier runners land, every tier record here is recorded by hand, and the
output says so; the evidence is still real (a command's captured output, a diff).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import click

from receipts import EventType, Role, Signer, fingerprint
from verify import LedgerSource, TrustRoot, verify_receipt

from .._errors import InputError
from .._git import git, resolve_candidate
from ..ci._gate import gate
from ..git._notes import attach
from ..keys._key_files import generate_key_file
from ..keys._keyring import add_key
from ..ladder._events import begin_effect, end_effect, record_event
from ..ladder._records import seal_receipt
from ..ladder._status import task_state
from ..store._ledger import Appended, Ledger
from ..tiers import decide, run_deterministic, run_judge
from ..views._render import verify_lines

__all__ = ["run_demo", "demo_contract"]

TASK = "DEMO-1"


def demo_contract(test_runs: int = 1) -> bytes:
    """The demo task's completion contract (TOML bytes)."""
    # test_runs > 1 repeats the test check; the cold-verify benchmark uses it to reach 20 evidence blobs.
    return (
        """# Completion contract for DEMO-1
version = 1
task = "DEMO-1"
goal = "greet() returns a friendly greeting"
kind = "code"
owned_files = ["greet.py", "test_greet.py"]
evidence_required = ["tests"]
deliverables = ["greet() greets by name, politely"]

[policy]
required_tiers = ["deterministic", "judge", "human"]

[judge]
backend = "command"
command = [%s, "-m", "ledger.demo._judge"]    # a scripted example judge, not a model

[[checks]]
id = "tests"
type = "test_passes"
command = [%s, "test_greet.py"]

[[checks]]
id = "module"
type = "path_exists"
path = "greet.py"

[[checks]]
id = "greeting"
type = "file_contains"
path = "greet.py"
literal = "Hello"
"""
        % (json.dumps(sys.executable), json.dumps(sys.executable))
        + "".join(
            """
[[checks]]
id = "tests-%d"
type = "test_passes"
command = [%s, "-c", "import sys, greet; assert greet.greet('Ada') == 'Hello, Ada!'; print('run %d passed'); print('run %d', file=sys.stderr)"]
"""
            % (i, json.dumps(sys.executable), i, i)
            for i in range(2, test_runs + 1)
        )
    ).encode()


def _say(text: str) -> None:
    click.secho(text, bold=True)


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "demo",
        "GIT_AUTHOR_EMAIL": "demo@example.invalid",
        "GIT_COMMITTER_NAME": "demo",
        "GIT_COMMITTER_EMAIL": "demo@example.invalid",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo),
    }
    return git(repo, *args, env=env).decode("utf-8")


def _run_verify(root: Path, receipt: str, trust: TrustRoot) -> bool:
    source = LedgerSource.open(root)
    try:
        result = verify_receipt(source, receipt, trust)
    finally:
        source.close()
    click.echo("\n".join("    " + line for line in verify_lines(result)))
    return result.ok


def run_demo(keep: Path | None, test_runs: int = 1) -> int:
    """`ledger demo`: a throwaway repository and ledger, the whole ladder, a receipt that
    verifies and a tampered copy that does not. Returns the exit code (0 when both hold).
    """
    work = keep if keep is not None else Path(tempfile.mkdtemp(prefix="receipt-ledger-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _demo(work, test_runs)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            click.echo("workspace kept at %s" % work, err=True)


def _demo(work: Path, test_runs: int) -> int:
    repo, keydir = work / "repo", work / "keys"
    for d in (repo, keydir, work / "evidence"):
        d.mkdir()
    _say("1. A repository with a small change by an agent")
    _make_repo(repo, test_runs)
    _say("2. A ledger, and one key per role (OpenSSH Ed25519, outside the repository)")
    signers = {name: generate_key_file(keydir / name, name) for name in ("admin", "ci", "judge", "alice", "sealer")}
    ledger = Ledger.create(repo / ".ledger", signers["admin"], "admin")
    for name, role in (("ci", Role.DETERMINISTIC), ("judge", Role.JUDGE), ("alice", Role.HUMAN), ("sealer", Role.SEAL)):
        add_key(ledger, signers["admin"], name, [role], signers[name].public_key_blob)
        click.echo("    %-7s %s" % (name, role.value))
    signers["agent"] = generate_key_file(keydir / "agent", "agent")
    add_key(ledger, signers["admin"], "agent", [Role.AGENT], signers["agent"].public_key_blob)
    sealed = _climb(ledger, repo, signers)
    if sealed is None:
        _say("Demo FAILED: the approval was not signed")
        return 1
    receipt_hash = str(sealed.body_hash)
    trust = TrustRoot(frozenset({fingerprint(signers["admin"].public_key_blob)}), "the demo admin key")
    _say("8. ledger verify %s --trust <admin key>" % receipt_hash)
    accepted = _run_verify(repo / ".ledger", receipt_hash, trust)
    _say("9. Attach the receipt to the commit, gate it, and merge exactly once")
    passed = _gate_and_merge(ledger, work, sealed, signers["sealer"], trust)
    ledger.close()
    _say("10. A copy of the ledger with one byte changed in the deterministic record, verified again")
    rejected = not _run_verify(_tampered_copy(work, repo / ".ledger"), receipt_hash, trust)
    if accepted and rejected and passed:
        _say("Demo complete: the honest receipt verified, the tampered copy was rejected.")
        return 0
    _say("Demo FAILED: accepted=%s rejected=%s" % (accepted, rejected))
    return 1


def _make_repo(repo: Path, test_runs: int) -> None:
    _git(repo, "init", "-q", "-b", "main")
    (repo / "contracts").mkdir()
    (repo / "contracts" / "DEMO-1.toml").write_bytes(demo_contract(test_runs))
    (repo / "greet.py").write_text("def greet(name):\n    return 'hi ' + name\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial")
    (repo / "greet.py").write_text("def greet(name):\n    return 'Hello, ' + name + '!'\n")
    (repo / "test_greet.py").write_text(
        "from greet import greet\nassert greet('Ada') == 'Hello, Ada!'\nprint('1 passed')\n"
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "DEMO-1: friendlier greeting")
    click.echo("    commit %s: DEMO-1: friendlier greeting" % _git(repo, "rev-parse", "--short", "HEAD").strip())


def _climb(ledger: Ledger, repo: Path, signers: Mapping[str, Signer]) -> Appended | None:
    """Steps 3 to 7: the claim, the three tiers and the seal; the receipt's entry (None if
    the approval was not signed).
    """
    contract_bytes = (repo / "contracts" / "DEMO-1.toml").read_bytes()
    _say("3. The agent claims it is done (ledger claim): recorded, and believed by nobody")
    head = resolve_candidate("HEAD", repo)
    summary = {"summary": "greeting fixed, tests pass"}
    record_event(ledger, signers["agent"], TASK, EventType.ANSWER_PROPOSED, head, summary)
    click.echo("    status: %s" % _status(ledger))
    _say("4. The deterministic tier runs the contract's checks for real (ledger check DEMO-1)")
    run = run_deterministic(
        ledger,
        repo=repo,
        task_id=TASK,
        contract_bytes=contract_bytes,
        source="contracts/DEMO-1.toml",
        signer=signers["ci"],
    )
    for cid, status, why, digest in run.rows:
        click.echo("    %-9s %-5s %-22s %s" % (cid, status, digest, why))
    click.echo(
        "    attribution %s; deterministic %s, record %s"
        % (run.snapshot.strength, run.outcome.verdict.value, run.appended.body_hash.short())
    )
    candidate = run.record.input_hash
    _say("5. The judge tier asks the contract's judge (here a SCRIPTED EXAMPLE judge, not a model)")
    judged = run_judge(
        ledger, task_id=TASK, contract_bytes=contract_bytes, candidate=candidate, signer=signers["judge"]
    )
    outcome = judged.outcome
    click.echo("    judge %s: %s" % (outcome.verdict.value, outcome.reason))
    _say("6. A human (the demo key 'alice') sees what she approves, and signs")
    approval = decide(
        ledger,
        task_id=TASK,
        contract_bytes=contract_bytes,
        candidate=candidate,
        signer=signers["alice"],
        approve=True,
        note="demo approval",
        repo=repo,
        confirm=_show,
    )
    if approval is None:
        return None
    click.echo("    approval %s" % approval.body_hash.short())
    _say("7. Seal the receipt")
    receipt, sealed = seal_receipt(ledger, task_id=TASK, signer=signers["sealer"], input_hash=candidate)
    eligible = str(receipt.merge_eligible).lower()
    click.echo("    receipt %s merge_eligible=%s; status: %s" % (sealed.body_hash, eligible, _status(ledger)))
    note = ledger.checkpoint(signers["sealer"])
    click.echo("    signed checkpoint: %s" % " / ".join(note.text.strip().splitlines()))
    return sealed


def _gate_and_merge(ledger: Ledger, work: Path, sealed: Appended, sealer: Signer, trust: TrustRoot) -> bool:
    """Step 9: attach, gate as CI that reaches the store (its own audit proves the task
    complete), then one merge effect, and a second refused. Whether the gate passed.
    """
    repo = work / "repo"
    attach(ledger, repo, sealed.body_hash, None)
    gated = gate(
        repo,
        "HEAD",
        trust,
        open_ledger=lambda: LedgerSource.open(repo / ".ledger"),
        audit_state=work / "gate-audit-state.json",
        recorder=(ledger, sealer),
        task=TASK,
    )
    click.echo(
        "    ledger --dir .ledger gate HEAD --audit-state gate-audit-state.json: %s"
        % ("PASS (completeness audited)" if gated.passed else "FAIL: " + "; ".join(gated.reasons))
    )
    if gated.passed:
        begin_effect(ledger, sealer, TASK, "merge", "demo-merge-1", "main", gated.candidate, trust=trust)
        click.echo("    effect demo-merge-1 begun; status: %s" % _status(ledger))
        end_effect(ledger, sealer, "demo-merge-1", "confirmed", "read back: main contains the candidate")
        click.echo("    effect confirmed; status: %s" % _status(ledger))
        try:
            begin_effect(ledger, sealer, TASK, "merge", "demo-merge-1", "main", gated.candidate, trust=trust)
        except InputError as exc:
            click.echo("    a second merge with the same key: %s" % exc)
    return gated.passed


def _tampered_copy(work: Path, ledger_dir: Path) -> Path:
    """A copy of the ledger with the last byte of its first tier record's body flipped."""
    tampered = work / "tampered-ledger"
    shutil.copytree(ledger_dir, tampered)
    conn = sqlite3.connect(tampered / "ledger.db")
    with conn:
        row = conn.execute("SELECT seq, body FROM entries WHERE kind = 'tier_record' ORDER BY seq LIMIT 1").fetchone()
        body = bytearray(row[1])
        body[-1] ^= 0x01  # the last byte is part of the record's creation time
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (bytes(body), row[0]))
    conn.close()
    click.echo("    flipped the last byte of entry %d's body" % row[0])
    return tampered


def _show(shown: str) -> bool:
    """The demo's stand-in for a person at a terminal: print what is signed, and agree."""
    click.echo("\n".join("    | " + line for line in shown.splitlines()))
    return True


def _status(ledger: Ledger) -> str:
    state = task_state(ledger, TASK)
    return "%s (%s)" % (state.state.value, state.reason)
