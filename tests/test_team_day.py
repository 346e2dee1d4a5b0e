"""A team's day, end to end, as GitHub and the agent run it (issue 24).

The team is set up by docs/team.md as written (§1 to §3: PostgreSQL roles, the shared
ledger, the keys) and its CI is the workflow of docs/ci.md, as written, run by
`tests/actions_runner.py` the way a hosted runner runs it: a shallow checkout, our
composite action's bash steps, real event payloads, the job summary and outputs, and a
GitHub REST API stand-in on 127.0.0.1 that keeps the pull requests' comments.

The day: the agent works on T-1 in Claude Code, whose installed Stop hook (run from
`.claude/settings.json` with Claude Code's payload) blocks until the failing test is
repaired; two pull requests run the ladder and block until both reviewers approve from
their own clones, when the submitted review reruns it; CI reruns a job; the merge queue
gates each queue commit (one PR behind main is refused until brought up to date and
reviewed again); one PR is squash-merged and one rebase-merged, and each push to main is
gated; a newcomer's fresh clone gates main; the auditor pulls a mirror, verifies the
chain, reads the population and exports a bundle that verifies."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from actions_runner import JobRun, Runner, run_job
from docs_as_written import Site, blocks
from github_api import FakeGithub, serve
from team_setup import Machine, Team, team_contract, team_from_docs

TEST_A = """import sys
said = open("a.txt").read().strip()
print("collected 1 item")
if said != "two":
    print("FAILED test_a.py::test_says_two - AssertionError: %r != 'two'" % said)
    sys.exit(1)
print("1 passed")
"""


FILES = {
    "a.txt": "one\n",
    "b.txt": "one\n",
    "test_a.py": TEST_A,
    ".ledger/contracts/T-1.toml": team_contract("T-1", "a.txt", "two", "exec(open('test_a.py').read())"),
    ".ledger/contracts/T-2.toml": team_contract("T-2", "b.txt", "three", "print('1 passed')"),
}


@dataclass
class PullRequest:
    number: int
    title: str
    branch: str
    head: str = ""


@dataclass
class Day:
    """The team, its GitHub (the remote and the API stand-in) and the docs' workflow."""

    tmp: Path
    team: Team
    github: FakeGithub
    workflow: str
    attesting: str  # the docs' second workflow: attestations in GitHub's store
    runs: int = 0

    @property
    def remote(self) -> str:
        return "file://%s" % self.team.remote

    def job(
        self, event_name: str, event: dict[str, Any], rerun: JobRun | None = None, *, attest: bool = False
    ) -> JobRun:
        """One run of the docs' workflow's job on a fresh runner (or another attempt of
        the ``rerun`` run: the same run id, the next attempt); of the attesting workflow's
        job with ``attest``."""
        self.runs += 1
        run_id, attempt = (rerun.run_id, 2) if rerun else (1000 + self.runs, 1)
        key = (self.team.ci.keys / "ci").read_text()
        secrets = {"LEDGER_CI_KEY": key, "LEDGER_JUDGE_KEY": key, "LEDGER_SEAL_KEY": key, "LEDGER_DB_PASSWORD": ""}
        runner = Runner(
            self.tmp / ("runner-%d" % self.runs),
            self.remote,
            event_name,
            {**event, "repository": REPOSITORY, "sender": {"login": "agent-bot"}},
            secrets,
            self.github.url,
            run_attempt=attempt,
            run_id=run_id,
        )
        return run_job(runner, self.attesting, "attest") if attest else run_job(runner, self.workflow)

    def comments(self) -> list[str]:
        return [c["body"] for c in self.github.comments]


REPOSITORY = {"full_name": "acme/app", "default_branch": "main"}


def _pr_payload(pr: PullRequest, action: str = "synchronize") -> dict[str, Any]:
    return {
        "action": action,
        "number": pr.number,
        "pull_request": {
            "number": pr.number,
            "title": pr.title,
            "state": "open",
            "head": {"ref": pr.branch, "sha": pr.head, "repo": {"full_name": "acme/app"}},
            "base": {"ref": "main", "sha": "0" * 40, "repo": {"full_name": "acme/app"}},
            "merge_commit_sha": None,
            "user": {"login": "agent-bot"},
        },
    }


def _review_payload(pr: PullRequest, reviewer: str) -> dict[str, Any]:
    doc = _pr_payload(pr, "submitted")
    doc["review"] = {"state": "approved", "user": {"login": reviewer}, "commit_id": pr.head, "body": "ledger approve"}
    return doc


