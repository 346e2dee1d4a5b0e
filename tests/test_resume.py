"""Chain audits in bounded memory, and incremental audits from a state file: a
resumed audit walks only what was added since the auditor's last clean audit, and says
what a full audit says."""

from __future__ import annotations

import base64
import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import test_tamper
from test_flat import _checkpoint, _other_task, _resign_tree_and_checkpoint

import receipts as r
from conftest import ADMIN_ID, SIGNERS, Row, Sample, build_sample, find_row, read_rows, run_cli, write_rows
from ledger import Ledger, revoke_key
from verify import AuditState, CannotVerify, ChainResult, LedgerSource, TrustRoot, verify_chain
from verify._walk import SignatureQueue

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")


def _audit(root: Path, resume: AuditState | None = None, workers: int = 1) -> ChainResult:
    with LedgerSource.open(root) as source:
        return verify_chain(source, TRUST, resume=resume, workers=workers)


def _checkpoint_at(root: Path, size: int, line: bool = True) -> None:
    """A checkpoint of the first ``size`` entries, signed by the genesis admin (valid from 0),
    with the retention line naming no policy (the sample has none), or (``line=False``)
    without one, as checkpoints signed before the line existed."""
    conn = sqlite3.connect(root / "ledger.db")
    with conn:
        leaves = [r.leaf_hash(bytes(e)) for (e,) in conn.execute("SELECT entry FROM entries WHERE seq < ?", (size,))]
        genesis = r.decode_as(r.Genesis, conn.execute("SELECT body FROM entries WHERE seq = 0").fetchone()[0])
        origin = "receipt-ledger/" + genesis.ledger_id
        extensions = (r.retention_extension(r.NamedRetention(None, None)),) if line else ()
        text = r.checkpoint_text(r.Checkpoint(origin, size, r.tree_root(r.MemoryTree(leaves), size), extensions))
        note = r.SignedNote(text, (r.sign_note(text, origin, SIGNERS["admin"]),))
        conn.execute("INSERT INTO checkpoints (size, note) VALUES (?, ?)", (size, note.encode()))
    conn.close()


def _audited_genesis_then_sample(tmp: Path, *args: object, **kwargs: object) -> Sample:
    """The sample, audited clean when a checkpoint covered only its genesis: the state file
    lies beside the ledger, and every entry an attack touches comes after it."""
    s = build_sample(tmp, *args, **kwargs)  # type: ignore[arg-type]
    _checkpoint_at(s.root, 1)
    first = _audit(s.root)
    assert first.ok and first.state is not None and first.state.size == 1, first.defects
    (tmp / "audit-state.json").write_text(first.state.to_json())
    _checkpoint(s.root)
    return s


# Vectors whose change lies below the state's size (the genesis), which a resumed audit
# by design does not read again.
BELOW_THE_STATE = {"genesis-body-unusable"}


