"""The auditor's page (issue 16): `report.html` in every bundle, and `ledger report HASH
--html`. One self-contained HTML file: no script, no external resource, a print
stylesheet, every value escaped. What it says about verification is the verifier's
result on the bundle's own content (`bundle_renderings`), which every verifier of the
bundle re-renders and compares (format.md §10, step 9), and it says how to re-check it.
"""

from __future__ import annotations

import datetime
import html
from typing import Any

from receipts import approvals_shortfall

from ._exceptions import decision_headline

__all__ = ["report_html", "exceptions_html"]

_CSS = """
:root{--ok:#0a6b2d;--bad:#a3131b;--warn:#8a5a00;--line:#c8c8c8;--muted:#555}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:72em;padding:1.5em;color:#111}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .5em;border-bottom:1px solid var(--line)}
table{border-collapse:collapse;width:100%;margin:.3em 0}th,td{border:1px solid var(--line);padding:.3em .5em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f2f2f2}code{font-size:.85em;word-break:break-all}.muted{color:var(--muted)}li,p,.banner{overflow-wrap:anywhere}
.banner{padding:.8em 1em;border-radius:6px;font-size:1.15em;font-weight:600;margin:1em 0}
.banner.ok{background:#e3f4e8;border:2px solid var(--ok);color:var(--ok)}
.banner.bad{background:#fbe5e6;border:2px solid var(--bad);color:var(--bad)}
.pass,.approve{color:var(--ok);font-weight:600}.fail,.missing,.reject{color:var(--bad);font-weight:600}
.skip,.review,.retry,.unrecorded{color:var(--warn);font-weight:600}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2em 1em;margin:.3em 0}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
@media print{body{max-width:none;padding:0;font-size:11pt}a{color:inherit;text-decoration:none}
a[href]:after{content:" (" attr(href) ")";font-size:.8em;color:var(--muted)}h2{break-after:avoid}tr{break-inside:avoid}
.banner{border-width:3px}}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(ts: object) -> str:
    if not isinstance(ts, int):
        return "not recorded"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def exceptions_html(notes: list[dict[str, str]]) -> str:
    """The exceptions list every page shows under its decision (`verify.exceptions`)."""
    if not notes:
        return ""
    items = "".join(
        '<li class="exception %s"><strong>%s</strong>: %s</li>'
        % (_e(n["kind"].replace(" ", "-")), _e(n["kind"]), _e(n["text"]))
        for n in notes
    )
    return '<h2 id="exceptions">Exceptions</h2><ul>%s</ul>' % items


def _dl(pairs: list[tuple[str, object]]) -> str:
    return "<dl>%s</dl>" % "".join("<dt>%s</dt><dd>%s</dd>" % (_e(k), v) for k, v in pairs)


def _link(member: str, text: str, links: bool) -> str:
    # Relative to report.html at the bundle's root: it works wherever the zip is unpacked.
    return '<a href="%s">%s</a>' % (_e(member), _e(text)) if links else "<code>%s</code>" % _e(text)


def _file(name: str, digest: str, text: str, links: bool, redacted: dict[tuple[str, str], str | None]) -> str:
    if (name, digest) in redacted:
        why = redacted[(name, digest)]
        if why:  # pruned before export: retention, not an exporter's choice
            return '%s <span class="muted">(%s; its digest is %s)</span>' % (_e(text), _e(why), _e(digest))
        return '%s <span class="muted">(redacted from this bundle; its digest is %s)</span>' % (_e(text), _e(digest))
    return _link("blobs/" + digest.split(":", 1)[1], text, links)


def _code(value: object) -> str:
    return "<code>%s</code>" % _e(value) if value else '<span class="muted">not recorded</span>'


def report_html(m: dict[str, Any], links: bool = True) -> str:
    """The page for a bundle's manifest ``m``; ``links`` makes evidence names relative
    links to the bundle's members (off for a page written outside a bundle).
    """
    v = m["verification"]
    redacted = {(r["check"], r["digest"]): r.get("reason") for r in m.get("redacted", [])}
    eligible = bool(v["verified"] and m["merge_eligible"] and v["merge_eligible_derived"])
    notes = m.get("exceptions") or []
    said = decision_headline(v["verified"], eligible, v["not_eligible_because"], [n["kind"] for n in notes])
    banner = '<div class="banner %s" role="status" id="decision">%s</div>%s' % (
        "ok" if said.startswith("MERGE-ELIGIBLE (") else "bad",
        _e(said),
        exceptions_html(notes),
    )
    candidate, contract_dl = _candidate_and_contract(m)
    kept = m["policy_decisions"]
    in_force = "".join("<li>%s</li>" % _e(w) for w in kept["waivers"]) or "<li>none</li>"
    weakened = "".join("<li>%s</li>" % _e(w) for w in kept["contract_weakenings"]) or "<li>none</li>"
    tiers, checks, people = _ladder_rows(m, links, redacted)
    timeline, signers, evidence = _record_rows(m, links, redacted)
    verification, defects, warnings = _verification_parts(m)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        "<title>Receipt for %s: %s</title><style>%s</style></head><body>"
        "<h1>Receipt for %s</h1>%s"
        "<h2>Candidate</h2>%s<h2>Contract</h2>%s"
        "<h3>Waivers in force</h3><ul>%s</ul><h3>Contract weakenings</h3><ul>%s</ul>"
        "<h2>Tiers</h2><table><tr><th>tier</th><th>required</th><th>status</th><th>evidence entails</th><th>signer / detail</th></tr>%s</table>"
        "<h2>Checks</h2><table><tr><th>check</th><th>type</th><th>status</th><th>reason</th><th>duration</th><th>evidence</th></tr>%s</table>"
        "<h2>Approvals and rejections</h2><table><tr><th>decision</th><th>name</th><th>key</th><th>roles</th><th>time</th><th>given</th><th>comment or reason</th></tr>%s</table>"
        "<h2>Timeline</h2><table><tr><th>entry</th><th>time</th><th>kind</th><th>what</th><th>signed by</th></tr>%s</table>"
        "<h2>Signers</h2><table><tr><th>name</th><th>key</th><th>roles</th><th>status</th></tr>%s</table>"
        "<h2>Verification</h2>%s%s%s"
        "<h2>Evidence files</h2><table><tr><th>tier</th><th>item</th><th>file</th><th>bytes</th><th>type</th></tr>%s</table>"
        "<p class=muted>This page is a rendering: it is not signed and not verified. The bundle's entries, proofs, "
        "checkpoint and evidence are; re-check them with the command above.</p></body></html>\n"
    ) % (
        _e(m["task"]),
        _e("merge-eligible" if eligible else "not merge-eligible"),
        _CSS,
        _e(m["task"]),
        banner,
        candidate,
        contract_dl,
        in_force,
        weakened,
        tiers,
        checks,
        people,
        timeline,
        signers,
        verification,
        ("<h3>Defects</h3><ul>%s</ul>" % defects) if defects else "",
        ("<h3>Notes from verification</h3><ul>%s</ul>" % warnings) if warnings else "",
        evidence,
    )


def _candidate_and_contract(m: dict[str, Any]) -> tuple[str, str]:
    snap, contract = m["input_snapshot"], m["contract"]
    candidate = _dl(
        [
            ("Task", _e(m["task"])),
            ("Commit", _code(snap.get("commit"))),
            ("Tree", _code(snap.get("tree"))),
            ("Base", "%s %s" % (_code(snap.get("base")), _e(snap.get("base_source") or ""))),
            ("Candidate hash", _code(snap.get("candidate"))),
            ("Receipt", _code(m["receipt"])),
            ("Sealed", _e(_when(m.get("sealed_at")))),
        ]
    )
    policy = contract.get("policy") or {}
    contract_dl = _dl(
        [
            ("Goal", _e(contract.get("goal") or "not recorded")),
            ("Revision", "%s (entry %s)" % (_code(contract.get("config")), _e(contract.get("revision_entry")))),
            ("Required tiers", _e(", ".join(policy.get("required_tiers", [])) or "not recorded")),
            ("Human approvals required", _e(policy.get("human_approvals", "not recorded"))),
            ("Approvers independent of the author", _e("yes" if policy.get("independent_approvers") else "no")),
            ("Judge threshold", _e(policy.get("judge_threshold", "not recorded"))),
        ]
    )
    return candidate, contract_dl


def _approvals_short(reasons: list[str]) -> str | None:
    """The shortfall ("1 of 2 approvals") when the receipt lacks approvals, else None."""
    found = approvals_shortfall(reasons)
    return "%d of %d approvals" % found if found else None


def _ladder_rows(m: dict[str, Any], links: bool, redacted: dict[tuple[str, str], str | None]) -> tuple[str, str, str]:
    """The tiers', the checks' and the human decisions' table rows."""
    short = _approvals_short(m["verification"]["not_eligible_because"])
    tiers = "".join(
        "<tr><td>%s</td><td>%s</td><td class=%s>%s</td><td>%s</td><td>%s</td></tr>"
        % (
            _e(t["tier"]),
            "yes" if t["required"] else "no",
            _e("missing" if short and t["tier"] == "human" else t["status"]),
            # One approval among too few is no human pass: the row says how many.
            _e("%s (%s)" % (t["status"], short) if short and t["tier"] == "human" else t["status"]),
            # What the evidence entails, and why: the judge's reasoning, the failing checks.
            _e(
                "%s: %s" % (t["derived"], t["reason"])
                if t.get("derived") and t.get("reason")
                else t.get("derived") or ""
            ),
            _e(t["signer"] or t["detail"]),
        )
        for t in m["tiers"]
    )
    checks = "".join(_check_tr(c, links, redacted) for c in m["checks"]) or (
        '<tr><td colspan=7 class="muted">no deterministic checks</td></tr>'
    )
    people = (
        "".join(
            "<tr><td class=%s>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=%s>%s</td><td>%s</td></tr>"
            % (
                _e(p["decision"]),
                _e(p["decision"]),
                _e(p["name"]),
                _code(p["key"]),
                _e(", ".join(p.get("roles", []))),
                _e(_when(p.get("time"))),
                _e(p["method"]),
                _e(p["method"]),
                _e(p.get("note") or ""),
            )
            for p in m["decisions"]
        )
        or '<tr><td colspan=8 class="muted">no human decision on this candidate</td></tr>'
    )
    return tiers, checks, people


