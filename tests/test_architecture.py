"""The boundaries the architecture promises: a pure core, an auditor that cannot write,
and strict typing on both."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_verify_never_imports_ledger() -> None:
    assert "ledger" not in _imports("verify")


def test_receipts_does_no_io() -> None:
    forbidden = {
        "sqlite3",
        "sqlite_utils",
        "os",
        "subprocess",
        "socket",
        "urllib",
        "http",
        "pathlib",
        "shutil",
        "tempfile",
        "ledger",
        "verify",
    }
    assert not (_imports("receipts") & forbidden)


def test_receipts_and_verify_are_mypy_strict_clean() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "receipts", "verify"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
