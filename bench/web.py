"""The web view on a large ledger.

1. A receipt's page, verified by proof on each request, at 1k and at 1M entries, and its
   ratio (issue 26). The two pages are rendered in one process, interleaved round by round,
   each figure the median of the rounds in CPU time; beside them, the raw primitive the page
   is built on (`verify_receipt` by proof) measured the same way.
2. The first requests after a restart (issue 45) at 1k, 100k and 1M entries: a new process
   opens the index kept beside the ledger (`cache/web-index.sqlite`), catches up and renders
   the task list, then a receipt's page; wall time from after the imports, the median of
   three restarts, as a ratio to the 1k ledger's. Beside it, the same with no index file
   (the index built from nothing, once), which is what every start cost before.
3. A receipt page whose evidence was pruned under the retention policy against one whose
   evidence is kept (a legal hold), on a 50,000-entry ledger, interleaved, CPU medians;
   then `ledger report` over that ledger against a copy whose checkpoint does not name the
   retention policy (as checkpoints signed before ADR 0039 do not).

  python bench/web.py build DIR     # ledgers of 1k, 50k, 100k and 1M entries (slow: 1M appends)
  python bench/web.py measure DIR   # the tables
  python bench/web.py pruned DIR    # the third table alone (builds its ledger if missing)

Nothing here is a test.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import demo_repo, filler, seal_demo_receipt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key, population, prune, set_retention
from ledger.web import INDEX_FILE, ChainIndex, Pages, web_index
from verify import LedgerSource, TrustRoot, verify_receipt

SIZES = (1_000, 1_000_000)
RESTART = (1_000, 100_000, 1_000_000)
PRUNED = 50_000


def _ledger(work: Path, size: int) -> tuple[Ledger, dict[str, r.Ed25519Signer]]:
    """A ledger of ``size - 8`` filler entries (a receipt's 8 come next), its keys."""
    private = {n: Ed25519PrivateKey.generate() for n in ("admin", "ci", "judge", "alice", "sealer")}
    keys = {n: r.Ed25519Signer(k) for n, k in private.items()}
    work.mkdir(parents=True, exist_ok=True)
    (work / "sealer.key").write_bytes(private["sealer"].private_bytes_raw())  # to re-sign a checkpoint (report table)
    ledger = Ledger.create(work / "ledger", keys["admin"], "admin")
    roles = {"ci": r.Role.DETERMINISTIC, "judge": r.Role.JUDGE, "alice": r.Role.HUMAN, "sealer": r.Role.SEAL}
    for name, role in roles.items():
        add_key(ledger, keys["admin"], name, [role], keys[name].public_key_blob)
    filler(ledger, keys["ci"], size - 8 - ledger.reader.count())
    (work / "trust").write_text(r.fingerprint(keys["admin"].public_key_blob))
    return ledger, keys


def build(out: Path) -> None:
    for size in sorted(set(SIZES) | set(RESTART)):
        work = out / str(size)
        if (work / "receipt").exists():
            continue
        ledger, keys = _ledger(work, size)
        sealed = seal_demo_receipt(ledger, keys, demo_repo(work / "repo"))
        ledger.checkpoint(keys["sealer"])
        ledger.close()
        (work / "receipt").write_text(str(sealed.body_hash))
        print("built %d entries" % size, file=sys.stderr, flush=True)
    build_pruned(out)


def build_pruned(out: Path) -> None:
    """The third table's ledger: two receipts among 50,000 entries, the first one's raw
    outputs pruned, the second under a legal hold, a checkpoint over the policy."""
    work = out / "pruned"
    if not (work / "kept").exists():
        ledger, keys = _ledger(work, PRUNED - 9)
        repo = demo_repo(work / "repo")
        pruned = seal_demo_receipt(ledger, keys, repo, "DEMO-1")
        kept = seal_demo_receipt(ledger, keys, repo, "DEMO-2")
        set_retention(ledger, keys["admin"], 1, holds=["DEMO-2"])  # DEMO-2 is under a legal hold
        report = prune(ledger, now=int(time.time()) + 3600)
        ledger.checkpoint(keys["sealer"])
        ledger.close()
        assert report.removed and all(task == "DEMO-1" for task, _, _ in report.removed), report
        (work / "pruned").write_text(str(pruned.body_hash))
        (work / "kept").write_text(str(kept.body_hash))
        print("built the pruned ledger: %d blobs removed" % len(report.removed), file=sys.stderr, flush=True)


def first_requests(root: Path, receipt: str, trust_id: str) -> dict[str, float]:
    """What a restarted `ledger serve` does for its first two visitors: open the index beside
    the ledger, catch up, render the task list; catch up, render a receipt's page."""
    trust = TrustRoot(frozenset({trust_id}), "bench")
    started = time.perf_counter()
    index, why = web_index(root)
    assert why is None, why
    view = Pages(index, lambda: LedgerSource.open(root), trust)
    with LedgerSource.open(root) as source:
        index.update(source)
    assert view.tasks().status == 200
    tasks = time.perf_counter()
    with LedgerSource.open(root) as source:
        index.update(source)
    page = view.receipt(receipt)
    assert page.status == 200 and b"MERGE-ELIGIBLE (verified)" in page.body
    done = time.perf_counter()
    index.close()
    return {"tasks_s": tasks - started, "receipt_s": done - tasks, "both_s": done - started}


def _restarted(d: Path) -> dict[str, float]:
    args = [
        sys.executable,
        __file__,
        "first",
        str(d / "ledger"),
        (d / "receipt").read_text(),
        (d / "trust").read_text(),
    ]
    return dict(json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout))


