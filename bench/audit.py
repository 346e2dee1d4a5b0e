"""Full-chain audit (ledger verify --chain) of N entries against raw Ed25519 verification
across all cores, measured in the same run (issue 7)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import fresh_ledger, record, timed  # noqa: E402

import receipts as r  # noqa: E402
from verify import LedgerSource, verify_chain  # noqa: E402


def _raw(chunk: list[tuple[bytes, bytes, bytes]]) -> int:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    for pk, sig, msg in chunk:
        Ed25519PublicKey.from_public_bytes(pk).verify(sig, msg)
    return len(chunk)


def main(n: int = 100_000) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="rl-audit-"))
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

    audit_s = timed(audit)
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

    raw_s = timed(raw)
    return {
        "entries": result.entries,
        "cores": cores,
        "audit_seconds": round(audit_s, 2),
        "raw_verify_seconds": round(raw_s, 2),
        "audit_entries_per_s": round(result.entries / audit_s),
        "ratio": round(raw_s / audit_s, 3),
        "target": 0.8,
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000), indent=2))
