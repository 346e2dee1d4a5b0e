"""The window onto the ledger (issue 26): `ledger serve` read-only over a real ledger, each
receipt verified when its page is asked for, search through an index the chain keeps
current, a JSON API and a feed; `ledger site build` byte-identical; and the pages read in
Debian's Chromium, with scripts on, hostile text staying text and nothing leaving the
page's own origin."""

from __future__ import annotations

import functools
import re
import shutil
import socket
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from docs_as_written import blocks, run_shell
from starlette.testclient import TestClient
from test_report_page import _chromium

import receipts as r
from conftest import ADMIN_ID, SIGNERS, TASK, build_sample, contract_bytes, flaky_command, free_port, git, run_cli
from ledger import (
    Ledger,
    add_cosignatures,
    build_site,
    record_event,
    register_contract,
    run_deterministic,
    web_app,
)
from ledger.web import receipt_name
from verify import LedgerSource, PostgresSource, Transparency, TrustRoot, WitnessKey

HOSTILE = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"
TRUST = TrustRoot(frozenset({ADMIN_ID}), "test")


def _client(root: Path) -> TestClient:
    return TestClient(web_app(lambda: LedgerSource.open(root), TRUST))


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # The check prints hostile markup: its stdout is evidence the pages show.
    return build_sample(tmp_path_factory.mktemp("web"), command="print(%r)" % HOSTILE)


def test_search_by_commit_finds_the_receipt_and_its_page_shows_the_verifiers_decision(sample: Any) -> None:
    client = _client(sample.root)
    commit = git(sample.repo, "rev-parse", "HEAD")
    found = client.get("/search", params={"q": commit[:12]})
    assert found.status_code == 200
    link = "receipt/%s.html" % receipt_name(sample.receipt)
    assert link in found.text
    page = client.get("/" + link)
    assert page.status_code == 200 and "MERGE-ELIGIBLE (verified)" in page.text
    assert commit in page.text
    api = client.get("/api/receipt/%s" % receipt_name(sample.receipt)).json()
    assert api["verified"] is True and api["derived_eligible"] is True and api["defects"] == []
    # Other criteria: a check id, a signer's name, a verdict and a date range.
    assert link in client.get("/search", params={"q": "tests"}).text
    by_name = client.get("/api/search", params={"q": "sealer"}).json()["results"]
    assert by_name and all(row["signer_name"] == "sealer" for row in by_name)
    passes = client.get("/api/search", params={"verdict": "pass"}).json()["results"]
    assert {row["tier"] for row in passes} == {"deterministic", "judge", "human"}
    assert client.get("/api/search", params={"q": TASK, "to": "2000-01-01"}).json()["results"] == []


def test_a_flipped_byte_in_a_copy_of_the_ledger_reads_rejected_with_the_defect(sample: Any, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sample.root, copy)
    api = _client(copy).get("/api/receipt/%s" % receipt_name(sample.receipt)).json()
    assert api["verified"] is True
    blob = next(p for p in sorted((copy / "blobs").rglob("*")) if p.is_file())
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[0] ^= 1
    blob.write_bytes(bytes(data))
    page = _client(copy).get("/receipt/%s.html" % receipt_name(sample.receipt))
    assert "REJECTED" in page.text and "evidence-altered" in page.text and "VERIFIED" not in page.text


def test_no_method_but_get_and_head_reaches_a_route(sample: Any) -> None:
    client = _client(sample.root)
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        for path in ("/", "/search", "/api/tasks", "/receipt/x.html", "/nowhere"):
            answer = client.request(method, path)
            assert answer.status_code == 405, (method, path)
            assert answer.headers["allow"] == "GET, HEAD"
    head = client.head("/")
    assert head.status_code == 200
    csp = head.headers["content-security-policy"]
    assert "script-src" not in csp and "default-src 'none'" in csp
    assert head.headers["x-content-type-options"] == "nosniff"


def test_the_index_follows_the_chain_as_it_grows(sample: Any, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sample.root, copy)
    client = _client(copy)
    before = len(client.get("/api/chain/0").json())
    ledger = Ledger.open(copy)
    run_deterministic(
        ledger, repo=sample.repo, task_id=TASK, contract_bytes=sample.contract, source="c.toml", signer=SIGNERS["ci"]
    )
    ledger.close()
    rows = client.get("/api/chain/0").json()
    assert len(rows) == before + 1 and rows[-1]["tier"] == "deterministic"


