"""Run every benchmark and print its figures: `python bench/run_all.py [--quick]`.

--quick uses small sizes (a smoke test of the scripts); the figures in
docs/performance.md come from a full run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import append
import audit
import catch
import cold_verify
import ingest

if __name__ == "__main__":
    quick = "--quick" in sys.argv
    results = {
        "append": append.main(500, 50) if quick else append.main(),
        "audit": audit.main(3000) if quick else audit.main(),
        "ingest": ingest.main(64) if quick else ingest.main(),
        "cold_verify": cold_verify.main(3) if quick else cold_verify.main(),
        "catch": catch.main(1) if quick else catch.main(),
    }
    print(json.dumps(results, indent=2))
    print("transparency on a million entries: python bench/transparency.py --entries 1000000", file=sys.stderr)
