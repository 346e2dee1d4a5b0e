"""Human oversight, recorded and enforced: how each decision was given, the
digest of what was shown, and a contract option that keeps the change's own author (the
key that claimed it) from approving it, re-derived by verify from the chain."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

import receipts as r
from conftest import (
    ADMIN_ID,
    LEDGER,
    SIGNERS,
    cli_repo_with_lower_tiers,
    contract_bytes,
    find_row,
    read_rows,
    run_cli,
    seeded_signer,
    sign_decision,
    write_rows,
)
from ledger import Ledger, add_key, decision_caveats, record_event, run_deterministic, run_judge, seal_receipt
from verify import LedgerSource, Result, TrustRoot, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
DEV = seeded_signer("dev")  # an engineer whose key both drives the agent and may approve


def _independent() -> bytes:
    return contract_bytes().decode().replace("[policy]\n", "[policy]\nindependent_approvers = true\n").encode()


def _ladder(env: tuple[Path, Ledger], contract: bytes) -> r.Digest:
    repo, ledger = env
    add_key(ledger, SIGNERS["admin"], "dev", [r.Role.AGENT, r.Role.HUMAN], DEV.public_key_blob)
    run = run_deterministic(
        ledger, repo=repo, task_id="TASK-1", contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
    )
    # The dev key claims the change, as the agent's Stop hook does.
    record_event(ledger, DEV, "TASK-1", r.EventType.ANSWER_PROPOSED, run.record.input_hash, {"verified": "no"})
    return run.record.input_hash


def _approve(env: tuple[Path, Ledger], contract: bytes, candidate: r.Digest, signer: r.Ed25519Signer) -> None:
    repo, ledger = env
    sign_decision(ledger, repo, contract, candidate, signer, note="looked")


def _seal_and_verify(env: tuple[Path, Ledger], candidate: r.Digest) -> tuple[r.LadderReceipt, Result]:
    _, ledger = env
    receipt, appended = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=candidate)
    return receipt, verify_receipt(LedgerSource.open(ledger.root), str(appended.body_hash), TRUST)


def test_the_author_cannot_approve_its_own_change(env: tuple[Path, Ledger]) -> None:
    contract = _independent()
    candidate = _ladder(env, contract)
    _approve(env, contract, candidate, DEV)
    receipt, result = _seal_and_verify(env, candidate)
    dev = r.fingerprint(DEV.public_key_blob)
    assert receipt.merge_eligible is False and result.ok and result.derived_eligible is False
    assert any(
        "approval by dev (%s) does not count: that key signed the task's answer_proposed event" % dev in reason
        for reason in result.eligibility_reasons
    ), result.eligibility_reasons
    # Every screen says the approval is not counted, on the human row itself (issue 46).
    from ledger import pr_comment, verify_lines

    (row,) = [line for line in verify_lines(result) if line.strip().startswith("human ")]
    assert "pass, NOT COUNTED" in row and "dev" in row, row
    assert "pass, NOT COUNTED" in pr_comment(result, str(receipt.input_hash))
    # Another person's approval is what the contract asks for.
    _approve(env, contract, candidate, SIGNERS["alice"])
    receipt, result = _seal_and_verify(env, candidate)
    assert receipt.merge_eligible is True and result.ok and result.derived_eligible is True
    # Eligible by alice's approval, dev's still does not count, and its row still says so.
    assert result.uncounted_approvals == (dev,)
    rows = [line for line in verify_lines(result) if line.strip().startswith("human ")]
    # (the rows follow the records' digests, which vary from run to run)
    assert sorted(("NOT COUNTED" in row, "dev" in row) for row in rows) == [(False, False), (True, True)], rows


def test_without_the_option_the_authors_approval_counts(env: tuple[Path, Ledger]) -> None:
    contract = contract_bytes()
    candidate = _ladder(env, contract)
    _approve(env, contract, candidate, DEV)
    receipt, result = _seal_and_verify(env, candidate)
    assert receipt.merge_eligible is True and result.ok, result.eligibility_reasons


def test_a_receipt_that_counts_the_authors_approval_is_rejected(env: tuple[Path, Ledger]) -> None:
    # An attacker holding every key re-signs the receipt as eligible: verify re-derives the
    # rule from the chain's own claim event and refuses the claim.
    contract = _independent()
    candidate = _ladder(env, contract)
    _approve(env, contract, candidate, DEV)
    _, ledger = env
    _, appended = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=candidate)
    ledger.close()
    rows = read_rows(ledger.root)
    i = find_row(rows, appended.body_hash)
    receipt = r.decode_receipt(rows[i].body)
    rows[i].body = r.encode_body(dataclasses.replace(receipt, merge_eligible=True))
    write_rows(ledger.root, rows, resign_from=i)
    forged = str(r.body_hash(r.EntryKind.RECEIPT, rows[i].body))
    result = verify_receipt(LedgerSource.open(ledger.root), forged, TRUST)
    assert [d.code for d in result.defects] == ["eligibility-mismatch"]


def test_dropping_the_option_is_a_weakening() -> None:
    old, new = r.parse_contract(_independent()), r.parse_contract(contract_bytes())
    assert r.weakenings(old, new) == (
        "approvers no longer have to differ from the keys that claimed or authored the change",
    )
    assert r.weakenings(new, old) == ()
    with pytest.raises(r.ContractError, match="independent_approvers"):
        r.parse_contract(
            contract_bytes().decode().replace("[policy]\n", '[policy]\nindependent_approvers = "yes"\n').encode()
        )


def _decision(root: Path, seq: int | None = None) -> dict[str, object]:
    ledger = Ledger.open(root)
    try:
        rows = [row for row in ledger.records_for("TASK-1") if row.record.tier is r.Tier.HUMAN]
        ref = rows[-1].record.evidence[0]
        handle = ledger.reader.open_blob(ref.digest)
        assert handle is not None
        with handle:
            doc: dict[str, object] = json.loads(handle.read())
        return doc
    finally:
        ledger.close()


def test_a_scripted_approval_says_so_with_the_digest_of_what_was_shown(tmp_path: Path) -> None:
    repo, keys = cli_repo_with_lower_tiers(tmp_path)
    ok = run_cli("approve", "TASK-1", "--key", "alice", "--yes", "--comment", "read it", cwd=repo, env=keys)
    assert ok.returncode == 0, ok.stderr
    doc = _decision(repo / ".ledger")
    assert doc["method"] == "scripted"
    assert isinstance(doc["shown"], str) and doc["shown"] in ok.stderr  # exactly what the person saw
    assert doc["shown_sha256"] == hashlib.sha256(doc["shown"].encode()).hexdigest()


def test_an_approval_answered_at_a_terminal_is_interactive(tmp_path: Path) -> None:
    repo, keys = cli_repo_with_lower_tiers(tmp_path)
    # A real terminal: the command's stdin and stderr are a pseudo-terminal, and the test
    # answers the prompt once it has appeared on it.
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*LEDGER, "approve", "TASK-1", "--key", "alice", "--comment", "looked at it"],
        cwd=repo,
        env={**os.environ, **keys},
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    while b"Sign this approval?" not in seen:
        chunk = os.read(master, 4096)
        assert chunk, seen
        seen += chunk
    os.write(master, b"y\n")
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0, seen
    assert out.decode().strip().startswith("blake3:")
    assert _decision(repo / ".ledger")["method"] == "interactive"


def _human_record(doc: dict[str, str]) -> tuple[r.TierRecord, dict[str, str]]:
    data = json.dumps(doc).encode()
    digest = r.content_digest(data)
    record = r.new_tier_record(
        task_id="T",
        tier=r.Tier.HUMAN,
        config_hash=digest,
        input_hash=digest,
        evidence=(r.EvidenceRef(r.HUMAN_DECISION_ID, digest, len(data), "application/json"),),
        verdict=r.Verdict.PASS,
        verifier="t",
        verifier_version="0",
        environment=digest,
        created=1764633600,
    )
    return record, doc


@pytest.mark.parametrize(
    "change, why",
    [
        ({"method": "by carrier pigeon"}, "neither interactive nor scripted"),
        ({"shown_sha256": "00" * 32}, "shown_sha256 is not the digest"),
    ],
)
def test_a_decision_that_misstates_itself_approves_nothing(change: dict[str, str], why: str) -> None:
    doc = {
        "format": r.HUMAN_DECISION_FORMAT,
        "decision": "approve",
        "approver": "SHA256:x",
        "note": "",
        "shown": "APPROVE",
        "method": "scripted",
        "shown_sha256": hashlib.sha256(b"APPROVE").hexdigest(),
    }
    for given, expected in ((doc, r.Verdict.PASS), ({**doc, **change}, r.Verdict.FAIL)):
        record, read = _human_record(given)

        def reader(digest: r.Digest, fmt: str, read: dict[str, str] = read) -> dict[str, str]:
            return read

        verdict, reason = r.derive_human(record, "SHA256:x", reader)
        assert verdict is expected, reason
    assert why in reason


def test_an_approval_that_will_not_count_says_so_when_given(env: tuple[Path, Ledger]) -> None:
    contract = _independent()
    candidate = _ladder(env, contract)
    _, ledger = env
    dev = r.fingerprint(DEV.public_key_blob)
    said = decision_caveats(ledger, "TASK-1", contract, candidate, DEV)
    assert len(said) == 1 and "will not count: key %s signed the task's answer_proposed event" % dev in said[0]
    assert decision_caveats(ledger, "TASK-1", contract, candidate, SIGNERS["alice"]) == []
    # An approval of a candidate the task has moved past is said to be stale.
    older = r.candidate_hash({"commit": "0" * 40})
    stale = decision_caveats(ledger, "TASK-1", contract, older, SIGNERS["alice"])
    assert len(stale) == 1 and "newest checked candidate is %s" % candidate.short() in stale[0]
