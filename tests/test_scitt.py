"""SCITT statements and RFC 9942 receipts checked against vectors nobody here wrote (issue
28): the six of `action-state-group/scitt-cose` (Apache-2.0, placed in
../shared/vectors/scitt/ with their licence and read from there): the RFC 9162 ones give
their expected verdict and failure, the CCF one is refused as an unsupported structure."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import (
    ADMIN_ID,
    SIGNERS,
    Sample,
    build_sample,
    free_port,
    read_rows,
    run_cli,
    sealed_repo,
    seeded_signer,
    shared_vectors,
    write_private_key,
)
from verify import LedgerSource, verify_registered

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
    pem = SEAL_PEM
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


# -- registering statements in our log, and our RFC 9942 receipts (§15a) ---------------


def _pem(blob: bytes) -> bytes:
    """An OpenSSH Ed25519 key blob as the PEM public key scitt-cose takes."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = r.parse_public_key_blob(blob)
    return Ed25519PublicKey.from_public_bytes(raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


SEAL_PEM = _pem(SIGNERS["sealer"].public_key_blob)  # the seal key: issuer of ours, and the log


def _theirs(statement: bytes, receipt: bytes, log_key_pem: bytes) -> bool:
    from scitt_cose import verify_receipt

    result = verify_receipt(
        receipt, leaf_entry_hex=hashlib.sha256(statement).hexdigest(), log_public_key_pem=log_key_pem
    )
    return bool(result.ok)


def _es256_statement(subject: str, issuer: str = "ci.example.org") -> tuple[bytes, bytes]:
    """A statement by an issuer from elsewhere (ES256, P-256), made by `scitt-cose`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from scitt_cose import build_signed_statement

    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    statement = build_signed_statement(
        subject.encode(),
        alg="ES256",
        private_key_pem=private,
        issuer=issuer,
        subject=subject,
        content_type="text/plain",
    )
    return statement, public


def _sealed_statement(tmp_path: Path) -> tuple[Sample, Path, dict[str, str]]:
    s = build_sample(tmp_path)
    write_private_key(tmp_path / "keys" / "sealer", "sealer")
    env = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    out = tmp_path / "statement.cose"
    args = ("--dir", str(s.root), "export", s.receipt, "--format", "scitt", "--key", "sealer", "-o", str(out))
    done = run_cli(*args, "--trust", ADMIN_ID, env=env)
    assert done.returncode == 0, done.stderr
    return s, out, env


def _register(
    root: Path, statement: Path, out: Path, env: dict[str, str], *more: str, verb: str = "register"
) -> dict[str, Any]:
    done = run_cli(
        "--dir", str(root), "scitt", verb, str(statement), "--key", "sealer", "-o", str(out), "--json", *more, env=env
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_registered_statement_gets_a_receipt_that_scitt_cose_and_we_verify(tmp_path: Path) -> None:
    s, statement_file, env = _sealed_statement(tmp_path)
    receipt_file = tmp_path / "receipt.cose"
    first = _register(s.root, statement_file, receipt_file, env)
    assert (first["index"], first["tree_size"], first["appended"]) == (0, 1, True)
    statement, receipt = statement_file.read_bytes(), receipt_file.read_bytes()
    log_key = SEAL_PEM
    assert _theirs(statement, receipt, log_key)
    assert r.verify_scitt(statement, receipt, log_key, log_key).ok
    # The receipt's claims: the log as iss, the statement's own subject as sub (RFC 9943 §6).
    header = r.decode_sign1(receipt).header
    assert header[395] == 1 and header[15][2] == r.statement_subject(statement)
    with LedgerSource.open(s.root) as source:
        assert header[15][1] == r.decode_as(r.Genesis, source.by_seq(0).body).origin  # type: ignore[union-attr]
    # On the command line, offline and against this ledger's statement log; the keys as .pub files.
    pub = tmp_path / "keys" / "sealer.pub"
    pub.write_text(r.public_key_line(SIGNERS["sealer"].public_key_blob) + "\n")
    files = (str(statement_file), str(receipt_file), str(pub), str(pub))
    done = run_cli("--dir", str(s.root), "verify", "--scitt", *files, "--registered", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["leaf_index"] == 0, done.stdout + done.stderr
    # A retry appends nothing and names the same place.
    again = _register(s.root, statement_file, tmp_path / "again.cose", env)
    assert (again["seq"], again["index"], again["appended"]) == (first["seq"], 0, False)
    assert run_cli("--dir", str(s.root), "verify", "--chain", "--trust", ADMIN_ID).returncode == 0
    # The web view's index names it by its subject, once.
    from ledger.web import ChainIndex

    index = ChainIndex()
    with LedgerSource.open(s.root) as source:
        index.update(source)
    rows = index.of_kind(r.EntryKind.STATEMENT.value)
    assert [row.summary for row in rows] == ["SCITT statement registered: %s" % r.statement_subject(statement)]
    # One flipped byte of the receipt: both refuse.
    for at in (len(receipt) - 1, len(receipt) - 40, 8):
        flipped = bytearray(receipt)
        flipped[at] ^= 0x01
        assert not _theirs(statement, bytes(flipped), log_key), at
        assert not r.verify_scitt(statement, bytes(flipped), log_key, log_key).ok, at


def test_an_earlier_statement_is_proved_in_the_grown_log_and_issuers_from_elsewhere_register(tmp_path: Path) -> None:
    s, ours, env = _sealed_statement(tmp_path)
    _register(s.root, ours, tmp_path / "r0.cose", env)
    for i in range(1, 4):
        statement, public = _es256_statement("urn:example:build:%d" % i)
        (tmp_path / ("s%d.cose" % i)).write_bytes(statement)
        (tmp_path / ("k%d.pem" % i)).write_bytes(public)
        got = _register(
            s.root,
            tmp_path / ("s%d.cose" % i),
            tmp_path / ("r%d.cose" % i),
            env,
            "--issuer-key",
            str(tmp_path / ("k%d.pem" % i)),
            "--issuer",
            "ci.example.org",
        )
        assert (got["index"], got["tree_size"]) == (i, i + 1)
        receipt = (tmp_path / ("r%d.cose" % i)).read_bytes()
        assert _theirs(statement, receipt, SEAL_PEM)
        assert r.verify_scitt(statement, receipt, public, SEAL_PEM).ok
    # A new receipt for the first statement is over the whole log now; an outside issuer's
    # statement gets one without its key (the issuer was checked when it was appended).
    renewed = _register(s.root, ours, tmp_path / "r0-now.cose", env, verb="receipt")
    assert (renewed["index"], renewed["tree_size"], renewed["appended"]) == (0, 4, False)
    again = _register(s.root, tmp_path / "s2.cose", tmp_path / "r2-now.cose", env, verb="receipt")
    assert (again["index"], again["tree_size"]) == (2, 4)
    assert _theirs(
        (tmp_path / "s2.cose").read_bytes(),
        (tmp_path / "r2-now.cose").read_bytes(),
        SEAL_PEM,
    )
    assert _theirs(ours.read_bytes(), (tmp_path / "r0-now.cose").read_bytes(), SEAL_PEM)
    with LedgerSource.open(s.root) as source:
        verdict = verify_registered(
            source,
            ours.read_bytes(),
            (tmp_path / "r0-now.cose").read_bytes(),
            SEAL_PEM,
            SEAL_PEM,
        )
    assert verdict.ok and (verdict.tree_size, verdict.leaf_index) == (4, 0), verdict


def test_a_statement_the_registrar_cannot_check_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    s, ours, env = _sealed_statement(tmp_path)
    count = len(read_rows(s.root))
    data = ours.read_bytes()
    flipped = tmp_path / "flipped.cose"
    flipped.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    statement, _ = _es256_statement("urn:example:build:9")
    stranger = tmp_path / "stranger.cose"
    stranger.write_bytes(statement)
    for bad, why in (
        (flipped, "does not verify"),
        (stranger, "give --issuer-key"),
        (tmp_path / "ledger" / "ledger.db", "refused"),
    ):
        done = run_cli(
            "--dir",
            str(s.root),
            "scitt",
            "register",
            str(bad),
            "--key",
            "sealer",
            "-o",
            str(tmp_path / "r.cose"),
            env=env,
        )
        assert done.returncode == 2 and why in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "r.cose").exists()
    assert len(read_rows(s.root)) == count
    # A receipt for what was never registered is refused too.
    done = run_cli(
        "--dir", str(s.root), "scitt", "receipt", str(ours), "--key", "sealer", "-o", str(tmp_path / "r.cose"), env=env
    )
    assert done.returncode == 2 and "not registered" in done.stderr, done.stderr


def test_a_receipt_over_a_tree_this_ledger_does_not_hold_is_a_split_view(tmp_path: Path) -> None:
    s, ours, env = _sealed_statement(tmp_path)
    fork = tmp_path / "fork"
    shutil.copytree(s.root, fork)
    one, key1 = _es256_statement("urn:example:build:1")
    two, key2 = _es256_statement("urn:example:build:2")
    for root, statement, key, name in ((s.root, one, key1, "a"), (fork, two, key2, "b")):
        (tmp_path / (name + ".cose")).write_bytes(statement)
        (tmp_path / (name + ".pem")).write_bytes(key)
        _register(
            root,
            tmp_path / (name + ".cose"),
            tmp_path / (name + "-receipt.cose"),
            env,
            "--issuer-key",
            str(tmp_path / (name + ".pem")),
            "--issuer",
            "ci.example.org",
        )
    # The fork's receipt verifies offline (the log's key signed it) but not against this ledger.
    pem = tmp_path / "log.pem"
    pem.write_bytes(SEAL_PEM)
    files = [str(tmp_path / f) for f in ("b.cose", "b-receipt.cose", "b.pem")] + [str(pem)]
    assert run_cli("--dir", str(s.root), "verify", "--scitt", *files).returncode == 0
    done = run_cli("--dir", str(s.root), "verify", "--scitt", *files, "--registered", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["failure"] == "SPLIT_VIEW", done.stdout
    # A ledger that holds fewer statements than the receipt's tree cannot say: exit 2, one line.
    (tmp_path / "ours-receipt.cose").write_bytes(b"")
    _register(fork, ours, tmp_path / "ours-receipt.cose", env)
    files = [str(ours), str(tmp_path / "ours-receipt.cose"), str(pem), str(pem)]
    behind = run_cli("--dir", str(s.root), "verify", "--scitt", *files, "--registered")
    assert behind.returncode == 2 and "holds 1" in behind.stderr, behind.stdout + behind.stderr


def test_the_known_answer_statement_entry_and_receipt_verify_independently() -> None:
    ka = json.loads((Path(__file__).parent / "vectors" / "known_answers.json").read_text())
    statement = bytes.fromhex(ka["scitt_statement"]["cose_sign1"])
    key = ka["scitt_statement"]["signer_public_key"].encode()
    from scitt_cose import parse_signed_statement

    pem = SEAL_PEM
    assert parse_signed_statement(statement, public_key_pem=pem)["signature_verified"] is True
    preimage = bytes.fromhex(ka["scitt_statement"]["preimage_cbor"])
    assert r.decode_sign1(statement).payload == hashlib.sha256(preimage).digest()
    body = bytes.fromhex(ka["statement_entry"]["body_cbor"])
    decoded = r.decode_body(r.EntryKind.STATEMENT, body)
    assert isinstance(decoded, r.StatementRegistration) and decoded.statement == statement
    assert str(r.body_hash(r.EntryKind.STATEMENT, body)) == ka["statement_entry"]["body_hash"]
    receipt = bytes.fromhex(ka["cose_receipt"]["cose_sign1"])
    assert _theirs(statement, receipt, pem)
    verdict = r.verify_scitt(statement, receipt, key, key)
    assert verdict.ok and verdict.root == bytes.fromhex(ka["cose_receipt"]["root"]) and verdict.leaf_index == 2


def test_two_registrars_at_once_on_the_shared_store_get_two_places_in_one_log(pg_url: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    build_sample(tmp_path, store=pg_url)
    write_private_key(tmp_path / "keys" / "sealer", "sealer")
    env = {**os.environ, "RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    statements = []
    for name in ("a", "b"):
        statement, public = _es256_statement("urn:example:build:%s" % name)
        (tmp_path / (name + ".cose")).write_bytes(statement)
        (tmp_path / (name + ".pem")).write_bytes(public)
        statements.append(statement)
    registrars = [
        subprocess.Popen(
            [sys.executable, "-m", "ledger", "--store", pg_url, "scitt", "register", str(tmp_path / (n + ".cose"))]
            + ["--key", "sealer", "--issuer-key", str(tmp_path / (n + ".pem")), "--issuer", "ci.example.org"]
            + ["-o", str(tmp_path / (n + ".receipt"))]
            + ["--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in ("a", "b")
    ]
    places = []
    for registrar in registrars:
        out, err = registrar.communicate(timeout=120)
        assert registrar.returncode == 0, err
        places.append(json.loads(out)["index"])
    assert sorted(places) == [0, 1]
    log_key = SEAL_PEM
    for name, statement in zip(("a", "b"), statements, strict=True):
        receipt = (tmp_path / (name + ".receipt")).read_bytes()
        assert _theirs(statement, receipt, log_key)
        files = [str(tmp_path / f) for f in (name + ".cose", name + ".receipt", name + ".pem")]
        pem = tmp_path / "log.pem"
        pem.write_bytes(log_key)
        done = run_cli("--store", pg_url, "verify", "--scitt", *files, str(pem), "--registered")
        assert done.returncode == 0, done.stdout + done.stderr
    assert run_cli("--store", pg_url, "verify", "--chain", "--trust", ADMIN_ID).returncode == 0


# -- the registration server (SCRAPI shape) -----------------------------------------------


def _http(
    method: str, url: str, body: bytes | None = None, media_type: str = "application/cose"
) -> tuple[int, dict[str, str], bytes]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url, data=body, method=method, headers={"Content-Type": media_type} if body else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_the_registration_server_answers_as_scrapi_describes(tmp_path: Path) -> None:
    import base64
    import subprocess
    import sys

    import cbor2

    s, ours, env = _sealed_statement(tmp_path)
    outside, outside_key = _es256_statement("urn:example:build:1")
    (tmp_path / "issuer.pem").write_bytes(outside_key)
    # An issuer key that is no key stops the server before it listens, in one line.
    (tmp_path / "garbage.pem").write_text("not a key\n")
    garbage = str(tmp_path / "garbage.pem")
    args = ("--dir", str(s.root), "scitt", "serve", "--key", "sealer", "--issuer", "x", "--issuer-key", garbage)
    refused = run_cli(*args, env=env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "issuer key 1" in refused.stderr, (
        refused.stderr
    )
    cmd = [sys.executable, "-m", "ledger", "--dir", str(s.root), "scitt", "serve", "--key", "sealer"]
    cmd += ["--issuer-key", str(tmp_path / "issuer.pem"), "--issuer", "ci.example.org", "--port", "0"]
    server = subprocess.Popen(cmd, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        said = server.stderr.readline()  # announced only once it listens
        assert "serving http://" in said, said
        url = said.split("serving ")[1].strip().rstrip("/")
        log_key = SEAL_PEM
        # Registration: 201, the receipt, and where a fresh one is; a retry registers nothing new.
        for statement in (ours.read_bytes(), outside, ours.read_bytes()):
            status, headers, receipt = _http("POST", url + "/entries", statement)
            assert status == 201 and headers["Content-Type"] == "application/cose", (status, receipt)
            assert headers["Location"] == "/entries/" + hashlib.sha256(statement).hexdigest()
            assert _theirs(statement, receipt, log_key)
        status, headers, fresh = _http("GET", url + "/entries/" + hashlib.sha256(outside).hexdigest())
        assert status == 200 and _theirs(outside, fresh, log_key)
        assert r.decode_sign1(fresh).unprotected[396][-1][0] == cbor2.dumps(
            [2, 1, [r.statement_leaf(ours.read_bytes())]]
        )
        # The log's key, as a COSE Key Set and by its kid (base64url: ours holds / and +).
        status, _, keys = _http("GET", url + "/.well-known/scitt-keys")
        (key,) = cbor2.loads(keys)
        assert status == 200 and key[-2] == r.parse_public_key_blob(SIGNERS["sealer"].public_key_blob)
        kid = base64.urlsafe_b64encode(key[2]).decode().rstrip("=")
        assert cbor2.loads(_http("GET", url + "/.well-known/scitt-keys/" + kid)[2]) == key
        # Problems are RFC 9290 concise problem details.
        stranger, _ = _es256_statement("urn:example:build:2")
        for method, path, body, status_wanted, title in (
            ("POST", "/entries", b"not cbor", 400, "Malformed request"),
            ("POST", "/entries", stranger, 400, "Rejected"),
            ("GET", "/entries/" + "0" * 64, None, 404, "Not Found"),
            ("GET", "/.well-known/scitt-keys/nope", None, 404, "No such key"),
        ):
            status, headers, problem = _http(method, url + path, body)
            assert status == status_wanted and headers["Content-Type"] == "application/concise-problem-details+cbor"
            assert cbor2.loads(problem)[-1] == title, cbor2.loads(problem)
    finally:
        server.terminate()
        server.wait()
    # What was registered over HTTP is in the chain, which verifies.
    with LedgerSource.open(s.root) as source:
        assert [b.statement for _, b in source.statements()] == [ours.read_bytes(), outside]
    assert run_cli("--dir", str(s.root), "verify", "--chain", "--trust", ADMIN_ID).returncode == 0


def test_slow_clients_do_not_hold_the_registration_server(tmp_path: Path) -> None:
    # Issue 47: one client trickling a header held the single-threaded server (a key
    # request waited 50 s). Now each connection is read on its own thread: while five
    # half-sent requests are still connected, a key request and a registration (the work
    # on the ledger, done on the thread that opened it) are answered; a flood past the cap
    # is turned away at once; and SIGTERM stops the server cleanly.
    import contextlib
    import signal
    import socket
    import subprocess
    import sys

    s, ours, env = _sealed_statement(tmp_path)
    cmd = [sys.executable, "-m", "ledger", "--dir", str(s.root), "scitt", "serve", "--key", "sealer", "--port", "0"]
    # The server never drops an idle connection during the test (a loaded machine could
    # take 10 s between the slow clients' bytes and the check that they are still held):
    # the test ends each one itself.
    cmd += ["--idle-timeout", "300"]
    server = subprocess.Popen(cmd, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)
    held: list[socket.socket] = []
    try:
        assert server.stderr is not None
        url = server.stderr.readline().split("serving ")[1].strip().rstrip("/")
        host, port = url.split("//")[1].split(":")
        for _ in range(5):
            slow = socket.create_connection((host, int(port)))
            slow.sendall(b"GET /.well-known/scitt-keys HTTP/1.1\r\nHost: x\r\n")  # and no end of headers
            held.append(slow)
        assert _http("GET", url + "/.well-known/scitt-keys")[0] == 200
        status, _, receipt = _http("POST", url + "/entries", ours.read_bytes())
        assert status == 201 and _theirs(ours.read_bytes(), receipt, SEAL_PEM)
        for slow in held:  # answered while every slow client still holds its connection
            slow.setblocking(False)
            with pytest.raises(BlockingIOError):
                slow.recv(1)
        for _ in range(40):  # past the cap of 32 connections: 503 at once, not a thread each
            held.append(socket.create_connection((host, int(port))))  # sending nothing: no reset races the 503
        turned_away = []
        for flood in held[-8:]:
            flood.settimeout(60)
            turned_away.append(flood.recv(64))
        assert all(a.startswith(b"HTTP/1.1 503") for a in turned_away), turned_away
        for sock in held:  # each ends its request; the server answers or has refused it, and closes
            sock.setblocking(True)
            sock.settimeout(60)
            with contextlib.suppress(OSError):  # a refused one may already be gone
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(1024):
                    pass
        assert _http("GET", url + "/entries/" + hashlib.sha256(ours.read_bytes()).hexdigest())[0] == 200
    finally:
        for sock in held:
            sock.close()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0, server.stderr.read() if server.stderr else ""


def test_docs_scitt_md_runs_as_written(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    import cbor2
    from docs_as_written import blocks, run_shell

    repo, env, receipt = sealed_repo(tmp_path)
    keys = Path(env["RECEIPT_LEDGER_KEYS"])
    path = "%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", ""))
    shell_env = {**os.environ, **env, "PATH": path, "RECEIPT": receipt, "SEAL_PUB": str(keys / "sealer.pub")}
    (ours,) = blocks("scitt.md", "A statement about a receipt", "sh")
    done = run_shell(ours.text, repo, shell_env)
    assert done.returncode == 0 and "VERIFIED" in done.stdout, done.stdout + done.stderr
    seal_pem = _pem(r.parse_public_key_line((keys / "sealer.pub").read_text())[0])
    statement, cose = (repo / "statement.cose").read_bytes(), (repo / "receipt.cose").read_bytes()
    assert _theirs(statement, cose, seal_pem)
    # The server's blocks: a vendor's statement and key where the docs name them; the one
    # change is the port (8443 in the docs) for a free one.
    serve, client = blocks("scitt.md", "Statements from other issuers", "sh")
    sbom, vendor = _es256_statement("urn:example:sbom:1", issuer="vendor.example")
    (repo / "sbom.cose").write_bytes(sbom)
    (repo / "vendor.pem").write_bytes(vendor)
    port = free_port()
    server = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", serve.text.replace("8443", str(port))],
        cwd=repo,
        env=shell_env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the block's shell and the server it runs: stopped together
    )
    try:
        assert server.stderr is not None
        said = server.stderr.readline()  # once it listens
        assert said == "SCITT registration serving http://127.0.0.1:%d/\n" % port, said
        posted = run_shell(client.text.replace("8443", str(port)), repo, shell_env)
        assert posted.returncode == 0, posted.stdout + posted.stderr
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
    assert posted.stdout.strip().lower() == "location: /entries/%s" % hashlib.sha256(sbom).hexdigest()
    assert _theirs(sbom, (repo / "sbom.receipt.cose").read_bytes(), seal_pem)
    (key,) = cbor2.loads((repo / "log-keys.cbor").read_bytes())
    assert key[-2] == r.parse_public_key_blob(r.parse_public_key_line((keys / "sealer.pub").read_text())[0])


@pytest.mark.parametrize("shared", [False, True], ids=["sqlite", "postgresql"])
def test_a_registrar_that_looked_before_another_appended_does_not_append_again(
    shared: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two registrars of one statement: each looks, finds nothing, and appends. The second
    one's look is asked again under the writers' lock (`append_unless`), and there it
    finds the first one's entry: the statement log holds it once."""
    from ledger import Ledger, register_statement

    store = request.getfixturevalue("pg_url") if shared else None
    s = build_sample(tmp_path, store=store)
    sealer = SIGNERS["sealer"]
    first, second = Ledger.open(s.root, store=store), Ledger.open(s.root, store=store)
    statement = r.receipt_statement(
        b"a receipt",
        first.origin(),
        "urn:example:x",
        "urn:example:y",
        r.fingerprint(sealer.public_key_blob).encode(),
        sealer.sign_raw,
    )
    body = r.StatementRegistration(statement)
    try:
        assert not any(b.leaf == body.leaf for _, b in second.reader.statements())  # the second one's look
        done = register_statement(first, sealer, statement, None)  # meanwhile, the first registers it
        assert done.appended and done.index == 0
        again = second.append_unless(
            body, sealer, lambda: any(b.leaf == body.leaf for _, b in second.reader.statements())
        )
        assert again is None
        assert [b.statement for _, b in second.reader.statements()] == [statement]
        # The question is what stopped it: a writer told nothing stands for it appends.
        assert second.append_unless(body, sealer, lambda: False) is not None
        assert len(second.reader.statements()) == 2
    finally:
        first.close()
        second.close()


def test_a_statement_counts_as_the_keyring_stood_at_its_entry(tmp_path: Path) -> None:
    """The statement log replays the keyring once, past its last entry: a seal key revoked
    after registering keeps its statements, and a key added later never counts for them."""
    from ledger import Issuer, Ledger, add_key, register_statement, revoke_key

    s = build_sample(tmp_path)
    sealer = SIGNERS["sealer"]
    ledger = Ledger.open(s.root)

    def statement(n: int) -> bytes:
        return r.receipt_statement(
            b"%d" % n,
            ledger.origin(),  # a key of this keyring issues as the ledger's origin
            "urn:example:%d" % n,
            "urn:x",
            r.fingerprint(sealer.public_key_blob).encode(),
            sealer.sign_raw,
        )

    try:
        first = register_statement(ledger, sealer, statement(1), None)
        revoke_key(ledger, SIGNERS["admin"], "sealer", "rotated")
        successor = seeded_signer("sealer2")
        add_key(ledger, SIGNERS["admin"], "sealer2", [r.Role.SEAL], successor.public_key_blob)
        # The old key's statement, now registered by its successor (the issuer named).
        register_statement(ledger, successor, statement(2), Issuer(ledger.origin(), _pem(sealer.public_key_blob)))
        with pytest.raises(Exception, match="seal key"):
            register_statement(ledger, sealer, statement(3), None)  # the revoked key registers nothing
        with LedgerSource.open(s.root) as source:
            assert [seq for seq, _ in source.statements()] == [first.seq, first.seq + 3]
    finally:
        ledger.close()


def test_a_statement_signed_by_the_agents_key_is_not_registered(tmp_path: Path) -> None:
    # Issue 47: any active key its kid named could issue a statement into the team's log,
    # the agent's key too (its private half lives where the agent runs). Only seal keys do.
    from ledger import InputError, Ledger, register_statement

    s = build_sample(tmp_path)
    agent = SIGNERS["agent"]
    statement = r.receipt_statement(
        b"1", "logs.example", "urn:example:1", "urn:x", r.fingerprint(agent.public_key_blob).encode(), agent.sign_raw
    )
    ledger = Ledger.open(s.root)
    try:
        with pytest.raises(InputError, match="a key without the seal role"):
            register_statement(ledger, SIGNERS["sealer"], statement, None)
        assert ledger.reader.statements() == []  # nothing written
    finally:
        ledger.close()


def test_a_statement_is_registered_only_under_the_issuer_its_key_was_given_for(tmp_path: Path) -> None:
    # Issue 47: the registrar checked the signature but not the statement's iss, so a key
    # accepted for one issuer could register statements in another's name. Now the iss is
    # the one the key was given for: --issuer with --issuer-key, the origin for a seal key.
    from ledger import InputError, Issuer, Ledger, register_statement

    s, _, env = _sealed_statement(tmp_path)
    outside, outside_key = _es256_statement("urn:example:build:1", issuer="ci.example.org")
    sealer = SIGNERS["sealer"]
    ledger = Ledger.open(s.root)
    try:
        before = ledger.reader.statements()
        with pytest.raises(InputError, match="iss is 'ci.example.org'.*'vendor.example'"):
            register_statement(ledger, sealer, outside, Issuer("vendor.example", outside_key))
        kid = r.fingerprint(sealer.public_key_blob).encode()
        elsewhere = r.receipt_statement(b"1", "logs.example", "urn:example:1", "urn:x", kid, sealer.sign_raw)
        with pytest.raises(InputError, match="iss is 'logs.example'"):
            register_statement(ledger, sealer, elsewhere, None)
        assert ledger.reader.statements() == before  # nothing written
        assert register_statement(ledger, sealer, outside, Issuer("ci.example.org", outside_key)).appended
    finally:
        ledger.close()
    # On the command line, a key without the issuer it speaks for is bad input, in one line.
    (tmp_path / "k.pem").write_bytes(outside_key)
    (tmp_path / "s.cose").write_bytes(outside)
    args = ("--dir", str(s.root), "scitt", "register", str(tmp_path / "s.cose"), "--key", "sealer")
    done = run_cli(*args, "--issuer-key", str(tmp_path / "k.pem"), "-o", str(tmp_path / "r.cose"), env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--issuer ISS" in done.stderr, done.stderr


def test_a_fault_the_log_did_not_foresee_is_a_500_problem_not_a_dropped_connection(tmp_path: Path) -> None:
    # A request whose work on the ledger fails in a way nobody foresaw (here: the ledger's
    # connection closed under it) is answered with an RFC 9290 problem, as every error is.
    import cbor2

    from ledger import Ledger, ScittService

    s, ours, _ = _sealed_statement(tmp_path)
    ledger = Ledger.open(s.root)
    service = ScittService(ledger, SIGNERS["sealer"])
    status, media, _, _ = service.post(
        "/entries", "application/cose", len(ours.read_bytes()), lambda n: ours.read_bytes()
    )
    assert status == 201, media
    ledger.close()
    status, media, body, _ = service.get("/entries/" + hashlib.sha256(ours.read_bytes()).hexdigest())
    assert (status, media) == (500, "application/concise-problem-details+cbor")
    assert cbor2.loads(body)[-1] == "Internal error"


def test_the_log_called_from_another_thread_when_not_serving_answers_at_once(tmp_path: Path) -> None:
    # The ledger's work runs on the thread that opened it. A library caller on another
    # thread, with no server taking that work, used to wait for ever; it is now a 500
    # problem, at once, and the same service still answers on its own thread.
    import threading

    import cbor2

    from ledger import Ledger, ScittService

    s, ours, _ = _sealed_statement(tmp_path)
    ledger = Ledger.open(s.root)
    service = ScittService(ledger, SIGNERS["sealer"])
    answers: list[Any] = []
    caller = threading.Thread(
        target=lambda: answers.append(
            service.post("/entries", "application/cose", len(ours.read_bytes()), lambda n: ours.read_bytes())
        ),
        daemon=True,
    )
    caller.start()
    caller.join(60)  # a bound on the failure only: the answer comes at once
    assert not caller.is_alive(), "the caller waits for a thread that takes no work"
    ((status, media, body, _),) = answers
    assert (status, media) == (500, "application/concise-problem-details+cbor")
    assert cbor2.loads(body)[-1] == "Internal error"
    status, _, _, _ = service.post("/entries", "application/cose", len(ours.read_bytes()), lambda n: ours.read_bytes())
    assert status == 201
    ledger.close()
