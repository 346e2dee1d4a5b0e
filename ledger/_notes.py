"""Receipts on commits: git notes under refs/notes/receipts, so that `git log
--notes=receipts` shows them and `git push origin refs/notes/receipts` carries them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from receipts import (
    SNAPSHOT_FORMAT,
    Digest,
    EntryKind,
    LadderReceipt,
    ReceiptsError,
    Tier,
    TierRecord,
    candidate_hash,
    decode_body,
    parse_evidence_json,
)
from verify import Result, Transparency, Trust, verify_receipt

from ._errors import InputError
from ._git import resolve_commit
from ._store import Ledger

__all__ = ["NOTES_REF", "attach", "attached", "receipt_commit", "pr_comment", "gate_check"]

NOTES_REF = "refs/notes/receipts"
_LINE = re.compile(r"^receipt-ledger: (blake3:[0-9a-f]{64})$", re.MULTILINE)


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError("cannot run git: %s" % exc) from None


def receipt_commit(ledger: Ledger, receipt: LadderReceipt) -> str | None:
    """The candidate commit a receipt is about, from its deterministic record's snapshot."""
    slot = receipt.entry(Tier.DETERMINISTIC)
    for digest in slot.records if slot else ():
        stored = ledger.find(digest)
        if stored is None:
            continue
        rec = decode_body(EntryKind.TIER_RECORD, stored.body)
        assert isinstance(rec, TierRecord)
        for ref in rec.evidence:
            if ref.check_id == "snapshot":
                try:
                    doc = parse_evidence_json(ledger.blob_path(ref.digest).read_bytes(), SNAPSHOT_FORMAT)
                except (OSError, ReceiptsError):
                    continue
                commit = doc.get("commit")
                return commit if isinstance(commit, str) else None
    return None


def _summary(ledger: Ledger, receipt_hash: str, receipt: LadderReceipt) -> str:
    tiers = []
    for slot in receipt.entries:
        verdicts = []
        for digest in slot.records:
            stored = ledger.find(digest)
            record = decode_body(EntryKind.TIER_RECORD, stored.body) if stored is not None else None
            if isinstance(record, TierRecord):
                verdicts.append(record.verdict.value)
        tiers.append("%s %s" % (slot.tier.value, "/".join(verdicts) if verdicts else "skip"))
    return "receipt-ledger: %s\n  task %s, merge_eligible %s, %s\n  verify: ledger verify %s\n" % (
        receipt_hash, receipt.task_id, str(receipt.merge_eligible).lower(), ", ".join(tiers), receipt_hash)


def attach(ledger: Ledger, repo: Path, receipt_digest: Digest, rev: str | None) -> str:
    """Add the receipt to the note of its candidate commit; return the commit id."""
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    commit = rev or receipt_commit(ledger, receipt)
    if commit is None:
        raise InputError("the receipt names no commit (no deterministic snapshot): pass --commit REV")
    fields = resolve_commit(commit, repo)
    if candidate_hash(fields) != receipt.input_hash:
        raise InputError("commit %s (tree %s) is not the receipt's candidate" % (fields["commit"][:12], fields["tree"][:12]))
    if receipt_hash in attached(repo, fields["commit"]):
        return fields["commit"]
    out = _git(repo, "notes", "--ref", NOTES_REF, "append", "-m", _summary(ledger, receipt_hash, receipt).rstrip("\n"), fields["commit"])
    if out.returncode != 0:
        raise InputError("git notes failed: %s" % out.stderr.strip())
    return fields["commit"]


def attached(repo: Path, rev: str) -> list[str]:
    """Receipt hashes in the note of a commit (none if it has no note)."""
    commit = resolve_commit(rev, repo)["commit"]
    out = _git(repo, "notes", "--ref", NOTES_REF, "show", commit)
    return _LINE.findall(out.stdout) if out.returncode == 0 else []


def pr_comment(result: Result, receipt_hash: str) -> str:
    mark = {"pass": "✅", "fail": "❌", "skip": "⏭️", "missing": "❌", "review": "🟡", "retry": "🟡"}
    verdict = "merge-eligible" if result.ok and result.derived_eligible else ("NOT merge-eligible" if result.ok else "REJECTED by verification")
    lines = ["### receipt-ledger: %s **%s**" % (result.task_id or "?", verdict), "",
             "| tier | required | status | signed by |", "|---|---|---|---|"]
    for t in result.tiers:
        lines.append("| %s | %s | %s %s | %s |" % (t.tier.value, "yes" if t.required else "no", mark.get(t.status, ""), t.status,
                                                  (t.signer or t.detail).replace("|", "\\|")))
    if result.eligibility_reasons:
        lines += ["", "Not eligible because:"] + ["- %s" % r for r in result.eligibility_reasons]
    if result.defects:
        lines += ["", "Verification defects:"] + ["- `%s` %s" % (d.code, d.message) for d in result.defects]
    for w in result.weakenings + result.waivers + result.stale:
        lines.append("- note: %s" % w)
    lines += ["", "Receipt `%s`, candidate `%s`%s." % (receipt_hash, result.candidate, ", checkpoint " + result.checkpoint if result.checkpoint else ""),
              "", "Verify it yourself:", "", "```sh", "git fetch origin refs/notes/receipts:refs/notes/receipts",
              "ledger verify %s --trust ALLOWED_SIGNERS" % receipt_hash, "```", ""]
    return "\n".join(lines)


def gate_check(ledger: Ledger, repo: Path, rev: str, trust: Trust,
               require_checkpoint: bool = False) -> tuple[str | None, list[str], Digest, dict[str, str]]:
    """(the receipt that lets REV through or None, why others did not, REV's candidate, its commit and tree).
    Only a verified, merge-eligible receipt for REV's exact commit and tree lets it through."""
    fields = resolve_commit(rev, repo)
    candidate = candidate_hash(fields)
    reasons: list[str] = []
    hashes = attached(repo, rev)
    if not hashes:
        return None, ["no receipt is attached to %s" % fields["commit"][:12]], candidate, fields
    for h in hashes:
        res = verify_receipt(ledger.reader, h, trust, Transparency(require_checkpoint=require_checkpoint))
        if res.candidate != str(candidate):
            reasons.append("%s is stale: it is for candidate %s, not this commit's tree" % (h, (res.candidate or "?")[:19]))
        elif not res.ok:
            reasons.append("%s does not verify: %s" % (h, res.defects[0].message))
        elif not res.derived_eligible:
            reasons.append("%s is not merge-eligible: %s" % (h, "; ".join(res.eligibility_reasons)))
        else:
            return h, reasons, candidate, fields
    return None, reasons, candidate, fields
