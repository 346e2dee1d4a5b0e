"""Human and JSON renderings shared by the CLI and the demo."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from receipts import (
    Digest,
    Keyring,
    KeySpec,
    LadderReceipt,
    RetentionPolicy,
    TierRecord,
    armor,
    config_hash,
    decode_body,
    decode_entry,
    entry_signed_bytes,
    fingerprint,
    public_key_line,
    utc_text,
)
from verify import (
    UNPROVEN_PREFIX,
    ChainResult,
    Result,
    StoredEntry,
    TierLine,
    completeness_text,
    exceptions,
    headline,
)

from .._escape import comment_text

if TYPE_CHECKING:
    from receipts import ToolDecision

    from ..ladder._records import Sealed
    from ..ladder._status import StatusReport
    from ..store._ledger import Appended
    from ..store._mirror import PullResult
    from ..tiers import CheckRun, JudgeRun

__all__ = [
    "pull_lines",
    "jsonable",
    "dumps",
    "verify_lines",
    "chain_lines",
    "pr_comment",
    "status_lines",
    "entry_document",
    "log_rows",
    "keyring_rows",
]


def jsonable(value: Any) -> Any:
    """Model objects as plain JSON values: digests as blake3:<hex>, keys as OpenSSH lines."""
    if isinstance(value, Digest):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, KeySpec):
        d = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        d["public_key"] = public_key_line(value.public_key)
        d["key_id"] = value.key_id
        return d
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    return value


def dumps(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2, sort_keys=True)


def _yn(value: bool | None) -> str:
    return "unknown" if value is None else str(value).lower()


def verify_lines(result: Result) -> list[str]:
    """A receipt's verification for a person (and a CI log): the ladder, the derived
    eligibility, weakenings, waivers and every defect.
    """
    lines = [headline(result, exceptions(result)), "receipt   %s" % result.target]
    if result.task_id is not None:
        lines.append("task      %s" % result.task_id)
        lines.append("candidate %s" % result.candidate)
    lines.append("trust     %s" % result.trust)
    if result.tiers:
        lines.append("")
        lines.append("  %-14s %-4s %-8s %-20s %s" % ("TIER", "REQ", "STATUS", "RECORD", "SIGNER / DETAIL"))
        for t in result.tiers:
            record = (t.record[:19] + "…") if t.record else "-"
            lines.append(
                "  %-14s %-4s %-8s %-20s %s"
                % (t.tier.value, "yes" if t.required else "no", _status(t, result), record, t.signer or t.detail)
            )
        lines.append("")
        lines.append(
            "merge_eligible: claimed %s, re-derived %s" % (_yn(result.claimed_eligible), _yn(result.derived_eligible))
        )
        for reason in result.eligibility_reasons:
            lines.append("  not eligible because: %s" % reason)
    if result.checkpoint:
        lines.append("checkpoint %s" % result.checkpoint)
    if not any(w.startswith(UNPROVEN_PREFIX) for w in result.warnings):  # else its warning says it, once
        lines.append("completeness %s" % completeness_text(result.completeness, result.certified_by))
    for w in result.weakenings:
        lines.append("WEAKENING: %s" % w)
    lines += ["note: %s" % n for n in result.notes] + ["warning: %s" % w for w in result.warnings]
    for w in result.waivers:
        lines.append("waiver in force: %s" % w)
    for w in result.stale:
        lines.append("stale (not counted): %s" % w)
    lines += ["%s: %s" % (n.kind, n.text) for n in exceptions(result) if n.kind in ("rejection", "judge")]
    if result.ok:
        lines.append(
            "VERIFIED (%d chain entries checked%s)"
            % (result.entries_checked, ", each proven into the checkpoint" if result.method == "proof" else "")
        )
    else:
        lines.append("REJECTED: %d defect(s)" % len(result.defects))
        for d in result.defects:
            lines.append("  [%s] %s" % (d.code, d.message))
    return lines


def _status(line: TierLine, result: Result) -> str:
    """A tier row's status as a reader must take it: an approval the eligibility rule does
    not count (its signer authored the change) is "pass" only with that said.
    """
    if line.tier.value == "human" and line.status == "pass" and line.signer:
        key = line.signer.rsplit("(", 1)[-1].rstrip(")")
        if key in result.uncounted_approvals:
            return "pass, NOT COUNTED"
    return line.status


def chain_lines(result: ChainResult, state_file: Path | None = None) -> list[str]:
    """A whole-chain audit for a person: the head, the trust, and the first bad entry."""
    lines = ["entries   %d" % result.entries, "head      %s" % (result.head or "-"), "trust     %s" % result.trust]
    if result.resumed_from is not None:
        lines.append(
            "resumed   from your audit state at size %d: entries %d to %d walked, the rest proven by the checkpoint"
            % (result.resumed_from, result.resumed_from, result.entries - 1)
        )
    if result.evidence_blobs is None:
        lines.append("evidence  NOT CHECKED (--skip-evidence): blobs were not read, only the entries")
    else:
        lines.append("evidence  %d blob(s) re-hashed" % result.evidence_blobs)
    if state_file is not None:
        lines.append(
            "state     written to %s (size %d)" % (state_file, result.state.size)
            if result.state is not None
            else "state     NOT written: only a clean audit up to a checkpoint leaves a state"
        )
    for w in result.warnings:
        lines.append("warning: %s" % w)
    if result.ok:
        lines.append("VERIFIED: the whole chain checks out")
    else:
        lines.append("REJECTED: first bad entry is %s; %d defect(s)" % (result.first_bad, len(result.defects)))
        for d in result.defects:
            lines.append("  [%s] %s" % (d.code, d.message))
    return lines


def status_lines(report: StatusReport) -> list[str]:
    """`ledger status` for a person: each task's state and reason, then the nudge."""
    n = report.nudge
    lines = ["%-24s %-25s %s" % (t, s.state.value, s.reason) for t, s in report.tasks]
    lines.append("claims without verification: %d of the last %d (%.0f%%)" % (n.unverified, n.claims, 100 * n.share))
    if n.alert:
        lines.append(
            "ALERT: more than %.0f%% of claims were not followed by verification; most recent: %s"
            % (100 * n.threshold, ", ".join(n.recent_unverified))
        )
    return lines