def test_hostile_text_is_escaped_in_pages_the_feed_and_evidence(sample: Any) -> None:
    client = _client(sample.root)
    receipt = client.get("/receipt/%s.html" % receipt_name(sample.receipt)).text
    stdout = next(
        line.split('href="../evidence/')[1].split(".html")[0]
        for line in receipt.split("<tr>")
        if "check:tests:stdout" in line
    )
    shown = client.get("/evidence/%s.html" % stdout)
    assert "&lt;script&gt;document.title=" in shown.text and "<script>" not in shown.text
    feed = client.get("/feed.atom")
    assert feed.headers["content-type"].startswith("application/atom+xml")
    assert ET.fromstring(feed.content).tag == "{http://www.w3.org/2005/Atom}feed"
    assert client.get("/task/%s.html" % "no~3Cb~3Esuch").status_code == 404


def _tampered(root: Path, into: Path) -> Path:
    """A copy of the ledger with the first byte of one evidence blob changed."""
    shutil.copytree(root, into)
    blob = next(p for p in sorted((into / "blobs").rglob("*")) if p.is_file())
    blob.chmod(0o644)
    blob.write_bytes(b"x" + blob.read_bytes()[1:])
    return into


def test_the_feed_tells_a_rejected_receipt_and_a_weakened_contract(sample: Any, tmp_path: Path) -> None:
    def titles(root: Path) -> list[str]:
        feed = ET.fromstring(_client(root).get("/feed.atom").content)
        return [t.text or "" for t in feed.iter("{http://www.w3.org/2005/Atom}title")][1:]

    assert "%s: receipt verified, merge-eligible" % TASK in titles(sample.root)
    copy = _tampered(sample.root, tmp_path / "copy")
    # Which blob sorts first varies with the run; whichever it is, the defect is named.
    rejected = "%s: receipt REJECTED by the verifier: evidence-altered" % TASK
    assert any(t.startswith(rejected) for t in titles(copy))
    ledger = Ledger.open(copy)
    register_contract(ledger, TASK, contract_bytes(command="print('ok')"), SIGNERS["admin"], reason="tests retired")
    ledger.close()
    assert "%s: contract WEAKENED: check tests was changed (reason: tests retired)" % TASK in titles(copy)
    # The task's page names the weakening's reason and its signer beside the revision.
    assert "WEAKENED (reason: tests retired), signed by admin</h3>" in _client(copy).get("/task/%s.html" % TASK).text


