"""The agents' own provenance records as evidence (issue 25): Agent Trace records, git-ai
notes and Entire checkpoints validated and stored under a signed event; the
`attribution_declared` check over the candidate's added lines, re-derived by the verifier
from the stored records; the models they name held to the judge's different-family rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import receipts as r
from conftest import (
    ADMIN_ID,
    SIGNERS,
    TASK,
    build_sample,
    contract_bytes,
    git,
    judge_table,
    run_cli,
)
from ledger import InputError, Ledger, add_provenance, run_deterministic, run_judge, task_provenance
from verify import LedgerSource, TrustRoot, verify_receipt

VECTORS = Path(__file__).parent / "vectors" / "provenance"
TRACE = VECTORS / "agent-trace.json"
DECLARED = '\n[[checks]]\nid = "declared"\ntype = "attribution_declared"\n'


def _trace(tmp: Path, **changes: object) -> Path:
    doc = json.loads(TRACE.read_bytes())
    doc.update(changes)
    path = tmp / "trace.json"
    path.write_text(json.dumps(doc))
    return path


def _check(ledger: Ledger, repo: Path, contract: bytes) -> tuple[r.Outcome, list[tuple[str, str, str, str]]]:
    run = run_deterministic(
        ledger, repo=repo, task_id=TASK, contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    return run.outcome, list(run.rows)


# -- the records --------------------------------------------------------------------------------


def test_a_trace_shaped_as_the_specifications_example_is_accepted() -> None:
    doc = r.parse_agent_trace(TRACE.read_bytes())
    declared = r.declared_by(r.provenance_document("agent-trace", doc))
    assert declared.ranges == (("app.py", ((1, 1),)), ("lib/helpers.py", ((3, 8),)))
    assert declared.models == ("anthropic/claude-sonnet-4-5", "openai/gpt-4o")
    # The published schema has also said MAJOR.MINOR: both are versions.
    assert r.parse_agent_trace(json.dumps({**doc, "version": "1.0"}).encode())["version"] == "1.0"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"version": "v1"}, "version"),
        ({"id": "not-a-uuid"}, "id"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"files": [{"path": "a", "conversations": [{"ranges": [{"start_line": 5, "end_line": 2}]}]}]}, "ranges[0]"),
        ({"files": [{"path": "a", "conversations": [{"ranges": [{"start_line": 0, "end_line": 2}]}]}]}, "start_line"),
        ({"files": [{"path": "/etc/passwd", "conversations": []}]}, "files[0].path"),
        ({"files": [{"path": "a", "conversations": [{"contributor": {"type": "robot"}, "ranges": []}]}]}, "type"),
        ({"vcs": {"type": "cvs", "revision": "1"}}, "vcs.type"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_a_record_that_breaks_the_schema_is_refused_naming_the_field(change: dict[str, object], named: str) -> None:
    doc = {**json.loads(TRACE.read_bytes()), **change}
    with pytest.raises(r.FormatError, match="agent-trace record") as caught:
        r.parse_agent_trace(json.dumps(doc).encode())
    assert named in str(caught.value)


def test_a_git_ai_note_declares_its_sessions_humans_and_prompts() -> None:
    declared = r.parse_git_ai_note((VECTORS / "git-ai-note.txt").read_text())
    assert dict(declared.ranges) == {
        "app.py": ((1, 1),),
        "docs/a note.md": ((1, 4), (7, 7)),
        "lib/old.py": ((2, 3),),
    }
    assert declared.models == ("claude-sonnet-4-5", "gpt-4o")
    broken = (VECTORS / "git-ai-note.txt").read_text().replace("h_99887766554433 1-4", "h_00000000000000 1-4")
    with pytest.raises(r.FormatError, match="h_00000000000000, which the metadata does not describe"):
        r.parse_git_ai_note(broken)


def test_added_lines_follow_git_and_undeclared_names_what_is_left(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("1\n2\n3\n4\n5\n")
    (repo / "gone.txt").write_text("x\n")
    (repo / "bin.dat").write_bytes(b"\0\1")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "a.txt").write_text("1\nX\n3\n4\n5\nY\nZ\n")
    (repo / "gone.txt").unlink()
    (repo / "bin.dat").write_bytes(b"\0\2")
    (repo / "new é.txt").write_text("n\nm\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    diff = git(repo, "diff", "--binary", "HEAD~1", "HEAD").encode() + b"\n"
    added = r.added_lines(diff)
    assert added == {"a.txt": [[2, 2], [6, 7]], "bin.dat": [[1, 1]], "new é.txt": [[1, 2]]}
    assert r.undeclared(added, {"a.txt": [[2, 2], [7, 9]], "new é.txt": [[1, 1]]}, ["bin.dat"]) == [
        "a.txt lines 6",
        "new é.txt lines 2",
    ]


# -- the check, end to end ------------------------------------------------------------------------


def test_attribution_declared_passes_when_every_added_line_is_declared(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    contract = contract_bytes(extra=DECLARED)
    outcome, rows = _check(ledger, repo, contract)
    assert ("declared", "fail") == rows[1][:2] and "no provenance record was stored" in rows[1][2]
    added = add_provenance(ledger, SIGNERS["agent"], TASK, None, repo=repo, agent_trace=TRACE)
    assert [str(ref.digest) for ref, _ in task_provenance(ledger, TASK)] == [str(added.document)]
    outcome, rows = _check(ledger, repo, contract)
    assert outcome.verdict is r.Verdict.PASS, outcome
    assert rows[1][:3] == ("declared", "pass", "every added line of 1 file(s) is declared by 1 record(s)")


def test_a_changed_file_no_record_declares_fails_naming_it(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    (repo / "extra.py").write_text("a = 1\nb = 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: more")
    add_provenance(ledger, SIGNERS["agent"], TASK, None, repo=repo, agent_trace=TRACE)
    outcome, rows = _check(ledger, repo, contract_bytes(extra=DECLARED))
    assert outcome.verdict is r.Verdict.FAIL
    assert rows[1][:2] == ("declared", "fail")
    assert rows[1][2] == "changed lines no provenance record declares: extra.py lines 1-2"
    # Narrowed to other files (the candidate's diff is against HEAD~1: extra.py only), the
    # same facts pass: nothing it looks at is undeclared (the rule, from the recorded result).
    (record,) = [row.record for row in ledger.records_for(TASK)]
    ref = next(e for e in record.evidence if e.check_id == "check:declared")
    result = json.loads(ledger.blob_path(ref.digest).read_bytes())
    narrowed = r.parse_contract(contract_bytes(extra=DECLARED + 'paths = ["app.py"]\n')).checks[1]
    result["declared"] = r.declared_params(narrowed)
    assert r.derive_check(narrowed, result) == (True, "every added line of 0 file(s) is declared by 1 record(s)")
    # A records list the verifier cannot re-read is never believed, whatever it claims is declared.
    forged = {**result, "facts": {**result["facts"], "records": [1], "declared_files": ["extra.py"]}}
    assert r.derive_check(narrowed, forged) == (False, "the result's list of provenance records is malformed")


def test_the_verifier_rederives_the_check_from_the_stored_record(tmp_path: Path) -> None:
    s = build_sample(tmp_path, check_extra=DECLARED, provenance=TRACE)
    result = verify_receipt(LedgerSource.open(s.root), s.receipt, TrustRoot(frozenset({ADMIN_ID}), "t"))
    assert result.ok and result.derived_eligible, result.defects
    # The record's evidence lists the provenance document it read, so a bundle carries it.
    ledger = Ledger.open(s.root)
    (record,) = [row.record for row in ledger.records_for(TASK) if row.record.tier is r.Tier.DETERMINISTIC]
    ledger.close()
    assert [e.media_type for e in record.evidence if e.check_id == "check:declared:provenance:0"] == [
        r.PROVENANCE_MEDIA_TYPE
    ]


# -- the judge ------------------------------------------------------------------------------------


def _judged(env: tuple[Path, Ledger], model: str, top: str = "") -> r.SampleOutcome:
    repo, ledger = env
    contract = contract_bytes(judge=judge_table("accept", "0.9", model=model), top=top)
    add_provenance(ledger, SIGNERS["agent"], TASK, None, repo=repo, agent_trace=TRACE)
    run = _check(ledger, repo, contract)
    assert run[0].verdict is r.Verdict.PASS, run
    candidate = next(row.record.input_hash for row in ledger.records_for(TASK))
    return run_judge(
        ledger, task_id=TASK, contract_bytes=contract, candidate=candidate, signer=SIGNERS["judge"]
    ).outcome


def test_a_trace_whose_model_shares_the_judges_family_makes_the_judge_refuse(env: tuple[Path, Ledger]) -> None:
    outcome = _judged(env, "claude-opus-4")
    assert outcome.verdict is r.Verdict.REVIEW
    assert outcome.reason == "the judge is of the same model family as the author"


def test_a_model_of_another_family_judges_as_before(env: tuple[Path, Ledger]) -> None:
    assert _judged(env, "gemini-2.5-pro").verdict is r.Verdict.PASS


def test_records_that_contradict_the_contracts_author_model_are_a_defect(env: tuple[Path, Ledger]) -> None:
    outcome = _judged(env, "gemini-2.5-pro", top='author_model = "claude-sonnet-4-5"')
    assert outcome.verdict is r.Verdict.FAIL
    assert outcome.reason == (
        "the contract declares the author model claude-sonnet-4-5; the provenance records name openai/gpt-4o"
    )


# -- the command ----------------------------------------------------------------------------------


def _cli_ledger(tmp: Path, repo: Path) -> dict[str, str]:
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp / "keys")}
    for args in (("init",), ("keys", "generate", "agent", "--role", "agent")):
        res = run_cli(*args, cwd=repo, env=keys)
        assert res.returncode == 0, res.stderr
    return keys


def test_evidence_add_takes_each_source_and_refuses_a_bad_record_in_one_line(env: tuple[Path, Ledger]) -> None:
    repo = env[0]
    keys = _cli_ledger(repo.parent, repo)
    ok = run_cli("evidence", "add", TASK, "--agent-trace", str(TRACE), "--key", "agent", "--json", cwd=repo, env=keys)
    assert ok.returncode == 0, ok.stderr
    said = json.loads(ok.stdout)
    assert said["files"] == ["app.py", "lib/helpers.py"] and said["models"][0] == "anthropic/claude-sonnet-4-5"
    # git-ai: the note on the candidate commit, from refs/notes/ai.
    git(repo, "notes", "--ref=ai", "add", "-F", str(VECTORS / "git-ai-note.txt"), "HEAD")
    noted = run_cli("evidence", "add", TASK, "--git-ai", "--key", "agent", cwd=repo, env=keys)
    assert noted.returncode == 0 and "3 file(s) declared" in noted.stdout, noted.stderr
    # Entire: a checkpoint on its branch, sharded by id.
    _entire_checkpoint(repo, "a3b2c4d5e6f7", ["app.py"])
    entire = run_cli("evidence", "add", TASK, "--entire", "a3b2c4d5e6f7", "--key", "agent", cwd=repo, env=keys)
    assert entire.returncode == 0 and "1 file(s) declared" in entire.stdout, entire.stderr
    bad = _trace(repo.parent, version="one")
    refused = run_cli("evidence", "add", TASK, "--agent-trace", str(bad), "--key", "agent", cwd=repo, env=keys)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "ledger: error: agent-trace record: version must be MAJOR.MINOR or MAJOR.MINOR.PATCH"
    ]
    none = run_cli("evidence", "add", TASK, "--key", "agent", cwd=repo, env=keys)
    assert none.returncode == 2 and "exactly one of" in none.stderr
    ledger = Ledger.open(repo / ".ledger")
    sources = [doc["source"] for _, doc in task_provenance(ledger, TASK) if doc]
    ledger.close()
    assert sources == ["agent-trace", "git-ai", "entire"]


def _entire_checkpoint(repo: Path, cid: str, files: list[str]) -> None:
    """An Entire checkpoint branch as its CLI lays it out, built with git plumbing."""
    folder = "%s/%s" % (cid[:2], cid[2:])
    session = {"checkpoint_id": cid, "session_id": "s-1", "strategy": "manual-commit", "files_touched": files}
    summary = {
        "checkpoint_id": cid,
        "strategy": "manual-commit",
        "files_touched": files,
        "sessions": [{"metadata": "/%s/0/metadata.json" % folder}],
    }
    index = repo / ".git" / "entire-index"
    env_index = {"GIT_INDEX_FILE": str(index)}
    for path, doc in (("%s/metadata.json" % folder, summary), ("%s/0/metadata.json" % folder, session)):
        blob = _git_in(repo, env_index, "hash-object", "-w", "--stdin", stdin=json.dumps(doc))
        _git_in(repo, env_index, "update-index", "--add", "--cacheinfo", "100644,%s,%s" % (blob, path))
    tree = _git_in(repo, env_index, "write-tree")
    commit = _git_in(repo, env_index, "commit-tree", tree, "-m", "Checkpoint: %s" % cid)
    git(repo, "update-ref", "refs/heads/entire/checkpoints/v1", commit)


def _git_in(repo: Path, extra: dict[str, str], *args: str, stdin: str | None = None) -> str:
    import os
    import subprocess

    from conftest import GIT_ENV

    env = {**os.environ, **GIT_ENV, **extra}
    done = subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_add_provenance_refuses_what_it_cannot_read(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    with pytest.raises(InputError, match="has no git-ai note"):
        add_provenance(ledger, SIGNERS["agent"], TASK, None, repo=repo, git_ai="HEAD")
    with pytest.raises(InputError, match="no Entire checkpoint branch"):
        add_provenance(ledger, SIGNERS["agent"], TASK, None, repo=repo, entire="a3b2c4d5e6f7")