_MARK = {"pass": "✅", "fail": "❌", "skip": "⏭️", "missing": "❌", "review": "🟡", "retry": "🟡"}


def pr_comment(
    result: Result,
    receipt_hash: str,
    manifest: Mapping[str, Any] | None = None,
    commit: str | None = None,
    outputs: Mapping[str, str] | None = None,
) -> str:
    """Markdown for a pull-request comment and the job summary, in the order a reviewer
    reads: the decision and why, the task's goal, each check (failures first) with its
    reason, the tiers, who approved, notes, and the commands to re-check ``commit``.
    ``manifest`` is the verified bundle's (its renderings are re-derived by `verify`);
    ``outputs``, a failing check's last printed lines by check id, shown under the table.
    Every text from the ledger is escaped (`comment_text`): GitHub renders HTML in comments,
    links addresses and notifies mentions.
    """
    md = comment_text
    doc = manifest or {}
    lines = _comment_head(result)
    goal = (doc.get("contract") or {}).get("goal")
    if goal:
        lines += ["", "**Goal:** %s" % md(goal)]
    lines += _comment_checks(doc.get("checks") or [])
    lines += _comment_outputs(outputs or {})
    lines += ["", "| tier | required | status | signed by |", "|---|---|---|---|"]
    lines += [
        "| %s | %s | %s %s | %s |"
        % (
            t.tier.value,
            "yes" if t.required else "no",
            _MARK.get(t.status, ""),
            md(_status(t, result)),
            md(t.signer or t.detail),
        )
        for t in result.tiers
    ]
    judged = [t for t in result.tiers if t.tier.value == "judge" and t.reason]
    if judged:
        lines += ["", "**Judge:** %s: %s" % (md(judged[-1].derived or judged[-1].status), md(judged[-1].reason or ""))]
    lines += _comment_decisions(doc.get("decisions") or [])
    notes = [n for n in exceptions(result) if n.kind != "judge"]  # the judge line is above
    if notes:
        lines += ["", "**Exceptions:**"] + ["- **%s**: %s" % (md(n.kind), md(n.text)) for n in notes]
    lines += [
        "",
        "Receipt `%s`, candidate `%s`%s."
        % (receipt_hash, result.candidate, ", checkpoint " + md(result.checkpoint) if result.checkpoint else ""),
        "",
        "Verify it yourself:",
        "",
        "```sh",
        "ledger receipts fetch",
        "ledger verify --commit %s" % (commit or "HEAD"),
        "```",
        "",
    ]
    return "\n".join(lines)