def _queue_payload(pr: PullRequest, sha: str, tree: str, message: str) -> dict[str, Any]:
    return {
        "action": "checks_requested",
        "merge_group": {
            "head_sha": sha,
            "head_ref": "refs/heads/gh-readonly-queue/main/pr-%d-%s" % (pr.number, pr.head),
            "base_sha": "0" * 40,
            "base_ref": "refs/heads/main",
            "head_commit": {"id": sha, "tree_id": tree, "message": message},
        },
    }


def _push_payload(before: str, after: str, tree: str, message: str) -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "created": False,
        "forced": False,
        "base_ref": None,
        "head_commit": {"id": after, "tree_id": tree, "message": message},
        "pusher": {"name": "github"},
    }


@pytest.fixture
def day(team_site: tuple[Site, str], tmp_path: Path) -> Iterator[Day]:
    here, superuser = team_site
    team = team_from_docs(tmp_path, here, superuser, FILES, witness=False)
    # GitHub serves any commit of the repository by its id, as checkout asks for it.
    subprocess.run(["git", "-C", str(team.remote), "config", "uploadpack.allowAnySHA1InWant", "true"], check=True)
    workflow, attesting = blocks("ci.md", "The GitHub Action", "yaml")
    assert "attest: svr" in attesting.text and "attest: svr" not in workflow.text
    with serve() as github:
        yield Day(tmp_path, team, github, workflow.text, attesting.text)


