"""Full-chain audit (ledger verify --chain) of N entries against raw Ed25519 verification
across all cores, measured in the same run (issue 7): the two interleaved and repeated,
and the audit's peak memory taken in a fresh process."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import PEAK_KIB, fresh_ledger, record, scratch, timed

import receipts as r
from verify import LedgerSource, verify_chain


def _raw(chunk: list[tuple[bytes, bytes, bytes]]) -> int:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    for pk, sig, msg in chunk:
        Ed25519PublicKey.from_public_bytes(pk).verify(sig, msg)
    return len(chunk)


def main(n: int = 100_000, repeat: int = 3) -> dict[str, object]:
    with scratch("rl-audit-") as work:
        return _measured(work, n, repeat)


def _measured(work: Path, n: int, repeat: int) -> dict[str, object]:
    ledger, signers = fresh_ledger(work / "ledger")
    for start in range(0, n, 5000):
        ledger.append_many([record(i) for i in range(start, min(n, start + 5000))], signers["alice"])
    trust = ledger.genesis_trust()  # the bench's own ledger: its genesis admin is the pin
    ledger.close()
    cores = os.cpu_count() or 1
    source = LedgerSource.open(work / "ledger")
    result = None

    def audit() -> None:
        nonlocal result
        # The records carry no evidence: the audit's cost is the walk and the signatures, as before.
        result = verify_chain(source, trust, workers=cores)

    audit()  # warm the page cache and count the entries
    assert result is not None and result.ok, result
    # Raw floor: the same number of Ed25519 verifications of entry-sized messages, on every core.
    pk = r.parse_public_key_blob(signers["alice"].public_key_blob)
    msg = b"x" * 300
    sig = signers["alice"].sign_raw(msg)
    items = [(pk, sig, msg)] * result.entries
    chunks = [items[i : i + 2000] for i in range(0, len(items), 2000)]

    def raw() -> None:
        with ProcessPoolExecutor(cores) as pool:
            sum(pool.map(_raw, chunks))

    # Interleaved and repeated: each audit is compared with the floor measured beside it.
    runs = []
    for _ in range(repeat):
        audit_s, raw_s = timed(audit), timed(raw)
        runs.append((audit_s, raw_s))
    ratios = sorted(raw_s / audit_s for audit_s, raw_s in runs)
    audit_s = statistics.median(a for a, _ in runs)
    return {
        "entries": result.entries,
        "cores": cores,
        "repeats": repeat,
        "audit_seconds": round(audit_s, 2),
        "raw_verify_seconds": round(statistics.median(b for _, b in runs), 2),
        "audit_entries_per_s": round(result.entries / audit_s),
        "ratio": round(statistics.median(ratios), 3),
        "ratios": [round(x, 3) for x in ratios],
        "target": 0.8,
        "audit_peak_rss_mb": _peak_rss_mb(work / "ledger", cores),
        "per_entry_us": _breakdown(source, trust, statistics.median(b for _, b in runs) * cores / result.entries),
    }


def _breakdown(source: LedgerSource, trust: Any, raw_per_signature: float, sample: int = 20_000) -> dict[str, float]:
    """Where an audit's CPU goes, per entry: everything in one process (the walk and the
    SSHSIG checks), the SSHSIG checks alone (on a sample of the ledger's own entries), and
    a raw Ed25519 verification (the floor's, per signature on one core). With every core
    busy and no hand-off cost, the ratio could at best reach raw / everything."""
    ring: dict[str, bytes] = {}
    checks = []
    for stored in source.entries_between(0, sample):
        entry = r.decode_entry(stored.entry)
        body = r.decode_body(entry.kind, stored.body)
        if isinstance(body, r.Genesis):
            ring.update((k.key_id, k.public_key) for k in body.keys)
        elif isinstance(body, r.KeyAdd):
            ring[body.key.key_id] = body.key.public_key
        role = r.required_role(entry.kind, body)
        checks.append((ring[entry.signer], r.namespace_for(role), r.entry_signed_bytes(entry), entry.signature))
    entries = source.count()
    everything = timed(lambda: verify_chain(source, trust, workers=1, evidence=False)) / entries

    def verify_each() -> None:
        for c in checks:
            r.sshsig_verify(*c)

    sshsig = timed(verify_each) / len(checks)
    return {
        "everything": round(everything * 1e6, 1),
        "walk_without_signatures": round((everything - sshsig) * 1e6, 1),
        "sshsig_check": round(sshsig * 1e6, 1),
        "raw_ed25519": round(raw_per_signature * 1e6, 1),
        "ceiling_ratio": round(raw_per_signature / everything, 3),
    }


def _peak_rss_mb(root: Path, cores: int) -> float:
    """The audit's peak memory, in a fresh process (this one's peak was set by building
    the ledger)."""
    code = (
        "import sys; from pathlib import Path; from verify import LedgerSource, TrustRoot, verify_chain;"
        "from receipts import decode_entry; s = LedgerSource.open(Path(sys.argv[1]));"
        "g = decode_entry(s.by_seq(0).entry).signer;"
        "res = verify_chain(s, TrustRoot(frozenset({g}), 'bench'), workers=%d); assert res.ok;"
        "print(%s)" % (cores, PEAK_KIB)
    )
    out = subprocess.run([sys.executable, "-c", code, str(root)], check=True, capture_output=True, text=True)
    return round(int(out.stdout.strip()) / 1024, 1)


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000), indent=2))
