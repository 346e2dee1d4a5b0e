"""Every page that states a decision states its exceptions (issue 45): a pass that rests on
a waiver, a pass under a contract an admin weakened, a rejection with its reason, and
evidence removed under the retention policy, each shown by every surface an auditor or a
reviewer reads: `ledger verify` (text and JSON), the PR comment, the bundle's report page,
the web view and its JSON API, and the static site, the pages read in Chromium at a
desktop's and a phone's width.
"""

from __future__ import annotations

import json
import re
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from test_report_page import browser  # noqa: F401 - the module's Chromium, shared
from test_web import _Served

import receipts as r
from conftest import ADMIN_ID, ROLES, SIGNERS, contract_bytes, make_repo, run_cli, sign_decision
from ledger import (
    Ledger,
    add_key,
    build_site,
    export_bundle,
    frozen_clock,
    prune,
    register_contract,
    run_deterministic,
    run_judge,
    seal_receipt,
    set_retention,
    waive_check,
    web_app,
)
from ledger.web import receipt_name
from verify import LedgerSource, TrustRoot

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
WAIVER_REASON = "linter crashes on CI runners, OPS-7"
WEAKENING_REASON = "lint is advisory until the new rules land"
CRITERIA_FROM = "ticket OPS-12, agreed with carol"
REJECTION_NOTE = "the migration is missing"
LINT = '\n[[checks]]\nid = "lint"\ntype = "test_passes"\ncommand = [%s, "-c", "raise SystemExit(1)"]\n' % json.dumps(
    sys.executable
)


@dataclass(frozen=True)
class History:
    root: Path
    waived: str  # a pass resting on a waiver of a failing check
    weakened: str  # a pass under a contract whose failing check an admin dropped
    rejected: str  # bob rejected it, with a reason
    site: Path


