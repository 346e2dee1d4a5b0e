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
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key, decide, demo_contract, export_bundle, run_deterministic, run_judge, seal_receipt


def _repo(path: Path) -> Path:
    env = dict(
        os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b"
    )
    path.mkdir()
    for args in (["init", "-q", "-b", "main"],):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    (path / "greet.py").write_text("def greet(n):\n    return 'hi ' + n\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "initial"], cwd=path, check=True, env=env)
    (path / "greet.py").write_text("def greet(n):\n    return 'Hello, ' + n + '!'\n")
    (path / "test_greet.py").write_text("from greet import greet\nassert greet('Ada') == 'Hello, Ada!'\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "DEMO-1: friendlier greeting"], cwd=path, check=True, env=env)
    return path


def _filler(ledger: Ledger, signer: r.Ed25519Signer, n: int, batch: int = 20000) -> float:
    """Append n signed tier records for another task, in batches through the public API."""
    env = r.domain_hash(r.Domain.ENVIRONMENT, b"bench")
    started = time.perf_counter()
    done = 0
    while done < n:
        now = int(time.time())
        count = min(batch, n - done)
        ledger.append_many(
            [
                r.new_tier_record(
                    task_id="FILLER",
                    tier=r.Tier.DETERMINISTIC,
                    config_hash=env,
                    input_hash=env,
                    evidence=(),
                    verdict=r.Verdict.FAIL,
                    verifier="bench filler",
                    verifier_version="0",
                    environment=env,
                    created=now,
                )
                for _ in range(count)
            ],
            signer,
        )
        done += count
        print("  filler %d/%d (%.0f s)" % (done, n, time.perf_counter() - started), file=sys.stderr, flush=True)
    return time.perf_counter() - started


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
        repo = _repo(work / "repo")
        ledger = Ledger.create(work / "ledger", signers["admin"], "admin")
        for name, role in (
            ("ci", r.Role.DETERMINISTIC),
            ("judge", r.Role.JUDGE),
            ("alice", r.Role.HUMAN),
            ("sealer", r.Role.SEAL),
        ):
            add_key(ledger, signers["admin"], name, [role], signers[name].public_key_blob)
        contract = demo_contract()
        run = run_deterministic(
            ledger, repo=repo, task_id="DEMO-1", contract_bytes=contract, source="c", signer=signers["ci"]
        )
        run_judge(
            ledger, task_id="DEMO-1", contract_bytes=contract, candidate=run.record.input_hash, signer=signers["judge"]
        )
        decide(
            ledger,
            task_id="DEMO-1",
            contract_bytes=contract,
            candidate=run.record.input_hash,
            signer=signers["alice"],
            approve=True,
            note="bench",
            repo=repo,
            confirm=lambda s: True,
        )
        _, sealed = seal_receipt(ledger, task_id="DEMO-1", signer=signers["sealer"], input_hash=run.record.input_hash)
        receipt_seq = sealed.seq
        ledger.checkpoint(signers["sealer"])
        small = work / "small.zip"
        export_bundle(ledger, sealed.body_hash, small)

        build_s = _filler(ledger, signers["ci"], args.entries)
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