@pytest.mark.parametrize("case", test_tamper.VECTORS, ids=[c["name"] for c in test_tamper.VECTORS])
def test_a_resumed_audit_says_what_a_full_audit_says_on_every_tamper_vector(
    case: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(test_tamper, "build_sample", _audited_genesis_then_sample)
    s = test_tamper.MUTATIONS[case["name"]](tmp_path)
    state = AuditState.from_json((tmp_path / "audit-state.json").read_text())
    full, resumed = _audit(s.root), _audit(s.root, state)
    if case["name"] in BELOW_THE_STATE:
        # format.md §8.2: the rows below the state are not read again; the full audit finds it.
        assert not full.ok and resumed.ok and resumed.resumed_from == state.size, case["name"]
        return
    # (A chain audit rejects most of these; those that only a receipt's check can see, such
    # as a dropped rejection, pass both.)
    assert full.ok == resumed.ok, case["name"]
    assert resumed.resumed_from == state.size
    assert sorted({d.code for d in resumed.defects}) == sorted({d.code for d in full.defects}), (
        case["name"],
        full.defects,
        resumed.defects,
    )
    assert (resumed.entries, resumed.head, resumed.first_bad) == (full.entries, full.head, full.first_bad)
    # A failed audit leaves nothing to resume from; a clean one leaves the same state either way.
    assert resumed.state == full.state and (resumed.state is None) != full.ok


def test_a_clean_extension_resumes_to_the_full_audits_result(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _checkpoint(s.root)
    first = _audit(s.root)
    assert first.ok and first.state is not None
    state = AuditState.from_json(first.state.to_json())
    assert state == first.state  # the file holds exactly the state
    _other_task(s.root, 25)
    _checkpoint(s.root)
    _other_task(s.root, 3)  # past the newest checkpoint: walked, and walked again next time
    full, resumed = _audit(s.root), _audit(s.root, state)
    assert full.ok and resumed.ok, resumed.defects
    assert (resumed.entries, resumed.head) == (full.entries, full.head)
    assert resumed.state == full.state and resumed.state is not None
    assert resumed.state.size == full.entries - 3


def test_a_history_rewritten_under_the_audited_prefix_is_caught(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _other_task(s.root, 6)
    _checkpoint(s.root)
    state = _audit(s.root).state
    assert state is not None
    _other_task(s.root, 4)
    rows = read_rows(s.root)
    # An entry you audited, changed and the chain after it re-signed, the tree rebuilt and the
    # checkpoint re-signed, by an attacker holding every key.
    i = state.size - 3
    record = r.decode_as(r.TierRecord, rows[i].body)
    rows[i].body = r.encode_body(dataclasses.replace(record, created=record.created + 1))
    write_rows(s.root, rows, resign_from=i)
    _resign_tree_and_checkpoint(s.root)
    assert _audit(s.root).ok  # a full audit with nothing kept cannot tell: the signatures all hold
    codes = {d.code for d in _audit(s.root, state).defects}
    # The seam is not the entry audited, the signed root is not the audited prefix extended,
    # and the first new entries link to history that is not the audited one.
    assert "history-rewritten" in codes and "checkpoint-root" in codes, codes


def test_a_ledger_cut_short_or_a_lost_checkpoint_is_caught(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _checkpoint(s.root)
    state = _audit(s.root).state
    assert state is not None
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM checkpoints")
    conn.close()
    assert [d.code for d in _audit(s.root, state).defects] == ["history-rewritten"]
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries WHERE seq = 2")
    conn.close()
    assert [d.code for d in _audit(s.root, state).defects] == ["history-rewritten"] * 2
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries WHERE seq >= ?", (state.size - 2,))
    conn.close()
    assert [d.code for d in _audit(s.root, state).defects] == ["history-rewritten"]


def test_a_state_that_does_not_match_its_checkpoint_is_bad_input(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _checkpoint(s.root)
    state = _audit(s.root).state
    assert state is not None
    wrong = dataclasses.replace(state, range=(bytes(32),) * len(state.range))
    with pytest.raises(CannotVerify, match="does not match its own checkpoint"):
        _audit(s.root, wrong)
    path = tmp_path / "state.json"
    for text in (wrong.to_json(), "{}", state.to_json().replace('"size"', '"sighs"'), "not json"):
        path.write_text(text)
        cli = run_cli("--dir", str(s.root), "verify", "--chain", "--resume", str(path), "--trust", ADMIN_ID)
        assert cli.returncode == 2 and cli.stderr.count("\n") == 1 and "Traceback" not in cli.stderr, cli.stderr
        assert path.read_text() == text  # nothing written over it


def test_the_cli_saves_resumes_and_updates_the_state(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _checkpoint(s.root)
    path = tmp_path / "audit.json"
    base = ("--dir", str(s.root), "verify", "--chain", "--trust", ADMIN_ID)
    first = run_cli(*base, "--save-state", str(path))
    assert first.returncode == 0 and "state     written to" in first.stdout, first.stdout
    saved = json.loads(path.read_text())
    assert saved["format"] == "receipt-ledger/audit-state/v1"
    _other_task(s.root, 5)
    _checkpoint(s.root)
    again = run_cli(*base, "--resume", str(path), "--json")
    doc = json.loads(again.stdout)
    assert again.returncode == 0 and doc["resumed_from"] == saved["size"] and doc["state_size"] == doc["entries"]
    assert json.loads(path.read_text())["size"] == doc["entries"]  # updated in place
    # A failing audit leaves the state as it was.
    _other_task(s.root, 2)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        seq, body = conn.execute("SELECT seq, body FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        conn.execute("UPDATE entries SET body = ? WHERE seq = ?", (body + b"\x00", seq))
    conn.close()
    before = path.read_text()
    failed = run_cli(*base, "--resume", str(path))
    assert failed.returncode == 1 and "state     NOT written" in failed.stdout
    assert path.read_text() == before
    assert run_cli("--dir", str(s.root), "verify", s.receipt, "--resume", str(path)).returncode == 2


def test_signature_chunks_in_flight_are_bounded_and_every_failure_is_still_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(SignatureQueue, "CHUNK", 5)
    signer = SIGNERS["ci"]
    data = [b"entry %d" % i for i in range(200)]
    queue = SignatureQueue(2)
    most = 0
    try:
        for i, d in enumerate(data):
            sig = r.sshsig_sign(signer, "receipt-ledger", d)
            if i in (3, 97, 198):
                sig = r.sshsig_sign(SIGNERS["judge"], "receipt-ledger", d)  # the wrong key
            queue.append((signer.public_key_blob, "receipt-ledger", d, sig, i, "ci"))
            most = max(most, len(queue.sent))
        bad = [d.seq for d in queue.defects() if d.seq is not None]
    finally:
        queue.close()
    assert most <= 4
    assert sorted(bad) == [3, 97, 198]


def test_evidence_forgotten_by_the_audit_is_read_again_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import verify._verifier as verifier

    monkeypatch.setattr(verifier._Recent, "LIMIT", 1)
    s = test_tamper.MUTATIONS["evidence-blob-altered"](tmp_path)
    result = _audit(s.root)
    assert "evidence-altered" in [d.code for d in result.defects]
    assert result.evidence_blobs is not None and result.evidence_blobs > 1
    # nothing keeps the ledger's own entries across the walk
    assert Ledger.open(s.root).reader.count() == result.entries


def test_a_state_of_another_ledger_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = build_sample(tmp_path / "a"), build_sample(tmp_path / "b")
    for s in (first, second):
        _checkpoint(s.root)
    state = _audit(first.root).state
    assert state is not None and _audit(second.root).ok
    with pytest.raises(CannotVerify, match="another ledger"):
        _audit(second.root, state)


def _state_before_a_revoked_signature(tmp: Path) -> tuple[Sample, dict[str, Any]]:
    """The ci key revoked and a checkpoint signed over that; a clean audit's state there; then
    a deterministic record signed by the revoked key appended after it (as a holder of the
    lost key would). Returns the sample and the honest state's JSON document."""
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    revoke_key(ledger, SIGNERS["admin"], "ci", "laptop lost")
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    clean = _audit(s.root)
    assert clean.ok and clean.state is not None, clean.defects
    rows = read_rows(s.root)
    late = rows[find_row(rows, s.records[r.Tier.DETERMINISTIC])]
    rows.append(Row(dataclasses.replace(late.entry), late.body))
    write_rows(s.root, rows, resign_from=len(rows) - 1)
    full = _audit(s.root)
    assert "signer-unauthorized" in {d.code for d in full.defects}, full.defects
    return s, json.loads(clean.state.to_json())


def _resume_with(s: Sample, doc: dict[str, Any]) -> ChainResult:
    return _audit(s.root, AuditState.from_json(json.dumps(doc)))


def test_a_state_with_its_revocation_removed_does_not_resume(tmp_path: Path) -> None:
    """Issue 22, case 13: the state file is not signed; its keyring is re-proven as the signed
    ring chain ending at the audited seam, so a revocation cut from it is found."""
    s, doc = _state_before_a_revoked_signature(tmp_path)
    honest = _resume_with(s, doc)
    assert "signer-unauthorized" in {d.code for d in honest.defects}, honest.defects
    revocation = doc["ring"].pop()
    assert r.decode_entry(base64.b64decode(revocation[0])).kind is r.EntryKind.KEY_REVOKE
    doc["last_ring"] = r.entry_hash(base64.b64decode(doc["ring"][-1][0])).value.hex()
    with pytest.raises(CannotVerify, match="ring chain"):
        _resume_with(s, doc)


@pytest.mark.parametrize("edit", ["keyring-body-altered", "task-head-moved-back", "contract-swapped", "head-dropped"])
def test_a_state_edited_anywhere_does_not_resume(tmp_path: Path, edit: str) -> None:
    """Issue 22, case 13: keyring bodies, task heads and contracts are re-proven too."""
    s, doc = _state_before_a_revoked_signature(tmp_path)
    if edit == "keyring-body-altered":
        entry, body = doc["ring"][-1]
        revoke = r.decode_as(r.KeyRevoke, base64.b64decode(body))
        other = r.KeyRevoke(r.fingerprint(SIGNERS["judge"].public_key_blob), revoke.reason)
        doc["ring"][-1] = [entry, base64.b64encode(r.encode_body(other)).decode()]
    elif edit == "task-head-moved-back":
        with LedgerSource.open(s.root) as source:
            older = list(source.iter_entries(upto=doc["size"] - 1, task="TASK-1"))[-2]
        doc["tasks"]["TASK-1"] = r.entry_hash(older.entry).value.hex()
    elif edit == "contract-swapped":
        revision = r.decode_as(r.ContractRevision, base64.b64decode(doc["contracts"][0]))
        swapped = dataclasses.replace(revision, contract=revision.contract + b"\n# relaxed\n")
        doc["contracts"][0] = base64.b64encode(r.encode_body(swapped)).decode()
    else:
        del doc["tasks"]["TASK-1"]
    with pytest.raises(CannotVerify, match="re-prove"):
        _resume_with(s, doc)


def test_a_state_whose_checkpoint_has_no_retention_line_cannot_vouch_for_the_newest_one(tmp_path: Path) -> None:
    # Below the state's size the resumed walk cannot see which retention policy is newest;
    # its checkpoint, signed before the line existed, does not say: fail closed, say how.
    s = build_sample(tmp_path)
    _checkpoint_at(s.root, 1, line=False)
    first = _audit(s.root)
    assert first.ok and first.state is not None
    _checkpoint(s.root)
    resumed = _audit(s.root, first.state)
    assert [d.code for d in resumed.defects] == ["checkpoint-retention"]
    assert "audit once without it" in resumed.defects[0].message
    assert _audit(s.root).ok
