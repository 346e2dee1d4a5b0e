"""Append throughput against its floor (issue 7).

batched: many records in one transaction, against (canonical CBOR encode + BLAKE3 + Ed25519
sign + SQLite insert) per record, batched the same way;
durable: one record per committed transaction (WAL, synchronous=FULL), against (sign + a bare
committed SQLite transaction) per record.

Each ratio is the median of ROUNDS paired rounds: the floor and ours back to back, after the
disk has been flushed, so that drift and bursts of noise on this shared machine land on
both sides of each pair. The spread of the pairs is printed with it (issue 15: a single
best-of figure swung from 0.32 to 1.96 and said nothing).
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import fresh_ledger, record, scratch, timed

import receipts as r
from verify.schema import SCHEMA


def floor_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, hash BLOB, entry BLOB, body BLOB)")  # seq: rowid, as ours
    return conn


ROUNDS = 9


def _paired(floor: Callable[[], object], ours: Callable[[], object], n: int) -> dict[str, object]:
    ratios, floors, oursl = [], [], []
    for _ in range(ROUNDS):
        os.sync()
        f = timed(floor) / n
        os.sync()
        o = timed(ours) / n
        ratios.append(f / o)
        floors.append(f)
        oursl.append(o)
    return {
        "us_per_record": round(statistics.median(oursl) * 1e6, 1),
        "floor_us": round(statistics.median(floors) * 1e6, 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }


def main(batched_n: int = 2000, durable_n: int = 60) -> dict[str, object]:
    with scratch("rl-append-") as work:
        return _measured(work, batched_n, durable_n)


def _measured(work: Path, batched_n: int, durable_n: int) -> dict[str, object]:
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

    batched = _paired(floor_batched, lambda: ledger.append_many(bodies, sealer), batched_n)

    # Informative, not the target's floor: the same floor inserting into our entries table,
    # with its indexes (hash, body hash, task and kind lookups), to show what they cost.
    indexed = sqlite3.connect(work / "indexed.db", isolation_level=None)
    indexed.execute("PRAGMA journal_mode = WAL")
    indexed.execute("PRAGMA synchronous = FULL")
    indexed.executescript(SCHEMA)
    next_seq = iter(range(1 << 40))

    def floor_indexed() -> None:
        indexed.execute("BEGIN")
        for rec in bodies:
            data = r.encode_tier_record(rec)
            h = r.domain_hash(r.Domain.TIER_RECORD, data)
            sig = sealer.sign_raw(h.value + data[:64])
            seq = next(next_seq)
            indexed.execute(
                "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (seq, sig[:24] + seq.to_bytes(8, "big"), "tier_record", h.value, rec.task_id, sig, data),
            )
        indexed.execute("COMMIT")

    with_indexes = _paired(floor_indexed, lambda: ledger.append_many(bodies, sealer), batched_n)
    batched["floor_with_our_indexes_us"] = with_indexes["floor_us"]
    batched["ratio_to_that"] = with_indexes["ratio"]

    conn2 = floor_db(work / "floor2.db")

    def floor_durable() -> None:
        for rec in bodies[:durable_n]:
            sig = sealer.sign_raw(r.encode_tier_record(rec)[:96])
            conn2.execute("BEGIN")
            conn2.execute("INSERT INTO t (hash, entry, body) VALUES (?, ?, ?)", (sig[:32], sig, b""))
            conn2.execute("COMMIT")

    durable = _paired(floor_durable, lambda: [ledger.append(rec, sealer) for rec in bodies[:durable_n]], durable_n)
    ledger.close()
    return {"batched": {**batched, "target": 0.6}, "durable": {**durable, "target": 0.7}}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
