"""The `ledger` CLI end to end on a real git repository, through click's CliRunner."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conftest import GIT_ENV, SIGNERS, cli_repo_with_lower_tiers, judge_table, run_cli
from ledger import InputError, Ledger, load_signer
from ledger.cli import cli

CONTRACT = """version = 1
task = "T-1"
goal = "a.txt exists"
owned_files = ["a.txt"]

%s
[[checks]]
id = "a-file"
type = "path_exists"
path = "a.txt"

[[checks]]
id = "tests"
type = "test_passes"
command = [%s, "-c", "print('ok')"]
""" % (judge_table("accept", "0.9"), json.dumps(sys.executable))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("one\n")
    (repo / ".ledger" / "contracts").mkdir(parents=True)
    (repo / ".ledger" / "contracts" / "T-1.toml").write_text(CONTRACT)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "T-1: first"], cwd=repo, check=True)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("RECEIPT_LEDGER_KEYS", str(tmp_path / "keys"))
    monkeypatch.delenv("LEDGER_DIR", raising=False)
    return repo


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def setup_keys() -> None:
    assert run("init").exit_code == 0
    for name, role in (("ci", "deterministic"), ("judge", "judge"), ("alice", "human"), ("sealer", "seal")):
        res = run("keys", "generate", name, "--role", role)
        assert res.exit_code == 0, res.output
    res = run("contract", "set", "T-1", "--key", "ci")
    assert res.exit_code == 0, res.output


def record_all(human: str = "approve") -> None:
    res = run("check", "T-1", "--key", "ci")
    assert res.exit_code == 0, res.output
    # The contract calls them checks; so does the table.
    assert " CHECK " in res.output and "SIGNAL" not in res.output, res.output
    res = run("judge", "T-1", "--key", "judge")
    assert res.exit_code == 0, res.output
    args = ("--reason", "not convinced") if human == "reject" else ("--comment", "looks right")
    res = run(human, "T-1", "--key", "alice", "--yes", *args)
    assert res.exit_code == 0, res.output


def test_init_creates_ledger_at_git_root_with_private_key_outside(repo: Path, tmp_path: Path) -> None:
    res = run("init")
    assert res.exit_code == 0, res.output
    assert (repo / ".ledger" / "ledger.db").is_file()
    key = tmp_path / "keys" / "admin"
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600
    assert key.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    # The clone's versioned contract is kept, and the chain and evidence stay out of git:
    # only the ignore file and the trust pin are new, for the team to commit beside the contracts.
    assert (repo / ".ledger" / "contracts" / "T-1.toml").is_file()
    assert (
        subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True).stdout
        == "?? .ledger/.gitignore\n?? .ledger/allowed_signers\n"
    )
    again = run("init")
    assert again.exit_code == 2 and "already holds a ledger" in again.output


def test_full_ladder_seals_an_eligible_receipt_that_verifies(repo: Path) -> None:
    setup_keys()
    record_all()
    sealed = run("seal", "T-1", "--key", "sealer", "--json")
    assert sealed.exit_code == 0, sealed.output
    receipt = json.loads(sealed.stdout)
    assert receipt["body"]["merge_eligible"] is True
    res = run("verify", receipt["receipt"], "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (
        doc["verified"]
        and doc["merge_eligible_derived"] is True
        and [t["status"] for t in doc["tiers"]] == ["pass"] * 3
    )
    human = run("verify", receipt["receipt"])
    assert "VERIFIED" in human.stdout and "deterministic" in human.stdout
    assert run("verify", "--chain").exit_code == 0


def test_a_failing_tier_seals_an_honest_non_eligible_receipt(repo: Path) -> None:
    setup_keys()
    record_all(human="reject")
    sealed = json.loads(run("seal", "T-1", "--key", "sealer", "--json").stdout)
    assert sealed["body"]["merge_eligible"] is False
    res = run("verify", sealed["receipt"], "--json")
    # The receipt is authentic and its (negative) claim is entailed: verified, not eligible (3).
    assert res.exit_code == 3
    reasons = json.loads(res.stdout)["eligibility_reasons"]
    assert any(x.startswith("tier human verdict is fail by alice (SHA256:") for x in reasons), reasons


def test_seal_says_each_reason_a_receipt_is_not_eligible(repo: Path) -> None:
    setup_keys()
    record_all(human="reject")
    res = run("seal", "T-1", "--key", "sealer")
    assert res.exit_code == 0 and "merge_eligible=false (entry " in res.stderr, res.stderr
    assert "\n  not eligible: tier human verdict is fail by SHA256:" in res.stderr, res.stderr
    assert "not eligible" not in res.stdout  # stdout stays the receipt's hash, for scripts


def test_a_tier_without_a_record_becomes_an_explicit_skip(repo: Path) -> None:
    setup_keys()
    assert run("check", "T-1", "--key", "ci").exit_code == 0
    sealed = json.loads(run("seal", "T-1", "--key", "sealer", "--json").stdout)
    entries = sealed["body"]["entries"]
    assert sealed["body"]["merge_eligible"] is False
    assert [e["tier"] for e in entries] == ["deterministic", "judge", "human"]
    assert entries[1]["skip_reason"] and entries[2]["skip_reason"]
    res = json.loads(run("verify", sealed["receipt"], "--json").stdout)
    assert res["verified"] and [t["status"] for t in res["tiers"]] == ["pass", "skip", "skip"]


def test_a_new_commit_is_a_new_candidate(repo: Path) -> None:
    setup_keys()
    record_all()
    (repo / "a.txt").write_text("two\n")
    subprocess.run(["git", "commit", "-qam", "later"], check=True)
    new = json.loads(run("seal", "T-1", "--key", "sealer", "--json").stdout)
    assert new["body"]["merge_eligible"] is False
    assert all(e["skip_reason"] for e in new["body"]["entries"])  # nothing was checked on the new commit
    # The approval of the commit before is named as stale, not only as missing.
    assert "1 decision(s) are stale" in new["body"]["entries"][2]["skip_reason"], new["body"]["entries"]
    old = json.loads(run("seal", "T-1", "--key", "sealer", "--input", "HEAD~1", "--json").stdout)
    assert old["body"]["merge_eligible"] is True


def test_a_key_may_sign_only_what_its_role_allows(repo: Path) -> None:
    setup_keys()
    res = run("record", "T-1", "--tier", "judge", "--verdict", "fail", "--key", "alice")
    assert res.exit_code == 2 and "has no judge role" in res.output
    res = run("judge", "T-1", "--key", "alice")
    assert res.exit_code == 2 and "has no judge role" in res.output
    res = run("check", "T-1", "--key", "alice")
    assert res.exit_code == 2 and "has no deterministic role" in res.output
    res = run("seal", "T-1", "--key", "ci", "--config", ".ledger/contracts/T-1.toml")
    assert res.exit_code == 2 and "has no seal role" in res.output
    res = run("record", "T-1", "--tier", "deterministic", "--verdict", "pass", "--key", "ci")
    assert res.exit_code == 2 and "ledger check" in res.output
    for tier, runner in (("judge", "ledger judge"), ("human", "ledger approve")):
        res = run("record", "T-1", "--tier", tier, "--verdict", "pass", "--key", "alice")
        assert res.exit_code == 2 and "cannot be recorded by hand" in res.output and runner in res.output, res.output


def test_revoked_key_is_refused_and_listed(repo: Path) -> None:
    setup_keys()
    assert run("keys", "revoke", "ci", "--reason", "laptop lost").exit_code == 0
    res = run("check", "T-1", "--key", "ci")
    assert res.exit_code == 2 and "revoked" in res.output
    listed = json.loads(run("keys", "list", "--json").stdout)
    assert {k["name"]: k["status"] for k in listed}["ci"] == "revoked"
    exported = run("keys", "export-allowed-signers").stdout
    ci_line = [line for line in exported.splitlines() if line.startswith("ci ")][0]
    assert 'namespaces="receipt-ledger/deterministic"' in ci_line and "valid-before=" in ci_line


def test_a_refused_key_leaves_no_key_file(repo: Path, tmp_path: Path) -> None:
    setup_keys()
    res = run("keys", "generate", "ci", "--role", "human", "--out", str(tmp_path / "ci-2"))
    assert res.exit_code == 2 and "already active" in res.output
    assert not (tmp_path / "ci-2").exists() and not (tmp_path / "ci-2.pub").exists()


def test_the_last_admin_cannot_be_revoked(repo: Path) -> None:
    setup_keys()
    res = run("keys", "revoke", "admin")
    assert res.exit_code == 2 and "last admin" in res.output


def test_teammate_public_key_can_be_added_and_bad_ones_refused(repo: Path, tmp_path: Path) -> None:
    setup_keys()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "bob")], check=True)
    assert run("keys", "add", "bob", str(tmp_path / "bob.pub"), "--role", "human").exit_code == 0
    assert run("keys", "add", "bob2", "ssh-ed25519 @@@", "--role", "human").exit_code == 2
    assert run("keys", "add", "carol", "ssh-rsa AAAAB3NzaC1yc2E", "--role", "human").exit_code == 2


def test_private_key_inside_the_repository_is_refused(repo: Path) -> None:
    setup_keys()
    res = run("keys", "generate", "eve", "--role", "human", "--out", str(repo / "eve"))
    assert res.exit_code == 2 and "inside the repository" in res.output
    assert not (repo / "eve").exists()


def test_encrypted_key_needs_its_passphrase(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup_keys()
    res = CliRunner().invoke(
        cli, ["keys", "generate", "dave", "--role", "human", "--passphrase"], input="s3cret\ns3cret\n"
    )
    assert res.exit_code == 0, res.output
    args = ["approve", "T-1", "--key", "dave", "--yes"]
    assert run(*args).exit_code == 2
    monkeypatch.setenv("RECEIPT_LEDGER_PASSPHRASE", "wrong")
    assert run(*args).exit_code == 2
    monkeypatch.setenv("RECEIPT_LEDGER_PASSPHRASE", "s3cret")
    assert run(*args).exit_code == 0


def test_bad_inputs_are_one_line_and_exit_2(repo: Path) -> None:
    assert run("log").exit_code == 2  # no ledger yet
    setup_keys()
    cases = [
        ("record", "T-1", "--tier", "human", "--verdict", "fail", "--key", "alice", "--config", "missing.toml"),
        ("record", "T-1", "--tier", "human", "--verdict", "fail", "--key", "alice", "--evidence", "nope"),
        (
            "record",
            "bad task",
            "--tier",
            "human",
            "--verdict",
            "fail",
            "--key",
            "alice",
            "--config",
            ".ledger/contracts/T-1.toml",
        ),
        ("record", "T-1", "--tier", "human", "--verdict", "fail", "--key", "nobody"),
        ("record", "T-1", "--tier", "human", "--verdict", "fail", "--key", "alice", "--input", "no-such-rev"),
        ("check", "T-2", "--key", "ci"),
        ("check", "T-1", "--key", "ci", "--contract", "a.txt"),
        ("show", "blake3:" + "0" * 64),
        ("verify",),
    ]
    for args in cases:
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert res.output.startswith("ledger: error:") and res.output.count("\n") == 1, (args, res.output)


def test_log_and_show(repo: Path) -> None:
    setup_keys()
    record_all()
    rows = [r for r in json.loads(run("log", "--json", "--task", "T-1").stdout) if r["kind"] == "tier_record"]
    assert [r["summary"] for r in rows] == ["deterministic pass", "judge pass", "human pass"]
    shown = json.loads(run("show", rows[0]["hash"], "--json").stdout)
    assert shown["body"]["tier"] == "deterministic" and shown["entry"]["kind"] == "tier_record"


def test_concurrent_writers_produce_one_linear_chain(repo: Path, tmp_path: Path) -> None:
    setup_keys()
    env = dict(os.environ, RECEIPT_LEDGER_KEYS=str(tmp_path / "keys"))
    code = (
        "import sys; from pathlib import Path; import receipts as r\n"
        "from ledger import Ledger, load_signer, record_tier\n"
        "l = Ledger.open(Path(sys.argv[1])); s = load_signer('ci')\n"
        "c = r.candidate_hash({'commit': 'w' + sys.argv[2]})\n"
        "for i in range(int(sys.argv[3])):\n"
        "    record_tier(l, task_id='W-' + sys.argv[2], tier=r.Tier.DETERMINISTIC, verdict=r.Verdict.PASS, signer=s,\n"
        "                config_hash=r.config_hash(b'c'), input_hash=c)\n"
    )
    before = len(json.loads(run("log", "--json").stdout))
    per_writer = int(os.environ.get("RECEIPT_LEDGER_CONCURRENCY", "40"))
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(repo / ".ledger"), str(w), str(per_writer)], env=env)
        for w in range(4)
    ]
    assert all(p.wait(timeout=1200) == 0 for p in procs)
    res = run("verify", "--chain", "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 0 and doc["entries"] == before + 4 * per_writer, doc
    rows = json.loads(run("log", "--json").stdout)
    assert [r["seq"] for r in rows] == list(range(before + 4 * per_writer))
    for w in range(4):
        assert sum(1 for r in rows if r["task"] == "W-%d" % w) == per_writer


def test_a_private_key_others_can_read_is_refused(tmp_path: Path) -> None:
    # issue 11, item 12: OpenSSH refuses such a key; so do we, with the fix in the message.
    from conftest import write_private_key

    key = write_private_key(tmp_path / "keys" / "alice", "alice")
    key.chmod(0o644)
    with pytest.raises(InputError, match="accessible by others.*chmod 600"):
        load_signer(str(key))
    key.chmod(0o600)
    assert load_signer(str(key)).public_key_blob == SIGNERS["alice"].public_key_blob


def test_a_bad_option_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (
        ("retention", "set", "--max-age-days", "0", "--key", "admin"),
        ("verify", "--method", "sideways", "blake3:" + "0" * 64),
        ("no-such-command",),
        ("report", "--from"),
    ):
        res = run_cli("--dir", str(tmp_path / "nowhere"), *args)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Usage:" not in res.stderr, (args, res.stderr)
        assert res.stderr.startswith("ledger: error: ")


def test_an_endless_input_file_is_refused_not_read_forever(tmp_path: Path) -> None:
    """Issue 22, case 9: every file a command is given is read through one bounded reader,
    so /dev/zero (or a FIFO that never ends) is one clear line and exit 2."""
    repo, env = cli_repo_with_lower_tiers(tmp_path)
    for args in (
        ("trace", "TASK-1", "/dev/zero", "--key", "ci"),
        ("verify", "--chain", "--resume", "/dev/zero", "--unsafe-trust-on-first-use"),
        ("verify", "--chain", "--tsa-cert", "/dev/zero", "--unsafe-trust-on-first-use"),
    ):
        res = run_cli(*args, cwd=repo, env=env)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (args, res.stderr)
        assert "/dev/zero is larger than" in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)


def test_what_a_command_opens_it_closes(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Long-running front ends (a web view, a test run) call many commands in one process:
    # a ledger left open holds a file handle or a database connection each time.
    setup_keys()
    opened: list[Ledger] = []
    real_open = Ledger.open

    def recording_open(root: Path, read_only: bool = False, store: str | None = None) -> Ledger:
        ledger = real_open(root, read_only=read_only, store=store)
        opened.append(ledger)
        return ledger

    monkeypatch.setattr(Ledger, "open", staticmethod(recording_open))
    for args in (("log",), ("keys", "list"), ("keys", "revoke", "ci", "--reason", "laptop lost")):
        assert run(*args).exit_code == 0, args
    assert len(opened) == 3
    for ledger in opened:
        with pytest.raises(sqlite3.ProgrammingError):
            ledger.backend.conn.execute("SELECT 1")  # type: ignore[attr-defined]


def test_the_admin_signs_with_key_like_every_signer_and_admin_is_a_hidden_alias(repo: Path) -> None:
    setup_keys()
    assert run("keys", "revoke", "ci", "--reason", "laptop lost", "--key", "admin").exit_code == 0
    assert run("keys", "revoke", "judge", "--reason", "rotated", "--admin", "admin").exit_code == 0
    revoked = {k["name"] for k in json.loads(run("keys", "list", "--json").stdout) if k["status"] == "revoked"}
    assert revoked == {"ci", "judge"}, revoked
    assert "--admin" not in run("keys", "revoke", "--help").stdout
    both = run_cli("keys", "revoke", "alice", "--key", "admin", "--admin", "sealer", cwd=repo)
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "give one" in both.stderr, both.stderr


def test_one_reading_of_a_moment_for_waivers_and_reports() -> None:
    from ledger import parse_when

    day = 1769817600  # 2026-01-31T00:00:00Z
    assert parse_when("2026-01-31", "--from") == day
    assert parse_when("2026-01-31", "--expires", end_of_day=True) == day + 86400  # through that day
    assert parse_when("2026-01-31T12:00:00", "--to") == day + 12 * 3600  # no zone: UTC
    assert parse_when("2026-01-31T12:00:00+02:00", "--to") == day + 10 * 3600
    with pytest.raises(InputError, match="^--expires takes a date"):
        parse_when("next tuesday", "--expires")


def test_a_wrong_passphrase_is_named_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger import InputError, generate_key_file, load_signer

    path = tmp_path / "keys" / "alice"
    path.parent.mkdir()
    generate_key_file(path, "alice", b"right horse battery")
    monkeypatch.setenv("RECEIPT_LEDGER_PASSPHRASE", "wrong")
    with pytest.raises(InputError, match=r"wrong passphrase for key .*alice"):
        load_signer(str(path))
    monkeypatch.setenv("RECEIPT_LEDGER_PASSPHRASE", "right horse battery")
    assert load_signer(str(path)).public_key_blob


def test_commands_take_the_hash_prefix_that_tables_print(repo: Path) -> None:
    setup_keys()
    record_all()
    full = run("seal", "T-1", "--key", "sealer").stdout.strip()
    for prefix in (full[:15], full[7:19], full[:19] + "…"):  # blake3: and 8 digits, 12 bare, as a table cuts it
        shown = run("show", prefix, "--json")
        assert shown.exit_code == 0 and json.loads(shown.stdout)["entry"]["body_hash"] == full, (prefix, shown.output)
        assert run("verify", prefix).exit_code == 0, prefix
    missing = run("show", "blake3:00000000")
    assert (
        missing.exit_code == 2
        and "no entry, record, receipt, contract or evidence hash starts with 00000000" in missing.output
    )
    # Too short to be a prefix: the refusal names both forms a hash argument takes.
    for command in ("show", "verify", "prove"):
        short = run(command, "blake3:1234567")
        assert short.exit_code == 2 and "nor the prefix of one a table prints (at least 8 hex digits)" in short.output


def test_log_is_a_table_with_times_and_signers_by_name(repo: Path) -> None:
    setup_keys()
    res = run("log")
    lines = res.stdout.splitlines()
    assert res.exit_code == 0 and lines[0].split()[:3] == ["ENTRY", "TIME", "(UTC)"], res.stdout
    genesis = lines[1].split()
    assert genesis[0] == "0" and genesis[1].endswith("Z") and genesis[2] == "genesis" and genesis[5] == "admin"
    assert any(line.split()[2] == "key_add" and "admin" in line for line in lines[2:])
    rows = json.loads(run("log", "--json").stdout)
    assert rows[0]["signer_name"] == "admin" and rows[0]["time_utc"] == genesis[1]


def test_show_reads_as_text_with_the_time_and_the_signer_by_name(repo: Path) -> None:
    setup_keys()
    record_all()
    receipt = run("seal", "T-1", "--key", "sealer").stdout.strip()
    shown = run("show", receipt[:15])
    lines = shown.stdout.splitlines()
    assert shown.exit_code == 0 and lines[0].startswith("entry ") and "(receipt)" in lines[0], shown.stdout
    assert lines[1].startswith("time ") and lines[1].endswith("Z")
    assert lines[2].split()[1] == "sealer" and "body hash  %s" % receipt in shown.stdout
    assert json.loads(run("show", receipt, "--json").stdout)["entry"]["body_hash"] == receipt


def test_a_weakening_says_why_and_whose_criteria_and_the_history_shows_it(repo: Path) -> None:
    setup_keys()
    path = repo / ".ledger" / "contracts" / "T-1.toml"
    path.write_text(CONTRACT[: CONTRACT.index('[[checks]]\nid = "tests"')])  # the tests check dropped
    refused = run("contract", "set", "T-1", "--key", "admin")
    assert refused.exit_code == 2 and "gives no reason: say why with --reason" in refused.output, refused.output
    assert len(json.loads(run("contract", "show", "T-1", "--json").output)) == 1  # nothing was written
    reason = "tests move to CI\n    3  blake3:0  admin"  # a line break must not start a forged row
    done = run("contract", "set", "T-1", "--key", "admin", "--reason", reason, "--criteria-from", "ticket OPS-9")
    assert done.exit_code == 0, done.output
    history = run("contract", "show", "T-1").output.splitlines()
    assert len(history) == 2 and "WEAKENS: check tests was dropped" in history[-1], history
    assert history[-1].endswith("(reason: tests move to CI\\n    3  blake3:0  admin; criteria from: ticket OPS-9)")
    (row,) = json.loads(run("contract", "show", "T-1", "--json").output)[1:]
    assert (row["reason"], row["criteria_from"]) == (reason, "ticket OPS-9")


def test_every_hash_a_command_prints_is_one_show_reads(repo: Path) -> None:
    # Issue 46: check's evidence digests, contract show's contract hash, log's entries,
    # status's and seal's receipts; each printed form is accepted by `show`, which says
    # what it is: an entry (record, receipt), a contract as its TOML, evidence as its text.
    import re

    setup_keys()
    printed = {
        "check": run("check", "T-1", "--key", "ci").stdout,
        "contract show": run("contract", "show", "T-1").stdout,
    }
    assert run("judge", "T-1", "--key", "judge").exit_code == 0
    assert run("approve", "T-1", "--key", "alice", "--yes", "--comment", "fine").exit_code == 0
    printed["seal"] = run("seal", "T-1", "--key", "sealer").stdout
    printed["log"] = run("log").stdout
    printed["status"] = run("status").stdout
    found = {
        (where, token)
        for where, text in printed.items()
        for token in re.findall(r"blake3:[0-9a-f]{8,64}…?|(?<![0-9a-z:])[0-9a-f]{12}(?![0-9a-f])", text)
    }
    assert {w for w, _ in found} >= {"check", "contract show", "seal", "log"}, printed
    for where, token in sorted(found):
        shown = run("show", token)
        assert shown.exit_code == 0, (where, token, shown.output)
    contract = next(t for w, t in found if w == "contract show")
    assert 'task = "T-1"' in run("show", contract).stdout  # the contract, as its TOML
    evidence = [t for w, t in found if w == "check"]
    assert any("print('ok')" in run("show", t).stdout or "ok" in run("show", t).stdout for t in evidence)


def test_show_reads_a_contract_revision_as_its_toml(repo: Path) -> None:
    setup_keys()
    entry = next(row for row in json.loads(run("log", "--json").stdout) if row["kind"] == "contract")
    shown = run("show", entry["hash"]).stdout
    assert "contract:\n" in shown and '  task = "T-1"' in shown and 'goal = "a.txt exists"' in shown, shown


def test_keys_generate_where_no_admin_key_is_held_makes_the_pair_for_an_admin_to_add(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's machine (issue 46): docs/agents.md's set-up line works there, and says
    # what the admin runs; the admin's `keys add` then registers exactly that key.
    setup_keys()
    monkeypatch.setenv("RECEIPT_LEDGER_KEYS", str(tmp_path / "agent-keys"))
    made = run("keys", "generate", "agent", "--role", "agent")
    assert made.exit_code == 0, made.output
    assert "not in the keyring yet" in made.stdout and "ledger keys add agent" in made.stderr, made.output
    public = tmp_path / "agent-keys" / "agent.pub"
    assert public.is_file() and (tmp_path / "agent-keys" / "agent").stat().st_mode & 0o777 == 0o600
    assert not any(r["kind"] == "key_add" and "agent" in json.dumps(r) for r in json.loads(run("log", "--json").stdout))
    monkeypatch.setenv("RECEIPT_LEDGER_KEYS", str(tmp_path / "keys"))  # back on the admin's machine
    added = run("keys", "add", "agent", str(public), "--role", "agent")
    assert added.exit_code == 0 and "added at entry" in added.stdout, added.output
    # A named admin that is not held is still an error, not a quiet key pair.
    monkeypatch.setenv("RECEIPT_LEDGER_KEYS", str(tmp_path / "agent-keys"))
    named = run("keys", "generate", "other", "--role", "human", "--admin", "admin")
    assert named.exit_code == 2 and not (tmp_path / "agent-keys" / "other").exists(), named.output


def test_check_shows_the_failing_assertion_not_only_the_exit_code(repo: Path) -> None:
    # Issue 46: the Stop hook shows the agent the failing assertion; `ledger check` shows
    # the same last lines, under the table, and --json carries them.
    setup_keys()
    failing = CONTRACT.replace(
        '"-c", "print(\'ok\')"', "\"-c\", \"print('1 test'); assert 1 == 2, 'expected 2 greetings, got 1'\""
    )
    assert failing != CONTRACT
    (repo / ".ledger" / "contracts" / "T-1.toml").write_text(failing)
    subprocess.run(["git", "commit", "-qam", "T-1: the test asserts"], cwd=repo, check=True)
    changed = run("contract", "set", "T-1", "--key", "admin", "--reason", "the test now asserts the count")
    assert changed.exit_code == 0, changed.output
    shown = run("check", "T-1", "--key", "ci")
    assert shown.exit_code == 1, shown.output  # a failing verdict
    lines = shown.stdout.splitlines()
    at = lines.index("tests, its last output:")
    assert "    AssertionError: expected 2 greetings, got 1" in lines[at + 1 :], lines
    doc = json.loads(run("check", "T-1", "--key", "ci", "--json").stdout)
    (tests,) = [c for c in doc["checks"] if c["id"] == "tests"]
    assert "AssertionError: expected 2 greetings, got 1" in tests["output_tail"] and tests["result"] == "fail"
