"""SSHSIG signatures, and interoperability with stock ssh-keygen where it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import receipts as r
from conftest import ADMIN_ID, LEDGER, SIGNERS, Sample, run_cli

ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")


def test_sign_verify_and_the_ways_it_must_fail() -> None:
    alice, mallory = SIGNERS["alice"], SIGNERS["mallory"]
    sig = r.sshsig_sign(alice, "receipt-ledger/human", b"msg")
    r.sshsig_verify(alice.public_key_blob, "receipt-ledger/human", b"msg", sig)
    with pytest.raises(r.SignatureError):
        r.sshsig_verify(alice.public_key_blob, "receipt-ledger/seal", b"msg", sig)
    with pytest.raises(r.SignatureError):
        r.sshsig_verify(alice.public_key_blob, "receipt-ledger/human", b"msg!", sig)
    with pytest.raises(r.SignatureError):
        r.sshsig_verify(mallory.public_key_blob, "receipt-ledger/human", b"msg", sig)
    forged = bytearray(sig)
    forged[-1] ^= 1
    with pytest.raises(r.SignatureError):
        r.sshsig_verify(alice.public_key_blob, "receipt-ledger/human", b"msg", bytes(forged))
    for broken in (sig[:-1], sig + b"\x00", b"SSHSIX" + sig[6:], b""):
        with pytest.raises(r.FormatError):
            r.sshsig_verify(alice.public_key_blob, "receipt-ledger/human", b"msg", broken)
    assert r.dearmor(r.armor(sig)) == sig


def test_public_key_lines_round_trip_and_reject_other_types() -> None:
    blob = SIGNERS["ci"].public_key_blob
    assert r.parse_public_key_line(r.public_key_line(blob, "ci@host")) == (blob, "ci@host")
    with pytest.raises(r.FormatError):
        r.parse_public_key_line("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ comment")
    with pytest.raises(r.FormatError):
        r.parse_public_key_line("ssh-ed25519 not*base64")


@ssh_keygen
def test_fingerprint_matches_ssh_keygen(tmp_path: Path) -> None:
    pub = tmp_path / "k.pub"
    pub.write_text(r.public_key_line(SIGNERS["ci"].public_key_blob) + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(pub)], capture_output=True, text=True, check=True).stdout
    assert out.split()[1] == r.fingerprint(SIGNERS["ci"].public_key_blob)


@ssh_keygen
def test_record_signature_verifies_with_stock_ssh_keygen(sample: Sample, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed_signers"
    res = run_cli("--dir", str(sample.root), "keys", "export-allowed-signers", "-o", str(allowed))
    assert res.returncode == 0, res.stderr
    record = str(sample.records[r.Tier.DETERMINISTIC])
    message, sig = tmp_path / "entry.bin", tmp_path / "entry.sig"
    signed = subprocess.run(
        [*LEDGER, "--dir", str(sample.root), "show", record, "--signed-bytes"], capture_output=True, check=True
    ).stdout
    message.write_bytes(signed)
    sig.write_text(run_cli("--dir", str(sample.root), "show", record, "--signature").stdout)
    verify = ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "ci", "-s", str(sig)]
    ok = subprocess.run([*verify, "-n", "receipt-ledger/deterministic"], input=signed, capture_output=True)
    assert ok.returncode == 0, ok.stderr
    assert b"Good" in ok.stdout
    # The same signature does not count for another role, nor for other bytes.
    assert subprocess.run([*verify, "-n", "receipt-ledger/seal"], input=signed, capture_output=True).returncode != 0
    assert (
        subprocess.run(
            [*verify, "-n", "receipt-ledger/deterministic"], input=signed + b"x", capture_output=True
        ).returncode
        != 0
    )


@ssh_keygen
def test_ssh_keygen_signature_verifies_with_ours(tmp_path: Path) -> None:
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    msg = tmp_path / "m"
    msg.write_bytes(b"signed by openssh")
    subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", "receipt-ledger/seal", str(msg)],
        check=True,
        capture_output=True,
    )
    blob, _ = r.parse_public_key_line((tmp_path / "id.pub").read_text())
    r.sshsig_verify(blob, "receipt-ledger/seal", msg.read_bytes(), r.dearmor((tmp_path / "m.sig").read_text()))


def test_allowed_signers_trust_file_pins_the_admin(sample: Sample, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed_signers"
    run_cli("--dir", str(sample.root), "keys", "export-allowed-signers", "-o", str(allowed))
    ok = run_cli("--dir", str(sample.root), "verify", sample.receipt, "--trust", str(allowed))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "warning" not in ok.stderr
    # A trust file that pins somebody else's admin key rejects the genesis.
    other = tmp_path / "other"
    other.write_text(
        'boss namespaces="receipt-ledger/admin" %s\n' % r.public_key_line(SIGNERS["mallory"].public_key_blob)
    )
    bad = run_cli("--dir", str(sample.root), "verify", sample.receipt, "--trust", str(other), "--json")
    assert bad.returncode == 1 and '"trust-root"' in bad.stdout
    # Without --trust, the pin `Ledger.create` wrote beside the ledger is used, and named.
    pinned = run_cli("--dir", str(sample.root), "verify", sample.receipt, cwd=tmp_path)
    assert (
        pinned.returncode == 0
        and "pinned (%s (written by ledger init))" % (sample.root / "allowed_signers") in pinned.stdout
    )
    # Without any pin: refused, unless trust on first use is asked for by its unsafe name.
    (sample.root / "allowed_signers").unlink()
    refused = run_cli("--dir", str(sample.root), "verify", sample.receipt, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("ledger: error: no trust root (not a git repository)")
    tofu = run_cli("--dir", str(sample.root), "verify", sample.receipt, "--unsafe-trust-on-first-use", cwd=tmp_path)
    assert tofu.returncode == 0 and "UNSAFE trust on first use" in tofu.stdout and ADMIN_ID in tofu.stdout
    assert tofu.stderr.startswith("warning: UNSAFE")
