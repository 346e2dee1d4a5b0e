"""Receipts that travel with the code (docs/format.md §10).

Two kinds of refs, both carried by ``git push`` and ``git fetch`` with the refspecs that
``ledger receipts push|fetch`` use:

- ``refs/notes/receipts``: one line per receipt, on the candidate commit **and** on its
  tree, so that a squash or rebase merge with the same tree still finds it. One line per
  receipt lets git's ``cat_sort_uniq`` strategy merge two writers' notes without loss.
- ``refs/receipts/<hex>``: the receipt's evidence bundle (the bytes ``ledger export``
  writes), as ``bundle.zip`` in a parentless commit. It is what a fresh clone verifies,
  with no ledger and no network.

Nothing here is trusted: a note only says where to look, a bundle is verified like any
other, and a note's commit field is a hint that the receipt's own signed candidate hash
must confirm.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from receipts import Digest, LadderReceipt, Signer, candidate_hash

from .._errors import InputError
from .._git import git, git_ok, git_to_file, resolve_commit, run_git
from ..exports._bundle import export_bundle
from ..ladder._evidence import receipt_snapshot
from ..store._ledger import Ledger

__all__ = [
    "NOTES_REF",
    "BUNDLE_REFS",
    "BUNDLE_NAME",
    "NoteLine",
    "attach",
    "attached",
    "bundle_ref",
    "has_bundle",
    "open_bundle",
    "receipt_commit",
    "git_identity",
]

NOTES_REF = "refs/notes/receipts"
BUNDLE_REFS = "refs/receipts/"
BUNDLE_NAME = "bundle.zip"
# Older notes named only the hash; the commit field lets a tree's note be matched.
_LINE = re.compile(r"^receipt-ledger: blake3:([0-9a-f]{64})(?: commit=([0-9a-f]{40}|[0-9a-f]{64}))?(?: |$)", re.M)
# A bundle commit's fixed author, committer and time: the same bundle makes the same
# commit on every machine, so two writers of one receipt never conflict.
_BUNDLE_ENV = {
    **{"GIT_%s_%s" % (who, "NAME"): "receipt-ledger" for who in ("AUTHOR", "COMMITTER")},
    **{"GIT_%s_%s" % (who, "EMAIL"): "receipt-ledger@localhost" for who in ("AUTHOR", "COMMITTER")},
    **{"GIT_%s_DATE" % who: "@0 +0000" for who in ("AUTHOR", "COMMITTER")},
}


@dataclass(frozen=True, slots=True)
class NoteLine:
    """One receipt named by a note: its hash and the commit the note says it was for."""

    receipt: str
    commit: str | None
    on: str  # "commit" or "tree": which object's note named it


def receipt_commit(ledger: Ledger, receipt: LadderReceipt) -> str | None:
    """The candidate commit a receipt is about, from its deterministic record's snapshot."""
    snapshot = receipt_snapshot(ledger, receipt)
    commit = snapshot.get("commit") if snapshot is not None else None
    return commit if isinstance(commit, str) else None


def _line(ledger: Ledger, receipt_hash: str, commit: str, receipt: LadderReceipt) -> str:
    tiers = []
    for slot in receipt.entries:
        verdicts = []
        for digest in slot.records:
            record = ledger.record(digest)
            if record is not None:
                verdicts.append(record.verdict.value)
        tiers.append("%s=%s" % (slot.tier.value, "/".join(verdicts) if verdicts else "skip"))
    return "receipt-ledger: %s commit=%s task=%s merge_eligible=%s %s" % (
        receipt_hash,
        commit,
        receipt.task_id.replace(" ", "_"),
        str(receipt.merge_eligible).lower(),
        " ".join(tiers),
    )


def bundle_ref(receipt_hash: str) -> str:
    """The ref holding a receipt's bundle: ``refs/receipts/<hex of the receipt hash>``."""
    return BUNDLE_REFS + Digest.parse(receipt_hash).hex


def has_bundle(repo: Path, receipt_hash: str) -> bool:
    """True if this repository holds the receipt's bundle (fetched or attached here)."""
    return git_ok(repo, "rev-parse", "--verify", "--quiet", bundle_ref(receipt_hash) + "^{commit}") is not None


