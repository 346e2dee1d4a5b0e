"""A team's machines and the set-up of docs/team.md (§1 to §3), run as written: the
server's roles, the shared ledger, the keys. `tests/test_team.py` continues with the
docs' flow; `tests/test_team_day.py` with a day of pull requests through the action."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from docs_as_written import Site, blocks, run_shell

from conftest import GIT_ENV, judge_table, run_cli


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


def psql(url: str, sql: str) -> None:
    """``sql`` through `psql`, statement by statement, stopping at the first error."""
    done = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url], input=sql, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def seed(tmp: Path, files: dict[str, str]) -> Path:
    """The team's repository before receipt-ledger (a bare remote whose main holds
    ``files``: the code and the tasks' contracts); returns the remote."""
    remote = tmp / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    seeded = tmp / "seed"
    subprocess.run(["git", "clone", "-q", str(remote), str(seeded)], check=True, capture_output=True)
    for name, text in files.items():
        (seeded / name).parent.mkdir(parents=True, exist_ok=True)
        (seeded / name).write_text(text)
    env = {**os.environ, **GIT_ENV}
    for args in (("add", "-A"), ("commit", "-qm", "the code and its contracts"), ("push", "-q", "origin", "HEAD:main")):
        subprocess.run(["git", *args], cwd=seeded, env=env, check=True, capture_output=True)
    return remote


@dataclass
class Team:
    """The machines after docs/team.md §1 to §3, and the store's addresses by role."""

    site: Site
    remote: Path
    lead: Machine
    ci: Machine
    agent: Machine
    alice: Machine
    bob: Machine

    def url(self, role: str) -> str:
        return "postgresql://%s@%s/%s" % (self.site.role(role), self.site.host, self.site.database)


def team_from_docs(tmp: Path, here: Site, superuser: str, files: dict[str, str], witness: bool = True) -> Team:
    """Run docs/team.md §1 to §3 as written: the server's roles (as its superuser), the
    admin's `init` and commit, the owner's GRANTs, the agent's key made on its machine and
    each teammate's SSH key handed to the admin, the admin's `keys` commands, and (unless
    ``witness`` is False: the action's day does not cosign) the day-one auditing witness;
    CI's private keys then move to CI."""
    remote = seed(tmp, files)
    server, grants = blocks("team.md", "1.", "sql")
    psql(superuser, here.apply(server.text))
    lead = Machine(tmp, "lead", remote)
    (create,) = blocks("team.md", "2.", "sh")
    lead.runs(here.apply(create.text))
    team = Team(here, remote, lead, *(Machine(tmp, name, remote) for name in ("ci", "agent", "alice", "bob")))
    psql(team.url("owner"), here.apply(grants.text))
    agent_key, keys, witness_block = blocks("team.md", "3.", "sh")
    said = team.agent.runs(here.apply(agent_key.text))  # no admin key there: the pair only
    assert "not in the keyring yet" in said, said
    (lead.home / "agent.pub").write_bytes((team.agent.keys / "agent.pub").read_bytes())
    for machine in (team.alice, team.bob):
        (lead.home / (machine.name + ".pub")).write_bytes(machine.ssh_key("id_ed25519").read_bytes())
    lead.runs(here.apply(keys.text))
    if witness:
        lead.runs(here.apply(witness_block.text))  # the day-one auditing witness, pinned on main
    team.ci.keys.mkdir(parents=True)
    for name in ("ci", "witness") if witness else ("ci",):
        for half in (name, name + ".pub"):
            (team.ci.keys / half).write_bytes((lead.keys / half).read_bytes())
            (lead.keys / half).unlink()
        (team.ci.keys / name).chmod(0o600)
    for machine in (team.ci, team.agent, team.alice, team.bob):
        machine.git("pull", "-q", "origin", "main")
    return team


def team_contract(task: str, path: str, literal: str, tests: str) -> str:
    """A contract the team's tests commit: two approvals, a file check and a test command
    (``tests``, Python source run by this interpreter)."""
    return """version = 1
task = "%s"
goal = "%s says %s"
owned_files = ["%s"]

[policy]
required_tiers = ["deterministic", "judge", "human"]
human_approvals = 2

%s
[[checks]]
id = "says-%s"
type = "file_contains"
path = "%s"
literal = "%s"

[[checks]]
id = "tests"
type = "test_passes"
command = [%s, "-c", %s]
""" % (
        task,
        path,
        literal,
        path,
        judge_table("accept", "0.9"),
        literal,
        path,
        literal,
        json.dumps(sys.executable),
        json.dumps(tests),
    )
