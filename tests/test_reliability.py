"""Reliability: crashes at random moments, concurrent writers with readers,
and resource faults. Each leaves a ledger that verifies, and a clean error."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, build_sample, run_cli, write_private_key
from ledger import Evidence, InputError, Ledger, add_key, record_tier, register_contract
from verify import LedgerSource, TrustRoot, verify_chain

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
CRASH_TRIALS = int(os.environ.get("RECEIPT_LEDGER_CRASH_TRIALS", "12"))

# A child that appends human records as fast as it can, printing each committed seq.
APPENDER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from typing import Any
import receipts as r
from conftest import SIGNERS
from ledger import Ledger, record_tier
ledger = Ledger.open(Path(sys.argv[1]))
cfg = r.config_hash(b"crash")
cand = r.candidate_hash({"commit": "c" * 40})
while True:
    _, appended = record_tier(ledger, task_id="CRASH-" + sys.argv[3], tier=r.Tier.HUMAN, verdict=r.Verdict.PASS,
                              signer=SIGNERS["alice"], config_hash=cfg, input_hash=cand)
    print(appended.seq, flush=True)
"""


def human_record(task: str, config: r.Digest, environment: r.Digest | None = None) -> r.TierRecord:
    """A hand-made human approval record, as cheap filler for chains that these tests grow."""
    return r.new_tier_record(
        task_id=task,
        tier=r.Tier.HUMAN,
        config_hash=config,
        input_hash=config,
        evidence=(),
        verdict=r.Verdict.PASS,
        verifier="t",
        verifier_version="1",
        environment=environment or config,
        created=1,
    )


def _spawn(root: Path, tag: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(root), str(Path(__file__).parent), tag],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _committed(proc: subprocess.Popen[str]) -> list[int]:
    out = proc.stdout.read() if proc.stdout else ""
    return [int(line) for line in out.split() if line.isdigit()]


