"""Which store a command uses, and that no password is kept or printed (no server needed)."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_without_the_driver_the_local_ledger_works_and_a_shared_store_says_what_to_install(tmp_path: Path) -> None:
    # psycopg made unimportable, as on a base install without the `postgres` extra.
    blocked = "import sys; sys.modules['psycopg'] = None; sys.argv[0] = 'ledger'; from ledger.cli import main; main()"
    env = dict(os.environ, RECEIPT_LEDGER_KEYS=str(tmp_path / "keys"))
    local = [sys.executable, "-c", blocked, "--dir", str(tmp_path / "work" / "ledger")]
    init = subprocess.run([*local, "init"], capture_output=True, text=True, env=env)
    assert init.returncode == 0, init.stderr
    admin = init.stdout.split()[-1]  # "admin key admin SHA256:..."
    for args in (["log"], ["verify", "--chain", "--trust", admin]):
        res = subprocess.run([*local, *args], capture_output=True, text=True, env=env)
        assert res.returncode == 0, (args, res.stderr)
    res = subprocess.run(
        [sys.executable, "-c", blocked, "--store", "postgresql://127.0.0.1/x", "log"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 2 and "receipt-ledger[postgres]" in res.stderr and res.stderr.count("\n") == 1


def test_init_refuses_a_password_in_the_store_url_and_says_where_it_goes(tmp_path: Path) -> None:
    # init writes the store into config.toml for the team: the password would be dropped
    # there (and the next command fail to connect) or committed. Nothing is written.
    res = run_cli("--dir", str(tmp_path / ".ledger"), "init", "--store", "postgresql://team:s3cret@127.0.0.1:1/x")
    assert res.returncode == 2 and "PGPASSWORD" in res.stderr and "s3cret" not in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and not (tmp_path / ".ledger").exists()


def test_init_outside_a_git_repository_says_what_that_means(tmp_path: Path) -> None:
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    res = run_cli("--dir", str(tmp_path / "plain" / ".ledger"), "init", env=keys)
    assert res.returncode == 0 and "not inside a git repository" in res.stderr, res.stderr
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    res = run_cli("--dir", str(repo / ".ledger"), "init", "--admin", "other", env=keys)
    assert res.returncode == 0 and "not inside a git repository" not in res.stderr, res.stderr


def test_init_on_a_shared_store_never_commits_the_role_it_connected_as(tmp_path: Path, pg_url: str) -> None:
    # init connects as the owner; config.toml is for every clone: it names the store without
    # that role (each clone's PGUSER), or the address --team-store gives.
    import tomllib
    from urllib.parse import urlsplit

    keys = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")}
    assert urlsplit(pg_url).username, pg_url
    res = run_cli("--dir", str(tmp_path / "a" / ".ledger"), "init", "--store", pg_url, env=keys)
    assert res.returncode == 0, res.stderr
    written = tomllib.loads((tmp_path / "a" / ".ledger" / "config.toml").read_text())["store"]
    assert urlsplit(written).username is None and urlsplit(written).hostname == urlsplit(pg_url).hostname
    assert "without the role you connected as" in res.stderr and "--team-store" in res.stderr
    team = pg_url.replace("%s@" % urlsplit(pg_url).username, "someone_else@", 1)
    again = run_cli("--dir", str(tmp_path / "b" / ".ledger"), "init", "--store", pg_url, "--team-store", team, env=keys)
    assert again.returncode == 2 and "already" in again.stderr  # one store holds one ledger
    res = run_cli("--dir", str(tmp_path / "c" / ".ledger"), "init", "--team-store", team, env=keys)
    assert res.returncode == 2 and "goes with --store" in res.stderr and not (tmp_path / "c").exists(), res.stderr