def test_the_checkpoints_page_checks_each_cosignature_against_the_witnesses_given(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    note = ledger.checkpoint(SIGNERS["sealer"])
    w1 = WitnessKey("witness.example/w1", r.parse_public_key_blob(SIGNERS["bob"].public_key_blob))
    w2 = WitnessKey("witness.example/w2", r.parse_public_key_blob(SIGNERS["mallory"].public_key_blob))
    for w, signer in ((w1, SIGNERS["bob"]), (w2, SIGNERS["mallory"])):
        add_cosignatures(
            ledger, note.with_signature(r.cosign_note(note.text, w.name, signer, 1_700_000_000)).encode(), (w,)
        )
    ledger.close()

    def checkpoints(policy: Transparency) -> str:
        app = web_app(lambda: LedgerSource.open(s.root), TRUST, policy=policy)
        return TestClient(app).get("/checkpoints.html").text

    page = checkpoints(Transparency(witnesses=(w1,), quorum=1))
    assert "witness.example/w1: verified 2023-11-14 22:13 UTC" in page
    assert "witness.example/w2: untrusted" in page and "quorum met (1 of 1)" in page
    app = web_app(lambda: LedgerSource.open(s.root), TRUST, policy=Transparency(witnesses=(w1,), quorum=1))
    (doc,) = TestClient(app).get("/api/checkpoints").json()
    assert doc["quorum_met"] is True and [c["name"] for c in doc["cosignatures"]] == [w1.name, w2.name]
    # The same name with another key: the stored cosignature does not verify, and the
    # receipt's page, verified under the same policy, is rejected for the quorum.
    impostor = WitnessKey(w1.name, r.parse_public_key_blob(SIGNERS["alice"].public_key_blob))
    policy = Transparency(witnesses=(impostor,), quorum=1)
    page = checkpoints(policy)
    assert "witness.example/w1: does not verify" in page and "quorum NOT met (0 of 1)" in page
    app = web_app(lambda: LedgerSource.open(s.root), TRUST, policy=policy)
    doc = TestClient(app).get("/api/receipt/%s" % receipt_name(s.receipt)).json()
    assert doc["verified"] is False and [d["code"] for d in doc["defects"]] == ["witness-quorum"]
    # The command takes the witnesses as `ledger verify` does.
    line = "%s %s" % (w1.name, r.public_key_line(SIGNERS["bob"].public_key_blob))
    args = ("--dir", str(s.root), "site", "build", str(tmp_path / "site"), "--trust", ADMIN_ID)
    built = run_cli(*args, "--witness", line, "--witness-quorum", "1")
    assert built.returncode == 0, built.stderr
    assert "witness.example/w1: verified" in (tmp_path / "site" / "checkpoints.html").read_text()
    refused = run_cli(*args, "--witness-quorum", "2")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--witness-quorum 2" in refused.stderr


def test_site_build_is_byte_identical_and_never_clobbers_a_folder_it_did_not_write(sample: Any, tmp_path: Path) -> None:
    def tree(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    first, second = tmp_path / "a", tmp_path / "b"
    written = build_site(lambda: LedgerSource.open(sample.root), TRUST, first)
    build_site(lambda: LedgerSource.open(sample.root), TRUST, second)
    assert tree(first) == tree(second) and len(tree(first)) == written
    assert "receipt/%s.html" % receipt_name(sample.receipt) in tree(first)
    build_site(lambda: LedgerSource.open(sample.root), TRUST, first)  # rebuilt in place
    assert tree(first) == tree(second)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    refused = run_cli("--dir", str(sample.root), "site", "build", str(other), "--trust", ADMIN_ID)
    assert refused.returncode == 2 and "is not a site this command built" in refused.stderr
    assert (other / "notes.txt").read_text() == "keep me"
    for name in ("c", "d"):  # the command, as a team's job runs it
        cli = run_cli("--dir", str(sample.root), "site", "build", str(tmp_path / name), "--trust", ADMIN_ID)
        assert cli.returncode == 0 and "files written" in cli.stdout, cli.stderr
    assert tree(tmp_path / "c") == tree(tmp_path / "d") and tree(tmp_path / "c").keys() == tree(first).keys()


# -- in the browser -------------------------------------------------------------------------------


class _Served:
    """The app under uvicorn on a socket already listening: requests wait for it, not a timer."""

    def __init__(self, root: Path | None, open_source: Any = None, trust: Any = TRUST) -> None:
        import uvicorn

        if open_source is None:
            assert root is not None
            open_source = functools.partial(LedgerSource.open, root)

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        config = uvicorn.Config(web_app(open_source, trust), log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        yield b
        b.close()


def _page(browser: Any, origin: str) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900}, java_script_enabled=True)
    elsewhere: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda req: None if req.url.startswith(origin) else elsewhere.append(req.url))

    def dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    return page, elsewhere, dialogs


def test_in_chromium_search_leads_to_the_decision_and_hostile_text_stays_text(
    browser: Any, sample: Any, tmp_path: Path
) -> None:
    # What an agent says is free text too: a claim whose summary is markup.
    root = tmp_path / "said"
    shutil.copytree(sample.root, root)
    ledger = Ledger.open(root)
    record_event(ledger, SIGNERS["agent"], TASK, r.EventType.ANSWER_PROPOSED, None, {"summary": HOSTILE})
    ledger.close()
    served = _Served(root)
    try:
        page, elsewhere, dialogs = _page(browser, served.url)
        page.goto(served.url + "/")
        page.fill("input[name=q]", git(sample.repo, "rev-parse", "HEAD")[:10])
        page.click("header button")
        page.click("a[href*='receipt/']")
        assert "MERGE-ELIGIBLE (verified)" in page.inner_text("main")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        stdout = page.get_attribute("tr:has-text('check:tests:stdout') a", "href")
        page.goto(page.url.rsplit("/", 2)[0] + "/" + stdout.removeprefix("../"))
        assert "<script>document.title='owned'</script>" in page.inner_text("pre")
        assert page.title() != "owned" and dialogs == []
        for path in ("/", "/chain/0.html", "/keys.html", "/checkpoints.html", "/task/%s.html" % TASK):
            page.goto(served.url + path)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280, path
        # The contract's text (its command prints the markup) and the agent's claim are shown
        # on the task's page as text.
        assert "<script>document.title='owned'</script>" in page.inner_text("main")
        assert "event answer_proposed: %s" % HOSTILE in page.inner_text("main")
        assert page.title() != "owned" and dialogs == []
        assert elsewhere == []
        page.close()
    finally:
        served.close()
    tampered = _Served(_tampered(sample.root, tmp_path / "copy"))
    try:
        page, _, _ = _page(browser, tampered.url)
        page.goto(tampered.url + "/receipt/%s.html" % receipt_name(sample.receipt))
        text = page.inner_text("main")
        assert "REJECTED" in text and "evidence-altered" in text
        page.close()
    finally:
        tampered.close()