def _next_commit(proc: subprocess.Popen[str]) -> int:
    """Block until the child reports its next committed entry: a real signal, not a time."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), "the appender stopped before committing (%r)" % line
    return int(line)


def test_sigkill_at_random_moments_never_loses_or_tears_an_entry(ledger_dir: Path) -> None:
    rng = random.Random(1202)
    reported: list[int] = []
    for trial in range(CRASH_TRIALS):
        proc = _spawn(ledger_dir, str(trial))
        # Past its imports and its first commit, the child is always inside some append:
        # killing it after a random number of further commits lands at a random point of one.
        for _ in range(1 + rng.randrange(4)):
            reported.append(_next_commit(proc))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reported += _committed(proc)
        result = verify_chain(LedgerSource.open(ledger_dir), TRUST)
        assert result.ok, (trial, result.defects[:3])
    conn = sqlite3.connect(ledger_dir / "ledger.db")
    present = {seq for (seq,) in conn.execute("SELECT seq FROM entries")}
    conn.close()
    assert len(reported) >= CRASH_TRIALS and set(reported) <= present  # every append reported as committed is there
    assert present == set(range(len(present)))  # and there is no gap


def _reader(ledger_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "--dir", str(ledger_dir), "verify", "--chain", "--trust", ADMIN_ID],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_writers_and_readers_at_once_see_one_linear_chain(ledger_dir: Path) -> None:
    writers = [_spawn(ledger_dir, "w%d" % i) for i in range(4)]
    reported = [_next_commit(w) for w in writers]  # every writer is writing before the first read starts
    torn = 0
    for _ in range(3):  # whole audits while all four keep appending: each writer commits during each one
        reader = _reader(ledger_dir)
        while reader.poll() is None:
            reported += [_next_commit(w) for w in writers]
        torn += reader.returncode != 0
        reported += [_next_commit(w) for w in writers]
    for w in writers:
        w.send_signal(signal.SIGTERM)
    reported += [seq for w in writers for seq in _committed(w)]
    for w in writers:
        w.wait()
    assert torn == 0, "a reader saw a torn chain"
    assert len(reported) == len(set(reported))  # no seq handed out twice
    result = verify_chain(LedgerSource.open(ledger_dir), TRUST)
    assert result.ok and result.entries >= max(reported) + 1


def test_a_lock_held_too_long_is_a_clean_error_and_a_dead_holder_frees_it(ledger_dir: Path, tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(60)",
            str(ledger_dir / "ledger.db"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    pub = tmp_path / "k.pub"
    from receipts import public_key_line

    pub.write_text(public_key_line(SIGNERS["mallory"].public_key_blob))
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys"), "RECEIPT_LEDGER_BUSY_TIMEOUT_MS": "300"}
    write_private_key(tmp_path / "keys" / "admin", "admin")
    locked = run_cli("--dir", str(ledger_dir), "keys", "add", "m", str(pub), "--role", "human", env=keys)
    assert locked.returncode == 2 and "locked" in locked.stderr and "Traceback" not in locked.stderr
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    freed = run_cli("--dir", str(ledger_dir), "keys", "add", "m", str(pub), "--role", "human", env=keys)
    assert freed.returncode == 0, freed.stderr
    assert verify_chain(LedgerSource.open(ledger_dir), TRUST).ok


def test_a_missing_blob_store_is_a_clean_error(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    import shutil

    shutil.rmtree(s.root / "blobs")
    evidence = tmp_path / "e.txt"
    evidence.write_text("x")
    res = run_cli("--dir", str(s.root), "verify", s.receipt, "--json")
    assert res.returncode == 1 and "evidence-missing" in res.stdout and "Traceback" not in res.stderr
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path; import receipts as r; from conftest import SIGNERS; "
        "from ledger import Ledger, Evidence, record_tier; from ledger import LedgerError\n"
        "try:\n    record_tier(Ledger.open(Path(sys.argv[1])), task_id='T-1', tier=r.Tier.HUMAN, verdict=r.Verdict.PASS, "
        "signer=SIGNERS['alice'], config_hash=r.config_hash(b'x'), input_hash=r.config_hash(b'y'), evidence=[Evidence('e', Path(sys.argv[3]))])\n"
        "except LedgerError as exc:\n    print('clean:', exc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(s.root), str(Path(__file__).parent), str(evidence)],
        capture_output=True,
        text=True,
    )
    assert out.stdout.startswith("clean: cannot write to the blob store"), out.stdout + out.stderr
    # The entries are intact; a full audit reports the evidence the blob store lost.
    assert verify_chain(LedgerSource.open(s.root), TRUST, evidence=False).ok
    assert {d.code for d in verify_chain(LedgerSource.open(s.root), TRUST).defects} == {"evidence-missing"}


def test_a_full_disk_is_a_clean_error_and_leaves_the_ledger_intact(ledger_dir: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(256 * 1024))
    before = sqlite3.connect(ledger_dir / "ledger.db").execute("SELECT count(*) FROM entries").fetchone()[0]
    code = (
        "import resource, signal, sys; sys.path.insert(0, sys.argv[2]); signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))\n"
        "from pathlib import Path; import receipts as r; from conftest import SIGNERS\n"
        "from ledger import Ledger, Evidence, record_tier; from ledger import LedgerError\n"
        "try:\n    record_tier(Ledger.open(Path(sys.argv[1])), task_id='T-1', tier=r.Tier.HUMAN, verdict=r.Verdict.PASS, "
        "signer=SIGNERS['alice'], config_hash=r.config_hash(b'x'), input_hash=r.config_hash(b'y'), evidence=[Evidence('e', Path(sys.argv[3]))])\n"
        "    print('written')\n"
        "except LedgerError as exc:\n    print('clean:', exc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ledger_dir), str(Path(__file__).parent), str(big)],
        capture_output=True,
        text=True,
    )
    assert out.stdout.startswith("clean:"), out.stdout + out.stderr
    assert not list((ledger_dir / "blobs").rglob(".incoming-*"))  # no half-written blob left behind
    assert sqlite3.connect(ledger_dir / "ledger.db").execute("SELECT count(*) FROM entries").fetchone()[0] == before
    assert verify_chain(LedgerSource.open(ledger_dir), TRUST).ok


def test_a_read_only_ledger_is_a_clean_error(tmp_path: Path) -> None:
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("this machine does not let the tests mount a filesystem")
    try:
        s = build_sample(mnt)
        assert subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True).returncode == 0
        res = run_cli("--dir", str(s.root), "checkpoint", "--key", str(tmp_path / "no-such-key"))
        assert res.returncode == 2 and "Traceback" not in res.stderr
        code = (
            "import sys; sys.path.insert(0, sys.argv[2]); from pathlib import Path; import receipts as r; from conftest import SIGNERS\n"
            "from ledger import Ledger; from ledger import LedgerError\n"
            "try:\n    Ledger.open(Path(sys.argv[1])).checkpoint(SIGNERS['sealer']); print('written')\n"
            "except LedgerError as exc:\n    print('clean:', exc)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(s.root), str(Path(__file__).parent)], capture_output=True, text=True
        )
        assert out.stdout.startswith("clean:") and "read-only" in out.stdout, out.stdout + out.stderr
        verified = run_cli("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--json")
        assert verified.returncode == 0 and json.loads(verified.stdout)["verified"], verified.stderr
        # issue 11, item 10: the commands that only read work on a read-only copy too.
        for args in (
            ("log",),
            ("show", s.receipt),
            ("status",),
            ("keys", "list"),
            ("contract", "show", "TASK-1"),
            ("stats",),
            ("verify", "--chain", "--trust", ADMIN_ID),
        ):
            res = run_cli("--dir", str(s.root), *args)
            assert res.returncode == 0, (args, res.stderr)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_batch_mixing_keyring_contract_and_record_entries_keeps_tree_and_pointers(ledger_dir: Path) -> None:
    """A batch defers its inserts; a body whose append reads the table (keyring, contract)
    must see the batch's earlier entries, and the Merkle tree must match the entries."""
    from conftest import TASK, contract_bytes, seeded_signer
    from ledger import InputError
    from verify import Transparency

    ledger = Ledger.open(ledger_dir)
    add_key(
        ledger,
        SIGNERS["admin"],
        "multi",
        [r.Role.ADMIN, r.Role.DETERMINISTIC, r.Role.HUMAN],
        SIGNERS["mallory"].public_key_blob,
    )
    cfg, env = r.config_hash(b"batch"), r.domain_hash(r.Domain.ENVIRONMENT, b"e")

    def rec(i: int) -> r.TierRecord:
        return human_record(TASK if i % 2 else "B-0", cfg, env)

    strong = r.ContractRevision(
        TASK, contract_bytes(extra='\n[[checks]]\nid = "more"\ntype = "path_exists"\npath = "app.py"\n'), None
    )
    weak = r.ContractRevision(TASK, contract_bytes(), strong.config_hash, "the extra check is retired")
    spec = r.KeySpec("carol", (r.Role.HUMAN,), seeded_signer("carol").public_key_blob)
    batch: list[r.Body] = [
        rec(0),
        rec(1),
        r.KeyAdd(spec),
        rec(2),
        strong,
        rec(3),
        weak,
        rec(4),
        r.KeyRevoke(r.fingerprint(spec.public_key), "test"),
        rec(5),
        *[rec(i) for i in range(6, 37)],
    ]
    done = ledger.append_many(batch, SIGNERS["mallory"])  # an admin may weaken: the batch is accepted
    revoked = ledger.keyring().get(r.fingerprint(spec.public_key))
    assert ledger.latest_contract(TASK) == weak and revoked is not None and revoked.revoked_at == done[8].seq
    # Without the admin role the second revision weakens the first one of the same batch: refused, nothing written.
    dave = seeded_signer("dave")
    add_key(ledger, SIGNERS["admin"], "dave", [r.Role.DETERMINISTIC, r.Role.HUMAN], dave.public_key_blob)
    before = len(list(ledger.entries()))
    again = r.ContractRevision(TASK, strong.contract, weak.config_hash)
    with pytest.raises(InputError, match="weakens"):
        ledger.append_many([rec(40), again, rec(41), r.ContractRevision(TASK, weak.contract, again.config_hash)], dave)
    assert len(list(ledger.entries())) == before
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    result = verify_chain(
        LedgerSource.open(ledger_dir), TRUST, transparency=Transparency(require_checkpoint=True), workers=1
    )
    assert result.ok, result.defects


