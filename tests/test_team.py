"""docs/team.md as written, as one test: its SQL and shell blocks, read from the Markdown,
run on a real PostgreSQL server by six machines (the admin's, CI's, the agent's, two
reviewers', an auditor's), each its own home, keys and git clone of one bare remote.
Then the auditor, with public keys only, checks that the mirror and the store agree."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_as_written import Site, blocks, paragraphs, run_shell

from conftest import GIT_ENV, judge_table, run_cli

CONTRACT = """version = 1
task = "T-1"
goal = "a.txt says two"
owned_files = ["a.txt"]

[policy]
required_tiers = ["deterministic", "judge", "human"]
human_approvals = 2

%s
[[checks]]
id = "says-two"
type = "file_contains"
path = "a.txt"
literal = "two"

[[checks]]
id = "tests"
type = "test_passes"
command = [%s, "-c", "print('1 passed')"]
""" % (judge_table("accept", "0.9"), json.dumps(sys.executable))


class Machine:
    """One teammate's machine: a home of its own (its keys under ~/.config, its SSH keys
    under ~/.ssh) and a clone of the team's repository, with the installed `ledger` on PATH."""

    def __init__(self, tmp: Path, name: str, remote: Path) -> None:
        self.name = name
        self.home = tmp / ("home-" + name)
        self.home.mkdir()
        path = "%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", ""))
        self.env = {**os.environ, **GIT_ENV, "HOME": str(self.home), "PATH": path}
        for private in ("RECEIPT_LEDGER_KEYS", "LEDGER_STORE", "LEDGER_DIR", "XDG_CONFIG_HOME"):
            self.env.pop(private, None)
        self.keys = self.home / ".config" / "receipt-ledger" / "keys"
        self.clone = self.home / "app"
        self.git("clone", "-q", str(remote), str(self.clone), cwd=self.home)

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=cwd or self.clone, env=self.env, check=True, capture_output=True, text=True
        )
        return done.stdout

    def ledger(self, *args: str, code: int = 0) -> str:
        res = run_cli(*args, cwd=self.clone, env=self.env)
        assert res.returncode == code, "%s: ledger %s\n%s%s" % (self.name, " ".join(args), res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        return res.stdout

    def runs(self, script: str, *, answer: str | None = None) -> str:
        """A block (or paragraph) of the docs, as written, in this machine's clone."""
        res = run_shell(script, self.clone, self.env, answer=answer)
        assert res.returncode == 0, "%s ran:\n%s\nexit %d\n%s%s" % (
            self.name,
            script,
            res.returncode,
            res.stdout,
            res.stderr,
        )
        assert "Traceback" not in res.stderr, res.stderr
        return res.stdout

    def ssh_key(self, file_name: str) -> Path:
        """The teammate's own SSH key at ~/.ssh/FILE_NAME, made with OpenSSH, as they already
        have one; returns the public half."""
        private = self.home / ".ssh" / file_name
        private.parent.mkdir(mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.name, "-f", str(private)], check=True)
        return private.with_suffix(".pub")


def _witness_cosigns(tmp: Path, url: str, log_key: str) -> str:
    """A witness outside the team cosigns the shared ledger's checkpoint; returns its
    ``NAME KEY`` line for auditors."""
    keys = tmp / "keys-witness"
    keys.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "w1")], check=True)
    res = run_cli(
        "--store",
        url,
        "witness",
        "cosign",
        str(tmp / "checkpoint"),
        "--key",
        str(keys / "w1"),
        "--name",
        "witness.example/w1",
        "--log-key",
        log_key,
        "--state",
        str(keys / "state.json"),
        cwd=tmp,
        env={"RECEIPT_LEDGER_KEYS": str(keys)},
    )
    assert res.returncode == 0, res.stderr
    (tmp / "cosigned").write_text(res.stdout)
    return "witness.example/w1 " + (keys / "w1.pub").read_text().strip()


@pytest.fixture
def site(pg_server: str) -> Iterator[tuple[Site, str]]:
    """The docs' database and roles on the test server, made by the docs' own SQL (run by
    the test's `psql` as the server's superuser), dropped afterwards; yields the site and
    the superuser's URL."""
    token = secrets.token_hex(4)
    here = Site(database="rl_team_" + token, role_prefix="rl_team_" + token)
    try:
        yield here, pg_server
    finally:
        import psycopg

        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % here.database)
            for role in ("owner", "writer", "auditor"):
                admin.execute("DROP ROLE IF EXISTS %s" % here.role(role))


def _psql(url: str, sql: str) -> None:
    done = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url], input=sql, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def _seed(tmp: Path) -> Path:
    """The team's repository before receipt-ledger: the code and the task's contract."""
    remote = tmp / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seed = tmp / "seed"
    subprocess.run(["git", "clone", "-q", str(remote), str(seed)], check=True, capture_output=True)
    (seed / "a.txt").write_text("one\n")
    (seed / ".ledger" / "contracts").mkdir(parents=True)
    (seed / ".ledger" / "contracts" / "T-1.toml").write_text(CONTRACT)
    env = dict(os.environ, **GIT_ENV)
    for args in (("add", "-A"), ("commit", "-qm", "T-1: the contract"), ("push", "-q", "origin", "HEAD:main")):
        subprocess.run(["git", *args], cwd=seed, env=env, check=True, capture_output=True)
    return remote


