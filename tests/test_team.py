"""The team flow of docs/team.md as one test: four machines (an agent, two reviewers, a
CI runner), each its own git clone and key directory, one shared ledger on a real
PostgreSQL server; then an auditor with only public keys pulls and verifies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    """One teammate's machine: a clone of the team's repository and a private key directory."""

    def __init__(self, tmp: Path, name: str, remote: Path) -> None:
        self.name = name
        self.keys = tmp / ("keys-" + name)
        self.keys.mkdir()
        self.env = dict(GIT_ENV, RECEIPT_LEDGER_KEYS=str(self.keys))
        self.clone = tmp / name
        self.git("clone", "-q", str(remote), str(self.clone), cwd=tmp)

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

    def ssh_key(self) -> tuple[Path, Path]:
        """The teammate's own SSH key, made with OpenSSH, as they already have one."""
        private = self.keys / self.name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.name, "-f", str(private)], check=True)
        return private, private.with_suffix(".pub")


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


def test_four_machines_share_one_ledger_and_an_auditor_verifies_a_mirror(pg_url: str, tmp_path: Path) -> None:
    remote = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)

    # The CI runner sets the shared ledger up, and commits its address and the contract.
    ci = Machine(tmp_path, "ci", remote)
    (ci.clone / "a.txt").write_text("one\n")
    (ci.clone / ".ledger" / "contracts").mkdir(parents=True)
    (ci.clone / ".ledger" / "contracts" / "T-1.toml").write_text(CONTRACT)
    ci.ledger("init", "--store", pg_url, "--admin", "lead")
    assert (ci.clone / ".ledger" / "config.toml").read_text().count(pg_url) == 1
    ci.ledger("keys", "generate", "ci", "--role", "deterministic", "--role", "judge", "--role", "seal")
    ci.ledger("contract", "set", "T-1", "--key", "ci")
    ci.git("add", "-A")
    ci.git("commit", "-qm", "T-1: contract and the shared ledger")
    ci.git("push", "-q", "origin", "HEAD:main")
    assert set(ci.git("ls-files", ".ledger").split()) == {
        ".ledger/.gitignore",
        ".ledger/allowed_signers",
        ".ledger/config.toml",
        ".ledger/contracts/T-1.toml",
    }

    # Three more machines, each with its own SSH key, which the admin adds by public key only.
    agent, alice, bob = (Machine(tmp_path, name, remote) for name in ("agent", "alice", "bob"))
    private = {}
    for machine, roles in ((agent, ("agent",)), (alice, ("human",)), (bob, ("human",))):
        private[machine.name], public = machine.ssh_key()
        ci.ledger("keys", "add", machine.name, str(public), *[x for role in roles for x in ("--role", role)])

    # The agent changes the code and claims; the signed checks run in CI, never with the
    # agent's key (docs/agents.md), so the agent's key has no deterministic role.
    (agent.clone / "a.txt").write_text("two\n")
    agent.git("commit", "-qam", "T-1: say two")
    agent.git("push", "-q", "origin", "HEAD:main")
    agent.ledger("claim", "T-1", "--key", str(private["agent"]))
    refused = run_cli("check", "T-1", "--key", str(private["agent"]), cwd=agent.clone, env=agent.env)
    assert refused.returncode == 2 and "has no deterministic role" in refused.stderr, refused.stderr
    ci.git("pull", "-q", "origin", "main")
    ci.ledger("check", "T-1", "--key", "ci")

    # Two reviewers approve from their laptops: each approval lands in the one shared chain.
    for reviewer in (alice, bob):
        reviewer.git("pull", "-q", "origin", "main")
        reviewer.ledger("approve", "T-1", "--key", str(private[reviewer.name]), "--yes", "--comment", "read it")

    # CI judges, seals, checkpoints, attaches and gates: it sees everyone's records.
    ci.git("pull", "-q", "origin", "main")
    ci.ledger("judge", "T-1", "--key", "ci")
    sealed = json.loads(ci.ledger("seal", "T-1", "--key", "ci", "--json"))
    receipt = sealed["receipt"]
    assert sealed["body"]["merge_eligible"] is True, sealed
    (tmp_path / "checkpoint").write_text(ci.ledger("checkpoint", "--key", "ci"))
    witness = _witness_cosigns(tmp_path, pg_url, (ci.keys / "ci.pub").read_text().strip())
    ci.ledger("witness", "add", str(tmp_path / "cosigned"), "--witness", witness)
    for command in (("consistency", "3"), ("stats",), ("log",), ("keys", "list"), ("contract", "show", "T-1")):
        ci.ledger(*command)
    allowed = tmp_path / "allowed_signers"
    ci.ledger("keys", "export-allowed-signers", "-o", str(allowed))
    ci.ledger("attach", receipt)
    # CI reaches the store, so the gate audits its chain to prove the task complete (the
    # store named on the command line: the checkout's config.toml is the candidate's).
    ci.ledger(
        "--store", pg_url, "gate", "--trust", str(allowed), "--require-checkpoint", "--audit-state", str(tmp_path / "a")
    )
    ci.ledger("prove", receipt)
    ci.ledger("export", receipt, "-o", str(tmp_path / "bundle.zip"))
    status = json.loads(ci.ledger("status", "T-1", "--json"))
    assert status, status
    ci.ledger("verify", "--bundle", str(tmp_path / "bundle.zip"), "--trust", str(allowed))

    # The auditor: an empty directory, the allowed_signers file, and read access.
    audit = tmp_path / "auditor"
    audit.mkdir()
    (audit / "allowed_signers").write_bytes(allowed.read_bytes())
    env = {"RECEIPT_LEDGER_KEYS": str(tmp_path / "no-keys")}
    res = run_cli("pull", "--from", pg_url, "--to", str(audit / "mirror"), cwd=audit, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("--dir", str(audit / "mirror"), "verify", "--chain", "--trust", "allowed_signers", cwd=audit, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    on_mirror = run_cli(
        "--dir", "mirror", "verify", receipt, "--trust", "allowed_signers", "--json", cwd=audit, env=env
    )
    on_store = run_cli("--store", pg_url, "verify", receipt, "--trust", "allowed_signers", "--json", cwd=audit, env=env)
    assert on_mirror.returncode == on_store.returncode == 0, on_mirror.stdout + on_store.stderr
    assert json.loads(on_mirror.stdout) == json.loads(on_store.stdout)
    # On the shared store too the checkpoint lets the receipt be checked by proof, with the
    # walk's findings.
    walked = run_cli(
        "--store",
        pg_url,
        "verify",
        receipt,
        "--trust",
        "allowed_signers",
        "--json",
        "--method",
        "walk",
        cwd=audit,
        env=env,
    )
    by_proof, by_walk = json.loads(on_store.stdout), json.loads(walked.stdout)
    assert walked.returncode == 0 and (by_proof["method"], by_walk["method"]) == ("proof", "walk")
    same = ("tiers", "merge_eligible_derived", "checkpoint", "defects", "candidate", "sealed_at")
    assert {k: by_proof[k] for k in same} == {k: by_walk[k] for k in same}
    witnessed = ("--witness", witness, "--witness-quorum", "1")
    res = run_cli("--dir", "mirror", "verify", receipt, "--trust", "allowed_signers", *witnessed, cwd=audit, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not (audit / ".ledger").exists() and not list((tmp_path / "no-keys").glob("*"))
