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

from ._index import ChainIndex, IndexRow

__all__ = ["Pages", "Page", "CSP", "STYLE", "page_name", "receipt_name", "PAGE_SIZE", "MAX_SHOWN"]

PAGE_SIZE = 100  # chain rows per page
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
    """

    def __init__(
        self,
        index: ChainIndex,
        open_source: Callable[[], LedgerSource],
        trust: Trust,
        title: str = "receipt-ledger",
        static: bool = False,
        policy: Transparency | None = None,
    ) -> None:
        self.index = index
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
            receipt = self.index.receipts.get(row.candidate or "")
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
        rows = []
        for task, entries in self.index.tasks().items():
            receipts = [e for e in entries if e.kind == EntryKind.RECEIPT]
            state = receipts[-1].verdict if receipts else "no receipt yet"
            rows.append(
                "<tr><td>%s</td><td>%s</td><td>%d</td><td>%s</td></tr>"
                % (
                    self._link_task(task, 0),
                    _e("latest receipt claims: %s" % state if receipts else state),
                    len(entries),
                    _e(_when(entries[-1].time)),
                )
            )
        table = (
            "<table><thead><tr><th>Task</th><th>State (the claim; open the receipt for the verifier's decision)</th>"
            "<th>Entries</th><th>Last activity</th></tr></thead><tbody>%s</tbody></table>" % "".join(rows)
        )
        return self._frame("Tasks", table + self._weekly_chart(), 0)

    def task(self, task: str) -> Page:
        entries = self.index.tasks().get(task)
        if not entries:
            return self._frame("No such task", "<p>No entry names task %s.</p>" % _e(task), 1, 404)
        revisions = "".join(
            '<h3 class="%s">Contract revision at entry %d%s</h3>%s<pre>%s</pre>'
            % (
                "fail" if row.weakened else "",
                row.seq,
                ": WEAKENED (only an admin key may sign this)" if row.weakened else "",
                "<ul>%s</ul>" % "".join("<li>%s</li>" % _e(w) for w in row.weakened) if row.weakened else "",
                _e(row.text),
            )
            for row in entries
            if row.kind == EntryKind.CONTRACT
        )
        body = self._timeline(entries) + self._rows_table(entries, 1) + "<h2>Contract revisions</h2>" + revisions
        return self._frame("Task %s" % task, body, 1)

    def receipt(self, target: str) -> Page:
        row = self.index.by_hash.get(target)
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
        commit, tree = self.index.commits.get(row.candidate or "", ("", ""))
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
        return [
            row
            for row in self.index.by_task.get(receipt.task or "", [])
            if row.seq < receipt.seq and row.kind == EntryKind.TIER_RECORD and row.candidate == receipt.candidate
        ]

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
        total = len(self.index.rows)
        last = max(0, (total - 1) // PAGE_SIZE)
        if page < 0 or page > last:
            return self._frame("No such page", "<p>The chain has pages 0 to %d.</p>" % last, 1, 404)
        rows = self.index.rows[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
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
        rows = self.search_rows(query)
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
        said = "<p>%d result(s)</p>" % len(rows)
        return self._frame("Search", form + said + self._rows_table(rows[:500], 0), 0)

    def search_rows(self, query: dict[str, str]) -> list[IndexRow]:
        return self.index.search(
            query.get("q", ""), query.get("verdict", ""), _day(query.get("from")), _day(query.get("to"), 86400)
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
                    "covers_until": _when(self.index.rows[size - 1].time) if 0 < size <= len(self.index.rows) else None,
                    "origin": lines[0] if lines else "",
                    "root": lines[2] if len(lines) > 2 else "",
                    "signer": note.signatures[0].name if note.signatures else "",
                    "cosignatures": [{"name": n, "status": status} for n, status in statuses],
                    "quorum": self.policy.quorum,
                    "quorum_met": good >= self.policy.quorum,
                }
            )
        return docs

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
        for family, tally in sorted(self.index.check_runs.items()):
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

    def commits(self) -> Page:
        """Each receipt by its candidate's commit: the static site's way to find one."""
        rows = self.index.of_kind(EntryKind.RECEIPT)[::-1]
        body = "".join(
            "<tr><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>"
            % (
                _e(self.index.commits.get(r.candidate or "", ("not recorded", ""))[0]),
                self._link_task(r.task or "", 0),
                self._link_receipt(r, 0),
                _e(_when(r.time)),
            )
            for r in rows
        )
        return self._frame(
            "Receipts by commit",
            "<table><thead><tr><th>Commit</th><th>Task</th><th>Receipt</th><th>Sealed</th></tr></thead>"
            "<tbody>%s</tbody></table>" % body,
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
        holder = next(
            (row for row in reversed(self.index.rows) if any(d == str(digest) for _, d, _ in row.evidence)), None
        )
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
        failing = [r for r in self.index.of_kind(EntryKind.TIER_RECORD) if r.verdict == "fail"]
        rows = sorted(self.index.of_kind(*kinds) + failing, key=lambda r: -r.seq)[:100]
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
            doc = [{"task": t, "entries": len(rows), "last": rows[-1].time} for t, rows in self.index.tasks().items()]
        elif what == "receipt":
            doc = self.receipt_document(str(args["target"]))
        elif what == "search":
            doc = [r.as_dict() for r in self.search_rows(args["query"])[:500]]
        elif what == "checkpoints":
            doc = self.checkpoint_documents()
        else:
            page = int(args.get("page", 0))
            doc = [r.as_dict() for r in self.index.rows[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]]
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
        for row in self.index.of_kind(EntryKind.RECEIPT):
            if row.time:
                day = datetime.datetime.fromtimestamp(row.time, datetime.UTC).date()
                week = (day - datetime.timedelta(days=day.weekday())).isoformat()
                counts = weeks.setdefault(week, [0, 0])
                counts[0 if row.verdict == "eligible" else 1] += 1
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


def _feed_title(row: IndexRow, decided: dict[str, Any] | None) -> str:
    """A feed entry's title: what happened, in words, the verifier's decision for a receipt."""
    if row.kind == EntryKind.CONTRACT and row.weakened:
        return "contract WEAKENED: %s" % "; ".join(row.weakened)
    if decided is None:
        return row.summary
    if not decided["verified"]:
        return "receipt REJECTED by the verifier: %s" % ", ".join(d["code"] for d in decided["defects"])
    return "receipt verified, %s" % ("merge-eligible" if decided["derived_eligible"] else "not merge-eligible")


def _pass_k(runs: int, passes: int, k: int) -> str:
    """The chance that k runs drawn from those recorded all pass (C(passes, k) / C(runs, k))."""
    import math

    return "%.2f" % (math.comb(passes, k) / math.comb(runs, k)) if runs >= k else "–"


def _bars(rows: list[tuple[str, list[int]]]) -> str:
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
