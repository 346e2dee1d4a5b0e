#!/usr/bin/env bash
# The long versions of the reliability suites (issue 7): 200 SIGKILL trials, 10,000 byte
# flips, 4 writers x 500 records. The test suite runs short versions of the same tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export RECEIPT_LEDGER_CRASH_TRIALS=200 RECEIPT_LEDGER_SWEEP=10000 RECEIPT_LEDGER_CONCURRENCY=500
exec python -m pytest -q tests/test_reliability.py tests/test_sweep.py "tests/test_cli.py::test_concurrent_writers_produce_one_linear_chain" "$@"
