"""Append throughput against its floor (issue 7).

batched: many records in one transaction, against (canonical CBOR encode + BLAKE3 + Ed25519
sign + SQLite insert) per record, batched the same way;
durable: one record per committed transaction (WAL, synchronous=FULL), against (sign + a bare
committed SQLite transaction) per record.

Each figure is the best of REPEATS runs, floor and ours alternating, so that a burst of
noise on this shared machine does not land on one side of the ratio only.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import fresh_ledger, record, timed  # noqa: E402

import receipts as r  # noqa: E402


def floor_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, hash BLOB, entry BLOB, body BLOB)")  # seq: rowid, as ours
    return conn


REPEATS = 3


def main(batched_n: int = 5000, durable_n: int = 300) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="rl-append-"))
    ledger, signers = fresh_ledger(work / "ledger")
    sealer = signers["alice"]
    bodies = [record(i) for i in range(batched_n)]

    conn = floor_db(work / "floor.db")

    def floor_batched() -> None:
        conn.execute("BEGIN")
        for rec in bodies:
            data = r.encode_tier_record(rec)
            h = r.domain_hash(r.Domain.TIER_RECORD, data)
            sig = sealer.sign_raw(h.value + data[:64])
            conn.execute("INSERT INTO t (hash, entry, body) VALUES (?, ?, ?)", (h.value, sig, data))
        conn.execute("COMMIT")

    floor_b = ours_b = float("inf")
    for _ in range(REPEATS):
        floor_b = min(floor_b, timed(floor_batched) / batched_n)
        ours_b = min(ours_b, timed(lambda: ledger.append_many(bodies, sealer)) / batched_n)

    conn2 = floor_db(work / "floor2.db")

    def floor_durable() -> None:
        for rec in bodies[:durable_n]:
            sig = sealer.sign_raw(r.encode_tier_record(rec)[:96])
            conn2.execute("BEGIN")
            conn2.execute("INSERT INTO t (hash, entry, body) VALUES (?, ?, ?)", (sig[:32], sig, b""))
            conn2.execute("COMMIT")

    floor_d = ours_d = float("inf")
    for _ in range(REPEATS):
        floor_d = min(floor_d, timed(floor_durable) / durable_n)
        ours_d = min(ours_d, timed(lambda: [ledger.append(rec, sealer) for rec in bodies[:durable_n]]) / durable_n)
    ledger.close()
    return {
        "batched_us_per_record": round(ours_b * 1e6, 1),
        "batched_floor_us": round(floor_b * 1e6, 1),
        "batched_ratio": round(floor_b / ours_b, 3),
        "batched_target": 0.6,
        "durable_us_per_record": round(ours_d * 1e6, 1),
        "durable_floor_us": round(floor_d * 1e6, 1),
        "durable_ratio": round(floor_d / ours_d, 3),
        "durable_target": 0.7,
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
