"""`ledger demo` shows the accepted and the rejected receipt, end to end."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    res = run_cli("demo", "--keep", str(tmp_path / "demo"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    out = res.stdout
    assert out.count("VERIFIED (") == 1 and "REJECTED" in out and "[body-hash]" in out
    assert "SCRIPTED EXAMPLE judge" in out and "APPROVE DEMO-1" in out
    assert (
        "status: VERIFYING (a claim awaits verification)" in out
        and "gate HEAD --audit-state gate-audit-state.json: PASS (completeness audited)" in out
    )
    assert "status: VERIFIED_COMPLETE" in out and "no double send" in out and "checkpoint size" in out
    assert (tmp_path / "demo" / "repo" / ".ledger" / "ledger.db").is_file()
