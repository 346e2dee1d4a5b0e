"""`ledger monitor` (issue 27): from its state file it raises exactly one alert per event
of a scripted sequence (a rejection, a weakening, a key change, a split view), each as a
line and a webhook POST to a real local endpoint, and none when run again."""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from conftest import ADMIN_ID, SIGNERS, TASK, build_sample, contract_bytes, other_records, run_cli
from ledger import Ledger, add_cosignatures, add_key, register_contract, revoke_key, seal_receipt
from verify import LedgerSource, WitnessKey


class _Hook:
    """A webhook endpoint on 127.0.0.1 that keeps every JSON document POSTed to it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.failing = False  # answer 500: the endpoint does not take the alert
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if hook.failing:
                    self.send_response(500)
                    self.end_headers()
                    return
                hook.received.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/alerts" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self) -> list[dict[str, Any]]:
        got, self.received = self.received, []
        return got


@pytest.fixture
def hook() -> Iterator[_Hook]:
    h = _Hook()
    yield h
    h.server.shutdown()
    h.server.server_close()


def _checkpoint(root: Path) -> None:
    ledger = Ledger.open(root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()


def _records(root: Path, n: int) -> None:
    ledger = Ledger.open(root)
    ledger.append_many(other_records("OTHER-1", n), SIGNERS["ci"])
    ledger.close()


def test_one_alert_per_event_and_none_on_a_restart(hook: _Hook, tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _checkpoint(s.root)
    state = tmp_path / "monitor.json"
    args = ("--dir", str(s.root), "monitor", "--state", str(state), "--webhook", hook.url, "--trust", ADMIN_ID)

    def monitor(expect: int) -> list[dict[str, Any]]:
        done = run_cli(*args)
        assert done.returncode == expect, (done.stdout, done.stderr)
        got = hook.take()
        assert [line for line in done.stdout.splitlines() if line.startswith("ALERT ")] == [
            "ALERT %s: %s" % (a["kind"], a["message"]) for a in got
        ]
        return got

    assert monitor(0) == []  # the first pass is the baseline: the log as found
    # A rejection: a new receipt whose evidence was then altered.
    with LedgerSource.open(s.root) as source:
        stored = source.by_body_hash(r.Digest.parse(s.receipt))
        assert stored is not None
        candidate = r.decode_as(r.LadderReceipt, stored.body).input_hash
    ledger = Ledger.open(s.root)
    _, again = seal_receipt(ledger, task_id=TASK, signer=SIGNERS["sealer"], input_hash=candidate)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    blob = next(p for p in sorted((s.root / "blobs").rglob("*")) if p.is_file())
    blob.chmod(0o644)
    blob.write_bytes(b"x" + blob.read_bytes()[1:])
    (alert,) = monitor(1)
    assert alert["kind"] == "rejection" and str(again.body_hash) in alert["message"]
    assert "evidence-altered" in alert["message"]
    # A weakening, signed by the admin.
    ledger = Ledger.open(s.root)
    register_contract(ledger, TASK, contract_bytes(command="print('ok')"), SIGNERS["admin"], reason="tests retired")
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    (alert,) = monitor(1)
    assert alert["kind"] == "weakening" and "check tests was changed" in alert["message"]
    # A key added.
    fork = tmp_path / "fork"
    shutil.copytree(s.root, fork)
    ledger = Ledger.open(s.root)
    add_key(ledger, SIGNERS["admin"], "carol", [r.Role.HUMAN], SIGNERS["mallory"].public_key_blob)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    (alert,) = monitor(1)
    assert alert["kind"] == "key" and "key added: carol (human)" in alert["message"]
    ledger = Ledger.open(s.root)
    revoke_key(ledger, SIGNERS["admin"], "carol", "left the team")
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    (alert,) = monitor(1)
    assert (
        alert["kind"] == "key"
        and "key revoked: carol (SHA256:" in alert["message"]
        and "left the team" in alert["message"]
    )
    # A split view: the log now shows a history that grew another way from before the key.
    _records(fork, 5)
    _checkpoint(fork)
    shutil.rmtree(s.root)
    shutil.copytree(fork, s.root)
    (alert,) = monitor(1)
    assert alert["kind"] == "fork" and "does not extend the one kept" in alert["message"]
    kept, seen = (Path(p).read_text() for p in alert["evidence"])
    assert r.parse_checkpoint(r.parse_note(kept).text).root != r.parse_checkpoint(r.parse_note(seen).text).root
    # Run again, as after a restart: everything re-proven, nothing sent twice.
    assert monitor(0) == []
    assert monitor(0) == []


def test_the_monitor_block_of_docs_witnesses_md_runs_as_written(hook: _Hook, tmp_path: Path) -> None:
    import os
    import sys

    from docs_as_written import blocks, run_shell

    s = build_sample(tmp_path)
    _checkpoint(s.root)
    (block,) = blocks("witnesses.md", "Watch the log", "sh")
    path = "%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", ""))
    env = {**os.environ, "PATH": path, "LEDGER_DIR": str(s.root), "ALERT_URL": hook.url, "LEDGER_ADMIN_KEY": ADMIN_ID}
    first = run_shell(block.text, tmp_path, env)
    # The baseline is not silent: it says what the history holds (the sample's keys), sends nothing.
    assert first.returncode == 0 and hook.take() == [], first.stderr
    assert re.fullmatch(r"BASELINE taken at \d+ entries; the history holds \d+ key \(not alerted: .*\)\n", first.stdout)
    ledger = Ledger.open(s.root)
    add_key(ledger, SIGNERS["admin"], "carol", [r.Role.HUMAN], SIGNERS["mallory"].public_key_blob)
    ledger.close()
    second = run_shell(block.text, tmp_path, env)
    assert second.returncode == 1 and second.stdout.startswith("ALERT key: key added: carol (human)")
    assert [a["kind"] for a in hook.take()] == ["key"] and (tmp_path / "monitor.json").is_file()


def test_an_alert_the_endpoint_did_not_take_is_sent_on_the_next_pass(hook: _Hook, tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    state = tmp_path / "monitor.json"
    args = ("--dir", str(s.root), "monitor", "--state", str(state), "--webhook", hook.url, "--trust", ADMIN_ID)
    assert run_cli(*args).returncode == 0  # the baseline
    for name in ("carol", "dave"):
        ledger = Ledger.open(s.root)
        fresh = r.Ed25519Signer(Ed25519PrivateKey.generate())
        add_key(ledger, SIGNERS["admin"], name, [r.Role.HUMAN], fresh.public_key_blob)
        ledger.close()
        if name == "carol":
            hook.failing = True
            down = run_cli(*args)
            assert down.returncode == 2 and "did not take alert key:" in down.stderr and hook.take() == []
            hook.failing = False
    back = run_cli(*args)
    assert back.returncode == 1, back.stderr
    assert [a["message"].split(" at entry")[0] for a in hook.take()] == [
        "key added: carol (human)",
        "key added: dave (human)",
    ]
    assert run_cli(*args).returncode == 0 and hook.take() == []


def test_a_lost_witness_quorum_is_one_alert(hook: _Hook, tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    note = ledger.checkpoint(SIGNERS["sealer"])
    witness = WitnessKey("witness.example/w1", r.parse_public_key_blob(SIGNERS["bob"].public_key_blob))
    cosigned = note.with_signature(r.cosign_note(note.text, witness.name, SIGNERS["bob"], 1_700_000_000))
    add_cosignatures(ledger, cosigned.encode(), (witness,))
    ledger.close()
    line = "%s %s" % (witness.name, r.public_key_line(SIGNERS["bob"].public_key_blob))
    state = tmp_path / "monitor.json"
    args = [
        *("--dir", str(s.root), "monitor", "--state", str(state), "--webhook", hook.url, "--trust", ADMIN_ID),
        *("--witness", line, "--witness-quorum", "1"),
    ]
    assert run_cli(*args).returncode == 0 and hook.take() == []  # the baseline: a witnessed checkpoint
    _records(s.root, 3)
    _checkpoint(s.root)  # the log moves on; the witness does not cosign
    lost = run_cli(*args)
    assert lost.returncode == 1, lost.stderr
    (alert,) = hook.take()
    assert alert["kind"] == "quorum" and "0 of the 1 --witness cosignatures required" in alert["message"]
    assert run_cli(*args).returncode == 0 and hook.take() == []


def test_a_webhook_that_redirects_is_not_followed(tmp_path: Path) -> None:
    # Issue 47: urllib followed a 302 from the configured endpoint with a GET to wherever it
    # pointed, and took the answer there as the alert delivered. The alert stays unsent (the
    # endpoint did not take it) and nothing is fetched from the address the redirect named.
    fetched: list[str] = []

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.end_headers()

        def do_GET(self) -> None:
            fetched.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        s = build_sample(tmp_path)
        url = "http://127.0.0.1:%d/alerts" % server.server_address[1]
        state = tmp_path / "m.json"
        args = ("--dir", str(s.root), "monitor", "--state", str(state), "--webhook", url, "--trust", ADMIN_ID)
        assert run_cli(*args).returncode == 0  # the baseline
        ledger = Ledger.open(s.root)
        carol = r.Ed25519Signer(Ed25519PrivateKey.generate()).public_key_blob
        add_key(ledger, SIGNERS["admin"], "carol", [r.Role.HUMAN], carol)
        ledger.close()
        moved = run_cli(*args)
        assert moved.returncode == 2 and "did not take alert key:" in moved.stderr, moved.stderr
        assert fetched == []
    finally:
        server.shutdown()
        server.server_close()
