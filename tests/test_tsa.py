"""Trusted time: `ledger checkpoint --tsa URL` time-stamps the checkpoint at a
real RFC 3161 authority (OpenSSL's `openssl ts -reply`, behind an HTTP handler on
127.0.0.1, with a test CA made here), and `verify --tsa-cert` checks the token offline
against the pinned certificate and reports the attested time."""

from __future__ import annotations

import datetime
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import receipts as r
from conftest import ADMIN_ID, SIGNERS, Sample, build_sample, run_cli, write_private_key
from ledger import Ledger, timestamp_checkpoint
from verify import LedgerSource, Result, Transparency, TrustRoot, tsa_roots, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _authority(d: Path, cn: str) -> Path:
    """A root CA and a time-stamping certificate it issued (EKU timeStamping, critical),
    with the OpenSSL TSA configuration that signs with it. Returns the root's PEM file."""
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
    ca_key, tsa_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(cn + " root"))
        .issuer_name(_name(cn + " root"))
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    tsa = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn + " root"))
        .public_key(tsa_key.public_key())
        .serial_number(2)
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    d.mkdir(parents=True)
    (d / "root.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (d / "tsa.pem").write_bytes(tsa.public_bytes(serialization.Encoding.PEM))
    (d / "tsa.key").write_bytes(
        tsa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (d / "serial").write_text("01\n")
    (d / "ts.cnf").write_text(
        "[ tsa ]\ndefault_tsa = tsa1\n[ tsa1 ]\n"
        "serial = %(d)s/serial\nsigner_cert = %(d)s/tsa.pem\ncerts = %(d)s/tsa.pem\nsigner_key = %(d)s/tsa.key\n"
        "signer_digest = sha256\ndefault_policy = 1.2.3.4.1\ndigests = sha256, sha384, sha512\n"
        "accuracy = secs:1\nordering = yes\ntsa_name = no\ness_cert_id_chain = no\ness_cert_id_alg = sha256\n"
        % {"d": d}
    )
    return d / "root.pem"


@pytest.fixture
def tsa(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A time-stamping authority at http://127.0.0.1:PORT/ (RFC 3161 over HTTP): each POST
    body goes to `openssl ts -reply` and its response comes back."""
    found = shutil.which("openssl")
    assert found, "the TSA test needs the openssl command"
    openssl: str = found
    root = _authority(tmp_path / "tsa", "test tsa")
    work = tmp_path / "tsa"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            query = self.rfile.read(int(self.headers["Content-Length"]))
            (work / "q.tsq").write_bytes(query)
            subprocess.run(
                [openssl, "ts", "-reply", "-config", str(work / "ts.cnf"), "-queryfile", str(work / "q.tsq")]
                + ["-out", str(work / "r.tsr")],
                check=True,
                capture_output=True,
            )
            reply = (work / "r.tsr").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d/" % server.server_address[1], root
    finally:
        server.shutdown()
        server.server_close()


def _sample(tmp: Path) -> Sample:
    tmp.mkdir()
    return build_sample(tmp)


def _stamped(tmp: Path, url: str) -> Sample:
    s = _sample(tmp)
    ledger = Ledger.open(s.root)
    note = ledger.checkpoint(SIGNERS["sealer"])
    timestamp_checkpoint(ledger, SIGNERS["sealer"], url, note, r.parse_checkpoint(note.text).size)
    ledger.close()
    return s


def _verify(s: Sample, root: Path | None, method: str = "auto") -> Result:
    roots = tsa_roots(root.read_bytes()) if root is not None else ()
    return verify_receipt(LedgerSource.open(s.root), s.receipt, TRUST, Transparency(tsa_roots=roots), method)


def test_a_time_stamped_checkpoint_verifies_offline_against_the_pinned_authority(
    tsa: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = tsa
    s = _stamped(tmp_path / "l", url)
    for method in ("proof", "walk"):
        result = _verify(s, root, method)
        assert result.ok, result.defects
        assert "time-stamped at 20" in (result.checkpoint or "")
    unchecked = _verify(s, None)
    assert unchecked.ok and any("not checked" in w for w in unchecked.warnings)


def test_another_authority_or_an_altered_token_is_a_defect(tsa: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = tsa
    s = _stamped(tmp_path / "l", url)
    stranger = _authority(tmp_path / "other", "other tsa")
    codes = [d.code for d in _verify(s, stranger).defects]
    assert codes == ["timestamp"]
    # The token's bytes changed in the blob store: it no longer hashes to what the chain recorded.
    ledger = Ledger.open(s.root)
    stamps = ledger.reader.timestamps()
    ledger.close()
    from verify.schema import blob_path

    path = blob_path(s.root, stamps[0][1].token)
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    assert [d.code for d in _verify(s, tsa[1]).defects] == ["timestamp"]


def test_without_a_time_stamp_a_pinned_authority_finds_none(tsa: tuple[str, Path], tmp_path: Path) -> None:
    s = _sample(tmp_path / "l")
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    result = _verify(s, tsa[1])
    assert [d.code for d in result.defects] == ["timestamp"]
    assert "no time-stamp was recorded" in result.defects[0].message


def test_the_cli_stamps_and_checks(tsa: tuple[str, Path], tmp_path: Path) -> None:
    url, root = tsa
    s = _sample(tmp_path / "l")
    keys = tmp_path / "keys"
    write_private_key(keys / "sealer", "sealer")
    env = {"RECEIPT_LEDGER_KEYS": str(keys)}
    made = run_cli("--dir", str(s.root), "checkpoint", "--key", "sealer", "--tsa", url, env=env)
    assert made.returncode == 0 and "time-stamp over the checkpoint" in made.stderr, made.stderr
    ok = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--tsa-cert", str(root))
    assert ok.returncode == 0 and "time-stamped at" in ok.stdout, ok.stdout
    down = run_cli("--dir", str(s.root), "checkpoint", "--key", "sealer", "--tsa", "http://127.0.0.1:9/", env=env)
    assert down.returncode == 2 and down.stderr.count("\n") == 1 and "did not answer" in down.stderr
    bad = tmp_path / "not-a-cert.pem"
    bad.write_text("hello")
    res = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--tsa-cert", str(bad))
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_the_time_stamp_travels_in_the_bundle_and_verifies_offline(tsa: tuple[str, Path], tmp_path: Path) -> None:
    import zipfile

    from ledger import export_bundle
    from verify import BundleSource

    url, root = tsa
    s = _stamped(tmp_path / "l", url)
    ledger = Ledger.open(s.root)
    export_bundle(ledger, r.Digest.parse(s.receipt), tmp_path / "b.zip")
    ledger.close()
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        assert "checkpoint.tsr" in zf.namelist()

    def offline(pinned: Path | None) -> Result:
        roots = tsa_roots(pinned.read_bytes()) if pinned is not None else ()
        with BundleSource(tmp_path / "b.zip") as source:
            return verify_receipt(source, s.receipt, TRUST, Transparency(require_checkpoint=True, tsa_roots=roots))

    good = offline(root)
    assert good.ok and "time-stamped at" in (good.checkpoint or "")
    stranger = _authority(tmp_path / "other", "other tsa")
    assert [d.code for d in offline(stranger).defects] == ["timestamp"]
    assert any("not checked" in w for w in offline(None).warnings)


@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1/tsa", "http://", "file:///etc/hostname"])
def test_a_tsa_that_is_no_http_url_is_bad_input_before_anything_is_signed(tmp_path: Path, url: str) -> None:
    # Issue 47: `--tsa 'not a url'` printed "internal error (ValueError)" after writing the checkpoint.
    s = _sample(tmp_path / "l")
    keys = tmp_path / "keys"
    write_private_key(keys / "sealer", "sealer")
    res = run_cli(
        "--dir", str(s.root), "checkpoint", "--key", "sealer", "--tsa", url, env={"RECEIPT_LEDGER_KEYS": str(keys)}
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--tsa is the http(s) URL" in res.stderr, res.stderr
    shown = run_cli("--dir", str(s.root), "checkpoint", "--show")
    assert shown.returncode == 2 and "no checkpoint yet" in shown.stderr  # nothing was written
