"""docs/team.md as written, as one test: its SQL and shell blocks, read from the Markdown,
run on a real PostgreSQL server by six machines (the admin's, CI's, the agent's, two
reviewers', an auditor's), each its own home, keys and git clone of one bare remote.
Then the auditor, with public keys only, checks that the mirror and the store agree."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from docs_as_written import Site, blocks, paragraphs, run_shell
from team_setup import Machine, team_contract, team_from_docs

from conftest import run_cli

CONTRACT = team_contract("T-1", "a.txt", "two", "print('1 passed')")


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


def test_docs_team_md_runs_as_written_and_an_auditor_verifies_a_mirror(
    team_site: tuple[Site, str], tmp_path: Path
) -> None:
    here, superuser = team_site
    files = {"a.txt": "one\n", ".ledger/contracts/T-1.toml": CONTRACT}
    team = team_from_docs(tmp_path, here, superuser, files)
    tracked = set(team.lead.git("ls-files", ".ledger").split())
    assert tracked == {
        ".ledger/.gitignore",
        ".ledger/allowed_signers",
        ".ledger/auditing-witnesses",
        ".ledger/config.toml",
        ".ledger/contracts/T-1.toml",
    }
    committed = tomllib.loads(team.lead.git("show", "origin/main:.ledger/config.toml"))
    assert committed == {"store": team.url("writer")}  # init wrote the writer's address, never the owner's

    # docs/agents.md's set-up, as written, on another agent's machine of the team: its key is
    # made there without an admin key (the admin adds the .pub), its hooks installed.
    (setup,) = blocks("agents.md", "Set-up", "sh")
    newcomer = Machine(tmp_path, "agent2", team.remote)
    said = newcomer.runs(here.apply(setup.text))
    assert "not in the keyring yet" in said and (newcomer.keys / "agent").is_file()
    assert (newcomer.clone / ".claude" / "settings.json").is_file()

    # 4. The flow, paragraph by paragraph, on the machine each one names.
    (team.agent.clone / "a.txt").write_text("two\n")  # the agent's work
    (flow,) = blocks("team.md", "4.", "sh")
    auditor: Machine | None = None
    for where, paragraph in paragraphs(flow):
        script = here.apply(paragraph)
        if where.startswith("the agent's machine"):
            team.agent.runs(script)
        elif where.startswith("CI"):
            team.ci.git("pull", "-q", "origin", "main")  # CI runs on the pushed commit
            team.ci.runs(script)
        elif where.startswith("each reviewer's laptop"):
            for reviewer in (team.alice, team.bob):
                reviewer.runs(script, answer="y\n")  # approve asks before signing
        elif where.startswith("an auditor"):
            auditor = Machine(tmp_path, "auditor", team.remote)
            auditor.runs(script)
        else:
            pytest.fail("docs/team.md §4 has a paragraph for an unknown machine: %r" % where)
    assert auditor is not None
    # docs/ci.md's pre-push hook, in that fresh clone: no store, the witness proves completeness.
    (hook,) = blocks("ci.md", "A pre-push hook", "sh")
    (auditor.clone / ".git" / "hooks" / "pre-push").write_text(hook.text)
    (auditor.clone / ".git" / "hooks" / "pre-push").chmod(0o755)
    pushed = run_shell("git push -q origin HEAD:refs/heads/day-one", auditor.clone, auditor.env)
    assert pushed.returncode == 0 and "GATE PASS" in pushed.stdout + pushed.stderr, pushed.stdout + pushed.stderr

    # The agent's key signs claims only; the signed checks were CI's (docs/agents.md).
    refused = run_shell(here.apply("ledger check T-1 --key agent"), team.agent.clone, team.agent.env)
    assert refused.returncode == 2 and "has no deterministic role" in refused.stderr, refused.stderr
    (verified,) = json.loads(auditor.ledger("verify", "--commit", "HEAD", "--json"))
    receipt = verified["receipt"]
    assert verified["result"]["verified"] is True and verified["result"]["merge_eligible_derived"] is True, verified
    _auditor_checks(tmp_path, auditor, team.ci, team.url("writer"), receipt)

    # 6. The owner's repair command on a healthy store: nothing to move, guards installed.
    (repair,) = blocks("team.md", "6.", "sh")
    team.lead.runs(here.apply(repair.text))


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