def _die(chunk: list[object]) -> list[object]:
    os._exit(3)  # a signature worker that dies mid-audit


def _chain_with_forged_signatures(ledger_dir: Path, bad: tuple[int, ...]) -> None:
    """Give entries ``bad`` a valid SSHSIG by the wrong key (mallory's, same namespace)."""
    import dataclasses

    from conftest import read_rows

    ledger = Ledger.open(ledger_dir)
    cfg = r.config_hash(b"q")
    ledger.append_many(
        [human_record("Q-1", cfg) for _ in range(40)],
        SIGNERS["alice"],
    )
    ledger.close()
    rows = read_rows(ledger_dir)
    conn = sqlite3.connect(ledger_dir / "ledger.db")
    with conn:
        for seq in bad:
            entry = rows[seq].entry
            forged = r.sshsig_sign(SIGNERS["mallory"], r.sshsig_namespace(entry.signature), r.entry_signed_bytes(entry))
            data = r.encode_entry(dataclasses.replace(entry, signature=forged))
            conn.execute("UPDATE entries SET entry = ?, hash = ? WHERE seq = ?", (data, r.entry_hash(data).value, seq))
    conn.close()


def test_signature_checks_on_worker_processes_find_every_forgery(
    ledger_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import verify._walk as walk

    monkeypatch.setattr(walk.SignatureQueue, "CHUNK", 8)  # several chunks go to the workers, the tail stays here
    assert verify_chain(LedgerSource.open(ledger_dir), TRUST, workers=2).ok
    _chain_with_forged_signatures(ledger_dir, (9, 30, 45))
    for workers in (1, 2):
        result = verify_chain(LedgerSource.open(ledger_dir), TRUST, workers=workers)
        assert sorted(d.seq or -1 for d in result.defects if d.code == "signature-invalid") == [9, 30, 45], (
            workers,
            result.defects,
        )


def test_a_dead_signature_worker_means_could_not_verify(ledger_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import verify._walk as walk
    from verify import CannotVerify

    _chain_with_forged_signatures(ledger_dir, ())
    monkeypatch.setattr(walk.SignatureQueue, "CHUNK", 8)
    monkeypatch.setattr(walk, "_signatures_ok", _die)
    with pytest.raises(CannotVerify, match="signature checks could not run"):
        verify_chain(LedgerSource.open(ledger_dir), TRUST, workers=2)


def test_batched_appends_build_the_same_verifiable_chain(ledger_dir: Path) -> None:
    from ledger import InputError

    ledger = Ledger.open(ledger_dir)
    cfg, env = r.config_hash(b"batch"), r.domain_hash(r.Domain.ENVIRONMENT, b"e")

    def rec(i: int) -> r.TierRecord:
        return human_record("B-%d" % (i % 3), cfg, env)

    first = ledger.append_many([rec(i) for i in range(40)], SIGNERS["alice"])
    ledger.append(rec(40), SIGNERS["alice"])
    second = ledger.append_many([rec(i) for i in range(41, 60)], SIGNERS["alice"])
    assert [a.seq for a in first + second] == list(range(first[0].seq, first[0].seq + 40)) + list(
        range(second[0].seq, second[0].seq + 19)
    )
    with pytest.raises(InputError):  # one refused body refuses the whole batch
        ledger.append_many([rec(60), rec(61)], SIGNERS["ci"])
    count = len(list(ledger.entries()))
    ledger.close()
    result = verify_chain(LedgerSource.open(ledger_dir), TRUST, workers=1)
    assert result.ok and result.entries == count == second[-1].seq + 1


def _limited_fsize() -> None:
    # A regression that reads a device forever dies at 8 MiB written instead of filling the disk.
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))