def test_docs_team_md_runs_as_written_and_an_auditor_verifies_a_mirror(site: tuple[Site, str], tmp_path: Path) -> None:
    here, superuser = site
    remote = _seed(tmp_path)
    owner_url = "postgresql://%s@%s/%s" % (here.role("owner"), here.host, here.database)
    writer_url = "postgresql://%s@%s/%s" % (here.role("writer"), here.host, here.database)

    # 1. The server and its roles; 2. the admin creates the shared ledger and commits it.
    server, grants = blocks("team.md", "1.", "sql")
    _psql(superuser, here.apply(server.text))
    lead = Machine(tmp_path, "lead", remote)
    (create,) = blocks("team.md", "2.", "sh")
    lead.runs(here.apply(create.text))
    _psql(owner_url, here.apply(grants.text))
    tracked = set(lead.git("ls-files", ".ledger").split())
    assert tracked == {
        ".ledger/.gitignore",
        ".ledger/allowed_signers",
        ".ledger/config.toml",
        ".ledger/contracts/T-1.toml",
    }
    assert lead.git("show", "origin/main:.ledger/config.toml").strip() == 'store = "%s"' % writer_url

    # 3. Each teammate has an SSH key and hands the admin its public half; the admin adds
    # them and makes CI's key, whose private half goes to CI (here: CI's own key folder).
    ci, agent, alice, bob = (Machine(tmp_path, name, remote) for name in ("ci", "agent", "alice", "bob"))
    for machine, file_name in ((agent, "agent"), (alice, "id_ed25519"), (bob, "id_ed25519")):
        (lead.home / (machine.name + ".pub")).write_bytes(machine.ssh_key(file_name).read_bytes())
    (keys,) = blocks("team.md", "3.", "sh")
    lead.runs(here.apply(keys.text))
    ci.keys.mkdir(parents=True)
    for half in ("ci", "ci.pub"):
        (ci.keys / half).write_bytes((lead.keys / half).read_bytes())
        (lead.keys / half).unlink()
    (ci.keys / "ci").chmod(0o600)

    # 4. The flow, paragraph by paragraph, on the machine each one names.
    (agent.clone / "a.txt").write_text("two\n")  # the agent's work
    (flow,) = blocks("team.md", "4.", "sh")
    auditor: Machine | None = None
    for where, paragraph in paragraphs(flow):
        script = here.apply(paragraph)
        if where.startswith("the agent's machine"):
            agent.runs(script)
        elif where.startswith("CI"):
            ci.git("pull", "-q", "origin", "main")  # CI runs on the pushed commit
            ci.runs(script)
        elif where.startswith("each reviewer's laptop"):
            for reviewer in (alice, bob):
                reviewer.runs(script, answer="y\n")  # approve asks before signing
        elif where.startswith("an auditor"):
            auditor = Machine(tmp_path, "auditor", remote)
            auditor.runs(script)
        else:
            pytest.fail("docs/team.md §4 has a paragraph for an unknown machine: %r" % where)
    assert auditor is not None

    # The agent's key signs claims only; the signed checks were CI's (docs/agents.md).
    refused = run_shell(here.apply("ledger check T-1 --key ~/.ssh/agent"), agent.clone, agent.env)
    assert refused.returncode == 2 and "has no deterministic role" in refused.stderr, refused.stderr
    (verified,) = json.loads(auditor.ledger("verify", "--commit", "HEAD", "--json"))
    receipt = verified["receipt"]
    assert verified["result"]["verified"] is True and verified["result"]["merge_eligible_derived"] is True, verified
    _auditor_checks(tmp_path, auditor, ci, writer_url, receipt)

    # 6. The owner's repair command on a healthy store: nothing to move, guards installed.
    (repair,) = blocks("team.md", "6.", "sh")
    lead.runs(here.apply(repair.text))


def _auditor_checks(tmp_path: Path, auditor: Machine, ci: Machine, store: str, receipt: str) -> None:
    """The mirror the docs' auditor pulled says what the store says, by proof and by walk,
    and a witness outside the team cosigns what the auditor then demands."""
    env = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "no-keys")}
    trust = ("--trust", ".ledger/allowed_signers", "--json")
    on_mirror = run_cli("--dir", "mirror", "verify", receipt, *trust, cwd=auditor.clone, env=env)
    on_store = run_cli("--store", store, "verify", receipt, *trust, cwd=auditor.clone, env=env)
    walked = run_cli("--store", store, "verify", receipt, *trust, "--method", "walk", cwd=auditor.clone, env=env)
    assert on_mirror.returncode == on_store.returncode == walked.returncode == 0, on_mirror.stdout + on_store.stderr
    assert json.loads(on_mirror.stdout) == json.loads(on_store.stdout)
    by_proof, by_walk = json.loads(on_store.stdout), json.loads(walked.stdout)
    assert (by_proof["method"], by_walk["method"]) == ("proof", "walk")
    same = ("tiers", "merge_eligible_derived", "checkpoint", "defects", "candidate", "sealed_at")
    assert {k: by_proof[k] for k in same} == {k: by_walk[k] for k in same}
    (tmp_path / "checkpoint").write_text(ci.ledger("checkpoint", "--show"))
    witness = _witness_cosigns(tmp_path, store, (ci.keys / "ci.pub").read_text().strip())
    ci.ledger("witness", "add", str(tmp_path / "cosigned"), "--witness", witness)
    auditor.ledger("pull", "--from", store, "--to", "mirror")
    witnessed = ("--witness", witness, "--witness-quorum", "1")
    res = run_cli("--dir", "mirror", "verify", receipt, *trust, *witnessed, cwd=auditor.clone, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not list((tmp_path / "no-keys").glob("*"))
