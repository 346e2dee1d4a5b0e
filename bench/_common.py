"""Shared helpers for the benchmarks: a fresh ledger with keys, and a timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key

ROLES = {"ci": r.Role.DETERMINISTIC, "alice": r.Role.HUMAN, "sealer": r.Role.SEAL}


def fresh_ledger(root: Path) -> tuple[Ledger, dict[str, r.Ed25519Signer]]:
    signers = {n: r.Ed25519Signer(Ed25519PrivateKey.generate()) for n in ("admin", *ROLES)}
    ledger = Ledger.create(root, signers["admin"], "admin")
    for name, role in ROLES.items():
        add_key(ledger, signers["admin"], name, [role], signers[name].public_key_blob)
    return ledger, signers


def record(i: int) -> r.TierRecord:
    env = r.domain_hash(r.Domain.ENVIRONMENT, b"bench")
    return r.new_tier_record(
        task_id="BENCH-%d" % (i % 50),
        tier=r.Tier.HUMAN,
        config_hash=env,
        input_hash=r.candidate_hash({"commit": "%040d" % i}),
        evidence=(),
        verdict=r.Verdict.PASS,
        verifier="bench",
        verifier_version="0",
        environment=env,
        created=1764633600,
    )


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started
