"""Every text format lives beside its parser (receipts/_formats.py, _allowed_signers.py):
each writer's output parses back to what was written, and the parsers accept only the one
canonical form."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import receipts as r
from conftest import ADMIN_ID, ROLES, SIGNERS, build_sample, run_cli
from ledger import Ledger, add_key

HASHES = st.lists(st.binary(min_size=32, max_size=32), max_size=12)
ORIGINS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789./-", min_size=1, max_size=40)
NOTE = "origin.example/log\n7\n" + "A" * 43 + "=\n"


@settings(max_examples=60, deadline=None)
@given(origin=ORIGINS, size=st.integers(0, (1 << 63) - 1), root=st.binary(min_size=32, max_size=32))
def test_a_checkpoint_round_trips(origin: str, size: int, root: bytes) -> None:
    cp = r.Checkpoint(origin, size, root)
    assert r.parse_checkpoint(r.checkpoint_text(cp)) == cp


def test_a_signed_note_round_trips_and_verifies() -> None:
    signer = SIGNERS["sealer"]
    text = r.checkpoint_text(r.Checkpoint("origin.example/log", 3, bytes(32)))
    note = r.SignedNote(text, (r.sign_note(text, "origin.example/log", signer),))
    parsed = r.parse_note(note.encode())
    assert parsed == note
    key = r.parse_public_key_blob(signer.public_key_blob)
    assert r.is_valid_note_signature(parsed, "origin.example/log", key)
    assert not r.is_valid_note_signature(
        r.SignedNote(text.replace("3", "4"), parsed.signatures), "origin.example/log", key
    )


@settings(max_examples=60, deadline=None)
@given(index=st.integers(0, 1 << 40), hashes=HASHES)
def test_a_tlog_proof_round_trips(index: int, hashes: list[bytes]) -> None:
    proof = r.parse_tlog_proof(r.tlog_proof_text(index, hashes, NOTE))
    assert (proof.index, proof.proof, proof.checkpoint_note, proof.extra) == (index, tuple(hashes), NOTE, None)


@settings(max_examples=60, deadline=None)
@given(old=st.integers(0, 1 << 40), extra=st.integers(0, 1 << 20), hashes=HASHES)
def test_a_consistency_proof_round_trips(old: int, extra: int, hashes: list[bytes]) -> None:
    proof = r.parse_consistency_proof(r.consistency_proof_text(old, old + extra, hashes, NOTE))
    assert proof == r.ConsistencyProof(old, old + extra, tuple(hashes), NOTE)


@pytest.mark.parametrize(
    "text",
    [
        "receipt-ledger/consistency-proof@v2\nold 1\nnew 2\n\n" + NOTE,  # another version
        "receipt-ledger/consistency-proof@v1\nold 01\nnew 2\n\n" + NOTE,  # a leading zero
        "receipt-ledger/consistency-proof@v1\nold 3\nnew 2\n\n" + NOTE,  # shrinking
        "receipt-ledger/consistency-proof@v1\nnew 2\nold 1\n\n" + NOTE,  # lines out of order
        "receipt-ledger/consistency-proof@v1\nold 1\nnew 2\n" + "A" * 42 + "==\n\n" + NOTE,  # a 31-byte hash
        "receipt-ledger/consistency-proof@v1\nold 1\nnew 2",  # truncated
        "receipt-ledger/consistency-proof@v1\nold \u0661\nnew 2\n\n" + NOTE,  # a non-ASCII digit
    ],
    ids=["version", "leading-zero", "shrinking", "order", "short-hash", "truncated", "arabic-digit"],
)
def test_a_consistency_proof_has_one_form(text: str) -> None:
    with pytest.raises(r.FormatError):
        r.parse_consistency_proof(text)


def test_allowed_signers_round_trip_with_roles_and_revocation() -> None:
    genesis = r.Genesis("ab" * 16, 1, (r.KeySpec("admin", (r.Role.ADMIN,), SIGNERS["admin"].public_key_blob),))
    ring = r.Keyring.from_genesis(genesis)
    for name, role in ROLES.items():
        ring = ring.with_added(r.KeySpec(name, (role,), SIGNERS[name].public_key_blob), 1)
    ring = ring.with_revoked(r.fingerprint(SIGNERS["bob"].public_key_blob), 5, "left")
    text = r.allowed_signers_text(ring, {5: 1_700_000_000})
    lines = r.parse_allowed_signers(text)
    assert [(s.principals, s.key_id) for s in lines] == [(st.spec.name, st.key_id) for st in ring]
    assert lines[0].namespaces == (r.namespace_for(r.Role.ADMIN),) and lines[0].key_id == ADMIN_ID
    assert 'valid-before="20231114221320Z"' in text.splitlines()[[s.principals for s in lines].index("bob")]


def test_the_consistency_proof_a_ledger_gives_proves_its_two_checkpoints(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    old = r.parse_checkpoint(ledger.checkpoint(SIGNERS["sealer"]).text)
    add_key(ledger, SIGNERS["admin"], "carol", [r.Role.HUMAN], SIGNERS["mallory"].public_key_blob)
    new = r.parse_checkpoint(ledger.checkpoint(SIGNERS["sealer"]).text)
    ledger.close()
    proof = r.parse_consistency_proof(run_cli("--dir", str(s.root), "consistency", str(old.size)).stdout)
    assert (proof.old, proof.new) == (old.size, new.size)
    assert r.parse_checkpoint(r.parse_note(proof.checkpoint_note).text) == new
    assert r.is_valid_consistency(old.size, new.size, old.root, new.root, proof.proof)
    assert not r.is_valid_consistency(old.size, new.size, bytes(32), new.root, proof.proof)