def _store_bundle(ledger: Ledger, repo: Path, receipt_digest: Digest, receipt_hash: str) -> None:
    """Export the bundle and commit it under its ref, unless the ref already holds one
    (an earlier attach, or a teammate's fetched one: either verifies).
    """
    if has_bundle(repo, receipt_hash):
        return
    with tempfile.TemporaryDirectory(prefix="receipt-attach-") as tmp:
        path = Path(tmp) / BUNDLE_NAME
        export_bundle(ledger, receipt_digest, path)
        blob = git(repo, "hash-object", "-w", "--", str(path)).decode().strip()
    tree = _mktree(repo, "100644 blob %s\t%s\n" % (blob, BUNDLE_NAME))
    env = {**os.environ, **_BUNDLE_ENV}
    commit = git(repo, "commit-tree", tree, "-m", "receipt-ledger bundle %s" % receipt_hash, env=env).decode().strip()
    # Create-only (the zero old value): a concurrent attach of the same receipt keeps its own.
    run_git(repo, "update-ref", bundle_ref(receipt_hash), commit, "0" * len(commit))


def _mktree(repo: Path, listing: str) -> str:
    return git(repo, "mktree", stdin=listing.encode()).decode().strip()


def attach(
    ledger: Ledger, repo: Path, receipt_digest: Digest, rev: str | None, checkpoint_signer: Signer | None = None
) -> str:
    """Store the receipt's bundle under ``refs/receipts/`` and name the receipt in the notes
    of its candidate commit and of that commit's tree; return the commit id. A bundle
    needs a checkpoint covering the receipt: ``checkpoint_signer`` signs one if none does.
    """
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
    if not any(size > stored.seq for size, _ in ledger.checkpoints()):
        if checkpoint_signer is None:
            raise InputError(
                "no checkpoint covers this receipt yet: pass --key NAME (a seal key) to sign one, or run"
                " `ledger checkpoint --key NAME` first"
            )
        ledger.checkpoint(checkpoint_signer)
    _store_bundle(ledger, repo, receipt_digest, receipt_hash)
    line = _line(ledger, receipt_hash, fields["commit"], receipt)
    for obj in (fields["commit"], fields["tree"]):
        if receipt_hash not in {n.receipt for n in _lines(repo, obj, "commit")}:
            git(repo, "notes", "--ref", NOTES_REF, "append", "-m", line, obj, env=git_identity(repo))
    return fields["commit"]


def git_identity(repo: Path) -> dict[str, str] | None:
    """A notes commit needs a committer. Where git knows none (a fresh CI machine), use a
    neutral one: the note's trust comes from the signed receipt, never from this name.
    """
    if run_git(repo, "var", "GIT_COMMITTER_IDENT").returncode == 0:
        return None
    neutral = {"NAME": "receipt-ledger", "EMAIL": "receipt-ledger@localhost"}
    return {
        **os.environ,
        **{"GIT_%s_%s" % (who, part): value for who in ("AUTHOR", "COMMITTER") for part, value in neutral.items()},
    }


def _lines(repo: Path, obj: str, on: str) -> list[NoteLine]:
    out = run_git(repo, "notes", "--ref", NOTES_REF, "show", obj)  # no note: a non-zero exit
    if out.returncode != 0:
        return []
    return [
        NoteLine("blake3:" + m.group(1), m.group(2), on) for m in _LINE.finditer(out.stdout.decode("utf-8", "replace"))
    ]


def attached(repo: Path, rev: str) -> list[NoteLine]:
    """The receipts named in the notes of ``rev``'s commit and of its tree, each once
    (the commit's note first).
    """
    fields = resolve_commit(rev, repo)
    seen: dict[str, NoteLine] = {}
    for line in _lines(repo, fields["commit"], "commit") + _lines(repo, fields["tree"], "tree"):
        seen.setdefault(line.receipt, line)
    return list(seen.values())


@contextlib.contextmanager
def open_bundle(repo: Path, receipt_hash: str) -> Iterator[Path | None]:
    """The receipt's bundle from git, streamed into a temporary file (None if this repository has none)."""
    if not has_bundle(repo, receipt_hash):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="receipt-bundle-") as tmp:
        path = Path(tmp) / BUNDLE_NAME
        with path.open("wb") as out:
            found = git_to_file(repo, out, "cat-file", "blob", "%s:%s" % (bundle_ref(receipt_hash), BUNDLE_NAME))
        yield path if found else None
