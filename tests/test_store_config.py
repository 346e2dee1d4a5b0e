"""Which store a command uses, and that no password is kept or printed (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from ledger import InputError, shared_store, write_store_config
from verify.postgres import redact_url


def test_the_explicit_store_wins_then_the_config_then_the_local_ledger(tmp_path: Path) -> None:
    assert shared_store(tmp_path, None) is None
    (tmp_path / "config.toml").write_text('store = "postgresql://team@db.example/ledger"\n[judge]\nmodel = "m"\n')
    assert shared_store(tmp_path, None) == "postgresql://team@db.example/ledger"
    assert shared_store(tmp_path, "postgresql://other/db") == "postgresql://other/db"
    with pytest.raises(InputError, match="postgresql://"):
        shared_store(tmp_path, "sqlite:///x.db")


def test_a_password_is_never_written_kept_or_printed(tmp_path: Path) -> None:
    assert write_store_config(tmp_path, "postgresql://team:s3cret@db.example:5432/ledger?sslmode=verify-full")
    text = (tmp_path / "config.toml").read_text()
    assert "s3cret" not in text and 'store = "postgresql://team@db.example:5432/ledger?sslmode=verify-full"' in text
    assert not write_store_config(tmp_path, "postgresql://x/y")  # the team's file is left alone
    (tmp_path / "config.toml").write_text('store = "postgresql://team:s3cret@db.example/ledger"\n')
    with pytest.raises(InputError, match="password"):
        shared_store(tmp_path, None)
    assert redact_url("postgresql://team:s3cret@db/x") == "postgresql://team:***@db/x"
    res = run_cli("--store", "postgresql://team:s3cret@127.0.0.1:1/x", "log")
    assert res.returncode == 2 and "s3cret" not in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_a_malformed_config_is_one_line_of_bad_input(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("store = [\n")
    res = run_cli("--dir", str(tmp_path), "log")
    assert res.returncode == 2 and "config.toml" in res.stderr and res.stderr.count("\n") == 1, res.stderr