def _check_tr(c: dict[str, Any], links: bool, redacted: dict[tuple[str, str], str | None]) -> str:
    # A check run several times is one row: its rule over all attempts, then each attempt.
    attempts = "".join(
        "<br>attempt %s: %s%s" % (_e(a["attempt"]), _e(a["status"]), _e(": " + a["reason"] if a["reason"] else ""))
        for a in c.get("attempts") or ()
    )
    return "<tr><td>%s</td><td>%s</td><td class=%s>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
        _e(c["id"]),
        _e(c.get("type")),
        _e(c.get("status")),
        _e(c.get("status")),
        _e(c.get("reason")) + attempts,
        _e("%s ms" % c["duration_ms"] if isinstance(c.get("duration_ms"), int) else "not recorded"),
        "<br>".join(_file(f["name"], f["digest"], f["name"], links, redacted) for f in c.get("files", []))
        or '<span class="muted">none</span>',
    )


def _record_rows(m: dict[str, Any], links: bool, redacted: dict[tuple[str, str], str | None]) -> tuple[str, str, str]:
    """The timeline's, the signers' and the evidence files' table rows."""
    timeline = "".join(
        "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>"
        % (t["seq"], _e(_when(t["time"])), _e(t["kind"]), _e(t["what"]), _e(t["signer"]))
        for t in m["timeline"]
    )
    signers = "".join(
        "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>"
        % (_e(k["name"]), _code(k["key_id"]), _e(", ".join(k["roles"])), _e(k["status"]))
        for k in m["provenance"]["keyring"]
    )
    evidence = "".join(
        "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td></tr>"
        % (
            _e(a["tier"]),
            _e(a["check"]),
            _file(a["check"], a["digest"], a["digest"], links, redacted),
            a["size"],
            _e(a["media_type"]),
        )
        for a in m["artifacts"]
    )
    return timeline, signers, evidence


def _verification_parts(m: dict[str, Any]) -> tuple[str, str, str]:
    v = m["verification"]
    defects = "".join("<li>[%s] %s</li>" % (_e(d["code"]), _e(d["message"])) for d in v["defects"])
    # How it was checked (notes) apart from what was not (warnings), each said as which it is.
    said = [("note", n) for n in v.get("notes", [])] + [("warning", w) for w in v["warnings"]]
    warnings = "".join("<li>%s: %s</li>" % (kind, _e(text)) for kind, text in said)
    verification = _dl(
        [
            (
                "Result",
                '<span class="%s">%s</span>'
                % ("pass" if v["verified"] else "fail", "verified" if v["verified"] else "REJECTED"),
            ),
            ("Computed", _e("from this bundle's content alone; every verifier re-renders this page and compares it")),
            ("Trust", _e(v["trust"])),
            ("Checked", _e(v["method"])),
            ("Checkpoint", _e(v.get("checkpoint") or "none")),
            ("Re-check it", _code(m["how_to_verify"])),
        ]
    )
    return verification, defects, warnings
