"""SCITT statements and RFC 9942 receipts checked against vectors nobody here wrote (issue
28): the six of `action-state-group/scitt-cose` (Apache-2.0, placed in
../shared/vectors/scitt/ with their licence and read from there): the RFC 9162 ones give
their expected verdict and failure, the CCF one is refused as an unsupported structure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import receipts as r
from conftest import shared_vectors

NAMES = (
    "valid-eddsa",
    "valid-es256",
    "fail-bad-statement-sig",
    "fail-tampered-path",
    "fail-unsupported-vds",
    "valid-ccf-vds2",
)


def _verdict(folder: Path) -> r.ScittVerdict:
    return r.verify_scitt(
        (folder / "statement.cose").read_bytes(),
        (folder / "receipt.cose").read_bytes(),
        (folder / "issuer-key.pub").read_bytes(),
        (folder / "log-key.pub").read_bytes(),
    )


@pytest.mark.parametrize("name", NAMES)
def test_each_vector_gives_its_expected_verdict(name: str) -> None:
    folder = shared_vectors("scitt") / name
    expected = json.loads((folder / "expected.json").read_text())
    verdict = _verdict(folder)
    if name == "valid-ccf-vds2":
        # A CCF receipt (vds 2): valid upstream, but a structure this verifier does not read.
        assert verdict.failure == "UNSUPPORTED_VDS" and "only 1, RFC 9162" in verdict.detail
        return
    assert verdict.ok == (expected["result"] == "VALID"), verdict
    assert verdict.failure == expected.get("failure_code"), verdict
    if verdict.ok:
        assert (verdict.tree_size, verdict.leaf_index) == (expected["tree_size"], expected["leaf_index"])


def test_one_flipped_byte_anywhere_in_a_valid_pair_is_refused() -> None:
    folder = shared_vectors("scitt") / "valid-eddsa"
    statement, receipt = (folder / "statement.cose").read_bytes(), (folder / "receipt.cose").read_bytes()
    keys = (folder / "issuer-key.pub").read_bytes(), (folder / "log-key.pub").read_bytes()
    assert r.verify_scitt(statement, receipt, *keys).ok
    for which in ("statement", "receipt"):
        data = statement if which == "statement" else receipt
        for at in range(0, len(data), 7):
            flipped = bytearray(data)
            flipped[at] ^= 0x01
            pair = (bytes(flipped), receipt) if which == "statement" else (statement, bytes(flipped))
            assert not r.verify_scitt(*pair, *keys).ok, (which, at)
