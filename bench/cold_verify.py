"""`ledger verify HASH` as a cold command: a fresh process, 3 tiers, 20 evidence blobs
(issue 7). Target: under 300 ms. Reports the share spent importing."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The demo's contract with its test check run this many times: each extra run stores its own result,
# stdout and stderr, so the receipt's three tiers reference 20 distinct blobs (counted below, not assumed).
TEST_RUNS = 4


def main(runs: int = 9) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="rl-cold-"))
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from ledger import run_demo; "
            "sys.exit(run_demo(Path(sys.argv[1]), test_runs=%d))" % TEST_RUNS,
            str(work / "demo"),
        ],
        check=True,
        capture_output=True,
    )
    repo = work / "demo" / "repo"
    receipt = [
        row["hash"]
        for row in json.loads(
            subprocess.run(
                [sys.executable, "-m", "ledger", "log", "--json"], cwd=repo, check=True, capture_output=True, text=True
            ).stdout
        )
        if row["kind"] == "receipt"
    ][0]
    blobs = len([p for p in (repo / ".ledger" / "blobs").rglob("*") if p.is_file()])
    cmd = [sys.executable, "-m", "ledger", "verify", receipt]
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd[1:]], cwd=repo, capture_output=True, text=True
    ).stderr
    rows = [
        line.split("|") for line in imports.splitlines() if line.startswith("import time:") and line.count("|") == 2
    ]
    # top-level imports are the ones whose name is not indented; their cumulative times add up
    import_us = sum(int(cols[1]) for cols in rows if cols[1].strip().isdigit() and not cols[2].startswith("  "))
    base = [time.perf_counter()]
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    python_s = time.perf_counter() - base[0]
    wall = statistics.median(walls)
    return {
        "evidence_blobs": blobs,
        "median_wall_ms": round(wall * 1000, 1),
        "import_ms": round(import_us / 1000, 1),
        "import_share": round(import_us / 1e6 / wall, 3),
        "bare_python_ms": round(python_s * 1000, 1),
        "target_ms": 300,
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
