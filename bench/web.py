"""The web view on a large ledger (issue 26): a receipt's page, verified by proof on each
request, at 1k and at 1M entries, and its ratio. The two pages are rendered in one process,
interleaved round by round, each figure the median of the rounds in CPU time; beside them,
the raw primitive the page is built on (`verify_receipt` by proof) measured the same way.

  python bench/web.py build DIR     # two ledgers of 1k and 1M entries (slow: 1M appends)
  python bench/web.py measure DIR   # the table

Nothing here is a test.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import demo_repo, filler, seal_demo_receipt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key
from ledger.web import ChainIndex, Pages
from verify import LedgerSource, TrustRoot, verify_receipt

SIZES = (1_000, 1_000_000)


def build(out: Path) -> None:
    for size in SIZES:
        keys = {n: r.Ed25519Signer(Ed25519PrivateKey.generate()) for n in ("admin", "ci", "judge", "alice", "sealer")}
        work = out / str(size)
        ledger = Ledger.create(work / "ledger", keys["admin"], "admin")
        roles = {"ci": r.Role.DETERMINISTIC, "judge": r.Role.JUDGE, "alice": r.Role.HUMAN, "sealer": r.Role.SEAL}
        for name, role in roles.items():
            add_key(ledger, keys["admin"], name, [role], keys[name].public_key_blob)
        filler(ledger, keys["ci"], size - 8 - ledger.reader.count())
        sealed = seal_demo_receipt(ledger, keys, demo_repo(work / "repo"))
        ledger.checkpoint(keys["sealer"])
        ledger.close()
        (work / "receipt").write_text(str(sealed.body_hash))
        (work / "trust").write_text(r.fingerprint(keys["admin"].public_key_blob))
        print("built %d entries" % size, file=sys.stderr, flush=True)


def _cpu(fn: Callable[[], object], n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) / n


def measure(out: Path, rounds: int = 15, per_round: int = 10) -> None:
    pages: dict[int, Callable[[], object]] = {}
    raw: dict[int, Callable[[], object]] = {}
    for size in SIZES:
        d = out / str(size)
        root, receipt = d / "ledger", (d / "receipt").read_text()
        trust = TrustRoot(frozenset({(d / "trust").read_text()}), "bench")
        index = ChainIndex()
        with LedgerSource.open(root) as source:
            index.update(source)
        view = Pages(index, lambda root=root: LedgerSource.open(root), trust)  # type: ignore[misc]
        page = view.receipt(receipt)
        assert page.status == 200 and b"VERIFIED" in page.body, size
        pages[size] = lambda view=view, receipt=receipt: view.receipt(receipt)  # type: ignore[misc]

        def proof(root: Path = root, receipt: str = receipt, trust: TrustRoot = trust) -> None:
            with LedgerSource.open(root) as source:
                assert verify_receipt(source, receipt, trust, method="proof").ok

        raw[size] = proof
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):  # interleaved: a drift in the machine hits both sizes alike
        for size in SIZES:
            times.setdefault(("page", size), []).append(_cpu(pages[size], per_round))
            times.setdefault(("proof", size), []).append(_cpu(raw[size], per_round))
    med = {key: statistics.median(v) for key, v in times.items()}
    small, large = SIZES
    print("| figure | 1k entries | 1M entries | 1M / 1k |")
    print("|---|---|---|---|")
    for what in ("page", "proof"):
        a, b = med[(what, small)], med[(what, large)]
        label = "receipt page (verified by proof)" if what == "page" else "verify_receipt by proof (the primitive)"
        print("| %s | %.2f ms | %.2f ms | %.2f |" % (label, a * 1000, b * 1000, b / a))
    print(
        "| page / primitive | %.2f | %.2f | |"
        % (med[("page", small)] / med[("proof", small)], med[("page", large)] / med[("proof", large)])
    )


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "measure"):
        raise SystemExit(__doc__)
    (build if sys.argv[1] == "build" else measure)(Path(sys.argv[2]))