def _ladder(ledger: Ledger, repo: Path, task: str, contract: bytes, reviewers: dict[str, bool]) -> str:
    run = run_deterministic(
        ledger, repo=repo, task_id=task, contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    run_judge(ledger, task_id=task, contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"])
    for who, approve in reviewers.items():
        note = REJECTION_NOTE if not approve else "reviewed"
        sign_decision(
            ledger, repo, contract, run.record.input_hash, SIGNERS[who], approve=approve, note=note, task=task
        )
    _, appended = seal_receipt(ledger, task_id=task, signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    return str(appended.body_hash)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    top = tmp_path_factory.mktemp("exceptions")
    repo = make_repo(top / "repo")
    # Everything happened ten days ago, so the retention policy of a day lets raw output go.
    with frozen_clock(time.time() - 10 * 86400):
        ledger = Ledger.create(top / "ledger", SIGNERS["admin"], "admin")
        for name, role in ROLES.items():
            add_key(ledger, SIGNERS["admin"], name, [role], SIGNERS[name].public_key_blob)
        waiving = contract_bytes(task="TASK-1", extra=LINT)
        register_contract(ledger, "TASK-1", waiving, SIGNERS["ci"])
        waive_check(ledger, SIGNERS["admin"], "TASK-1", "lint", WAIVER_REASON, int(time.time()) + 30 * 86400)
        waived = _ladder(ledger, repo, "TASK-1", waiving, {"alice": True})
        strict = contract_bytes(task="TASK-2", extra=LINT)
        register_contract(ledger, "TASK-2", strict, SIGNERS["ci"])
        lowered = contract_bytes(task="TASK-2")
        register_contract(  # drops the failing lint, saying why and on whose word
            ledger, "TASK-2", lowered, SIGNERS["admin"], reason=WEAKENING_REASON, criteria_from=CRITERIA_FROM
        )
        weakened = _ladder(ledger, repo, "TASK-2", lowered, {"alice": True})
        rejected = _ladder(ledger, repo, "TASK-3", contract_bytes(task="TASK-3"), {"alice": True, "bob": False})
        ledger.checkpoint(SIGNERS["sealer"])
    set_retention(ledger, SIGNERS["admin"], 86400, ())
    assert prune(ledger).removed, "the raw output of ten days ago is let go"
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    site = top / "site"
    build_site(lambda: LedgerSource.open(top / "ledger"), TRUST, site)
    return History(top / "ledger", waived, weakened, rejected, site)


# What each receipt's pages must say: its decision, then each exception in words.
def _expected(h: History) -> dict[str, tuple[str, ...]]:
    return {
        h.waived: ("MERGE-ELIGIBLE WITH EXCEPTIONS", "a waiver", WAIVER_REASON, "retention policy"),
        h.weakened: (
            "MERGE-ELIGIBLE WITH EXCEPTIONS",
            "a weakened contract",
            "weakened the contract of TASK-2",
            WEAKENING_REASON,
            CRITERIA_FROM,
        ),
        h.rejected: ("NOT MERGE-ELIGIBLE", "rejected by bob", REJECTION_NOTE),
    }


def _says_all(text: str, wanted: tuple[str, ...], where: str) -> None:
    missing = [w for w in wanted if w not in text]
    assert not missing, "%s does not say %s" % (where, missing)


def test_verify_and_the_pr_comment_state_every_exception(history: History) -> None:
    for receipt, wanted in _expected(history).items():
        base = ("--dir", str(history.root))
        said = run_cli(*base, "verify", receipt, "--trust", ADMIN_ID)
        assert said.stdout.startswith(wanted[0]), said.stdout  # the decision first
        _says_all(said.stdout, wanted, "ledger verify")
        doc = json.loads(run_cli(*base, "verify", receipt, "--trust", ADMIN_ID, "--json").stdout)
        assert doc["headline"].startswith(wanted[0])
        _says_all(json.dumps(doc["exceptions"]), wanted[2:], "ledger verify --json")
        comment = run_cli(*base, "pr-comment", receipt, "--trust", ADMIN_ID)
        assert comment.returncode == 0, comment.stderr
        _says_all(comment.stdout, wanted, "the PR comment")
        # A pass leaning on a waiver or a weakened contract is never worded as a clean pass.
        assert "every check passed" not in comment.stdout + said.stdout


def test_the_web_api_carries_the_exceptions(history: History) -> None:
    client = TestClient(web_app(lambda: LedgerSource.open(history.root), TRUST))
    for receipt, wanted in _expected(history).items():
        doc = client.get("/api/receipt/%s" % receipt_name(receipt)).json()
        assert doc["headline"].startswith(wanted[0])
        _says_all(json.dumps(doc["exceptions"]), wanted[2:], "/api/receipt")


def test_retention_is_named_as_retention_on_the_evidence_link(history: History) -> None:
    client = TestClient(web_app(lambda: LedgerSource.open(history.root), TRUST))
    page = client.get("/receipt/%s.html" % receipt_name(history.waived))
    rows = re.findall(r'<tr><td>([^<]*)</td><td><a href="\.\./evidence/([^"]+)"', page.text)
    stdout_links = [href for item, href in rows if item.endswith(":stdout")]
    assert stdout_links, "the receipt page links its raw output"
    gone = [client.get("/evidence/" + href) for href in stdout_links]
    assert all(g.status_code == 410 and "removed under the retention policy of entry" in g.text for g in gone)
    assert all("older than 24 hours may go" in g.text and "86400" not in g.text for g in gone)  # time for people


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_shows_every_exception_in_chromium(
    history: History,
    browser: Any,  # noqa: F811 - the fixture imported above
    width: int,
    tmp_path: Path,
) -> None:
    served = _Served(history.root)
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        for receipt, wanted in _expected(history).items():
            name = receipt_name(receipt)
            ledger = Ledger.open(history.root)
            try:
                export_bundle(ledger, r.Digest.parse(receipt), tmp_path / ("%s.zip" % name))
            finally:
                ledger.close()
            with zipfile.ZipFile(tmp_path / ("%s.zip" % name)) as zf:
                zf.extractall(tmp_path / name)
            for where, url in (
                ("the web view", "%s/receipt/%s.html" % (served.url, name)),
                ("the static site", (history.site / "receipt" / ("%s.html" % name)).as_uri()),
                ("the bundle's report page", (tmp_path / name / "report.html").as_uri()),
            ):
                page.goto(url)
                decision = page.inner_text("#decision")
                assert decision.startswith(wanted[0]), (where, decision)
                _says_all(page.inner_text("body"), wanted, "%s at %d px" % (where, width))
                assert page.locator("#exceptions").is_visible(), where
                # Readable at this width: nothing pushes the page sideways.
                assert page.evaluate("document.documentElement.scrollWidth") <= width, (where, width)
    finally:
        page.close()
        served.close()
