"""The population of changes in a period: what an auditor samples from, one row
per sealed receipt, each verified."""

from __future__ import annotations

import csv
import datetime
import io
import json
import re
from pathlib import Path

from test_human import lower_tiers

import receipts as r
from conftest import ADMIN_ID, SIGNERS, contract_bytes, git, run_cli, sign_decision
from ledger import POPULATION_COLUMNS, Ledger, frozen_clock, population, seal_receipt
from verify import TrustRoot

JAN = datetime.datetime(2027, 1, 10, 12, tzinfo=datetime.UTC).timestamp()
FEB = datetime.datetime(2027, 2, 10, 12, tzinfo=datetime.UTC).timestamp()


def _two_periods(env: tuple[Path, Ledger]) -> tuple[str, str]:
    """An approved, eligible receipt sealed in January; a rejected one in February."""
    repo, ledger = env
    contract = contract_bytes()
    sealed = []
    for when, who, approve in ((JAN, "alice", True), (FEB, "bob", False)):
        with frozen_clock(when):
            run = lower_tiers(env, contract)
            sign_decision(
                ledger, repo, contract, run.record.input_hash, SIGNERS[who], approve=approve, note="looked at it"
            )
            _, appended = seal_receipt(
                ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash
            )
            sealed.append(str(appended.body_hash))
    ledger.checkpoint(SIGNERS["sealer"])
    return sealed[0], sealed[1]


def _day(text: str, end: bool = False) -> int:
    start = datetime.datetime.fromisoformat(text + "T00:00:00+00:00").timestamp()
    return int(start) + (86400 if end else 0)


def test_each_period_lists_the_receipts_sealed_in_it(env: tuple[Path, Ledger]) -> None:
    repo, ledger = env
    january, february = _two_periods(env)
    trust = TrustRoot(frozenset({ADMIN_ID}), "t")
    jan = population(ledger, trust, _day("2027-01-01"), _day("2027-01-31", end=True))
    assert [row.receipt for row in jan] == [january]
    both = population(ledger, trust, _day("2027-01-01"), _day("2027-02-28", end=True))
    assert [row.receipt for row in both] == [january, february]
    assert population(ledger, trust, _day("2026-01-01"), _day("2026-12-31", end=True)) == []
    first, second = both
    head = git(repo, "rev-parse", "HEAD").strip()
    assert (first.commit, first.task, first.verified, first.merge_eligible) == (head, "TASK-1", True, True)
    assert dict(first.tiers) == {"deterministic": "pass", "judge": "pass", "human": "pass"}
    alice = r.fingerprint(SIGNERS["alice"].public_key_blob)
    assert first.approvers == (
        {"name": "alice", "key": alice, "time": int(JAN), "method": "scripted", "decision": "approve"},
    )
    # February's receipt lists both humans' latest decisions on the candidate: alice's
    # approval from January and bob's rejection, which blocks.
    assert second.merge_eligible is False and second.verified is True
    assert sorted((a["name"], a["decision"]) for a in second.approvers) == [("alice", "approve"), ("bob", "reject")]
    assert first.contract_entry is not None and first.contract == str(r.config_hash(contract_bytes()))


def test_the_cli_writes_csv_and_json_an_auditor_can_load(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    january, february = _two_periods(env)
    ledger.close()
    base = ("--dir", str(ledger.root), "report", "--trust", ADMIN_ID)
    out = run_cli(*base, "--from", "2027-01-01", "--to", "2027-02-28", "--csv")
    assert out.returncode == 0, out.stderr
    table = list(csv.DictReader(io.StringIO(out.stdout)))
    assert list(table[0]) == list(POPULATION_COLUMNS)
    assert [(row["receipt"], row["merge_eligible"], row["verified"]) for row in table] == [
        (january, "yes", "yes"),
        (february, "no", "yes"),
    ]
    assert "(scripted)" in table[0]["approvers"] and table[0]["human"] == "pass"
    # Times as a spreadsheet and a person read them: ISO 8601 in UTC, never epoch seconds.
    # A date a spreadsheet reads as a date: ISO 8601 with no zone letter (UTC by the column's name).
    assert re.fullmatch(r"2027-01-\d\dT\d\d:\d\d:\d\d", table[0]["sealed_at_utc"]), table[0]
    assert " at 2027-01-10T12:00:00Z (scripted)" in table[0]["approvers"], table[0]["approvers"]
    as_json = run_cli(*base, "--from", "2027-02-01", "--to", "2027-02-28", "--json")
    assert as_json.returncode == 0 and [row["receipt"] for row in json.loads(as_json.stdout)] == [february]
    readable = run_cli(*base, "--from", "2027-01-01", "--to", "2027-01-31")
    assert readable.returncode == 0 and "1 sealed receipt(s)" in readable.stdout
    for bad in (("--from", "last tuesday", "--to", "2027-01-31"), ("--from", "2027-02-01", "--to", "2027-01-01")):
        res = run_cli(*base, *bad)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    # --reached takes a branch: a moving name or a tag is refused, as is a branch with no history.
    period = ("--from", "2027-01-01", "--to", "2027-01-31", "--csv")
    for branch, said in (("HEAD", "--reached takes a branch"), ("no-such-branch", "cannot read the history")):
        res = run_cli(*base, *period, "--reached", branch)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and said in res.stderr, res.stderr
