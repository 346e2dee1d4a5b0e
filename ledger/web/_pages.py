"""The pages of the web view and of the static site, rendered once here: HTML that needs
no script, every ledger field escaped, links relative so that the same bytes work behind
a reverse proxy's prefix and on a static host. A receipt's decision is the verifier's,
computed when its page is rendered, never read from the index.
"""

from __future__ import annotations

import datetime
import html
import json
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from receipts import Digest, EntryKind, FormatError, ReceiptsError, TierRecord, decode_as, parse_note
from verify import (
    LedgerSource,
    Transparency,
    Trust,
    cosignature_statuses,
    exceptions,
    exceptions_html,
    headline,
    read_blob,
    verify_receipt,
)

from ._branch import Branch
from ._index import ChainIndex, IndexRow, TaskSummary

__all__ = ["Pages", "Page", "CSP", "STYLE", "page_name", "receipt_name", "PAGE_SIZE", "MAX_SHOWN"]

PAGE_SIZE = 100  # chain rows (and search results) per page
TASK_ROWS = 500  # a task's page shows its newest entries, and says so when there are more
COMMITS_SHOWN = 500  # branch commits per commits page
MAX_SHOWN = 256 << 10  # the most of an evidence blob a page shows as text
FEED_VERIFIED = 20  # the feed verifies its newest receipts by proof; older ones say their claim
# No script, nothing from another origin: the CSS is our own file.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
STYLE = """body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px;color:#1a1a1a}
header{display:flex;gap:16px;align-items:baseline;border-bottom:1px solid #ccc;padding:8px 0;flex-wrap:wrap}
header a{text-decoration:none}table{border-collapse:collapse;width:100%;table-layout:fixed}
td,th{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
code,pre{font:13px ui-monospace,monospace;overflow-wrap:anywhere;white-space:pre-wrap}p,li,dd{overflow-wrap:anywhere}
.ok{background:#e5f5e5;border:2px solid #2a7a2a;padding:8px}.bad{background:#fbe4e4;border:2px solid #a02020;padding:8px}
.pass{color:#2a7a2a}.fail{color:#a02020}svg{max-width:100%;height:auto}form{margin:12px 0}
@media print{header form{display:none}}
"""
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def page_name(text: str) -> str:
    """A task id or hash as one path segment of a file name (``~XX`` for each other byte)."""
    return _SAFE.sub(lambda m: "".join("~%02X" % b for b in m.group(0).encode()), text)


def receipt_name(body_hash: str) -> str:
    """A receipt's page name: its hash's hex digits (the algorithm is always BLAKE3, §2)."""
    return page_name(body_hash.removeprefix("blake3:"))


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(ts: int) -> str:
    if not ts:
        return "not recorded"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True, slots=True)
class Page:
    """A rendered page: its status, body and media type."""

    status: int
    body: bytes
    media_type: str = "text/html; charset=utf-8"
    download: str | None = None  # a file name: the page is offered as an attachment, never shown