def measure_restart(out: Path) -> None:
    cold: dict[int, float] = {}
    warm: dict[int, list[float]] = {}
    for size in RESTART:
        d = out / str(size)
        for path in (d / "ledger" / INDEX_FILE).parent.glob("web-index.sqlite*"):
            path.unlink()
        cold[size] = _restarted(d)["both_s"]  # the index built from nothing
    for _ in range(3):  # restarts, interleaved across sizes
        for size in RESTART:
            warm.setdefault(size, []).append(_restarted(out / str(size))["both_s"])
    base = statistics.median(warm[RESTART[0]])
    print("| entries | first two requests, index kept (s) | ratio to 1k | index built from nothing (s) |")
    print("|---|---|---|---|")
    for size in RESTART:
        med = statistics.median(warm[size])
        print("| %d | %.3f | %.2f | %.1f |" % (size, med, med / base, cold[size]))


def measure_pruned(out: Path, rounds: int = 15, per_round: int = 5) -> None:
    d = out / "pruned"
    root = d / "ledger"
    trust = TrustRoot(frozenset({(d / "trust").read_text()}), "bench")
    index = ChainIndex()
    with LedgerSource.open(root) as source:
        index.update(source)
    view = Pages(index, lambda: LedgerSource.open(root), trust)
    pages = {what: (d / what).read_text() for what in ("kept", "pruned")}
    for what, receipt in pages.items():
        body = view.receipt(receipt).body
        assert b"(verified)" in body and (what == "kept" or b"retention" in body), what
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for what, receipt in pages.items():
            times.setdefault(what, []).append(_cpu(lambda receipt=receipt: view.receipt(receipt), per_round))  # type: ignore[misc]
    kept, gone = statistics.median(times["kept"]), statistics.median(times["pruned"])
    print("| receipt page, %d entries | kept evidence | pruned evidence | pruned / kept |" % PRUNED)
    print("|---|---|---|---|")
    print("| CPU per page | %.2f ms | %.2f ms | %.2f |" % (kept * 1000, gone * 1000, gone / kept))


def _without_retention_line(d: Path) -> Path:
    """A copy of the pruned ledger whose checkpoint is signed again without its retention
    line, as every checkpoint signed before ADR 0039 is: the verifier must walk to excuse."""
    copy = d / "ledger-without-line"
    if not copy.exists():
        shutil.copytree(d / "ledger", copy, ignore=shutil.ignore_patterns("cache"))
        sealer = r.Ed25519Signer(Ed25519PrivateKey.from_private_bytes((d / "sealer.key").read_bytes()))
        conn = sqlite3.connect(copy / "ledger.db")
        with conn:
            size, stored = conn.execute("SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1").fetchone()
            cp = r.parse_checkpoint(r.parse_note(stored).text)
            text = r.checkpoint_text(r.Checkpoint(cp.origin, cp.size, cp.root))
            note = r.SignedNote(text, (r.sign_note(text, cp.origin, sealer),))
            conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note.encode(), size))
        conn.close()
    return copy


def measure_report(out: Path, rounds: int = 5) -> None:
    """`ledger report --from --to` (the library call it makes) over the pruned ledger, whose
    checkpoint names its retention policy, against the same ledger with a checkpoint that
    does not (what it cost before ADR 0039); interleaved, CPU medians."""
    d = out / "pruned"
    trust = TrustRoot(frozenset({(d / "trust").read_text()}), "bench")
    roots = {"named": d / "ledger", "not named": _without_retention_line(d)}
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for what, root in roots.items():
            ledger = Ledger.open(root)
            try:
                started = time.process_time()
                rows = population(ledger, trust, 0, 1 << 40)
                times.setdefault(what, []).append(time.process_time() - started)
            finally:
                ledger.close()
            assert len(rows) == 2 and all(row.verified for row in rows), rows
    named, before = statistics.median(times["named"]), statistics.median(times["not named"])
    print("| `ledger report`, %d entries, one receipt pruned | policy named by the checkpoint |" % PRUNED, end="")
    print(" checkpoint without the line | ratio |")
    print("|---|---|---|---|")
    print("| CPU per report | %.3f s | %.3f s | %.1f |" % (named, before, before / named))


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
        assert page.status == 200 and b"MERGE-ELIGIBLE (verified)" in page.body, size
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
    if len(sys.argv) == 5 and sys.argv[1] == "first":
        print(json.dumps(first_requests(Path(sys.argv[2]), sys.argv[3], sys.argv[4])))
    elif len(sys.argv) == 3 and sys.argv[1] == "build":
        build(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "pruned":
        build_pruned(Path(sys.argv[2]))
        measure_pruned(Path(sys.argv[2]))
        print()
        measure_report(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "measure":
        measure(Path(sys.argv[2]))
        print()
        measure_restart(Path(sys.argv[2]))
        print()
        measure_pruned(Path(sys.argv[2]))
        print()
        measure_report(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
