"""SCITT statements and RFC 9942 receipts checked against vectors nobody here wrote (issue
28): the six of `action-state-group/scitt-cose` (Apache-2.0, placed in
../shared/vectors/scitt/ with their licence and read from there): the RFC 9162 ones give
their expected verdict and failure, the CCF one is refused as an unsupported structure."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, build_sample, run_cli, shared_vectors, write_private_key
from verify import LedgerSource

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


def test_our_statement_about_a_receipt_verifies_with_scitt_cose_and_with_ours(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from scitt_cose import parse_signed_statement

    s = build_sample(tmp_path)
    write_private_key(tmp_path / "keys" / "sealer", "sealer")
    out = tmp_path / "statement.cose"
    done = run_cli(
        "--dir",
        str(s.root),
        "export",
        s.receipt,
        "--format",
        "scitt",
        "--key",
        "sealer",
        "-o",
        str(out),
        "--trust",
        ADMIN_ID,
        env={"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")},
    )
    assert done.returncode == 0, done.stderr
    raw = r.parse_public_key_blob(SIGNERS["sealer"].public_key_blob)
    pem = Ed25519PublicKey.from_public_bytes(raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    data = out.read_bytes()
    theirs = parse_signed_statement(data, public_key_pem=pem)
    assert theirs["signature_verified"] is True, theirs
    with LedgerSource.open(s.root) as source:
        stored = source.by_body_hash(r.Digest.parse(s.receipt))
        genesis = source.by_seq(0)
        assert stored is not None and genesis is not None
        origin = r.decode_as(r.Genesis, genesis.body).origin
    assert theirs["payload"] == hashlib.sha256(stored.body).digest()  # the hash envelope's payload
    assert theirs["issuer"] == origin and theirs["subject"].startswith("urn:receipt-ledger:candidate:")
    ours = r.decode_sign1(data)
    assert r.verify_sign1(ours, pem)
    assert (ours.header[258], ours.header[259]) == (-16, r.RECEIPT_MEDIA_TYPE)  # RFC 9995
    assert ours.header[260] == "urn:receipt-ledger:receipt:" + s.receipt.removeprefix("blake3:")
    # One flipped byte of the signature, the payload or the header: both refuse.
    for at in (len(data) - 1, len(data) - 70, 12):
        flipped = bytearray(data)
        flipped[at] ^= 0x01
        assert parse_signed_statement(bytes(flipped), public_key_pem=pem)["signature_verified"] is False, at
        try:
            assert not r.verify_sign1(r.decode_sign1(bytes(flipped)), pem), at
        except r.FormatError:
            pass  # a flip that breaks the structure is refused as malformed


@pytest.mark.parametrize("name", ["valid-es256", "fail-tampered-path", "valid-ccf-vds2"])
def test_verify_scitt_on_the_command_line(name: str) -> None:
    folder = shared_vectors("scitt") / name
    files = [str(folder / f) for f in ("statement.cose", "receipt.cose", "issuer-key.pub", "log-key.pub")]
    done = run_cli("verify", "--scitt", *files, "--json")
    doc = json.loads(done.stdout)
    expected = {"valid-es256": (0, None), "fail-tampered-path": (1, "TAMPERED_INCLUSION_PATH")}
    assert (done.returncode, doc["failure"]) == expected.get(name, (1, "UNSUPPORTED_VDS")), done.stdout
