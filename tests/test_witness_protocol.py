"""The C2SP witness protocol on both sides and the tlog-policy quorum (issue 27): two
`ledger witness serve` processes on 127.0.0.1, `ledger witness request` from the log,
`verify --policy` and `gate --policy`; a fork gets the spec's 409 and leaves the
witness's state as it was; a restarted witness refuses a smaller size."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from conftest import SIGNERS, free_port, run_cli, sealed_repo
from ledger import Ledger


@dataclass
class Witness:
    name: str
    key: Path
    state: Path
    proc: subprocess.Popen[str] | None = None
    url: str = ""

    def vkey(self) -> str:
        said = run_cli("witness", "vkey", "--name", self.name, "--public-key", str(self.key.with_suffix(".pub")))
        assert said.returncode == 0, said.stderr
        blob = r.parse_public_key_line(self.key.with_suffix(".pub").read_text())[0]
        assert said.stdout.strip() == r.verifier_key(self.name, r.parse_public_key_blob(blob), 0x04)
        return said.stdout.strip()

    def start(self, log_vkey: str) -> Witness:
        cmd = [sys.executable, "-m", "ledger", "witness", "serve", "--key", str(self.key), "--name", self.name]
        cmd += ["--log", log_vkey, "--state", str(self.state), "--port", "0"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        said = self.proc.stderr.readline()  # it announces only once it listens
        assert "serving http://" in said, said
        self.url = said.split("serving ")[1].strip()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
            self.proc = None

    def post(self, body: bytes) -> tuple[int, str, str]:
        request = urllib.request.Request(self.url + "add-checkpoint", data=body, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.headers["Content-Type"], answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], str, list[Witness]]]:
    """A repository through the whole ladder, its receipt sealed, and two witnesses (not started)."""
    repo, env, receipt = sealed_repo(tmp_path)
    witnesses = []
    for n in ("w1", "w2"):
        (tmp_path / n).mkdir()
        key = tmp_path / n / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        witnesses.append(Witness("witness.example/" + n, key, tmp_path / n / "state.json"))
    try:
        yield repo, env, receipt, witnesses
    finally:
        for w in witnesses:
            w.stop()


def _checkpoint(repo: Path, env: dict[str, str]) -> str:
    res = run_cli("checkpoint", "--key", "sealer", cwd=repo, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _policy(repo: Path, log_vkey: str, witnesses: list[Witness]) -> Path:
    lines = ["# both organisations' witnesses must cosign", "log " + log_vkey]
    lines += ["witness W%d %s %s" % (i, w.vkey(), w.url) for i, w in enumerate(witnesses, 1)]
    lines += ["group both all W1 W2", "quorum both", ""]
    path = repo.parent / "policy"
    path.write_text("\n".join(lines))
    return path


def _gate_under_policy(site: tuple[Path, dict[str, str], str, list[Witness]], up: int) -> tuple[str, str, Path]:
    """Start both witnesses, write the policy, leave ``up`` of them running, ask them to
    cosign the checkpoint covering the receipt, attach it and gate it under the policy.
    Returns what `witness request` and the gate printed, and the policy."""
    repo, env, receipt, witnesses = site
    _checkpoint(repo, env)
    sealer = str(Path(env["RECEIPT_LEDGER_KEYS"]) / "sealer.pub")
    log_vkey = run_cli("checkpoint", "vkey", "--log-key", sealer, cwd=repo, env=env)
    assert log_vkey.returncode == 0, log_vkey.stderr
    for w in witnesses:
        w.start(log_vkey.stdout.strip())
    policy = _policy(repo, log_vkey.stdout.strip(), witnesses)
    for w in witnesses[up:]:
        w.stop()
    asked = run_cli("witness", "request", "--policy", str(policy), cwd=repo, env=env)
    assert asked.returncode == (0 if up == len(witnesses) else 1), asked.stderr
    assert run_cli("attach", receipt, cwd=repo, env=env).returncode == 0
    state = repo.parent / "gate-audit.json"
    gate = run_cli("--dir", ".ledger", "gate", "--audit-state", str(state), "--policy", str(policy), cwd=repo, env=env)
    assert gate.returncode == (0 if up == len(witnesses) else 1), gate.stdout
    return asked.stdout, gate.stdout, policy


def test_two_witnesses_and_a_policy_needing_both(site: tuple[Path, dict[str, str], str, list[Witness]]) -> None:
    asked, gate, policy = _gate_under_policy(site, up=2)
    assert asked == "W1: cosigned\nW2: cosigned\n" and "GATE PASS" in gate
    repo, env, receipt, witnesses = site
    assert run_cli("verify", receipt, "--policy", str(policy), cwd=repo, env=env).returncode == 0
    # The shorthand still works beside it: one named witness, quorum 1.
    line = "witness.example/w1 " + witnesses[0].key.with_suffix(".pub").read_text().strip()
    one = run_cli("verify", receipt, "--witness", line, "--witness-quorum", "1", cwd=repo, env=env)
    assert one.returncode == 0, one.stdout
    # A policy naming another log (our origin, another key as the log's) is not met by
    # our checkpoint, however well witnessed.
    kept = policy.read_text()
    ours = next(line for line in kept.splitlines() if line.startswith("log "))
    other = r.verifier_key(ours[4:].split("+")[0], r.parse_public_key_blob(SIGNERS["admin"].public_key_blob))
    policy.write_text(kept.replace(ours, "log " + other))
    foreign = run_cli("verify", receipt, "--policy", str(policy), "--json", cwd=repo, env=env)
    assert foreign.returncode == 1, foreign.stdout + foreign.stderr
    assert [d["code"] for d in json.loads(foreign.stdout)["defects"]] == ["log-not-in-policy"], foreign.stdout
    # Issue 47: whatever its quorum, the policy's log lines bind the checkpoint (`quorum none` too).
    lines = policy.read_text().splitlines()
    policy.write_text("".join(("quorum none" if line.startswith("quorum ") else line) + "\n" for line in lines))
    unwitnessed = run_cli("verify", receipt, "--policy", str(policy), "--json", cwd=repo, env=env)
    assert unwitnessed.returncode == 1, unwitnessed.stdout + unwitnessed.stderr
    assert [d["code"] for d in json.loads(unwitnessed.stdout)["defects"]] == ["log-not-in-policy"]
    # A policy file with a fault is bad input naming its line.
    policy.write_text(kept + "quorum W1\n")
    bad = run_cli("verify", receipt, "--policy", str(policy), cwd=repo, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "a second quorum line" in bad.stderr


def test_with_one_witness_stopped_the_gate_fails_for_the_quorum(
    site: tuple[Path, dict[str, str], str, list[Witness]],
) -> None:
    asked, gate, policy = _gate_under_policy(site, up=1)
    assert "W1: cosigned" in asked and "W2: unreachable" in asked
    assert "GATE FAIL" in gate and "cosignatures (W1) do not meet the policy's quorum both" in gate
    repo, env, receipt, _ = site
    verified = run_cli("verify", receipt, "--policy", str(policy), "--json", cwd=repo, env=env)
    assert verified.returncode == 1
    assert [d["code"] for d in json.loads(verified.stdout)["defects"]] == ["witness-quorum"]


def test_a_fork_is_refused_and_a_restarted_witness_refuses_a_smaller_size(
    site: tuple[Path, dict[str, str], str, list[Witness]], tmp_path: Path
) -> None:
    repo, env, _, witnesses = site
    sealer = Path(env["RECEIPT_LEDGER_KEYS"]) / "sealer.pub"
    log_vkey = run_cli("checkpoint", "vkey", "--log-key", str(sealer), cwd=repo, env=env).stdout.strip()
    # A fork: a copy of the ledger grows another way to the same size, validly signed.
    earlier = _checkpoint(repo, env)
    fork = tmp_path / "fork"
    shutil.copytree(repo, fork)
    assert run_cli("keys", "generate", "carol", "--role", "human", cwd=repo, env=env).returncode == 0
    first = _checkpoint(repo, env)
    w = witnesses[0].start(log_vkey)
    status, _, said = w.post(r.add_checkpoint_body(0, [], first))
    assert status == 200 and said.startswith("\u2014 witness.example/w1 ")
    kept = w.state.read_bytes()
    size = r.parse_checkpoint(r.parse_note(first).text).size
    assert json.loads(kept)[r.parse_checkpoint(r.parse_note(first).text).origin]["size"] == size
    assert run_cli("keys", "generate", "dave", "--role", "human", cwd=fork, env=env).returncode == 0
    forked = _checkpoint(fork, env)
    assert r.parse_checkpoint(r.parse_note(forked).text).size == size  # the same size, another root
    assert r.parse_checkpoint(r.parse_note(forked).text).root != r.parse_checkpoint(r.parse_note(first).text).root
    status, media, said = w.post(r.add_checkpoint_body(size, [], forked))
    assert (status, media, said) == (409, "text/x.tlog.size", "%d\n" % size)
    assert w.state.read_bytes() == kept
    # An old size the witness does not hold: 409 naming the one it does.
    status, media, said = w.post(r.add_checkpoint_body(0, [], first))
    assert (status, said) == (409, "%d\n" % size)
    # Restarted from its state, it refuses a checkpoint smaller than the one it cosigned:
    # the log's own earlier checkpoint, sent as if the witness held nothing larger.
    w.stop()
    w.start(log_vkey)
    older_size = r.parse_checkpoint(r.parse_note(earlier).text).size
    assert older_size < size
    status, media, said = w.post(r.add_checkpoint_body(older_size, [], earlier))
    assert (status, media, said) == (409, "text/x.tlog.size", "%d\n" % size)
    status, _, said = w.post(r.add_checkpoint_body(size, [], earlier))
    assert status == 400 and "above the checkpoint's" in said
    # Another log's checkpoint: 404. This log's checkpoint signed by another key: 403.
    stranger = r.Ed25519Signer(Ed25519PrivateKey.generate())
    text = r.parse_note(first).text
    origin = r.parse_checkpoint(text).origin
    for changed, code in ((text.replace(origin, origin + "x", 1), 404), (text, 403)):
        name = r.parse_checkpoint(changed).origin
        forged = r.SignedNote(changed, (r.sign_note(changed, name, stranger),)).encode()
        assert w.post(r.add_checkpoint_body(0, [], forged))[0] == code
    assert w.state.read_bytes() == kept
    # A signed note that is not a checkpoint: 400, and the witness goes on serving.
    junk = r.SignedNote("not a checkpoint\n", (r.sign_note("not a checkpoint\n", origin, stranger),)).encode()
    status, _, said = w.post(r.add_checkpoint_body(0, [], junk))
    assert status == 400 and "checkpoint" in said
    assert w.state.read_bytes() == kept
    # The log grows: a wrong consistency proof is 422 and changes nothing; the right one,
    # from the size the witness holds, is cosigned and kept.
    assert run_cli("keys", "generate", "erin", "--role", "human", cwd=repo, env=env).returncode == 0
    third = _checkpoint(repo, env)
    new_size = r.parse_checkpoint(r.parse_note(third).text).size
    ledger = Ledger.open(repo / ".ledger", read_only=True)
    proof = r.consistency_proof(ledger, size, new_size)
    ledger.close()
    assert w.post(r.add_checkpoint_body(size, [bytes(32)] * len(proof), third))[0] == 422
    assert w.state.read_bytes() == kept
    assert w.post(r.add_checkpoint_body(size, proof, third))[0] == 200
    assert json.loads(w.state.read_text())[origin]["size"] == new_size


def test_policy_files_are_checked_line_by_line() -> None:
    log = r.verifier_key("example.com/log", b"\x02" * 32)
    w1 = r.verifier_key("w.example/1", b"\x03" * 32, 0x04)
    w2 = r.verifier_key("w.example/2", b"\x04" * 32, 0x04)
    good = "log %s\nwitness A %s http://a/\n\twitness B %s\ngroup G 1 A B\nquorum G\n" % (log, w1, w2)
    policy = r.parse_tlog_policy(good)
    assert policy.quorum == "G" and policy.groups["G"] == (1, ("A", "B")) and policy.witness_urls == {"A": "http://a/"}
    for bad, why in (
        (good + "quorum A\n", "line 6: a second quorum line"),
        ("quorum X\n", "line 1: quorum X is not defined"),
        ("witness A %s\nwitness B %s\nquorum A\n" % (w1, w1), "line 2: a duplicate key"),
        ("witness A %s\ngroup G 2 A\nquorum G\n" % w1, "threshold"),
        ("witness A %s\ngroup G any A A\nquorum G\n" % w1, "member twice"),
        ("log %s\nquorum none\n" % w1, "a log key has signature type 0x01"),
        ("witness none %s\nquorum none\n" % w1, "reserved"),
        ("witness A %s\r\nquorum A\n" % w1, "control character"),
        ("logs %s\nquorum none\n" % log, "not a log, witness, group or quorum line"),
        ("witness A %s\n" % w1, "exactly one quorum line"),
    ):
        with pytest.raises(r.FormatError, match=why):
            r.parse_tlog_policy(bad)


def test_docs_witnesses_md_runs_as_written(site: tuple[Path, dict[str, str], str, list[Witness]]) -> None:
    import os
    import signal

    from docs_as_written import blocks, run_shell

    repo, env, receipt, witnesses = site
    _checkpoint(repo, env)
    path = "%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", ""))
    keys = Path(env["RECEIPT_LEDGER_KEYS"])
    shell_env = {**os.environ, **env, "PATH": path, "LEDGER_LOG_KEY": str(keys / "sealer.pub")}
    (publish,) = blocks("witnesses.md", "Publish the log as tiles", "sh")
    done = run_shell(publish.text, repo, shell_env)
    assert done.returncode == 0, done.stderr
    assert (repo / "public" / "log" / "checkpoint").is_file() and (
        repo / "public" / "log" / "tile" / "entries"
    ).is_dir()
    vkey = (repo / "public" / "log" / "vkey").read_text().strip()
    # The witness's block, in its own folder holding the log's vkey; the one change is the
    # port (8080 in the docs) for a free one.
    (run,) = blocks("witnesses.md", "Run a witness", "sh")
    home = witnesses[0].key.parent
    (home / "vkey").write_text(vkey + "\n")
    port = free_port()
    w1 = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", run.text.replace("8080", str(port))],
        cwd=home,
        env={**shell_env, "WITNESS_KEY": str(witnesses[0].key)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the block's shell and the witness it runs: stopped together
    )
    try:
        assert w1.stdout is not None and w1.stderr is not None
        assert w1.stdout.readline().strip() == witnesses[0].vkey()
        said = w1.stderr.readline()  # once it listens
        assert said == "witness witness.example/w1 serving http://127.0.0.1:%d/\n" % port, said
        witnesses[0].url = "http://127.0.0.1:%d/" % port
        witnesses[1].start(vkey)
        policy = _policy(repo, vkey, witnesses)
        policy.replace(repo / ".ledger" / "witness-policy")
        (hold,) = blocks("witnesses.md", "Hold the log to a quorum", "sh")
        done = run_shell(hold.text, repo, {**shell_env, "RECEIPT": receipt})
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "W1: cosigned\nW2: cosigned\n" in done.stdout and "VERIFIED" in done.stdout
    finally:
        os.killpg(w1.pid, signal.SIGTERM)
        w1.wait()


def test_a_witness_whose_state_is_unreadable_refuses_to_start(tmp_path: Path) -> None:
    key = tmp_path / "w" / "key"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    state = tmp_path / "w" / "state.json"
    state.write_text("[1, 2]\n")
    vkey = r.verifier_key("example.com/log", bytes(range(32)))
    cmd = ("witness", "serve", "--key", str(key), "--name", "w.example/1", "--log", vkey, "--state", str(state))
    refused = run_cli(*cmd, "--port", "0")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "witness state %s is unreadable" % state in refused.stderr


def test_half_sent_requests_do_not_each_hold_a_thread_of_the_witness(
    site: tuple[Path, dict[str, str], str, list[Witness]],
) -> None:
    # Issue 47: 200 half-sent bodies kept 201 threads alive. Connections beyond the cap are
    # answered 503 at once, each half-sent one is dropped when it stops sending, and a
    # well-behaved request is answered after.
    import socket

    repo, env, _, witnesses = site
    sealer = str(Path(env["RECEIPT_LEDGER_KEYS"]) / "sealer.pub")
    log_vkey = run_cli("checkpoint", "vkey", "--log-key", sealer, cwd=repo, env=env).stdout.strip()
    w = witnesses[0].start(log_vkey)
    host, port = w.url.split("//")[1].rstrip("/").split(":")
    held: list[socket.socket] = []
    try:
        for _ in range(40):
            s = socket.create_connection((host, int(port)))
            s.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nold ")  # then nothing
            held.append(s)
        answers = []
        for s in held:  # every connection ends: 503 at once past the cap, else dropped by the server
            s.settimeout(60)
            data = b""
            while chunk := s.recv(1024):
                data += chunk
            answers.append(data)
        assert sum(a.startswith(b"HTTP/1.1 503") for a in answers) >= 40 - 32, [a[:20] for a in answers]
        assert w.post(b"not a checkpoint")[0] == 400  # answered: the server is free again
    finally:
        for s in held:
            s.close()
        w.stop()
