"""RFC 6962 Merkle trees: the published 8-leaf test tree, and proofs that must fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import receipts as r

V = json.loads((Path(__file__).parent / "vectors" / "rfc6962.json").read_text())
LEAVES = [r.leaf_hash(bytes.fromhex(x)) for x in V["leaves"]]
ROOTS = [bytes.fromhex(x) for x in V["roots"]]


def tree(size: int) -> r.MemoryTree:
    return r.MemoryTree(LEAVES[:size])


def test_roots_of_the_rfc6962_test_tree() -> None:
    assert r.tree_root(tree(0), 0) == r.EMPTY_ROOT
    for size in range(1, 9):
        assert r.tree_root(tree(size), size) == ROOTS[size - 1], size


@pytest.mark.parametrize("case", V["inclusion"], ids=lambda c: "%d-of-%d" % (c["leaf_index"], c["size"]))
def test_inclusion_proofs_match_and_verify(case: dict) -> None:  # type: ignore[type-arg]
    i, n = case["leaf_index"], case["size"]
    proof = [bytes.fromhex(p) for p in case["proof"]]
    assert r.inclusion_proof(tree(n), i, n) == proof
    assert r.is_valid_inclusion(LEAVES[i], i, n, proof, ROOTS[n - 1])
    # The same proof for the wrong index, size, leaf or root, or altered, must fail.
    assert not r.is_valid_inclusion(LEAVES[i], i + 1, n, proof, ROOTS[n - 1])
    if i > 0:
        assert not r.is_valid_inclusion(LEAVES[i], i - 1, n, proof, ROOTS[n - 1])
    assert not r.is_valid_inclusion(LEAVES[i], i, n * 2, proof, ROOTS[n - 1])
    assert not r.is_valid_inclusion(r.leaf_hash(b"wrong"), i, n, proof, ROOTS[n - 1])
    assert not r.is_valid_inclusion(LEAVES[i], i, n, proof, r.EMPTY_ROOT)
    assert not r.is_valid_inclusion(LEAVES[i], i, n, proof + [ROOTS[n - 1]], ROOTS[n - 1])
    for k in range(len(proof)):
        bad = list(proof)
        bad[k] = bytes([bad[k][0] ^ 8]) + bad[k][1:]
        assert not r.is_valid_inclusion(LEAVES[i], i, n, bad, ROOTS[n - 1])
    if proof:
        assert not r.is_valid_inclusion(LEAVES[i], i, n, proof[:-1], ROOTS[n - 1])


@pytest.mark.parametrize("case", V["consistency"], ids=lambda c: "%d-to-%d" % (c["size1"], c["size2"]))
def test_consistency_proofs_match_and_verify(case: dict) -> None:  # type: ignore[type-arg]
    m, n = case["size1"], case["size2"]
    proof = [bytes.fromhex(p) for p in case["proof"]]
    assert r.consistency_proof(tree(n), m, n) == proof
    assert r.is_valid_consistency(m, n, ROOTS[m - 1], ROOTS[n - 1], proof)
    if m < n:
        assert not r.is_valid_consistency(m, n, ROOTS[m - 1], r.leaf_hash(b"rewritten"), proof)
        assert not r.is_valid_consistency(m, n, r.leaf_hash(b"rewritten"), ROOTS[n - 1], proof)
        # (sizes whose proof paths share a shape are told apart by the signed checkpoint, not the proof)
        assert not r.is_valid_consistency(m, n * 2, ROOTS[m - 1], ROOTS[n - 1], proof)
        for k in range(len(proof)):
            bad = list(proof)
            bad[k] = bytes([bad[k][0] ^ 8]) + bad[k][1:]
            assert not r.is_valid_consistency(m, n, ROOTS[m - 1], ROOTS[n - 1], bad)


@given(st.integers(1, 70), st.data())
def test_every_proof_of_every_tree_verifies(size: int, data: st.DataObject) -> None:
    leaves = [r.leaf_hash(i.to_bytes(4, "big")) for i in range(size)]
    t = r.MemoryTree(leaves)
    root = r.tree_root(t, size)
    i = data.draw(st.integers(0, size - 1))
    assert r.is_valid_inclusion(leaves[i], i, size, r.inclusion_proof(t, i, size), root)
    m = data.draw(st.integers(1, size))
    old_root = r.tree_root(r.MemoryTree(leaves[:m]), m)
    assert r.is_valid_consistency(m, size, old_root, root, r.consistency_proof(t, m, size))


def test_signed_note_checkpoint_and_cosignature_round_trip() -> None:
    from conftest import SIGNERS

    cp = r.Checkpoint("receipt-ledger/0123abcd", 8, ROOTS[7])
    text = r.checkpoint_text(cp)
    assert text == "receipt-ledger/0123abcd\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n"
    note = r.SignedNote(text, (r.sign_note(text, cp.origin, SIGNERS["sealer"]),))
    parsed = r.parse_note(note.encode())
    assert parsed == note and r.parse_checkpoint(parsed.text) == cp
    log_key = r.parse_public_key_blob(SIGNERS["sealer"].public_key_blob)
    assert r.is_valid_note_signature(parsed, cp.origin, log_key)
    assert not r.is_valid_note_signature(parsed, cp.origin, r.parse_public_key_blob(SIGNERS["mallory"].public_key_blob))
    cosigned = parsed.with_signature(r.cosign_note(text, "witness.example/w1", SIGNERS["bob"], 1700000000))
    again = r.parse_note(cosigned.encode())
    assert (
        r.cosignature_time(again, "witness.example/w1", r.parse_public_key_blob(SIGNERS["bob"].public_key_blob))
        == 1700000000
    )
    assert (
        r.cosignature_time(again, "witness.example/w2", r.parse_public_key_blob(SIGNERS["bob"].public_key_blob)) is None
    )
    # the key id follows signed-note: SHA-256(name || 0x0A || 0x01 || key)[:4]
    import hashlib

    assert parsed.signatures[0].key_id == hashlib.sha256(cp.origin.encode() + b"\n\x01" + log_key).digest()[:4]


@pytest.mark.parametrize(
    "bad",
    [
        "origin\n8\nroot\n\n— origin AAAA\n",
        "origin\n08\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n",
        "origin\n8\n\n",
        "origin\n8\nXcnaeacGWamtVZy3Ad7Zoqudgjqtm0lgz+Nw7/RgQ==\n",
        # the root of the test above with a pad bit set: the same 32 bytes, but not their encoding
        "origin\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyh=\n",
    ],
)
def test_malformed_checkpoints_and_notes_are_format_errors(bad: str) -> None:
    with pytest.raises(r.FormatError):
        r.parse_checkpoint(bad)
    with pytest.raises(r.FormatError):
        r.parse_note(bad + "tail-without-signature")


def _bit_flips(text: str) -> list[str]:
    data = text.encode()
    out = []
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            try:
                out.append(flipped.decode())
            except UnicodeDecodeError:
                pass
    return out


def test_no_bit_flip_of_a_signed_note_parses_to_the_same_note() -> None:
    """Every accepted text has one meaning and every meaning one text: a changed byte
    either fails to parse or parses to something else (found by the bundle sweep, where
    a set pad bit in base64 once left a proof's text changed but its meaning intact)."""
    from conftest import SIGNERS

    cp = r.Checkpoint("receipt-ledger/0123abcd", 8, ROOTS[7])
    text = r.checkpoint_text(cp)
    encoded = r.SignedNote(text, (r.sign_note(text, cp.origin, SIGNERS["sealer"]),)).encode()
    note = r.parse_note(encoded)
    same = []
    for flipped in _bit_flips(encoded):
        try:
            other = r.parse_note(flipped)
            if other == note:
                same.append(flipped)
        except r.FormatError:
            pass
    assert not same
    for flipped in _bit_flips(text):
        try:
            assert r.parse_checkpoint(flipped) != cp
        except r.FormatError:
            pass


@given(st.binary(max_size=80))
def test_canonical_base64_round_trips_and_refuses_set_pad_bits(raw: bytes) -> None:
    import base64

    text = base64.b64encode(raw).decode()
    assert r.b64decode_canonical(text, "x") == raw
    pad = text.count("=")
    if pad:
        # the last data character carries 2 (one '=') or 4 (two '=') bits that must be zero
        i = len(text) - pad - 1
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        for low in range(1, 1 << (2 * pad)):
            bad = text[:i] + alphabet[alphabet.index(text[i]) | low] + text[i + 1 :]
            with pytest.raises(r.FormatError):
                r.b64decode_canonical(bad, "x")
    for bad in (text.rstrip("="), " " + text, text + "\n"):
        if bad != text:
            with pytest.raises(r.FormatError):
                r.b64decode_canonical(bad, "x")


EDGES = json.loads((Path(__file__).parent / "vectors" / "merkle_edges.json").read_text())


@pytest.mark.parametrize("case", EDGES["consistency"], ids=[c["name"] for c in EDGES["consistency"]])
def test_consistency_edge_vectors(case: dict[str, Any]) -> None:
    proof = [bytes.fromhex(h) for h in case["proof"]]
    old_root, new_root = bytes.fromhex(case["old_root"]), bytes.fromhex(case["new_root"])
    assert r.is_valid_consistency(case["old"], case["new"], old_root, new_root, proof) is case["valid"]


@pytest.mark.parametrize("case", EDGES["inclusion"], ids=[c["name"] for c in EDGES["inclusion"]])
def test_inclusion_edge_vectors(case: dict[str, Any]) -> None:
    leaf = r.leaf_hash(bytes.fromhex(case["leaf_data"]))
    proof = [bytes.fromhex(h) for h in case["proof"]]
    assert r.is_valid_inclusion(leaf, case["index"], case["size"], proof, bytes.fromhex(case["root"])) is case["valid"]


def test_a_compact_range_has_the_trees_root_at_every_size() -> None:
    leaves = [r.leaf_hash(b"leaf %d" % i) for i in range(70)]
    tree = r.MemoryTree(leaves)
    folded = r.CompactRange()
    assert folded.root() == r.EMPTY_ROOT
    for i, leaf in enumerate(leaves):
        folded.append(leaf)
        assert folded.root() == r.tree_root(tree, i + 1), i + 1
        assert len(folded.hashes) == bin(i + 1).count("1")
        # A range rebuilt from its hashes goes on exactly as the original would.
        again = r.CompactRange(folded.size, tuple(folded.hashes))
        assert again.root() == folded.root()


@pytest.mark.parametrize("size, hashes", [(3, 1), (4, 2), (-1, 0), (0, 1)])
def test_a_compact_range_needs_one_hash_per_set_bit(size: int, hashes: int) -> None:
    with pytest.raises(r.FormatError):
        r.CompactRange(size, (bytes(32),) * hashes)


def test_cached_nodes_answer_as_their_source_and_ask_it_once() -> None:
    tree = r.MemoryTree([r.leaf_hash(b"%d" % i) for i in range(1000)])
    asked: list[tuple[int, int]] = []

    class Counting:
        def node(self, level: int, index: int) -> bytes:
            asked.append((level, index))
            return tree.node(level, index)

    cached = r.CachedNodes(Counting())
    for i in (0, 499, 998, 999):
        assert r.inclusion_proof(cached, i, 1000) == r.inclusion_proof(tree, i, 1000)
    assert r.consistency_proof(cached, 7, 1000) == r.consistency_proof(tree, 7, 1000)
    assert len(asked) == len(set(asked))
