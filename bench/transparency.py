"""Benchmark: inclusion proofs and bundle size on a large ledger (issue 5).

    python bench/transparency.py [--entries 1000000]

Seals one real receipt (real deterministic run, scripted judge, approval) near the start
of a fresh ledger, appends N signed filler entries after it (real entries, built in
batches with the Merkle tree kept), checkpoints, then measures:
  - an inclusion proof from stored tree nodes, against the raw cost of the SQLite point
    reads it needs (measured in the same run);
  - the receipt's bundle size before and after the filler, as a ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key, export_bundle

sys.path.insert(0, str(Path(__file__).parent))
from _common import demo_repo, filler, seal_demo_receipt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="rl-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        signers = {
            n: r.Ed25519Signer(Ed25519PrivateKey.generate()) for n in ("admin", "ci", "judge", "alice", "sealer")
        }
        repo = demo_repo(work / "repo")
        ledger = Ledger.create(work / "ledger", signers["admin"], "admin")
        for name, role in (
            ("ci", r.Role.DETERMINISTIC),
            ("judge", r.Role.JUDGE),
            ("alice", r.Role.HUMAN),
            ("sealer", r.Role.SEAL),
        ):
            add_key(ledger, signers["admin"], name, [role], signers[name].public_key_blob)
        sealed = seal_demo_receipt(ledger, signers, repo)
        receipt_seq = sealed.seq
        ledger.checkpoint(signers["sealer"])
        small = work / "small.zip"
        export_bundle(ledger, sealed.body_hash, small)

        build_s = filler(ledger, signers["ci"], args.entries)
        size = ledger.tree_size()
        ledger.checkpoint(signers["sealer"])
        root = ledger.root_hash(size)

        # Raw primitive, same run: SQLite point reads of tree nodes.
        reads = 20000
        t0 = time.perf_counter()
        for i in range(reads):
            ledger.node(0, (i * 7919) % size)
        raw_read = (time.perf_counter() - t0) / reads

        proofs = 200
        t0 = time.perf_counter()
        for i in range(proofs):
            index = (i * 104729) % size
            r.inclusion_proof(ledger, index, size)
        per_proof = (time.perf_counter() - t0) / proofs
        entry = ledger.reader.by_seq(receipt_seq)
        assert entry is not None
        ok = r.is_valid_inclusion(
            r.leaf_hash(entry.entry), receipt_seq, size, r.inclusion_proof(ledger, receipt_seq, size), root
        )
        depth = math.ceil(math.log2(size))
        big = work / "big.zip"
        t0 = time.perf_counter()
        export_bundle(ledger, sealed.body_hash, big)
        export_s = time.perf_counter() - t0
        ledger.close()
        figures = {
            "entries": size,
            "filler_build_seconds": round(build_s, 1),
            "inclusion_proof_ms": round(per_proof * 1000, 3),
            "raw_sqlite_node_read_us": round(raw_read * 1e6, 2),
            "proof_vs_raw_floor": round(per_proof / (raw_read * depth), 2),
            "proof_verifies": ok,
            "bundle_bytes_small_ledger": small.stat().st_size,
            "bundle_bytes_large_ledger": big.stat().st_size,
            "bundle_size_ratio": round(big.stat().st_size / small.stat().st_size, 4),
            "bundle_export_seconds": round(export_s, 2),
        }
        print(json.dumps(figures, indent=2))
        print(
            "inclusion proof: %.3f ms on %d entries = %.2fx the raw floor (%d SQLite node reads at %.1f us, one per level)"
            % (per_proof * 1000, size, figures["proof_vs_raw_floor"], depth, raw_read * 1e6)
        )
        print(
            "bundle: %d bytes at %d entries vs %d bytes at %d entries (ratio %.4f; only the proofs grow, as log2 of the size)"
            % (big.stat().st_size, size, small.stat().st_size, receipt_seq + 2, figures["bundle_size_ratio"])
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
