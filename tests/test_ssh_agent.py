"""Signing with keys held by ssh-agent: a real OpenSSH agent on a
socket in a temporary folder; a FIDO key is refused; an agent that returns a signature
that does not verify is refused."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import receipts as r
from conftest import ADMIN_ID, ROLES, SIGNERS, contract_bytes, run_cli, write_private_key
from ledger import InputError, Ledger, load_signer, record_tier, register_contract
from verify import LedgerSource, TrustRoot, verify_chain

ALICE = r.fingerprint(SIGNERS["alice"].public_key_blob)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real ssh-agent holding alice's key; SSH_AUTH_SOCK points at it."""
    if shutil.which("ssh-agent") is None and os.environ.get("CI") != "true":
        pytest.skip("ssh-agent is not installed (.ci/run installs it; in CI these tests must run)")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None and "SSH_AUTH_SOCK" in proc.stdout.readline()  # printed once it listens
        key = write_private_key(tmp_path / "alice", "alice")
        env = dict(os.environ, SSH_AUTH_SOCK=str(sock))
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        key.unlink()  # from here on the private key exists only inside the agent
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield sock
    finally:
        proc.terminate()
        proc.wait()


def _record(root: Path, signer: r.Signer) -> None:
    record_tier(
        Ledger.open(root),
        task_id="T-1",
        tier=r.Tier.HUMAN,
        verdict=r.Verdict.FAIL,
        signer=signer,
        config_hash=r.config_hash(b"c"),
        input_hash=r.config_hash(b"i"),
    )


def test_a_key_in_the_agent_signs_entries_that_verify(agent: Path, ledger_dir: Path, tmp_path: Path) -> None:
    pub = tmp_path / "alice.pub"
    pub.write_text(r.public_key_line(SIGNERS["alice"].public_key_blob) + "\n")
    for selector in ("agent:" + ALICE, "agent:", str(pub)):  # by fingerprint, the only key, its .pub file
        signer = load_signer(selector)
        assert signer.public_key_blob == SIGNERS["alice"].public_key_blob
        _record(ledger_dir, signer)
    # The CLI takes the same --key forms; the private key file no longer exists anywhere.
    contract = tmp_path / "c.toml"
    contract.write_bytes(contract_bytes(task="T-2"))
    register_contract(Ledger.open(ledger_dir), "T-2", contract.read_bytes(), SIGNERS["ci"])
    res = run_cli(
        "--dir",
        str(ledger_dir),
        "record",
        "T-2",
        "--tier",
        "human",
        "--verdict",
        "fail",
        "--key",
        "agent:" + ALICE,
        "--contract",
        str(contract),
        "--input",
        "blake3:" + "0" * 64,
        env={"SSH_AUTH_SOCK": str(agent)},
    )
    assert res.returncode == 0, res.stderr
    result = verify_chain(LedgerSource.open(ledger_dir), TrustRoot(frozenset({ADMIN_ID}), "t"), workers=1)
    assert (
        result.ok and result.entries == 1 + len(ROLES) + 3 + 2
    )  # genesis, keys, three records, a contract and a record


def test_an_agent_without_the_key_or_no_agent_is_a_clear_refusal(
    agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InputError, match="holds no ssh-ed25519 key matching"):
        load_signer("agent:" + r.fingerprint(SIGNERS["bob"].public_key_blob))
    bob = tmp_path / "bob.pub"
    bob.write_text(r.public_key_line(SIGNERS["bob"].public_key_blob))
    with pytest.raises(InputError, match="does not hold the key"):
        load_signer(str(bob))
    monkeypatch.delenv("SSH_AUTH_SOCK")
    with pytest.raises(InputError, match="SSH_AUTH_SOCK is not set"):
        load_signer("agent:")


def test_a_fido_key_is_refused_with_the_reason(tmp_path: Path) -> None:
    def string(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    blob = string(b"sk-ssh-ed25519@openssh.com") + string(bytes(32)) + string(b"ssh:")
    pub = tmp_path / "id_ed25519_sk.pub"
    pub.write_text("sk-ssh-ed25519@openssh.com %s me@laptop\n" % base64.b64encode(blob).decode())
    with pytest.raises(InputError, match="FIDO security keys .* not supported.*ADR 0018"):
        load_signer(str(pub))


def test_an_agent_returning_a_bad_signature_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local agent speaking the protocol, answering with a signature of the wrong bytes."""
    sock_path = tmp_path / "liar.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen()
    key = SIGNERS["alice"].public_key_blob

    def string(b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + b

    def serve() -> None:
        for _ in range(2):  # one identities request, one sign request
            conn, _ = server.accept()
            with conn:
                n = struct.unpack(">I", conn.recv(4))[0]
                request = b""
                while len(request) < n:
                    request += conn.recv(n - len(request))
                if request[0] == 11:
                    answer = bytes([12]) + struct.pack(">I", 1) + string(key) + string(b"alice")
                else:
                    answer = bytes([14]) + string(
                        string(b"ssh-ed25519") + string(SIGNERS["alice"].sign_raw(b"other bytes"))
                    )
                conn.sendall(string(answer))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock_path))
    signer = load_signer("agent:")
    with pytest.raises(InputError, match="does not verify"):
        signer.sign_raw(b"what we asked to be signed")
    thread.join()
    server.close()