def _commit_to_decision(browser: Any, served: _Served, commit: str) -> str:
    """As a reviewer would: search the commit from the front page, open the receipt; the
    page's main text (nothing requested off the origin, nothing wider than 1280 px)."""
    try:
        page, elsewhere, dialogs = _page(browser, served.url)
        page.goto(served.url + "/")
        page.fill("input[name=q]", commit)
        page.click("header button")
        page.click("a[href*='receipt/']")
        text = str(page.inner_text("main"))
        for path in ("", "/checkpoints.html", "/keys.html", "/chain/0.html"):
            if path:
                page.goto(served.url + path)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280, path
        assert elsewhere == [] and dialogs == []
        page.close()
        return text
    finally:
        served.close()


def test_in_chromium_the_demo_ledger_and_its_tampered_copy(browser: Any, tmp_path: Path) -> None:
    demo = run_cli("demo", "--keep", str(tmp_path / "ws"))
    assert demo.returncode == 0, demo.stderr
    commit = re.search(r"commit ([0-9a-f]{7}): DEMO-1", demo.stdout)
    receipt = re.search(r"receipt (blake3:[0-9a-f]{64}) merge_eligible=true", demo.stdout)
    assert commit and receipt, demo.stdout
    admin = r.parse_public_key_line((tmp_path / "ws" / "keys" / "admin.pub").read_text())[0]
    trust = TrustRoot(frozenset({r.fingerprint(admin)}), "the demo admin key")
    root = tmp_path / "ws" / "repo" / ".ledger"
    text = _commit_to_decision(browser, _Served(root, trust=trust), commit.group(1))
    assert "MERGE-ELIGIBLE (verified)" in text and receipt.group(1) in text
    # The demo's own tampered copy (one byte of a tier record's body): the same page, rejected.
    tampered = _Served(tmp_path / "ws" / "tampered-ledger", trust=trust)
    try:
        page, _, _ = _page(browser, tampered.url)
        page.goto(tampered.url + "/receipt/%s.html" % receipt_name(receipt.group(1)))
        shown = page.inner_text("main")
        assert "REJECTED" in shown and "VERIFIED" not in shown and "Defects" in shown
        page.close()
    finally:
        tampered.close()


def test_in_chromium_the_shared_store_and_a_mirror_pulled_from_it(browser: Any, pg_url: str, tmp_path: Path) -> None:
    s = build_sample(tmp_path, store=pg_url)
    commit = git(s.repo, "rev-parse", "HEAD")[:12]
    text = _commit_to_decision(browser, _Served(None, lambda: PostgresSource.open_url(pg_url)), commit)
    assert "MERGE-ELIGIBLE (verified)" in text and s.receipt in text
    pulled = run_cli("pull", "--from", pg_url, "--to", str(tmp_path / "mirror"))
    assert pulled.returncode == 0, pulled.stderr
    text = _commit_to_decision(browser, _Served(tmp_path / "mirror"), commit)
    assert "MERGE-ELIGIBLE (verified)" in text and s.receipt in text


def test_the_static_site_reads_the_same_in_chromium(browser: Any, sample: Any, tmp_path: Path) -> None:
    build_site(lambda: LedgerSource.open(sample.root), TRUST, tmp_path / "site")
    page, elsewhere, dialogs = _page(browser, "file://")
    page.goto((tmp_path / "site" / "commits.html").as_uri())
    page.click("a[href*='receipt/']")
    assert "MERGE-ELIGIBLE (verified)" in page.inner_text("main")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert elsewhere == [] and dialogs == []
    page.close()


def test_the_shared_store_is_read_in_a_session_that_cannot_write(pg_url: str, tmp_path: Path) -> None:
    s = build_sample(tmp_path, store=pg_url)
    client = TestClient(web_app(lambda: PostgresSource.open_url(pg_url), TRUST))
    commit = git(s.repo, "rev-parse", "HEAD")
    link = "receipt/%s.html" % receipt_name(s.receipt)
    assert link in client.get("/search", params={"q": commit[:12]}).text
    page = client.get("/" + link)
    assert "MERGE-ELIGIBLE (verified)" in page.text
    source = PostgresSource.open_url(pg_url)
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            source.conn.execute("DELETE FROM entries")
    finally:
        source.close()
    assert client.get("/api/chain/0").json()[-1]["kind"] == "receipt"


