"""Receipts on commits: git notes under refs/notes/receipts, so that `git log
--notes=receipts` shows them and `git push origin refs/notes/receipts` carries them."""

from __future__ import annotations

import os
import re
from pathlib import Path

from receipts import Digest, LadderReceipt, candidate_hash

from ._errors import InputError
from ._evidence import receipt_snapshot
from ._git import git, resolve_commit, run_git
from ._store import Ledger

__all__ = ["NOTES_REF", "attach", "attached", "receipt_commit"]

NOTES_REF = "refs/notes/receipts"
_LINE = re.compile(r"^receipt-ledger: (blake3:[0-9a-f]{64})$", re.MULTILINE)


def receipt_commit(ledger: Ledger, receipt: LadderReceipt) -> str | None:
    """The candidate commit a receipt is about, from its deterministic record's snapshot."""
    snapshot = receipt_snapshot(ledger, receipt)
    commit = snapshot.get("commit") if snapshot is not None else None
    return commit if isinstance(commit, str) else None


def _summary(ledger: Ledger, receipt_hash: str, receipt: LadderReceipt) -> str:
    tiers = []
    for slot in receipt.entries:
        verdicts = []
        for digest in slot.records:
            record = ledger.record(digest)
            if record is not None:
                verdicts.append(record.verdict.value)
        tiers.append("%s %s" % (slot.tier.value, "/".join(verdicts) if verdicts else "skip"))
    return "receipt-ledger: %s\n  task %s, merge_eligible %s, %s\n  verify: ledger verify %s\n" % (
        receipt_hash,
        receipt.task_id,
        str(receipt.merge_eligible).lower(),
        ", ".join(tiers),
        receipt_hash,
    )


def attach(ledger: Ledger, repo: Path, receipt_digest: Digest, rev: str | None) -> str:
    """Add the receipt to the note of its candidate commit; return the commit id."""
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    commit = rev or receipt_commit(ledger, receipt)
    if commit is None:
        raise InputError("the receipt names no commit (no deterministic snapshot): pass --commit REV")
    fields = resolve_commit(commit, repo)
    if candidate_hash(fields) != receipt.input_hash:
        raise InputError(
            "commit %s (tree %s) is not the receipt's candidate" % (fields["commit"][:12], fields["tree"][:12])
        )
    if receipt_hash in attached(repo, fields["commit"]):
        return fields["commit"]
    git(
        repo,
        "notes",
        "--ref",
        NOTES_REF,
        "append",
        "-m",
        _summary(ledger, receipt_hash, receipt).rstrip("\n"),
        fields["commit"],
        env=_identity(repo),
    )
    return fields["commit"]


def _identity(repo: Path) -> dict[str, str] | None:
    """A notes commit needs a committer. Where git knows none (a fresh CI machine), use a
    neutral one: the note's trust comes from the signed receipt, never from this name."""
    if run_git(repo, "var", "GIT_COMMITTER_IDENT").returncode == 0:
        return None
    neutral = {"NAME": "receipt-ledger", "EMAIL": "receipt-ledger@localhost"}
    return {
        **os.environ,
        **{"GIT_%s_%s" % (who, part): value for who in ("AUTHOR", "COMMITTER") for part, value in neutral.items()},
    }


def attached(repo: Path, rev: str) -> list[str]:
    """Receipt hashes in the note of a commit (none if it has no note)."""
    commit = resolve_commit(rev, repo)["commit"]
    out = run_git(repo, "notes", "--ref", NOTES_REF, "show", commit)  # no note: a non-zero exit
    return _LINE.findall(out.stdout.decode("utf-8", "replace")) if out.returncode == 0 else []
