"""The auditor's page, read in a real browser: Debian's Chromium driven by
Playwright renders the report.html of a merge-eligible, a failing and a rejected receipt
from their unpacked bundles, and the test asserts what a reader sees. Screenshots are
kept as test artifacts (LEDGER_TEST_ARTIFACTS, default test-artifacts/)."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, build_sample, run_cli, sign_decision
from ledger import Ledger, export_bundle, seal_receipt

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("LEDGER_TEST_ARTIFACTS", ROOT / "test-artifacts"))
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror=window.pwned=2> & "quoted"'


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "the page tests need Debian's chromium (apt-get install chromium; .ci/run installs it)"
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # Root in a container has no user namespace for Chromium's sandbox.
        b = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _bundle(tmp: Path, verdicts: dict[r.Tier, r.Verdict], hostile: bool = False) -> Path:
    """A sample receipt (tests/conftest.build_sample) exported and unpacked; with ``hostile``,
    a second approver's comment is hostile markup and the receipt is sealed again."""
    s = build_sample(tmp, {**{t: r.Verdict.PASS for t in r.LADDER}, **verdicts})
    ledger = Ledger.open(s.root)
    receipt = r.Digest.parse(s.receipt)
    if hostile:
        candidate = r.decode_receipt(ledger.receipt(receipt)[0].body).input_hash
        sign_decision(ledger, s.repo, s.contract, candidate, SIGNERS["bob"], note=HOSTILE)
        receipt = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=candidate)[1].body_hash
    ledger.checkpoint(SIGNERS["sealer"])
    export_bundle(ledger, receipt, tmp / "bundle.zip")
    ledger.close()
    out = tmp / "unpacked"
    with zipfile.ZipFile(tmp / "bundle.zip") as zf:
        zf.extractall(out)
    return out


def _read(browser: Any, unpacked: Path, name: str) -> tuple[Any, Any, list[str]]:
    """The page with JavaScript off (it must read without scripts), every request it made
    recorded (it must make none beyond its own file), and a full-page screenshot kept."""
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto((unpacked / "report.html").as_uri())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / ("report-%s.png" % name)), full_page=True)
    page.emulate_media(media="print")
    page.screenshot(path=str(ARTIFACTS / ("report-%s-print.png" % name)), full_page=True)
    page.emulate_media(media="screen")
    return context, page, requested


def _links_resolve(page: Any, unpacked: Path) -> int:
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
    for href in hrefs:
        assert not href.startswith(("http:", "https:", "/", "..")), href
        assert (unpacked / href).is_file(), "evidence link %s resolves to no file in the bundle" % href
    return len(hrefs)


def test_a_merge_eligible_receipt_reads_as_one_and_hostile_text_stays_text(browser: Any, tmp_path: Path) -> None:
    unpacked = _bundle(tmp_path, {}, hostile=True)
    context, page, requested = _read(browser, unpacked, "eligible")
    try:
        assert page.inner_text("#decision").startswith("MERGE-ELIGIBLE")
        # At 1280 px (a laptop) nothing runs off the page: no sideways scrolling.
        page.set_viewport_size({"width": 1280, "height": 800})
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 1280, "the page is %d px wide at a 1280 px window" % wide
        assert _links_resolve(page, unpacked) >= 5
        assert requested == [(unpacked / "report.html").as_uri()]  # nothing fetched: self-contained
        text = page.inner_text("body")
        assert HOSTILE in text  # shown as the characters it is
        assert page.eval_on_selector_all("script", "s => s.length") == 0
        assert page.eval_on_selector_all("img", "i => i.length") == 0
        for heading in ("Candidate", "Contract", "Tiers", "Checks", "Approvals and rejections", "Timeline", "Signers"):
            assert heading in text
        assert "ledger verify --bundle" in text and "a test task" in text  # how to re-check; the goal
        rows = page.inner_text("table:below(h2:text('Approvals and rejections'))")
        assert "alice" in rows and "bob" in rows and "scripted" in rows
        judge = page.inner_text("tr:has(td:text-is('judge'))")
        assert "pass: accepted at confidence" in judge, judge  # the judge's reasoning is shown
    finally:
        context.close()
    # And with scripts on, the hostile comment still does nothing.
    context = browser.new_context()
    page = context.new_page()
    page.goto((unpacked / "report.html").as_uri())
    assert page.evaluate("typeof window.pwned") == "undefined"
    context.close()


def test_a_failing_check_shows_its_reason_and_evidence(browser: Any, tmp_path: Path) -> None:
    unpacked = _bundle(tmp_path, {r.Tier.DETERMINISTIC: r.Verdict.FAIL})
    context, page, _ = _read(browser, unpacked, "failing")
    try:
        banner = page.inner_text("#decision")
        assert banner.startswith("NOT MERGE-ELIGIBLE (verified): tier deterministic verdict is fail"), banner
        row = page.locator("tr", has=page.locator("td", has_text="test_passes"))
        assert "fail" in row.inner_text() and "exit code 1" in row.inner_text()
        assert _links_resolve(page, unpacked) >= 3
        # The failing check's own output is one click away, and is what the bundle holds.
        href = row.locator("a", has_text="check:tests:stderr").get_attribute("href")
        assert r.content_digest((unpacked / href).read_bytes()).hex == href.split("/")[1]
    finally:
        context.close()


def test_a_rejected_receipt_names_who_rejected_and_why(browser: Any, tmp_path: Path) -> None:
    unpacked = _bundle(tmp_path, {r.Tier.HUMAN: r.Verdict.FAIL})
    context, page, _ = _read(browser, unpacked, "rejected")
    try:
        banner = page.inner_text("#decision")
        alice = r.fingerprint(SIGNERS["alice"].public_key_blob)
        assert banner.startswith("NOT MERGE-ELIGIBLE (verified): tier human verdict is fail by alice (%s)" % alice), (
            banner
        )
        rows = page.inner_text("table:below(h2:text('Approvals and rejections'))")
        assert "reject" in rows and "alice" in rows and "reviewed" in rows and alice in rows
        assert _links_resolve(page, unpacked) >= 3
    finally:
        context.close()


def test_one_receipts_page_from_the_ledger(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    out = tmp_path / "page.html"
    res = run_cli("--dir", str(s.root), "report", s.receipt, "--html", "-o", str(out), "--trust", ADMIN_ID)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "MERGE-ELIGIBLE" in page and "<a href" not in page  # no bundle beside it: evidence named, not linked
    bad = run_cli("--dir", str(s.root), "report", s.receipt, "--trust", ADMIN_ID)
    assert bad.returncode == 2 and "report HASH --html" in bad.stderr


def test_a_tier_with_too_few_approvals_does_not_read_as_a_pass(tmp_path: Path) -> None:
    # The page agrees with itself: the banner's reason and the tiers table say the same.
    from verify import report_html

    manifest = json.loads((_bundle(tmp_path, {}) / "manifest.json").read_text())
    manifest["merge_eligible"] = False
    manifest["verification"]["merge_eligible_derived"] = False
    manifest["verification"]["not_eligible_because"] = ["1 of 2 required human approvals"]
    page = report_html(manifest)
    human = page[page.index("<tr><td>human</td>") :].split("</tr>")[0]
    assert "<td class=missing>pass (1 of 2 approvals)</td>" in human, human
    assert "1 of 2 required human approvals" in page[: page.index("<h2>")]  # the banner