def test_pass_k_per_check_tells_a_flaky_check_from_a_steady_one(tmp_path: Path) -> None:
    # A check run three times that fails its second run: 2 of 3 passed, pass^3 is 0.
    s = build_sample(tmp_path, command=flaky_command(tmp_path / "runs"), check_extra="runs = 3\nmin_passes = 2\n")
    page = _client(s.root).get("/checks.html").text
    row = page.split("<td>tests</td>")[1].split("</tr>")[0]
    assert row == "<td>3</td><td>2</td><td>0.67</td><td>0.00</td>"
    assert 'aria-label="pass^k per check"' in page


def test_the_candidate_the_index_names_is_the_snapshots(sample: Any) -> None:
    from ledger.web import ChainIndex

    index = ChainIndex()
    with LedgerSource.open(sample.root) as source:
        assert index.update(source) == source.count()
        assert index.update(source) == 0  # nothing new: nothing read
    (receipt,) = index.of_kind(r.EntryKind.RECEIPT)
    found = index.commit_of(receipt.candidate)
    assert found is not None and found[0] == git(sample.repo, "rev-parse", "HEAD")


# -- docs/web.md, as written ----------------------------------------------------------------------


def _docs_env(sample: Any) -> dict[str, str]:
    import os
    import sys

    path = "%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", ""))
    return {**os.environ, "PATH": path, "LEDGER_DIR": str(sample.root), "LEDGER_ADMIN_KEY": ADMIN_ID}


def test_the_static_site_block_of_docs_web_runs_as_written(sample: Any, tmp_path: Path) -> None:
    (block,) = blocks("web.md", "Publish a static site", "sh")
    done = run_shell(block.text, tmp_path, _docs_env(sample))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "public" / "receipt" / ("%s.html" % receipt_name(sample.receipt))).is_file()
    again = run_shell(block.text, tmp_path, _docs_env(sample))  # a rebuild replaces it
    assert again.returncode == 0, again.stderr


def test_the_serve_blocks_of_docs_web_run_as_written(sample: Any, tmp_path: Path) -> None:
    import re
    import subprocess

    serve, ask = blocks("web.md", "Run it for a team", "sh")
    # The one change: port 8000 (the docs' example) becomes a free one, as a site's names do.
    port = free_port()
    env = _docs_env(sample)
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", serve.text.replace("8000", str(port))],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline()  # printed once the socket listens: the signal to go on
        assert re.fullmatch(r"serving http://127\.0\.0\.1:%d/ \(read-only; stop with Ctrl-C\)\n" % port, said), said
        done = run_shell(ask.text.replace("8000", str(port)), tmp_path, env)
        assert done.returncode == 0, done.stderr
        assert '"task": "%s"' % TASK in done.stdout and '"tier": "deterministic"' in done.stdout
    finally:
        proc.terminate()
        proc.wait()


def test_slow_clients_do_not_hold_the_server(sample: Any, tmp_path: Path) -> None:
    # Issue 47: `ledger serve` had no header-read timeout: half-sent requests held their
    # sockets for ever. A bounded load of them: a well-behaved request is answered during
    # the attack, each slow connection is closed by the server, and one is answered after.
    import subprocess
    import sys
    import urllib.request

    port = free_port()
    cmd = [sys.executable, "-m", "ledger", "--dir", str(sample.root), "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--header-timeout", "1", "--trust", ADMIN_ID], cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    slow: list[socket.socket] = []
    try:
        assert proc.stderr is not None and proc.stderr.readline().startswith("serving ")  # it listens
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never the rest
            slow.append(s)
        with urllib.request.urlopen("http://127.0.0.1:%d/api/tasks" % port, timeout=30) as reply:
            assert reply.status == 200 and TASK in reply.read().decode()
        for s in slow:  # the server closes each one: reading ends at EOF (a timeout here fails)
            s.settimeout(60)
            while s.recv(1024):
                pass
        with urllib.request.urlopen("http://127.0.0.1:%d/api/tasks" % port, timeout=30) as reply:
            assert reply.status == 200
    finally:
        for s in slow:
            s.close()
        proc.terminate()
        assert proc.wait(timeout=60) is not None  # SIGTERM stops it
