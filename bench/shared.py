"""Benchmark: the shared store on PostgreSQL (issue 12).

    python bench/shared.py [--quick] [--server postgresql://postgres@127.0.0.1:5432/test]

Every figure is a ratio against a floor measured in the same run, repeated and
interleaved (ledger, floor, ledger, floor, ...), medians reported:
  - appends/s with 1, 4 and 8 writer processes against the floor: the same advisory
    lock, one INSERT of a row of the same size and a COMMIT, no signing, no model code;
  - `ledger pull` of a fresh mirror against a plain binary COPY of the same rows;
  - cold `ledger verify HASH` (a fresh process) on the shared store at a small and a
    large ledger, against `python -c pass`: it must not grow with the ledger.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key, pull

sys.path.insert(0, str(Path(__file__).parent))
from _common import demo_repo, filler, record, seal_demo_receipt

LOCK_KEY = 0x7265636C65646772  # the sequencer's key (ledger/store/_postgres.py)
_FORK = multiprocessing.get_context("fork")


def _database(server: str) -> str:
    name = "rl_bench_" + secrets.token_hex(4)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE DATABASE " + name)
    return urlsplit(server)._replace(path="/" + name).geturl()


def _drop(server: str, url: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % urlsplit(url).path[1:])


def _shared(url: str, root: Path) -> tuple[Ledger, dict[str, r.Ed25519Signer]]:
    signers = {n: r.Ed25519Signer(Ed25519PrivateKey.generate()) for n in ("admin", "ci", "judge", "alice", "sealer")}
    ledger = Ledger.create(root, signers["admin"], "admin", store=url)
    for name, role in (("ci", r.Role.DETERMINISTIC), ("judge", r.Role.JUDGE), ("alice", r.Role.HUMAN)):
        add_key(ledger, signers["admin"], name, [role], signers[name].public_key_blob)
    add_key(ledger, signers["admin"], "sealer", [r.Role.SEAL], signers["sealer"].public_key_blob)
    return ledger, signers


# -- appends ------------------------------------------------------------------------------------


def _ledger_writer(url: str, root: Path, signer: r.Ed25519Signer, n: int, ready: Any) -> None:
    ledger = Ledger.open(root, store=url)
    ready.wait()
    for i in range(n):
        ledger.append(record(i), signer)
    ledger.close()


def _floor_writer(url: str, row: bytes, n: int, ready: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        ready.wait()
        for _ in range(n):
            conn.execute("BEGIN")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            conn.execute("INSERT INTO floor (data) VALUES (%s)", (row,))
            conn.execute("COMMIT")


# The left siblings of the next leaf, one lookup per one bit of the tree size (the store's
# own query is private to it; this one asks the server the same).
FRONTIER = (
    "SELECT t.level, t.idx, t.hash FROM (SELECT coalesce(max(seq), -1) + 1 AS n FROM entries) AS m"
    " CROSS JOIN generate_series(0, 62) AS l CROSS JOIN LATERAL"
    " (SELECT level, idx, hash FROM tree WHERE level = l AND idx = (m.n >> l) - 1 LIMIT 1) AS t"
    " WHERE ((m.n >> l) & 1) = 1"
)


def _stripped_writer(url: str, size: int, n: int, ready: Any) -> None:
    """What this format asks of any writer, and nothing of ours: in one pipeline BEGIN, the
    lock and the reads a writer needs (the head, the task's newest entry, the rows since its
    last append, the Merkle frontier), one Ed25519 signature, then the real row and its leaf
    through the real schema (indexes and checking triggers) with the COMMIT. Its ratio is
    the ceiling of the design on this machine; ours is measured against the same floor.
    """
    key = Ed25519PrivateKey.generate()
    columns = "seq, hash, kind, body_hash, task, entry, body"
    with psycopg.connect(url, autocommit=True) as conn:
        ready.wait()
        last = 0
        for i in range(n):
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                head = conn.execute("SELECT %s FROM entries ORDER BY seq DESC LIMIT 1" % columns)
                task = "BENCH-%d" % (i % 50)
                conn.execute("SELECT %s FROM entries WHERE task = %%s ORDER BY seq DESC LIMIT 1" % columns, (task,))
                conn.execute("SELECT %s FROM entries WHERE seq > %%s ORDER BY seq LIMIT 64" % columns, (last,))
                conn.execute(FRONTIER)
            found = head.fetchone()
            assert found is not None, "the ledger has a genesis entry"
            seq, prev = found[:2]
            last = seq + 1
            entry = secrets.token_bytes(size) + key.sign(bytes(prev))
            digest = hashlib.sha256(entry).digest()
            with conn.pipeline():
                conn.execute(
                    "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body, prev)"
                    " VALUES (%s, %s, 'tier_record', %s, %s, %s, %s, %s)",
                    (last, digest, digest, task, entry, bytes(300), prev),
                )
                conn.execute(
                    "INSERT INTO tree (level, idx, hash) VALUES (0, %s, %s)",
                    (last, hashlib.sha256(b"\x00" + entry).digest()),
                )
                conn.execute("COMMIT")


def _rate(target: Any, args: tuple[Any, ...], writers: int, per_writer: int) -> float:
    """Appends per second of ``writers`` processes, timed from the moment all are ready."""
    ready = _FORK.Barrier(writers + 1)
    procs = [_FORK.Process(target=target, args=(*args, per_writer, ready)) for _ in range(writers)]
    for p in procs:
        p.start()
    ready.wait()
    started = time.perf_counter()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    return writers * per_writer / (time.perf_counter() - started)


def appends(url: str, stripped_url: str, root: Path, per_writer: int, repeats: int) -> dict[str, Any]:
    ledger, signers = _shared(url, root)
    _shared(stripped_url, root.with_name(root.name + "-stripped"))[
        0
    ].close()  # its rows never decode: a ledger of its own
    sample = ledger.append(record(0), signers["alice"])
    stored = ledger.reader.by_seq(sample.seq)
    assert stored is not None
    ledger.close()
    row = bytes(len(stored.entry) + len(stored.body) + 32 * 3 + 16)  # a row of the same size
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE floor (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, data BYTEA)")
    out: dict[str, Any] = {}
    for writers in (1, 4, 8):
        mine, floor, stripped = [], [], []
        for _ in range(repeats):
            mine.append(_rate(_ledger_writer, (url, root, signers["alice"]), writers, per_writer))
            floor.append(_rate(_floor_writer, (url, row), writers, per_writer))
            if writers == 8:
                stripped.append(_rate(_stripped_writer, (stripped_url, len(stored.entry)), writers, per_writer))
        m, f = statistics.median(mine), statistics.median(floor)
        out["%d_writers" % writers] = {
            "appends_per_s": round(m),
            "floor_per_s": round(f),
            "ratio": round(m / f, 2),
            "ratios": [round(a / b, 2) for a, b in zip(mine, floor, strict=True)],
        }
        if stripped:
            out["%d_writers" % writers]["stripped_writer_ratio"] = round(statistics.median(stripped) / f, 2)
    out["target_ratio_at_8_writers"] = 0.6
    return out


# -- pull and cold verify -----------------------------------------------------------------------


def _copy_seconds(url: str) -> float:
    started = time.perf_counter()
    size = 0
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY (SELECT seq, hash, kind, body_hash, task, entry, body FROM entries ORDER BY seq)"
            " TO STDOUT (FORMAT BINARY)"
        ) as copy:
            for data in copy:
                size += len(data)
    assert size > 0
    return time.perf_counter() - started


def _cold_verify(url: str, receipt: str, trust: str, runs: int) -> float:
    cmd = [sys.executable, "-m", "ledger", "--store", url, "verify", receipt, "--trust", trust]
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def _python_pass(runs: int) -> float:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def pull_and_verify(url: str, work: Path, small: int, large: int, repeats: int) -> dict[str, Any]:
    ledger, signers = _shared(url, work / "clone")
    sealed = seal_demo_receipt(ledger, signers, demo_repo(work / "repo"))
    receipt, trust = str(sealed.body_hash), r.fingerprint(signers["admin"].public_key_blob)
    out: dict[str, Any] = {}
    for size in (small, large):
        filler(ledger, signers["ci"], size - ledger.tree_size(), batch=5000)
        ledger.checkpoint(signers["sealer"])
        verify_s = _cold_verify(url, receipt, trust, repeats)
        python_s = _python_pass(repeats)
        out["cold_verify_%d_entries" % size] = {
            "median_ms": round(verify_s * 1000, 1),
            "python_pass_ms": round(python_s * 1000, 1),
            "ratio_to_python": round(verify_s / python_s, 2),
        }
    pulls, copies = [], []
    for i in range(repeats):
        mirror = work / ("mirror-%d" % i)
        started = time.perf_counter()
        result = pull(url, mirror)
        pulls.append(time.perf_counter() - started)
        assert result.ok and result.entries_after == ledger.tree_size()
        shutil.rmtree(mirror)
        copies.append(_copy_seconds(url))
    ledger.close()
    out["pull"] = {
        "entries": large,
        "pull_s": round(statistics.median(pulls), 2),
        "copy_s": round(statistics.median(copies), 3),
        "ratio_to_copy": round(statistics.median(copies) / statistics.median(pulls), 3),
    }
    small_ms = out["cold_verify_%d_entries" % small]["median_ms"]
    out["cold_verify_growth"] = round(out["cold_verify_%d_entries" % large]["median_ms"] / small_ms, 2)
    return out


def main(server: str, quick: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="rl-shared-"))
    urls = [_database(server), _database(server), _database(server)]
    try:
        return {
            "appends": appends(
                urls[0], urls[2], work / "a", per_writer=30 if quick else 250, repeats=1 if quick else 3
            ),
            "pull_and_cold_verify": pull_and_verify(
                urls[1], work, 1000, 3000 if quick else 100_000, repeats=1 if quick else 3
            ),
        }
    finally:
        for url in urls:
            _drop(server, url)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    print(json.dumps(main(args.server, args.quick), indent=2))
