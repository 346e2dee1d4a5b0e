"""Shared helpers for the benchmarks: a fresh ledger with keys, and a timer."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Appended, Ledger, add_key, decide, demo_contract, run_deterministic, run_judge, seal_receipt

ROLES = {"ci": r.Role.DETERMINISTIC, "judge": r.Role.JUDGE, "alice": r.Role.HUMAN, "sealer": r.Role.SEAL}


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A directory for a benchmark's ledgers and evidence, removed when it is done, however
    it ends (an ingest run leaves gigabytes).
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        yield Path(path)


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


def demo_repo(path: Path) -> Path:
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


def filler(ledger: Ledger, signer: r.Ed25519Signer, n: int, batch: int = 20000) -> float:
    """Append n signed tier records for another task, in batches through the public API.
    Each names a candidate of its own, so that no two bodies are equal, as in a real ledger
    (identical bodies would let a verifier keep one object for thousands of entries)."""
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
                    input_hash=r.domain_hash(r.Domain.CANDIDATE, b"bench %d" % (done + i)),
                    evidence=(),
                    verdict=r.Verdict.FAIL,
                    verifier="bench filler",
                    verifier_version="0",
                    environment=env,
                    created=now,
                )
                for i in range(count)
            ],
            signer,
        )
        done += count
        print("  filler %d/%d (%.0f s)" % (done, n, time.perf_counter() - started), file=sys.stderr, flush=True)
    return time.perf_counter() - started


def seal_demo_receipt(
    ledger: Ledger, signers: dict[str, r.Ed25519Signer], repo: Path, task: str = "DEMO-1"
) -> Appended:
    """One real receipt of ``task`` (the demo's contract under that name): a deterministic
    run on ``repo``, the scripted judge, an approval. ``signers`` holds ci, judge, alice and
    sealer keys already in the keyring."""
    contract = demo_contract().replace(b'task = "DEMO-1"', b'task = "%s"' % task.encode())
    run = run_deterministic(ledger, repo=repo, task_id=task, contract_bytes=contract, source="c", signer=signers["ci"])
    run_judge(ledger, task_id=task, contract_bytes=contract, candidate=run.record.input_hash, signer=signers["judge"])
    decide(
        ledger,
        task_id=task,
        contract_bytes=contract,
        candidate=run.record.input_hash,
        signer=signers["alice"],
        approve=True,
        note="bench",
        repo=repo,
        confirm=lambda s: True,
    )
    _, sealed = seal_receipt(ledger, task_id=task, signer=signers["sealer"], input_hash=run.record.input_hash)
    return sealed


# A whole `ledger` process whose peak memory is its own: VmHWM of its address space, read
# at exit. (wait4's and getrusage's ru_maxrss also count the parent's pages that the forked
# child held before exec, so every small process looked as big as the bench.)
_PEAK = (
    "import atexit, runpy, sys\n"
    "out = sys.argv[1]\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            open(out, 'w').write(line.split()[1])\n"
    "atexit.register(peak)\n"
    "if sys.argv[2:] != ['--nothing']:\n"
    "    sys.argv = ['ledger'] + sys.argv[2:]\n"
    "    runpy.run_module('ledger', run_name='__main__', alter_sys=True)\n"
)


# The same figure as an expression, for code run in a fresh `python -c`: KiB.
PEAK_KIB = "int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))"


def peak_command(args: list[str], out: Path) -> list[str]:
    """``ledger ARGS`` (or, with ['--nothing'], a bare interpreter) writing its peak RSS in KiB to ``out``."""
    return [sys.executable, "-c", _PEAK, str(out), *args]