def _claude_code_stop(agent: Machine) -> subprocess.CompletedProcess[str]:
    """Claude Code's Stop: the installed command from .claude/settings.json, run by a shell
    in the project with the event's payload on stdin."""
    settings = json.loads((agent.clone / ".claude" / "settings.json").read_text())
    (command,) = [h["command"] for group in settings["hooks"]["Stop"] for h in group["hooks"]]
    payload = {
        "session_id": "day-1",
        "transcript_path": str(agent.home / "transcript.jsonl"),
        "cwd": str(agent.clone),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    env = {**agent.env, "CLAUDE_PROJECT_DIR": str(agent.clone)}  # the hook finds the key where docs/agents.md puts it
    return subprocess.run(
        ["sh", "-c", command], input=json.dumps(payload), cwd=agent.clone, env=env, capture_output=True, text=True
    )


def _approve(reviewer: Machine, pr: PullRequest, task: str) -> None:
    """A reviewer reads the pull request in their own clone and approves its exact head."""
    reviewer.git("fetch", "-q", "origin", pr.branch)
    reviewer.git("checkout", "-q", "--detach", pr.head)
    reviewer.runs("ledger approve %s --key ~/.ssh/id_ed25519 --yes --comment 'read the diff'" % task)


def _decided(run: JobRun, decision: str) -> None:
    assert run.outputs["decision"] == decision, run.log + run.summary
    assert run.success == (decision == "pass"), run.log


def _queue_commit(team: Team, pr: PullRequest) -> tuple[str, str, str]:
    """What the merge queue makes: main merged with the pull request's head, pushed to its
    own branch; returns the commit, its tree and its message."""
    lead = team.lead
    lead.git("fetch", "-q", "origin", "main", pr.branch)
    lead.git("checkout", "-q", "--detach", "origin/main")
    message = "Merge pull request #%d from acme/%s\n\n%s" % (pr.number, pr.branch, pr.title)
    lead.git("merge", "-q", "--no-ff", "-m", message, pr.head)
    sha = lead.git("rev-parse", "HEAD").strip()
    lead.git("push", "-q", "origin", "HEAD:refs/heads/gh-readonly-queue/main/pr-%d-%s" % (pr.number, pr.head))
    return sha, lead.git("rev-parse", "HEAD^{tree}").strip(), message


def _merge(team: Team, pr: PullRequest, how: str) -> tuple[str, str, str, str]:
    """GitHub's squash or rebase merge of ``pr`` into main (a new commit with the pull
    request's tree on top of main); returns before, after, tree and message."""
    lead = team.lead
    lead.git("fetch", "-q", "origin", "main", pr.branch)
    before = lead.git("rev-parse", "origin/main").strip()
    lead.git("checkout", "-q", "--detach", "origin/main")
    if how == "squash":
        lead.git("merge", "-q", "--squash", pr.head)
        message = "%s (#%d)" % (pr.title, pr.number)
        lead.git("commit", "-qm", message)
    else:
        lead.git("cherry-pick", pr.head)  # a rebase merge re-commits each commit on main
        message = lead.git("log", "-1", "--format=%B").strip()
    lead.git("push", "-q", "origin", "HEAD:main")
    after = lead.git("rev-parse", "HEAD").strip()
    return before, after, lead.git("rev-parse", "HEAD^{tree}").strip(), message


def _open_pr(agent: Machine, pr: PullRequest, path: str, text: str) -> None:
    """The agent's change on a branch of main, with what its clone already holds of it."""
    agent.git("fetch", "-q", "origin", "main")
    if agent.git("branch", "--show-current").strip() != pr.branch:
        agent.git("checkout", "-q", "-B", pr.branch, "origin/main")
    (agent.clone / path).write_text(text)
    agent.git("commit", "-qam", pr.title)
    agent.git("push", "-q", "-f", "origin", pr.branch)
    pr.head = agent.git("rev-parse", "HEAD").strip()


def test_a_teams_day_from_the_agents_loop_to_the_audit(day: Day) -> None:
    team = day.team
    agent = team.agent
    pr7 = PullRequest(7, "T-1: a.txt says two", "T-1-say-two")
    pr8 = PullRequest(8, "T-2: b.txt says three", "T-2-say-three")

    # 1. The agent, in Claude Code with the hooks installed: its Stop is blocked while the
    # test fails, with the test's own output, and lets it stop once repaired.
    agent.git("checkout", "-q", "-b", pr7.branch)
    agent.runs("ledger hook install --agent claude-code")
    (agent.clone / ".git" / "info" / "exclude").write_text(".claude/\n")
    (agent.clone / "a.txt").write_text("too\n")
    blocked = _claude_code_stop(agent)
    assert blocked.returncode == 0 and json.loads(blocked.stdout)["decision"] == "block", (
        blocked.stdout + blocked.stderr
    )
    assert "FAILED test_a.py::test_says_two - AssertionError: 'too' != 'two'" in json.loads(blocked.stdout)["reason"]
    (agent.clone / "a.txt").write_text("two\n")
    stopped = _claude_code_stop(agent)
    assert stopped.returncode == 0 and "block" not in stopped.stdout, stopped.stdout + stopped.stderr
    _open_pr(agent, pr7, "a.txt", "two\n")

    # 2. Its pull request: CI runs the ladder, and the gate blocks for want of approvals,
    # saying so first in the one comment and in the summary.
    run = day.job("pull_request", _pr_payload(pr7, "opened"))
    _decided(run, "block")
    # Blocked for want of approvals, not because a tier could not run (once seen under load:
    # a receipt listing no record at all; the job's log then says which step failed).
    for step in ("check", "judge", "seal"):
        assert "receipt-ledger: %s exited 0" % step in run.log, run.log
    assert run.outputs["receipt"].startswith("blake3:") and run.outputs["merge-eligible"] == "false"
    assert "GATE FAIL" in run.summary and "no human record for this candidate" in run.summary, run.summary
    (comment,) = day.comments()
    assert "GATE FAIL" in comment and "T-1" in comment and ("verify --commit %s" % pr7.head) in comment

    # 3. Both reviewers approve from their clones; the submitted review reruns the ladder.
    for reviewer in (team.alice, team.bob):
        _approve(reviewer, pr7, "T-1")
    run = day.job("pull_request_review", _review_payload(pr7, "bob"))
    _decided(run, "pass")
    assert run.outputs["merge-eligible"] == "true"
    (comment,) = day.comments()  # the same comment, now saying it passed
    assert "GATE PASS" in comment and "alice" in comment and "bob" in comment, comment

    # The page an auditor reads is the run's artifact, linked from the summary and comment.
    link = "`receipt-ledger-report` artifact of [this run](https://github.com/acme/app/actions/runs/%d)" % run.run_id
    assert link in run.summary and link in comment, run.summary
    page = (run.artifacts / "receipt-ledger-report" / "report.html").read_text()
    assert run.outputs["receipt"] in page and "alice" in page, page[:2000]

    # 4. CI reruns the job: a rerun on the approved candidate stays green, its page replaced.
    rerun = day.job("pull_request", _pr_payload(pr7), rerun=run)
    _decided(rerun, "pass")
    assert rerun.outputs["receipt"] in (run.artifacts / "receipt-ledger-report" / "report.html").read_text()

    # 5. The second task, from another branch of main, to approval.
    _open_pr(agent, pr8, "b.txt", "three\n")
    _decided(day.job("pull_request", _pr_payload(pr8, "opened")), "block")
    for reviewer in (team.alice, team.bob):
        _approve(reviewer, pr8, "T-2")
    _decided(day.job("pull_request_review", _review_payload(pr8, "alice")), "pass")
    assert len(day.comments()) == 2  # one per pull request

    # 5b. The agent edits its own contract in a pull request (two approvals down to one,
    # issue 43): the contract in force is the one the ledger holds from main, so CI refuses
    # the revision as a weakening only an admin may sign, and the change cannot pass.
    pr9 = PullRequest(9, "T-1: a.txt says two, one reviewer is enough", "T-1-one-reviewer")
    agent.git("fetch", "-q", "origin", "main")
    agent.git("checkout", "-q", "-B", pr9.branch, "origin/main")
    own = agent.clone / ".ledger" / "contracts" / "T-1.toml"
    own.write_text(own.read_text().replace("human_approvals = 2", "human_approvals = 1"))
    _open_pr(agent, pr9, "a.txt", "two\n")
    weaker = day.job("pull_request", _pr_payload(pr9, "opened"))
    _decided(weaker, "block")
    assert "refused: this revision weakens the contract of T-1 (human approvals lowered" in weaker.log, weaker.log
    assert "receipt-ledger: check exited 2" in weaker.log and weaker.outputs["merge-eligible"] == "false"

    # 6. The merge queue takes PR 7 (its tree is the reviewed tree): gate-only, it passes;
    # then PR 7 is squash-merged and the push to main is gated again.
    sha, tree, message = _queue_commit(team, pr7)
    queued = day.job("merge_group", _queue_payload(pr7, sha, tree, message))
    _decided(queued, "pass")
    # One answer on the screen and in the outputs: the gate's, heading the summary.
    assert queued.outputs["merge-eligible"] == "true", queued.summary
    heading = queued.summary.split("\n")[1]
    assert heading.startswith("### receipt-ledger: T-1 **GATE PASS") and "NOT" not in heading, queued.summary
    before, after, tree, message = _merge(team, pr7, "squash")
    _decided(day.job("push", _push_payload(before, after, tree, message)), "pass")
    _attested(day, _push_payload(before, after, tree, message))

    # 7. PR 8 is now behind main: the queue's commit holds a tree nobody reviewed, and is
    # refused. Brought up to date, it is a new candidate: reviewed again, it passes.
    sha, tree, message = _queue_commit(team, pr8)
    behind = day.job("merge_group", _queue_payload(pr8, sha, tree, message))
    _decided(behind, "block")
    agent.git("fetch", "-q", "origin", "main")
    agent.git("checkout", "-q", pr8.branch)
    agent.git("rebase", "-q", "origin/main")
    agent.git("push", "-q", "-f", "origin", pr8.branch)
    pr8.head = agent.git("rev-parse", "HEAD").strip()
    _decided(day.job("pull_request", _pr_payload(pr8)), "block")  # the approvals were of the old head
    for reviewer in (team.alice, team.bob):
        _approve(reviewer, pr8, "T-2")
    _decided(day.job("pull_request_review", _review_payload(pr8, "bob")), "pass")
    sha, tree, message = _queue_commit(team, pr8)
    _decided(day.job("merge_group", _queue_payload(pr8, sha, tree, message)), "pass")
    before, after, tree, message = _merge(team, pr8, "rebase")
    _decided(day.job("push", _push_payload(before, after, tree, message)), "pass")

    # 8. A newcomer's fresh clone gates main: the receipts came with the code.
    newcomer = Machine(day.tmp, "newcomer", team.remote)
    newcomer.runs("ledger receipts fetch")
    audit_state = newcomer.home / "audit.json"
    newcomer.ledger("--store", team.url("writer"), "gate", "HEAD", "--audit-state", str(audit_state))

    # 9. The auditor: a mirror through the read-only role, the chain, the population, a bundle.
    _audit(day, Machine(day.tmp, "auditor", team.remote), after)


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _attested(day: Day, push: dict[str, Any]) -> None:
    """The docs' attesting workflow on the same push: the Statement actions/attest is handed
    is about the bundle git carries, and says what the verifier found; an auditor's lines
    of the docs, as written, fetch those bytes and verify them (the `gh` line needs GitHub)."""
    run = day.job("push", push, attest=True)
    _decided(run, "pass")
    (kept,) = run.attestations.iterdir()
    statement = json.loads(kept.read_text())
    assert statement["predicateType"] == "https://in-toto.io/attestation/svr/v0.2"
    predicate = statement["predicate"]
    assert predicate["https://receipt-ledger.dev/svr/receipt/v1"]["receipt"] == run.outputs["receipt"]
    assert {"RECEIPT_LEDGER_RECEIPT_VERIFIED", "RECEIPT_LEDGER_MERGE_ELIGIBLE", "RECEIPT_LEDGER_HUMAN_APPROVED"} <= set(
        predicate["properties"]
    ), predicate
    assert run.outputs["attestation-url"].startswith("https://github.com/acme/app/attestations/")
    auditor = Machine(day.tmp, "attestation-auditor", day.team.remote)
    auditor.env["RECEIPT"] = run.outputs["receipt"]
    (block,) = [b for b in blocks("ci.md", "The GitHub Action", "sh") if "gh attestation verify" in b.text]
    lines = block.text.splitlines()
    assert lines[-1].startswith("gh attestation verify receipt.bundle.zip ") and statement["predicateType"] in lines[-1]
    auditor.runs("\n".join(lines[:-1]))
    bundle = (auditor.clone / "receipt.bundle.zip").read_bytes()
    name = "receipt-%s.bundle.zip" % run.outputs["receipt"].removeprefix("blake3:")[:16]
    assert statement["subject"] == [{"name": name, "digest": {"sha256": hashlib.sha256(bundle).hexdigest()}}]
    # Without the permissions actions/attest needs, the step fails: the runner enforces them.
    bare = day.attesting.replace("      id-token: write        # Sigstore signs with the workflow's identity\n", "")
    assert bare != day.attesting
    day.attesting, kept_text = bare, day.attesting
    try:
        refused = day.job("push", push, attest=True)
    finally:
        day.attesting = kept_text
    assert not refused.success and "lacks id-token: write" in refused.log, refused.log


def _audit(day: Day, auditor: Machine, main: str) -> None:
    auditor.ledger("pull", "--from", day.team.url("auditor"), "--to", "mirror")
    trust = ("--trust", ".ledger/allowed_signers")
    auditor.ledger("--dir", "mirror", "verify", "--chain", *trust)
    period = ("--from", "2000-01-01", "--to", "2100-01-01")
    population = auditor.ledger("--dir", "mirror", "report", "--csv", *period, "--reached", "origin/main")
    rows = [(r["task"], r["merge_eligible"], r["gate_decision"], r["reached_target"]) for r in _csv(population)]
    # Each receipt with the decision it made, and whether its change reached main: PR 7's
    # first (blocked), approved and rerun receipts, all merged by squash; PR 8's receipts
    # of its first head (never merged) and of its head brought up to date (rebase-merged).
    assert rows == [
        ("T-1", "no", "block (enforce)", "yes"),
        ("T-1", "yes", "pass (enforce)", "yes"),
        ("T-1", "yes", "pass (enforce)", "yes"),
        ("T-2", "no", "block (enforce)", "no"),
        ("T-2", "yes", "pass (enforce)", "no"),
        ("T-2", "no", "block (enforce)", "yes"),
        ("T-2", "yes", "pass (enforce)", "yes"),
    ], population
    readable = auditor.ledger("--dir", "mirror", "report", *period, "--reached", "origin/main").splitlines()
    assert [line.split("eligible=")[1].split("  ")[0] for line in readable[:-1]] == [
        "no verified=yes gate=block merged",
        "yes verified=yes gate=pass merged",
        "yes verified=yes gate=pass merged",
        "no verified=yes gate=block not-merged",
        "yes verified=yes gate=pass not-merged",
        "no verified=yes gate=block merged",
        "yes verified=yes gate=pass merged",
    ], readable
    auditor.ledger("receipts", "fetch")
    checks = json.loads(auditor.ledger("verify", "--commit", main, "--json"))
    assert [c["match"] for c in checks] == ["tree", "tree"]  # PR 8's two receipts of this tree
    (receipt,) = [c["receipt"] for c in checks if c["result"]["merge_eligible_derived"]]
    auditor.ledger("--dir", "mirror", "export", receipt, "-o", "bundle.zip")
    auditor.ledger("verify", "--bundle", "bundle.zip", *trust)
    assert not os.path.exists(auditor.keys)
