"""Transparency: checkpoints, proofs, witnesses, and history rewrites caught."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_flat import _resign_tree_and_checkpoint

import receipts as r
from conftest import (
    ADMIN_ID,
    SIGNERS,
    Row,
    Sample,
    build_sample,
    find_row,
    read_rows,
    run_cli,
    seeded_signer,
    write_private_key,
    write_rows,
)
from ledger import InputError, Ledger, revoke_key
from receipts import is_valid_tlog_proof, parse_tlog_proof, tlog_proof_text
from verify import CannotVerify, LedgerSource, Result, Transparency, TrustRoot, WitnessKey, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
W1 = WitnessKey("witness.example/w1", r.parse_public_key_blob(SIGNERS["bob"].public_key_blob))


def checkpointed(tmp: Path) -> tuple[Sample, r.SignedNote]:
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    note = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    return s, note


def verify(s: Sample, **policy: Any) -> Result:
    return verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, Transparency(**policy))


def test_a_checkpoint_covers_the_receipt_and_verifies(tmp_path: Path) -> None:
    s, note = checkpointed(tmp_path)
    cp = r.parse_checkpoint(note.text)
    assert cp.origin.startswith("receipt-ledger/") and cp.size == len(read_rows(s.root))
    result = verify(s, require_checkpoint=True)
    assert result.ok and "size %d signed by sealer" % cp.size in (result.checkpoint or "")
    assert run_cli("--dir", str(s.root), "checkpoint", "--show").stdout == note.encode()


def test_without_a_checkpoint_transparency_is_not_claimed(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    assert any("no signed checkpoint" in w for w in verify(s).warnings)
    assert [d.code for d in verify(s, require_checkpoint=True).defects] == ["no-checkpoint"]


def test_inclusion_proof_verifies_and_fails_for_the_wrong_index(tmp_path: Path) -> None:
    s, note = checkpointed(tmp_path)
    text = run_cli("--dir", str(s.root), "prove", s.receipt).stdout
    assert text.startswith("c2sp.org/tlog-proof@v1\nindex ")
    proof = parse_tlog_proof(text)
    assert proof.checkpoint_note == note.encode()
    cp = r.parse_checkpoint(r.parse_note(proof.checkpoint_note).text)
    entry = next(row for row in read_rows(s.root) if str(row.entry.body_hash) == s.receipt)
    data = r.encode_entry(entry.entry)
    assert is_valid_tlog_proof(proof, data, cp)
    for wrong in (proof.index - 1, proof.index + 1):
        assert not is_valid_tlog_proof(type(proof)(wrong, proof.proof, proof.checkpoint_note), data, cp)


def test_a_checkpoint_signed_by_an_unknown_key_is_rejected(tmp_path: Path) -> None:
    s, note = checkpointed(tmp_path)
    forged = r.SignedNote(
        note.text, (r.sign_note(note.text, r.parse_checkpoint(note.text).origin, SIGNERS["mallory"]),)
    )
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("UPDATE checkpoints SET note = ?", (forged.encode(),))
    conn.close()
    assert [d.code for d in verify(s).defects] == ["checkpoint-signature"]


def test_a_truncated_ledger_fails_its_checkpoint(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    ledger.append(r.KeyAdd(r.KeySpec("extra", (r.Role.HUMAN,), SIGNERS["mallory"].public_key_blob)), SIGNERS["admin"])
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)")
    conn.close()
    assert [d.code for d in verify(s).defects] == ["checkpoint-root"]


def _rewrite_history(s: Sample) -> None:
    """Re-date the receipt by a second and re-sign it, as a forger with every key would:
    every link and signature holds, but the history differs from what was checkpointed."""
    import dataclasses

    rows = read_rows(s.root)
    ri = max(n for n, row in enumerate(rows) if row.entry.kind is r.EntryKind.RECEIPT)
    receipt = r.decode_receipt(rows[ri].body)
    rows[ri].body = r.encode_body(dataclasses.replace(receipt, created=receipt.created - 1))
    s.receipt = str(r.body_hash(r.EntryKind.RECEIPT, rows[ri].body))
    write_rows(s.root, rows, resign_from=ri)
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM tree")
        conn.execute("DELETE FROM checkpoints")
    conn.close()
    ledger = Ledger.open(s.root)  # rebuilds the tree over the rewritten entries
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()


def test_a_rewritten_history_fails_against_a_kept_checkpoint(tmp_path: Path) -> None:
    s, kept = checkpointed(tmp_path)
    assert verify(s, since=kept.encode()).ok
    _rewrite_history(s)
    rewritten = verify(s)
    assert rewritten.ok  # every hash link and signature was recomputed by the forger ...
    codes = [d.code for d in verify(s, since=kept.encode()).defects]
    assert codes == ["history-rewritten"]  # ... but the auditor's old checkpoint catches it
    kept_file = tmp_path / "kept.checkpoint"
    kept_file.write_text(kept.encode())
    cli = run_cli("--dir", str(s.root), "verify", s.receipt, "--since", str(kept_file), "--json")
    assert cli.returncode == 1 and json.loads(cli.stdout)["defects"][0]["code"] == "history-rewritten"
    # and the consistency proof the rewritten ledger offers does not verify against the kept root
    old = r.parse_checkpoint(kept.text)
    proof_text = run_cli("--dir", str(s.root), "consistency", str(old.size)).stdout.split("\n\n")[0].splitlines()[3:]
    new = r.parse_checkpoint(r.parse_note(run_cli("--dir", str(s.root), "checkpoint", "--show").stdout).text)
    import base64

    assert not r.is_valid_consistency(old.size, new.size, old.root, new.root, [base64.b64decode(x) for x in proof_text])


def _witness(tmp: Path, root: Path) -> Callable[..., tuple[int, str, str]]:
    """Witness bob's `ledger witness cosign` of the ledger at ``root`` against the sealer's
    log key, keeping its state in ``tmp``: call it with a checkpoint's text and any extra
    options; it returns the exit code, stdout and stderr."""
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp / "keys")}
    for name in ("bob", "sealer"):
        write_private_key(tmp / "keys" / name, name)
    log_key = r.public_key_line(SIGNERS["sealer"].public_key_blob)

    def cosign(note: str, *extra: str) -> tuple[int, str, str]:
        path = tmp / "cp"
        path.write_text(note)
        base = ("--dir", str(root), "witness", "cosign", str(path), "--key", "bob", "--name", W1.name)
        res = run_cli(*base, "--log-key", log_key, "--state", str(tmp / "witness-state.json"), *extra, env=keys)
        return res.returncode, res.stdout, res.stderr

    return cosign


def test_witness_cosigns_consistent_checkpoints_and_refuses_a_rewrite(tmp_path: Path) -> None:
    s, first = checkpointed(tmp_path)
    witness = _witness(tmp_path, s.root)

    def cosign(note: r.SignedNote) -> tuple[int, str, str]:
        return witness(note.encode())

    code, out, err = cosign(first)
    assert code == 0, err
    assert r.cosignature_time(r.parse_note(out), W1.name, W1.public_key) is not None
    ledger = Ledger.open(s.root)
    ledger.append(r.KeyAdd(r.KeySpec("extra", (r.Role.HUMAN,), SIGNERS["mallory"].public_key_blob)), SIGNERS["admin"])
    second = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    code, out, err = cosign(second)
    assert code == 0, err
    assert [d.code for d in verify(s, witnesses=(W1,), quorum=1).defects] == ["witness-quorum"]  # not stored yet
    # issue 11, item 8: the cosignature is stored by a command (verified first), not by hand.
    cosigned = tmp_path / "cosigned"
    cosigned.write_text(out)
    w1 = "%s %s" % (W1.name, r.public_key_line(SIGNERS["bob"].public_key_blob))
    wrong = "%s %s" % (W1.name, r.public_key_line(SIGNERS["mallory"].public_key_blob))
    refused = run_cli("--dir", str(s.root), "witness", "add", str(cosigned), "--witness", wrong)
    assert refused.returncode == 2 and "no valid cosignature" in refused.stderr
    foreign = tmp_path / "foreign"
    foreign.write_text(out.replace("\n", "\nextension line\n", 2).split("\n\n")[0] + "\n\n" + out.split("\n\n")[1])
    assert run_cli("--dir", str(s.root), "witness", "add", str(foreign), "--witness", w1).returncode == 2
    added = run_cli("--dir", str(s.root), "witness", "add", str(cosigned), "--witness", w1)
    assert added.returncode == 0 and W1.name in added.stdout, added.stderr
    again = run_cli("--dir", str(s.root), "witness", "add", str(cosigned), "--witness", w1)
    assert again.returncode == 0 and "nothing to add" in again.stdout
    quorum = verify(s, witnesses=(W1,), quorum=1)
    assert quorum.ok and "witness.example/w1" in (quorum.checkpoint or "")
    by_cli = run_cli(
        "--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--witness", w1, "--witness-quorum", "1"
    )
    assert by_cli.returncode == 0, by_cli.stdout
    # A newer, unwitnessed checkpoint: the kept cosigned one still covers the receipt and counts.
    ledger = Ledger.open(s.root)
    ledger.append(
        r.KeyAdd(r.KeySpec("later", (r.Role.HUMAN,), seeded_signer("later").public_key_blob)), SIGNERS["admin"]
    )
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    assert [d.code for d in verify(s, witnesses=(W1,), quorum=1).defects] == ["witness-quorum"]
    assert verify(s, witnesses=(W1,), quorum=1, since=out).ok
    unwitnessed = WitnessKey("witness.example/w2", r.parse_public_key_blob(seeded_signer("w2").public_key_blob))
    assert [d.code for d in verify(s, witnesses=(W1, unwitnessed), quorum=2).defects] == ["witness-quorum"]
    with pytest.raises(CannotVerify, match="one key is given twice"):  # one cosigner never counts twice
        verify(s, witnesses=(W1, WitnessKey("witness.example/w2", W1.public_key)), quorum=2)
    _rewrite_history(s)
    rewritten = Ledger.open(s.root).checkpoints()[-1][1]
    code, _, err = cosign(rewritten)
    assert code == 2 and "not consistent" in err


def test_chain_audit_checks_the_latest_checkpoint(tmp_path: Path) -> None:
    s, _ = checkpointed(tmp_path)
    assert run_cli("--dir", str(s.root), "verify", "--chain").returncode == 0
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)")
    conn.close()
    res = run_cli("--dir", str(s.root), "verify", "--chain", "--json")
    assert res.returncode == 1 and "checkpoint-root" in res.stdout


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "c2sp.org/tlog-proof@v1\n",
        "c2sp.org/tlog-proof@v1\nindex 01\n\n",
        "c2sp.org/tlog-proof@v1\nindex 1\nnot-base64!\n\n",
    ],
)
def test_malformed_proofs_are_format_errors(bad: str) -> None:
    with pytest.raises(r.FormatError):
        parse_tlog_proof(bad)


def test_no_bit_flip_of_a_tlog_proof_parses_to_the_same_proof() -> None:
    """A proof's text has exactly one meaning: the bundle sweep once found a proof hash
    whose base64 pad bit could be set without changing the decoded hash."""
    hashes = [bytes([i]) * 32 for i in range(1, 4)]
    text = tlog_proof_text(5, hashes, "origin\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n\n— origin AAAAAA==\n")
    proof = parse_tlog_proof(text)
    assert proof.index == 5 and proof.proof == tuple(hashes)
    data = text.encode()
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            try:
                other = parse_tlog_proof(flipped.decode())
            except (r.FormatError, UnicodeDecodeError):
                continue
            assert other != proof, "byte %d bit %d changed the text but not the proof" % (i, bit)


def test_a_witness_quorum_is_never_met_without_a_checkpoint(tmp_path: Path) -> None:
    # Asking for witnesses must fail closed when there is nothing they could have cosigned.
    s = build_sample(tmp_path)
    result = verify(s, witnesses=(W1,), quorum=1)
    assert [d.code for d in result.defects] == ["witness-quorum"]


def test_a_malformed_or_foreign_kept_checkpoint_is_bad_input(tmp_path: Path) -> None:
    # issue 11, item 11: not a rejected ledger (exit 1) but a file that cannot be used (exit 2).
    s, kept = checkpointed(tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_text("this is not a checkpoint\n")
    foreign = tmp_path / "foreign"
    foreign.write_text(kept.encode().replace("receipt-ledger/", "other-log/", 1))
    for path, why in ((garbage, "malformed checkpoint"), (foreign, "is for log")):
        res = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--since", str(path))
        assert res.returncode == 2 and why in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_a_ledger_made_before_checkpoints_existed_has_none(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    conn = sqlite3.connect(s.root / "ledger.db")
    conn.execute("DROP TABLE checkpoints")
    conn.commit()
    conn.close()
    with LedgerSource.open(s.root) as source:  # read-only: the table is not added back
        assert source.checkpoints() == []
        res = verify_receipt(source, s.receipt, TrustRoot(frozenset({ADMIN_ID}), "t"))
    assert res.ok and any("no signed checkpoint" in w for w in res.warnings)


def test_an_auditing_witness_cosigns_only_what_a_chain_audit_passes(tmp_path: Path) -> None:
    """Issue 22, audited checkpoints: `witness cosign --audit STATE` audits the chain first
    (resumed from its own state after the first time). A checkpoint that merely extends the
    last one, over an entry signed by a revoked key, is cosigned by a plain witness and
    refused by an auditing one."""
    s, first = checkpointed(tmp_path)
    cosign = _witness(tmp_path, s.root)
    audit = tmp_path / "audit-state.json"

    audited = ("--audit", str(audit), "--trust", ADMIN_ID)
    code, out, err = cosign(first.encode(), *audited)
    assert code == 0 and r.cosignature_time(r.parse_note(out), W1.name, W1.public_key) is not None, err
    assert json.loads(audit.read_text())["size"] == r.parse_checkpoint(first.text).size
    # The ci key is revoked, then signs anyway; the log signs a checkpoint over it.
    ledger = Ledger.open(s.root)
    revoke_key(ledger, SIGNERS["admin"], "ci", "laptop lost")
    ledger.close()
    rows = read_rows(s.root)
    late = rows[find_row(rows, s.records[r.Tier.DETERMINISTIC])]
    rows.append(Row(dataclasses.replace(late.entry), late.body))
    write_rows(s.root, rows, resign_from=len(rows) - 1)
    _resign_tree_and_checkpoint(s.root)
    with LedgerSource.open(s.root) as source:
        newest = source.checkpoints()[-1][1]
    code, _, err = cosign(newest, *audited)
    assert code == 2 and "audit of the ledger failed" in err and "signer-unauthorized" in err, err
    assert json.loads(audit.read_text())["size"] == r.parse_checkpoint(first.text).size  # state kept as it was
    code, _, err = cosign(newest)  # a witness that only checks consistency signs it
    assert code == 0, err
    # An old checkpoint is not what the audit reached: refused too.
    code, _, err = cosign(first.encode(), "--audit", str(tmp_path / "fresh.json"), "--trust", ADMIN_ID)
    assert code == 2 and ("not the ledger's newest" in err or "audit of the ledger failed" in err), err


def test_a_witness_that_saw_the_newer_checkpoint_refuses_the_rollback(tmp_path: Path) -> None:
    """Issue 22, case 10 for witnesses: once a witness has cosigned a checkpoint, the store
    cannot go back behind it. Offering the older checkpoint again is refused, and so is a
    checkpoint of the same size over a different newest entry (the newest entry and its
    checkpoint deleted and replaced), for a plain witness and for an auditing one alike."""
    s, first = checkpointed(tmp_path)
    cosign = _witness(tmp_path, s.root)
    audit = tmp_path / "audit-state.json"
    audited = ("--audit", str(audit), "--trust", ADMIN_ID)
    assert cosign(first.encode(), *audited)[0] == 0
    ledger = Ledger.open(s.root)
    ledger.append(
        r.KeyAdd(r.KeySpec("newer", (r.Role.HUMAN,), seeded_signer("newer").public_key_blob)), SIGNERS["admin"]
    )
    newer = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    code, _, err = cosign(newer.encode(), *audited)
    assert code == 0, err
    code, _, err = cosign(first.encode())
    assert code == 2 and "older than one this witness cosigned" in err, err
    # The rollback: the newest entry and its checkpoint go; another entry takes its place.
    conn = sqlite3.connect(s.root / "ledger.db")
    with conn:
        size = r.parse_checkpoint(newer.text).size
        conn.execute("DELETE FROM entries WHERE seq = ?", (size - 1,))
        conn.execute("DELETE FROM tree")
        conn.execute("DELETE FROM checkpoints WHERE size = ?", (size,))
    conn.close()
    ledger = Ledger.open(s.root)
    ledger.append(
        r.KeyAdd(r.KeySpec("other", (r.Role.HUMAN,), seeded_signer("other").public_key_blob)), SIGNERS["admin"]
    )
    replacing = ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    assert r.parse_checkpoint(replacing.text).size == size
    code, _, err = cosign(replacing.encode())
    assert code == 2 and "not consistent" in err, err
    code, _, err = cosign(replacing.encode(), *audited)
    assert code == 2 and "history-rewritten" in err, err


def test_a_seal_key_signs_the_checkpoint_right_after_it_is_added(tmp_path: Path) -> None:
    # Issue 47: a seal key added by the last entry signed a checkpoint its own ledger then
    # rejected (`checkpoint-signature`): the writer and the verifier read "valid at its size"
    # two ways. Both now read it as the keyring the checkpoint's entries replay to.
    from ledger import add_key
    from verify import verify_chain

    s = build_sample(tmp_path)
    fresh = seeded_signer("fresh-sealer")
    ledger = Ledger.open(s.root)
    added = add_key(ledger, SIGNERS["admin"], "fresh", [r.Role.SEAL], fresh.public_key_blob)
    note = ledger.checkpoint(fresh)
    ledger.close()
    assert r.parse_checkpoint(note.text).size == added.seq + 1  # the key's own entry is the last one
    chain = verify_chain(LedgerSource.open(s.root), TRUST)
    assert chain.ok, chain.defects
    assert verify(s).ok
    # A key revoked by the last entry may not sign that size: the writer refuses, the verifier too.
    ledger = Ledger.open(s.root)
    revoke_key(ledger, SIGNERS["admin"], "fresh", "rotated")
    with pytest.raises(InputError, match="active seal or admin key"):
        ledger.checkpoint(fresh)
    ledger.close()