def _comment_head(result: Result) -> list[str]:
    """The decision, then each reason for it: what a reviewer reads first."""
    md = comment_text
    said = headline(result, exceptions(result))
    verdict = (
        ("merge-eligible with exceptions" if said.startswith("MERGE-ELIGIBLE WITH") else "merge-eligible")
        if result.ok and result.derived_eligible
        else ("NOT merge-eligible" if result.ok else "REJECTED by verification")
    )
    lines = ["### receipt-ledger: %s **%s**" % (md(result.task_id or "?"), verdict), "", md(said)]
    if result.defects:
        lines += ["", "Verification found:"] + ["- `%s` %s" % (d.code, md(d.message)) for d in result.defects]
    if result.eligibility_reasons:
        lines += ["", "Not eligible because:"] + ["- %s" % md(r) for r in result.eligibility_reasons]
    return lines


def _comment_decisions(decisions: Sequence[Mapping[str, Any]]) -> list[str]:
    """Who decided, how and when, and what they said."""
    if not decisions:
        return []
    md = comment_text
    return ["", "**Human decisions:**"] + [
        "- %s %s %s (%s, %s)%s"
        % (
            _MARK["pass"] if d.get("decision") == "approve" else _MARK["fail"],
            md(str(d.get("name"))),
            "approved" if d.get("decision") == "approve" else md(str(d.get("decision"))),
            md(str(d.get("method"))),
            utc_text(int(d["time"])) if isinstance(d.get("time"), int) else "?",
            ": " + md(str(d["note"])) if d.get("note") else "",
        )
        for d in decisions
    ]


def _comment_outputs(outputs: Mapping[str, str]) -> list[str]:
    """Each failing check's last output, folded, in a code fence no line of it can close
    (so nothing in it renders: no link, no mention, no HTML).
    """
    lines = []
    for check, tail in sorted(outputs.items()):
        if not tail:
            continue
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", tail)), default=0))
        lines += ["", "<details><summary>%s: its last output</summary>" % comment_text(check), ""]
        lines += [fence + "text", *tail.splitlines(), fence, "", "</details>"]
    return lines