def test_evidence_must_be_a_regular_file_and_leaves_nothing_behind(ledger_dir: Path, tmp_path: Path) -> None:
    # issue 11, item 9: `--evidence /dev/zero` read forever and left a growing .incoming-* file.
    contract = tmp_path / "c.toml"
    from conftest import contract_bytes

    contract.write_bytes(contract_bytes(task="T-1"))
    register_contract(Ledger.open(ledger_dir), "T-1", contract.read_bytes(), SIGNERS["ci"])
    keys = tmp_path / "keys"
    write_private_key(keys / "alice", "alice")
    for device in ("/dev/zero",):
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "ledger",
                "--dir",
                str(ledger_dir),
                "record",
                "T-1",
                "--tier",
                "human",
                "--verdict",
                "fail",
                "--key",
                "alice",
                "--contract",
                str(contract),
                "--input",
                "blake3:" + "0" * 64,
                "--evidence",
                device,
            ],
            capture_output=True,
            text=True,
            preexec_fn=_limited_fsize,
            env=dict(os.environ, RECEIPT_LEDGER_KEYS=str(keys)),
        )
        assert res.returncode == 2 and "not a regular file" in res.stderr, res.stderr
    assert not list((ledger_dir / "blobs").glob(".incoming-*"))


def test_a_pipe_is_not_evidence(ledger_dir: Path, tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def writer() -> None:
        # Opening blocks until a reader comes: a build that opened the pipe would read this and
        # return (so the test fails instead of hanging); the refusal never opens it.
        with open(fifo, "wb") as out:
            out.write(b"not evidence")

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    with pytest.raises(InputError, match="not a regular file"):
        Ledger.open(ledger_dir).put_blob_file(fifo)
    release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer finish
    thread.join()
    os.close(release)


def test_an_interrupted_write_and_a_killed_writer_leave_no_temporary_blob(ledger_dir: Path) -> None:
    class Interrupted(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buf: Any) -> int:
            raise KeyboardInterrupt

    ledger = Ledger.open(ledger_dir)
    with pytest.raises(KeyboardInterrupt):
        ledger.put_blob_stream(io.BufferedReader(Interrupted()))
    assert not list((ledger_dir / "blobs").glob(".incoming-*"))
    # A writer killed mid-write cannot clean up: the next opening of the ledger does, for dead writers only.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = ledger_dir / "blobs" / (".incoming-%s-abc" % dead.stdout.strip())
    live = ledger_dir / "blobs" / (".incoming-%d-def" % os.getpid())
    left.write_bytes(b"half")
    live.write_bytes(b"in progress")
    Ledger.open(ledger_dir).close()
    assert not left.exists() and live.exists()
    live.unlink()


def test_a_non_utf8_evidence_name_is_bad_input(ledger_dir: Path, tmp_path: Path) -> None:
    odd = tmp_path / os.fsdecode(b"r\xe9sultat.txt")
    odd.write_text("x")
    with pytest.raises(InputError, match="not UTF-8"):
        record_tier(
            Ledger.open(ledger_dir),
            task_id="T-1",
            tier=r.Tier.HUMAN,
            verdict=r.Verdict.FAIL,
            signer=SIGNERS["alice"],
            config_hash=r.config_hash(b"x"),
            input_hash=r.config_hash(b"y"),
            evidence=[Evidence(odd.name, odd)],
        )