class Pages:
    """Renders every page from one index and the verifier's source.

    Args:
        index: the chain's index, updated before each page.
        open_source: opens the ledger as the auditor reads it (each receipt page verifies by proof).
        trust: the trust a receipt is verified against, as the CLI takes it.
        title: the site's name, shown on every page.
        static: render for a static host (no search form; binary evidence described, not served).
        policy: the witnesses, auditing witnesses and checkpoint the auditor asks for, as
            `ledger verify` takes them; receipts and checkpoints are checked against it.
        branch: the target branch in its repository, read from git: the commits page lists
            its commits and search finds a receipt by a commit on it (through its tree).
    """

    def __init__(
        self,
        index: ChainIndex,
        open_source: Callable[[], LedgerSource],
        trust: Trust,
        title: str = "receipt-ledger",
        static: bool = False,
        policy: Transparency | None = None,
        branch: Branch | None = None,
    ) -> None:
        self.index = index
        self.branch = branch or Branch(None, "main")
        self.policy = policy or Transparency()
        self.open_source = open_source
        self.trust = trust
        self.title = title
        self.static = static  # a static site has no search: its header links the commits' list instead

    # -- the frame -----------------------------------------------------------------------------

    def _frame(self, title: str, body: str, depth: int, status: int = 200) -> Page:
        up = "../" * depth
        nav = (
            '<a href="%sindex.html">Tasks</a> <a href="%schain/0.html">Chain</a> <a href="%skeys.html">Keys</a> '
            '<a href="%scheckpoints.html">Checkpoints</a> <a href="%schecks.html">Checks</a> '
            '<a href="%sfeed.atom">Feed</a>' % (up, up, up, up, up, up)
        )
        search = (
            '<a href="%scommits.html">Commits</a>' % up
            if self.static
            else '<form action="%ssearch" method="get"><input name="q" aria-label="search" '
            'placeholder="commit, task, check, signer"> <button>Search</button></form>' % up
        )
        doc = (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta http-equiv="Content-Security-Policy" content="%s">'
            '<link rel="stylesheet" href="%sstyle.css"><title>%s · %s</title></head>'
            "<body><header><strong>%s</strong> %s %s</header><main><h1>%s</h1>%s</main></body></html>\n"
            % (_e(CSP), up, _e(title), _e(self.title), _e(self.title), nav, search, _e(title), body)
        )
        return Page(status, doc.encode())

    def _link_receipt(self, row: IndexRow, depth: int) -> str:
        return '<a href="%sreceipt/%s.html">%s</a>' % (
            "../" * depth,
            receipt_name(row.body_hash),
            _e(row.body_hash[:19]),
        )

    def _link_task(self, task: str, depth: int) -> str:
        return '<a href="%stask/%s.html">%s</a>' % ("../" * depth, page_name(task), _e(task))

    def _rows_table(self, rows: list[IndexRow], depth: int) -> str:
        out = [
            "<table><thead><tr><th>#</th><th>When</th><th>Task</th><th>What</th><th>Signed by</th>"
            "<th>Entry</th></tr></thead><tbody>"
        ]
        for row in rows:
            what = _e(row.summary)
            if row.verdict in ("pass", "eligible"):
                what = '<span class="pass">%s</span>' % what
            elif row.verdict in ("fail", "not eligible"):
                what = '<span class="fail">%s</span>' % what
            # A record or event links to the newest receipt of its candidate, where one was sealed.
            receipt = self.index.receipt_of(row.candidate) if row.candidate else None
            if row.kind == EntryKind.RECEIPT:
                entry = self._link_receipt(row, depth)
            else:
                entry = "<code>%s</code>" % _e(row.body_hash[:19])
                entry += " (%s)" % self._link_receipt(receipt, depth) if receipt is not None else ""
            out.append(
                "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>"
                % (
                    row.seq,
                    _e(_when(row.time)),
                    self._link_task(row.task, depth) if row.task else "",
                    what,
                    _e(row.signer_name or row.signer[:20]),
                    entry,
                )
            )
        out.append("</tbody></table>")
        return "".join(out)

    # -- pages ---------------------------------------------------------------------------------

    def tasks(self) -> Page:
        rows = [
            "<tr><td>%s</td><td>%s</td><td>%d</td><td>%s</td></tr>"
            % (self._link_task(t.task, 0), _e(self._task_state(t)), t.entries, _e(_when(t.last_time)))
            for t in self.index.task_summaries()
        ]
        table = (
            "<table><thead><tr><th>Task</th><th>Receipts (the claims; open a receipt for the verifier's decision)</th>"
            "<th>Entries</th><th>Last activity</th></tr></thead><tbody>%s</tbody></table>" % "".join(rows)
        )
        return self._frame("Tasks", table + self._weekly_chart(), 0)

    def _task_state(self, task: TaskSummary) -> str:
        """A task's receipts as the gate would look for them: the newest that claims
        eligibility (what a merge of its commit rests on), then a newer one that does not.
        """
        if task.receipt is None:
            return "no receipt yet"
        newest = "latest receipt claims: %s (commit %s)" % (task.receipt.verdict, self._commit_text(task.receipt))
        if task.eligible is None or task.eligible.seq == task.receipt.seq:
            return newest
        return "merge-eligible receipt claimed for commit %s; %s" % (self._commit_text(task.eligible), newest)

    def _commit_text(self, receipt: IndexRow) -> str:
        found = self.index.commit_of(receipt.candidate)
        return found[0][:12] if found else "not recorded"

    def _task_document(self, task: TaskSummary) -> dict[str, Any]:
        return {
            "task": task.task,
            "entries": task.entries,
            "last": task.last_time,
            "latest_receipt": task.receipt.body_hash if task.receipt else None,
            "latest_claim": task.receipt.verdict if task.receipt else None,
            "eligible_receipt": task.eligible.body_hash if task.eligible else None,
            "state": self._task_state(task),
        }

    def task(self, task: str) -> Page:
        summary = self.index.summary_of(task)
        if summary is None:
            return self._frame("No such task", "<p>No entry names task %s.</p>" % _e(task), 1, 404)
        entries = self.index.task_rows(task, newest=TASK_ROWS)
        revisions = "".join(
            '<h3 class="%s">Contract revision at entry %d%s</h3>%s<pre>%s</pre>'
            % (
                "fail" if row.weakened else "",
                row.seq,
                ": WEAKENED (%s), signed by %s" % (row.provenance, row.signer_name or row.signer)
                if row.weakened
                else "",
                "<ul>%s</ul>" % "".join("<li>%s</li>" % _e(w) for w in row.weakened) if row.weakened else "",
                _e(row.text),
            )
            for row in self.index.task_rows(task, kind=EntryKind.CONTRACT)
        )
        shown = (
            "<p>The newest %d of the task's %d entries; the rest are on the chain pages.</p>"
            % (len(entries), summary.entries)
            if len(entries) < summary.entries
            else ""
        )
        body = (
            "<p>%s</p>" % _e(self._task_state(summary))
            + self._timeline(entries)
            + shown
            + self._rows_table(entries, 1)
            + "<h2>Contract revisions</h2>"
            + revisions
        )
        return self._frame("Task %s" % task, body, 1)

    def receipt(self, target: str) -> Page:
        row = self.index.row(target)
        if row is None or row.kind != EntryKind.RECEIPT:
            return self._frame("No such receipt", "<p>No receipt %s in this ledger.</p>" % _e(target), 1, 404)
        doc = self.receipt_document(target)
        clean = doc["verified"] and doc["derived_eligible"] and not doc["headline"].startswith("MERGE-ELIGIBLE WITH")
        # The decision first, in words; the exceptions it rests on right under it.
        banner = '<p class="%s" id="decision"><strong>%s</strong></p>%s' % (
            "ok" if clean else "bad",
            _e(doc["headline"]),
            exceptions_html(doc["exceptions"]),
        )
        defects = "".join("<li><code>%s</code> %s</li>" % (_e(d["code"]), _e(d["message"])) for d in doc["defects"])
        tiers = "".join(
            "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>"
            % (_e(t["tier"]), _e(t["claimed"]), _e(t["derived"]), _e(t["why"]))
            for t in doc["tiers"]
        )
        commit, tree = self.index.commit_of(row.candidate) or ("", "")
        body = (
            banner
            + ("<h2>Defects</h2><ul>%s</ul>" % defects if defects else "")
            + "<dl><dt>Task</dt><dd>%s</dd><dt>Commit</dt><dd><code>%s</code></dd><dt>Tree</dt><dd><code>%s</code></dd>"
            "<dt>Sealed</dt><dd>%s by %s</dd><dt>Receipt</dt><dd><code>%s</code></dd></dl>"
            % (
                self._link_task(row.task or "", 1),
                _e(commit or "not recorded"),
                _e(tree or "not recorded"),
                _e(_when(row.time)),
                _e(row.signer_name or row.signer),
                _e(target),
            )
            + "<h2>Tiers</h2><table><thead><tr><th>Tier</th><th>Record says</th><th>Derived by the verifier</th><th>Why</th></tr></thead>"
            "<tbody>%s</tbody></table>"
            % tiers
            + self._evidence_list(row)
            + "<p>Check it yourself: <code>ledger verify %s</code></p>" % _e(target)
        )
        return self._frame("Receipt of %s" % (row.task or ""), body, 1)

    def _evidence_list(self, receipt: IndexRow) -> str:
        """The evidence of the receipt's candidate's tier records, each linked to its page."""
        items = []
        for row in self.evidence_rows(receipt):
            for check_id, digest, size in row.evidence:
                items.append(
                    '<tr><td>%s</td><td><a href="../evidence/%s.html">%s</a></td><td>%d bytes</td></tr>'
                    % (_e("%s: %s" % (row.tier, check_id)), _e(digest.removeprefix("blake3:")), _e(digest[:19]), size)
                )
        if not items:
            return ""
        return (
            "<h2>Evidence</h2><table><thead><tr><th>Record: item</th><th>Blob</th><th>Size</th></tr></thead>"
            "<tbody>%s</tbody></table>" % "".join(items)
        )

    def evidence_rows(self, receipt: IndexRow) -> list[IndexRow]:
        """The task's tier records on the receipt's candidate, appended before the receipt."""
        return self.index.records_before(receipt)

    def receipt_document(self, target: str) -> dict[str, Any]:
        """The verifier's result for one receipt, as `ledger verify --json` gives it."""
        with self.open_source() as source:
            result = verify_receipt(source, target, self.trust, self.policy)
        doc = result.as_dict()
        doc["verified"] = result.ok
        doc["derived_eligible"] = bool(result.ok and result.derived_eligible)
        doc["eligibility_reasons"] = list(result.eligibility_reasons)
        notes = exceptions(result)
        doc["headline"] = headline(result, notes)
        doc["exceptions"] = [n.as_dict() for n in notes]
        doc["defects"] = [{"code": d.code, "message": d.message} for d in result.defects]
        doc["tiers"] = [
            {
                "tier": t.tier.value,
                "claimed": t.status,
                "derived": t.derived or "not re-derived",
                "why": t.reason or t.detail,
            }
            for t in result.tiers
        ]
        return doc

    def chain(self, page: int) -> Page:
        total = self.index.count()
        last = max(0, (total - 1) // PAGE_SIZE)
        if page < 0 or page > last:
            return self._frame("No such page", "<p>The chain has pages 0 to %d.</p>" % last, 1, 404)
        rows = self.index.rows_between(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)
        nav = " ".join(
            '<a href="%d.html">%s</a>' % (n, label)
            for n, label in ((page - 1, "newer entries ←"), (page + 1, "→ later entries"))
            if 0 <= n <= last
        )
        return self._frame("Chain, page %d of %d" % (page, last), "<p>%s</p>%s" % (nav, self._rows_table(rows, 1)), 1)

    def keys(self) -> Page:
        rows = self.index.of_kind(EntryKind.GENESIS, EntryKind.KEY_ADD, EntryKind.KEY_REVOKE)
        return self._frame("Keys and their history", self._rows_table(rows, 0), 0)

    def search(self, query: dict[str, str]) -> Page:
        page = _page_number(query.get("page"))
        found = self.search_rows(query, page)
        rows = found[:PAGE_SIZE]
        form = (
            '<form action="search" method="get"><input name="q" value="%s" aria-label="text"> '
            '<select name="verdict" aria-label="verdict">%s</select> '
            '<input name="from" type="date" value="%s" aria-label="from"> '
            '<input name="to" type="date" value="%s" aria-label="to"> <button>Search</button></form>'
            % (
                _e(query.get("q", "")),
                "".join(
                    '<option value="%s"%s>%s</option>'
                    % (_e(v), " selected" if query.get("verdict") == v else "", _e(v or "any verdict"))
                    for v in ("", "pass", "fail", "skip", "review", "eligible", "not eligible")
                ),
                _e(query.get("from", "")),
                _e(query.get("to", "")),
            )
        )
        first = page * PAGE_SIZE
        said = (
            "<p>Results %d to %d, newest first.</p>" % (first + 1, first + len(rows))
            if rows
            else "<p>No %sresult.</p>" % ("further " if page else "")
        )
        asked = {k: v for k, v in query.items() if k in ("q", "verdict", "from", "to") and v}
        nav = " ".join(
            '<a href="search?%s">%s</a>' % (_e(urllib.parse.urlencode({**asked, "page": n})), label)
            for n, label, shown in (
                (page - 1, "← newer results", page > 0),
                (page + 1, "older results →", len(found) > PAGE_SIZE),
            )
            if shown
        )
        return self._frame("Search", form + said + self._rows_table(rows, 0) + ("<p>%s</p>" % nav if nav else ""), 0)

    def search_rows(self, query: dict[str, str], page: int = 0) -> list[IndexRow]:
        """One page of results (and one more row when there is a next page)."""
        text = query.get("q", "")
        return self.index.search(
            text,
            query.get("verdict", ""),
            _day(query.get("from")),
            _day(query.get("to"), 86400),
            trees=self.branch.trees_named(text),
            offset=page * PAGE_SIZE,
            limit=PAGE_SIZE + 1,
        )

    def checkpoints(self) -> Page:
        """The signed checkpoints, newest first: the log's signer, then each cosignature
        checked against the witnesses this view was given (`--witness`,
        `--auditing-witness`), and whether the witness quorum is met.
        """
        rows = [self._checkpoint_row(doc) for doc in self.checkpoint_documents()]
        quorum = self.policy.quorum
        said = "<p>Cosignatures are checked against %d trusted witness key(s); %s.</p>" % (
            len(self.policy.witnesses) + len(self.policy.auditors),
            "a quorum of %d is required" % quorum if quorum else "no quorum is required",
        )
        table = (
            "<table><thead><tr><th>Size</th><th>Covers entries up to</th><th>Origin</th><th>Root</th><th>Signed by</th>"
            "<th>Witnesses</th></tr>"
            "</thead><tbody>%s</tbody></table>" % "".join(rows)
        )
        return self._frame("Checkpoints", said + table if rows else "<p>No checkpoint has been signed.</p>", 0)

    def checkpoint_documents(self) -> list[dict[str, Any]]:
        """The newest 200 checkpoints, each with its cosignatures' statuses
        (`verify.cosignature_statuses`) and whether the quorum is met: the page's facts.
        """
        with self.open_source() as source:
            notes = source.checkpoints()[::-1][:200]
        docs = []
        for size, text in notes:
            try:
                note = parse_note(text)
            except ReceiptsError as exc:
                docs.append({"size": size, "error": "does not parse: %s" % exc})
                continue
            lines = note.text.splitlines()
            statuses = cosignature_statuses(note, self.policy)
            good = sum(1 for _, status in statuses if status.startswith("verified"))
            docs.append(
                {
                    "size": size,
                    # A checkpoint carries no time of its own: the newest entry it covers bounds it.
                    "covers_until": self._covers_until(size),
                    "origin": lines[0] if lines else "",
                    "root": lines[2] if len(lines) > 2 else "",
                    "signer": note.signatures[0].name if note.signatures else "",
                    "cosignatures": [{"name": n, "status": status} for n, status in statuses],
                    "quorum": self.policy.quorum,
                    "quorum_met": good >= self.policy.quorum,
                }
            )
        return docs

    def _covers_until(self, size: int) -> str | None:
        newest = self.index.rows_between(size - 1, size) if size > 0 else []
        return _when(newest[0].time) if newest else None

    def _checkpoint_row(self, doc: dict[str, Any]) -> str:
        if "error" in doc:
            return '<tr><td>%d</td><td colspan="5" class="fail">%s</td></tr>' % (doc["size"], _e(doc["error"]))
        witnesses = "".join(
            '<li class="%s">%s: %s</li>'
            % (
                "pass" if c["status"].startswith("verified") else "fail" if c["status"] == "does not verify" else "",
                _e(c["name"]),
                _e(c["status"]),
            )
            for c in doc["cosignatures"]
        )
        good = sum(1 for c in doc["cosignatures"] if c["status"].startswith("verified"))
        met = (
            '<p class="%s">quorum %s (%d of %d)</p>'
            % ("pass" if doc["quorum_met"] else "fail", "met" if doc["quorum_met"] else "NOT met", good, doc["quorum"])
            if doc["quorum"]
            else ""
        )
        return "<tr><td>%d</td><td>%s</td><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td></tr>" % (
            doc["size"],
            _e(doc.get("covers_until") or "not known"),
            _e(doc["origin"]),
            _e(doc["root"]),
            _e(doc["signer"] or "nobody"),
            ("<ul>%s</ul>" % witnesses if witnesses else "not witnessed") + met,
        )

    def checks(self) -> Page:
        """pass^k per check, by task family, from every recorded run: a flaky check reads as
        one (pass^1 high, pass^3 lower), a broken one as broken.
        """
        parts = []
        for family, tally in self.index.check_runs().items():
            rows = sorted(tally.items())
            table = "".join(
                "<tr><td>%s</td><td>%d</td><td>%d</td>%s</tr>"
                % (_e(check), runs, passes, "".join("<td>%s</td>" % _pass_k(runs, passes, k) for k in (1, 3)))
                for check, (runs, passes) in rows
            )
            parts.append(
                "<h2>%s</h2>%s<table><thead><tr><th>Check</th><th>Runs</th><th>Passed</th><th>pass^1</th>"
                "<th>pass^3</th></tr></thead><tbody>%s</tbody></table>" % (_e(family), _bars(rows), table)
            )
        body = "".join(parts) or "<p>No check has been run under a registered contract.</p>"
        return self._frame("Checks: pass^k by family", body, 0)

    def commits(self, page: int = 0) -> Page:
        """The target branch's commits, newest first, each with the receipt whose candidate
        has its tree (what the gate accepts: squash and rebase merges included) or its
        absence; with no repository, each receipt by its candidate's commit.
        """
        listed = self.branch.commits(page * COMMITS_SHOWN, COMMITS_SHOWN + 1)
        if listed is None:
            return self._receipts_by_commit()
        shown = listed[:COMMITS_SHOWN]
        covered = self.index.receipts_on_trees(c.tree for c in shown)
        body = "".join(
            "<tr><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>"
            % (
                _e(c.commit[:12]),
                _e(_when(c.time)),
                _e(c.subject),
                "%s (%s)" % (self._link_receipt(covered[c.tree], 0), _e(covered[c.tree].verdict))
                if c.tree in covered
                else '<span class="fail">no receipt for this commit or its tree</span>',
            )
            for c in shown
        )
        more = len(listed) > COMMITS_SHOWN
        nav = (
            '<p><a href="commits.html?page=%d">older commits →</a></p>' % (page + 1)
            if more and not self.static
            else "<p>Only the newest %d commits are listed here; <code>ledger report --merges %s</code> lists"
            " them all.</p>" % (COMMITS_SHOWN, _e(self.branch.name))
            if more
            else ""
        )
        return self._frame(
            "Commits on %s" % self.branch.name,
            "<table><thead><tr><th>Commit</th><th>Committed</th><th>Subject</th><th>Receipt (claim)</th></tr>"
            "</thead><tbody>%s</tbody></table>%s" % (body, nav),
            0,
        )

    def _receipts_by_commit(self) -> Page:
        rows = self.index.of_kind(EntryKind.RECEIPT)[::-1]
        body = "".join(
            "<tr><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>"
            % (
                _e((self.index.commit_of(r.candidate) or ("not recorded", ""))[0]),
                self._link_task(r.task or "", 0),
                self._link_receipt(r, 0),
                _e(_when(r.time)),
            )
            for r in rows
        )
        return self._frame(
            "Receipts by commit",
            "<p>%s</p><table><thead><tr><th>Commit</th><th>Task</th><th>Receipt</th><th>Sealed</th></tr></thead>"
            "<tbody>%s</tbody></table>" % (_e(self.branch.why_not), body),
            0,
        )

    def evidence(self, digest_text: str) -> Page:
        if ":" not in digest_text:
            digest_text = "blake3:" + digest_text
        try:
            digest = Digest.parse(digest_text)
        except FormatError:
            return self._frame("Not a digest", "<p>%s is not a digest.</p>" % _e(digest_text), 1, 404)
        with self.open_source() as source:
            data = read_blob(source, digest, MAX_SHOWN + 1)
        if data is None:
            return self._missing_evidence(digest)
        try:
            text = data[:MAX_SHOWN].decode("utf-8")
        except UnicodeDecodeError:
            if self.static:  # a static host would guess its type: describe it, never serve it
                return self._frame(
                    "Evidence %s" % digest_text[:19],
                    "<p>Binary evidence. Fetch it with <code>ledger show</code> or from the ledger's blobs.</p>",
                    1,
                )
            return Page(200, data, "application/octet-stream", download=digest_text.replace(":", "-") + ".bin")
        cut = "<p>The first %d KiB are shown.</p>" % (MAX_SHOWN >> 10) if len(data) > MAX_SHOWN else ""
        return self._frame("Evidence %s" % digest_text[:19], cut + "<pre>%s</pre>" % _e(text), 1)

    def _missing_evidence(self, digest: Digest) -> Page:
        # Evidence removed under the signed retention policy is named as such (410 Gone),
        # with the policy entry that let it go; anything else missing is a 404.
        holder = self.index.holder_of(str(digest))
        why = None
        if holder is not None:
            with self.open_source() as source:
                stored = source.by_body_hash(Digest.parse(holder.body_hash))
                record = decode_as(TierRecord, stored.body) if stored is not None else None
                ref = next((e for e in record.evidence if e.digest == digest), None) if record else None
                why = source.pruned(record, ref) if record is not None and ref is not None else None
        if why is not None:
            return self._frame(
                "Evidence removed under the retention policy",
                "<p>Evidence %s of %s was %s. The verdicts derived from the documents that are kept still"
                " verify.</p>" % (_e(str(digest)), _e(holder.summary if holder else ""), _e(why)),
                1,
                410,
            )
        return self._frame(
            "No such evidence", "<p>No blob %s (or it no longer hashes to it).</p>" % _e(str(digest)), 1, 404
        )

    def feed(self, base: str = "") -> Page:
        """An Atom feed of receipts (the newest `FEED_VERIFIED` verified as their pages
        are, so a rejection is news), failing tier records, contract revisions (weakenings
        named) and key changes.
        """
        kinds = {EntryKind.RECEIPT, EntryKind.CONTRACT, EntryKind.KEY_ADD, EntryKind.KEY_REVOKE}
        failing = self.index.of_kind(EntryKind.TIER_RECORD, newest=100, verdict="fail")
        rows = sorted(self.index.of_kind(*kinds, newest=100) + failing, key=lambda r: -r.seq)[:100]
        receipts = [r for r in rows if r.kind == EntryKind.RECEIPT][:FEED_VERIFIED]
        decided = {r.body_hash: self.receipt_document(r.body_hash) for r in receipts}
        updated = _atom_time(rows[0].time if rows else 0)
        items = "".join(
            "<entry><id>urn:receipt-ledger:%s</id><title>%s</title><updated>%s</updated>%s<summary>%s</summary></entry>"
            % (
                _e(r.body_hash or r.seq),
                _e("%s: %s" % (r.task or r.kind, _feed_title(r, decided.get(r.body_hash)))),
                _atom_time(r.time),
                '<link href="%sreceipt/%s.html"/>' % (_e(base), receipt_name(r.body_hash))
                if r.kind == EntryKind.RECEIPT
                else "",
                _e("entry %d, signed by %s" % (r.seq, r.signer_name or r.signer)),
            )
            for r in rows
        )
        doc = (
            '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            "<id>urn:receipt-ledger:feed</id><title>%s</title><updated>%s</updated>%s</feed>\n"
            % (_e(self.title), updated, items)
        )
        return Page(200, doc.encode(), "application/atom+xml")

    def api(self, what: str, **args: Any) -> Page:
        """The JSON API (docs/web.md): the same facts as the pages."""
        doc: Any
        if what == "tasks":
            doc = [self._task_document(t) for t in self.index.task_summaries()]
        elif what == "receipt":
            doc = self.receipt_document(str(args["target"]))
        elif what == "search":
            page = _page_number(args["query"].get("page"))
            found = self.search_rows(args["query"], page)
            doc = {
                "results": [r.as_dict() for r in found[:PAGE_SIZE]],
                "page": page,
                "next_page": page + 1 if len(found) > PAGE_SIZE else None,
            }
        elif what == "checkpoints":
            doc = self.checkpoint_documents()
        else:
            page = int(args.get("page", 0))
            doc = [r.as_dict() for r in self.index.rows_between(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)]
        return Page(200, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(), "application/json")

    # -- pictures ------------------------------------------------------------------------------

    def _timeline(self, entries: list[IndexRow]) -> str:
        """The task's entries as a line of events, coloured by verdict: SVG, no script."""
        shown = entries[-40:]
        step = 1000 // max(1, len(shown))
        marks = []
        for i, row in enumerate(shown):
            x = 20 + i * step
            colour = {"pass": "#2a7a2a", "eligible": "#2a7a2a", "fail": "#a02020", "not eligible": "#a02020"}.get(
                row.verdict or "", "#666"
            )
            marks.append(
                '<circle cx="%d" cy="30" r="7" fill="%s"><title>%s</title></circle>'
                '<text x="%d" y="60" font-size="11" transform="rotate(30 %d 60)">%s</text>'
                % (x, colour, _e("%s · %s" % (row.summary, _when(row.time))), x, x, _e(row.summary[:24]))
            )
        return (
            '<svg viewBox="0 0 1040 130" role="img" aria-label="timeline"><line x1="10" y1="30" x2="1030" y2="30" '
            'stroke="#999"/>%s</svg>' % "".join(marks)
        )

    def _weekly_chart(self) -> str:
        """Receipts per week, eligible and not, as server-drawn SVG bars."""
        weeks: dict[str, list[int]] = {}
        for time, claim in self.index.receipt_times():
            if time:
                day = datetime.datetime.fromtimestamp(time, datetime.UTC).date()
                week = (day - datetime.timedelta(days=day.weekday())).isoformat()
                counts = weeks.setdefault(week, [0, 0])
                counts[0 if claim == "eligible" else 1] += 1
        if not weeks:
            return ""
        shown = sorted(weeks.items())[-26:]
        top = max(sum(c) for _, c in shown)
        bars = []
        for i, (week, (good, bad)) in enumerate(shown):
            x = 40 + i * 36
            h_good, h_bad = good * 100 // top, bad * 100 // top
            bars.append(
                '<rect x="%d" y="%d" width="24" height="%d" fill="#2a7a2a"><title>%s: %d eligible</title></rect>'
                '<rect x="%d" y="%d" width="24" height="%d" fill="#a02020"><title>%s: %d not eligible</title></rect>'
                '<text x="%d" y="135" font-size="9">%s</text>'
                % (x, 120 - h_good, h_good, week, good, x, 120 - h_good - h_bad, h_bad, week, bad, x, week[5:])
            )
        return (
            '<h2>Receipts per week</h2><svg viewBox="0 0 1000 140" role="img" aria-label="receipts per week">%s</svg>'
            % "".join(bars)
        )


def _page_number(text: str | None) -> int:
    """A page number from a query (anything else is the first page)."""
    return int(text) if text and text.isdigit() and len(text) < 9 else 0


def _feed_title(row: IndexRow, decided: dict[str, Any] | None) -> str:
    """A feed entry's title: what happened, in words, the verifier's decision for a receipt."""
    if row.kind == EntryKind.CONTRACT and row.weakened:
        return "contract WEAKENED: %s (%s)" % ("; ".join(row.weakened), row.provenance)
    if decided is None:
        return row.summary
    if not decided["verified"]:
        return "receipt REJECTED by the verifier: %s" % ", ".join(d["code"] for d in decided["defects"])
    return "receipt verified, %s" % ("merge-eligible" if decided["derived_eligible"] else "not merge-eligible")


def _pass_k(runs: int, passes: int, k: int) -> str:
    """The chance that k runs drawn from those recorded all pass (C(passes, k) / C(runs, k))."""
    import math

    return "%.2f" % (math.comb(passes, k) / math.comb(runs, k)) if runs >= k else "–"


def _bars(rows: list[tuple[str, tuple[int, int]]]) -> str:
    """pass^1 (dark) and pass^3 (light) per check as SVG bars: no script, prints as drawn."""
    import math

    bars = []
    for i, (check, (runs, passes)) in enumerate(rows[:30]):
        y = 10 + i * 22
        one = passes / runs if runs else 0.0
        three = math.comb(passes, 3) / math.comb(runs, 3) if runs >= 3 else 0.0
        bars.append(
            '<text x="0" y="%d" font-size="11">%s</text><rect x="200" y="%d" width="%d" height="8" fill="#2a7a2a">'
            "<title>pass^1 %.2f</title></rect>"
            '<rect x="200" y="%d" width="%d" height="8" fill="#8fc98f"><title>pass^3 %.2f</title></rect>'
            % (y + 10, _e(check[:30]), y, int(one * 600), one, y + 9, int(three * 600), three)
        )
    return '<svg viewBox="0 0 820 %d" role="img" aria-label="pass^k per check">%s</svg>' % (
        20 + 22 * len(bars),
        "".join(bars),
    )


def _day(text: str | None, add: int = 0) -> int | None:
    if not text:
        return None
    try:
        day = datetime.date.fromisoformat(text)
    except ValueError:
        return None
    return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp()) + add


def _atom_time(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