def _comment_checks(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The deterministic checks, failures first, each with its status and reason."""
    if not checks:
        return []
    ordered = sorted(checks, key=lambda c: c.get("status") == "pass")
    md = comment_text
    return ["", "| check | status | reason |", "|---|---|---|"] + [
        "| %s | %s %s | %s |"
        % (
            md(str(c.get("id"))),
            _MARK.get(str(c.get("status")), ""),
            md(str(c.get("status"))),
            md(str(c.get("reason"))),
        )
        for c in ordered
    ]


def entry_document(stored: StoredEntry) -> dict[str, Any]:
    """An entry and its decoded body, as `ledger show --json` prints it."""
    entry = decode_entry(stored.entry)
    body = decode_body(entry.kind, stored.body)
    return {
        "entry": {
            "seq": entry.seq,
            "hash": str(Digest(stored.hash)),
            "prev": str(entry.prev) if entry.prev else None,
            "kind": entry.kind.value,
            "body_hash": str(entry.body_hash),
            "time": entry.time,
            "signer": entry.signer,
        },
        "body": jsonable(body),
    }


def log_rows(entries: Iterable[StoredEntry], names: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per entry, oldest first, with a one-line summary of records and receipts,
    its time in ISO 8601 UTC, and its signer's name (``names``: key id to name).
    """
    rows = []
    for stored in entries:
        entry = decode_entry(stored.entry)
        body = decode_body(entry.kind, stored.body)
        summary = ""
        if isinstance(body, TierRecord):
            summary = "%s %s" % (body.tier.value, body.verdict.value)
        elif isinstance(body, LadderReceipt):
            summary = "merge_eligible=%s" % str(body.merge_eligible).lower()
        elif isinstance(body, RetentionPolicy):
            summary = "evidence kept %d days; held: %s" % (
                body.evidence_max_age_s // 86400,
                ", ".join(body.holds) or "none",
            )
        rows.append(
            {
                "seq": entry.seq,
                "time": entry.time,
                "time_utc": utc_text(entry.time),
                "kind": entry.kind.value,
                "task": stored.task,
                "hash": str(entry.body_hash),
                "signer": entry.signer,
                "signer_name": (names or {}).get(entry.signer),
                "summary": summary,
            }
        )
    return rows


def entry_lines(stored: StoredEntry, names: Mapping[str, str]) -> list[str]:
    """`ledger show` for a person: the entry's place, time, signer by name and hashes, then
    its body (times in it stay the signed integers; the header gives the entry's own).
    """
    doc = entry_document(stored)
    entry = doc["entry"]
    lines = [
        "entry      %d (%s)" % (entry["seq"], entry["kind"]),
        "time       %s" % utc_text(entry["time"]),
        "signer     %s (%s)" % (names.get(entry["signer"], "unknown key"), entry["signer"]),
        "hash       %s" % entry["hash"],
        "body hash  %s" % entry["body_hash"],
        "body:",
    ]
    body = dict(doc["body"])
    contract = body.pop("contract", None) if entry["kind"] == "contract" else None
    lines += ["  " + line for line in json.dumps(body, indent=2, sort_keys=True).splitlines()]
    if isinstance(contract, str):  # a revision's contract, as the TOML it is (the JSON keeps its bytes in hex)
        lines += [
            "contract:",
            *("  " + line for line in bytes.fromhex(contract).decode("utf-8", "replace").splitlines()),
        ]
    return lines


def log_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """`ledger log` for a person: position, time, kind, task, the hash's prefix (which
    `show` and `verify` take), who signed it, and what it says.
    """
    header = "%5s  %-20s %-11s %-14s %-19s %-10s %s" % ("ENTRY", "TIME (UTC)", "KIND", "TASK", "HASH", "SIGNER", "WHAT")
    return [header] + [
        "%5d  %-20s %-11s %-14s %-19s %-10s %s"
        % (
            r["seq"],
            r["time_utc"],
            r["kind"],
            r["task"] or "-",
            r["hash"][:19],
            r["signer_name"] or r["signer"][:17],
            r["summary"],
        )
        for r in rows
    ]


def keyring_rows(ring: Keyring) -> list[dict[str, Any]]:
    """The keyring as it stands, revoked keys included."""
    return [
        {
            "name": s.spec.name,
            "key_id": s.key_id,
            "roles": [r.value for r in s.spec.roles],
            "status": "revoked" if s.revoked_at is not None else "active",
            "revoked_at_entry": s.revoked_at,
            "public_key": public_key_line(s.spec.public_key),
        }
        for s in ring
    ]


def check_lines(run: CheckRun) -> list[str]:
    """`ledger check`: each check's result, why the tier failed, and the record."""
    lines = ["  %-20s %-6s %-22s %s" % ("CHECK", "RESULT", "EVIDENCE", "REASON")]
    # The table shows a prefix (`ledger blob` takes it); --json gives the whole digest.
    lines += ["  %-20s %-6s %-22s %s" % (cid, status, digest[:19], why[:120]) for cid, status, why, digest in run.rows]
    for cid, tail in run.tails:  # what the agent's Stop shows: the failing assertion, not only "exit code 1"
        if tail:
            lines += ["%s, its last output:" % cid, *("    " + line for line in tail.splitlines())]
    lines += ["attribution: %s" % run.snapshot.strength]
    room = run.snapshot.clean_room
    if room is not None:
        paths = room.get("restored")
        restored = ", ".join(str(p) for p in paths) if isinstance(paths, list) and paths else "nothing"
        lines += ["clean room: restored from %s: %s; network %s" % (room.get("base"), restored, room.get("network"))]
    lines += ["fail: %s" % why for why in run.outcome.reasons]
    lines += ["warning: %s" % w for w in run.outcome.warnings]
    lines += ["deterministic %s: record %s" % (run.outcome.verdict.value.upper(), run.appended.body_hash)]
    return lines


def check_document(run: CheckRun) -> dict[str, Any]:
    """`ledger check --json`: the record, the verdict and why, each check (a failing one with
    the last lines it printed), the attribution.
    """
    tails = dict(run.tails)
    return {
        "record": str(run.appended.body_hash),
        "verdict": run.outcome.verdict.value,
        "candidate": str(run.record.input_hash),
        "reasons": list(run.outcome.reasons),
        "warnings": list(run.outcome.warnings),
        "checks": [
            {"id": c, "result": s, "reason": why, "evidence": d, **({"output_tail": tails[c]} if c in tails else {})}
            for c, s, why, d in run.rows
        ],
        "attribution": {"strength": run.snapshot.strength, "commits": list(run.snapshot.commits)},
        "clean_room": run.snapshot.clean_room,
    }


def trace_lines(decisions: Iterable[ToolDecision]) -> list[str]:
    """`ledger trace`: each tool call of the trace with its decision and why."""
    return ["%4d  %-16s %-15s %s" % (d.step, d.tool or "-", d.decision, d.reason) for d in decisions]


def sealed_line(task: str, sealed: Sealed) -> str:
    """`ledger seal`: whether the receipt is merge-eligible and, when it is not, each reason."""
    said = "sealed %s: merge_eligible=%s" % (task, str(sealed.receipt.merge_eligible).lower())
    return "\n".join([said, *("  not eligible: %s" % why for why in sealed.reasons)])


def contract_set_line(task: str, data: bytes, appended: Appended | None) -> str:
    """`ledger contract set`: the revision recorded, or that it already was the current one."""
    if appended is None:
        return "unchanged: %s is already the current contract of %s" % (config_hash(data), task)
    return "contract %s of %s recorded at entry %d" % (config_hash(data), task, appended.seq)


def key_line(name: str, public_key_blob: bytes, appended: Appended | None) -> str:
    """`ledger keys add` and `generate`: the key's name and fingerprint, and its entry (or
    that it is not in the keyring yet).
    """
    if appended is None:
        return "%s %s not in the keyring yet" % (name, fingerprint(public_key_blob))
    return "%s %s added at entry %d" % (name, fingerprint(public_key_blob), appended.seq)


def generated_key_note(name: str, roles: Sequence[str], path: Path, appended: Appended | None) -> str:
    """What `keys generate` wrote, and, for a key no admin here could add, who adds it how."""
    said = "wrote %s and %s.pub" % (path, path)
    if appended is not None:
        return said
    return (
        "%s; no admin key is held here, so it is not in the keyring: an admin adds its public half with\n"
        "  ledger keys add %s %s.pub %s" % (said, name, path, " ".join("--role " + r for r in roles))
    )


def signed_bytes(stored: StoredEntry) -> bytes:
    """The exact bytes an entry's signature covers (for an independent check with ssh-keygen)."""
    return entry_signed_bytes(decode_entry(stored.entry))


def armored_signature(stored: StoredEntry) -> str:
    """An entry's signature as an armored SSH signature (``-----BEGIN SSH SIGNATURE-----``)."""
    return armor(decode_entry(stored.entry).signature)


def judge_document(run: JudgeRun) -> dict[str, Any]:
    """`ledger judge --json`: the record, the verdict, its confidence and reason, the attempts."""
    return {
        "record": str(run.appended.body_hash),
        "verdict": run.outcome.verdict.value,
        "confidence_bp": run.record.confidence_bp,
        "reason": run.outcome.reason,
        "attempts": run.attempts,
    }


def judge_lines(run: JudgeRun) -> list[str]:
    """`ledger judge`: the verdict, after how many attempts, why, and the record."""
    return [
        "judge %s after %d attempt(s): %s" % (run.outcome.verdict.value.upper(), run.attempts, run.outcome.reason),
        "record %s" % run.appended.body_hash,
    ]


def appended_document(name: str, appended: Appended, body: object) -> dict[str, Any]:
    """What a command that appended one entry prints with --json: the body's hash under
    ``name``, the entry's hash and position, and the body itself.
    """
    return {
        name: str(appended.body_hash),
        "entry": str(appended.entry_hash),
        "seq": appended.seq,
        "body": jsonable(body),
    }


def pull_lines(res: PullResult) -> list[str]:
    """A pull, as a CI log shows it."""
    lines = ["mirror       %s" % res.mirror]
    if not res.ok:
        lines += ["REFUSED: the shared ledger did not only grow; nothing was written"]
        lines += ["  - %s" % d for d in res.defects]
        return lines
    lines.append("entries      %d -> %d" % (res.entries_before, res.entries_after))
    lines.append("blobs        %d copied" % res.blobs_copied)
    lines += [
        "warning: blob row not copied: %s (a row no honest writer makes: the store's owner quarantines it"
        " with `ledger repair-head`)" % why
        for why in res.skipped
    ]
    lines.append("checkpoints  %d copied" % res.checkpoints_copied)
    if res.proven is not None:
        lines.append("proof        consistent from the kept checkpoint (size %d) to size %d" % res.proven)
    elif res.first:
        lines.append("proof        none: a new mirror has no kept checkpoint (the next pull proves against this one)")
    else:
        lines.append("proof        no newer checkpoint; the mirror's head is still the shared store's prefix")
    lines.append("PULLED: verify the mirror with `ledger --dir %s verify --chain --trust ...`" % res.mirror)
    return lines
