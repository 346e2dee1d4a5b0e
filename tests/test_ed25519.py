"""Ed25519 edge cases through our verification path: Wycheproof vectors, and
the policy on non-canonical S and small-order keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import receipts as r

VECTORS = json.loads((Path(__file__).parent / "vectors" / "wycheproof_ed25519.json").read_text())["tests"]
L = 2**252 + 27742317777372353535851937790883648493
# Small-order points (orders 1, 2 and 4); derived here, not vendored.
SMALL_ORDER = ["01" + "00" * 31, "ec" + "ff" * 30 + "7f", "00" * 32, "00" * 31 + "80"]


@pytest.mark.parametrize("case", VECTORS, ids=lambda c: "tc%d" % c["tcId"])
def test_wycheproof(case: dict) -> None:  # type: ignore[type-arg]
    ok = r.is_valid_ed25519(bytes.fromhex(case["pk"]), bytes.fromhex(case["sig"]), bytes.fromhex(case["msg"]))
    assert ok is (case["result"] == "valid")


def test_non_canonical_s_is_rejected() -> None:
    valid = next(c for c in VECTORS if c["result"] == "valid")
    sig = bytes.fromhex(valid["sig"])
    s = int.from_bytes(sig[32:], "little")
    for forged in (sig[:32] + (s + L).to_bytes(32, "little"), sig + b"\x00", sig[:63]):
        assert not r.is_valid_ed25519(bytes.fromhex(valid["pk"]), forged, bytes.fromhex(valid["msg"]))


@pytest.mark.parametrize("pk", SMALL_ORDER)
def test_small_order_keys_are_refused_everywhere(pk: str) -> None:
    raw = bytes.fromhex(pk)
    assert r.is_weak_ed25519_key(raw)
    # R = identity, S = 0: the trivial signature that OpenSSL accepts under the identity key
    assert not r.is_valid_ed25519(raw, bytes.fromhex("01" + "00" * 63), b"any message")
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + raw
    with pytest.raises(r.FormatError, match="large order"):
        r.parse_public_key_blob(blob)
    with pytest.raises(r.FormatError):
        r.KeySpec("weak", (r.Role.ADMIN,), blob)


def test_ordinary_keys_are_not_weak() -> None:
    from conftest import SIGNERS

    for signer in SIGNERS.values():
        assert not r.is_weak_ed25519_key(r.parse_public_key_blob(signer.public_key_blob))
    assert r.is_weak_ed25519_key(b"\xff" * 32)  # not a canonical field element
