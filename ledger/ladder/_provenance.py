"""The agents' own provenance records taken as evidence: read from a file (Agent Trace),
a git note (git-ai, ``refs/notes/ai``) or a checkpoint branch (Entire), validated by
`receipts`, stored exactly as read, and listed under a signed provenance event. The
deterministic tier's `attribution_declared` check and the judge read them back from there.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import (
    AGENT_TRACE_MEDIA_TYPE,
    PROVENANCE_FORMAT,
    PROVENANCE_MEDIA_TYPE,
    Declared,
    Digest,
    EventType,
    EvidenceRef,
    FormatError,
    Signer,
    declared_by,
    parse_agent_trace,
    provenance_document,
)

from .._errors import InputError
from .._files import read_bounded
from .._git import git_ok
from ..store._ledger import Appended, Store
from ._events import append_event, task_events
from ._evidence import evidence_json

__all__ = ["MAX_PROVENANCE", "ENTIRE_BRANCHES", "Provenance", "add_provenance", "task_provenance"]

MAX_PROVENANCE = 16 << 20
# Where Entire keeps committed checkpoints: its branch, here or as fetched from origin.
ENTIRE_BRANCHES = ("refs/heads/entire/checkpoints/v1", "refs/remotes/origin/entire/checkpoints/v1")


@dataclass(frozen=True, slots=True)
class Provenance:
    """One record as stored: its event's entry, the document's digest and what it declares."""

    appended: Appended
    document: Digest
    declared: Declared

    def as_dict(self) -> dict[str, Any]:
        """What `ledger evidence add --json` prints."""
        named = [path for path, _ in self.declared.ranges] + list(self.declared.files)
        return {
            "seq": self.appended.seq,
            "document": str(self.document),
            "files": named,
            "models": list(self.declared.models),
        }

    def lines(self) -> list[str]:
        """What it prints for people."""
        files, models = len(self.as_dict()["files"]), ", ".join(self.declared.models) or "none named"
        return [
            "provenance recorded at entry %d: %d file(s) declared; models: %s" % (self.appended.seq, files, models),
            "  stored as %s" % self.document,
        ]


def add_provenance(
    store: Store,
    signer: Signer,
    task: str,
    candidate: Digest | None,
    *,
    repo: Path,
    agent_trace: Path | None = None,
    git_ai: str | None = None,
    entire: str | None = None,
) -> Provenance:
    """Read one provenance record (exactly one of the three sources), validate it, store
    the bytes as read and the provenance document, and append a provenance event.

    Args:
        store: the ledger written to.
        signer: the key that signs the event (role agent).
        task: the task the record is evidence for.
        candidate: the candidate it describes, when known.
        repo: the repository git notes and branches are read from.
        agent_trace: an Agent Trace record (JSON).
        git_ai: a revision whose git-ai note (``refs/notes/ai``) to read.
        entire: an Entire checkpoint id, read from its checkpoint branch.

    Raises:
        InputError: not exactly one source, an unreadable source, or a record that does
            not validate (the message names the field).
    """
    if sum(x is not None for x in (agent_trace, git_ai, entire)) != 1:
        raise InputError("give exactly one of --agent-trace FILE, --git-ai or --entire ID")
    try:
        if agent_trace is not None:
            raw = read_bounded(agent_trace, "agent trace", MAX_PROVENANCE)
            source, record, media = "agent-trace", parse_agent_trace(raw), AGENT_TRACE_MEDIA_TYPE
        elif git_ai is not None:
            raw, record = _git_ai(repo, git_ai)
            source, media = "git-ai", "text/plain"
        else:
            assert entire is not None
            raw, record = _entire(repo, entire)
            source, media = "entire", "application/json"
        doc = provenance_document(source, record)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    declared = declared_by(doc)
    raw_digest, raw_size = store.put_blob_stream(io.BytesIO(raw))
    data = json.dumps(doc, sort_keys=True, indent=1).encode()
    doc_digest, doc_size = store.put_blob_stream(io.BytesIO(data))
    evidence = (
        EvidenceRef("provenance:record", raw_digest, raw_size, media),
        EvidenceRef("provenance", doc_digest, doc_size, PROVENANCE_MEDIA_TYPE),
    )
    fields = {
        "source": source,
        "files": str(len(declared.ranges) + len(declared.files)),
        "models": ",".join(declared.models),
    }
    appended = append_event(store, signer, task, EventType.PROVENANCE, candidate, fields, evidence)
    return Provenance(appended, doc_digest, declared)


def _git_ai(repo: Path, revision: str) -> tuple[bytes, dict[str, Any]]:
    commit = git_ok(repo, "rev-parse", "--verify", "--end-of-options", revision + "^{commit}")
    if commit is None:
        raise InputError("no commit %r in %s" % (revision, repo))
    note = git_ok(repo, "notes", "--ref=ai", "show", commit)
    if note is None:
        raise InputError(
            "commit %s has no git-ai note under refs/notes/ai (fetch it: git fetch origin refs/notes/ai:refs/notes/ai)"
            % commit[:12]
        )
    return note.encode(), {"commit": commit, "note": note + "\n"}


def _entire(repo: Path, checkpoint: str) -> tuple[bytes, dict[str, Any]]:
    checkpoint = checkpoint.strip().lower()
    if len(checkpoint) != 12 or any(c not in "0123456789abcdef" for c in checkpoint):
        raise InputError("an Entire checkpoint id is 12 hex digits: %r" % checkpoint)
    branch = next((b for b in ENTIRE_BRANCHES if git_ok(repo, "rev-parse", "--verify", "-q", b)), None)
    if branch is None:
        raise InputError("no Entire checkpoint branch (entire/checkpoints/v1) in %s" % repo)
    folder = "%s/%s" % (checkpoint[:2], checkpoint[2:])
    summary = _json_at(repo, branch, folder + "/metadata.json")
    sessions = []
    for i, entry in enumerate(summary.get("sessions") or []):
        path = entry.get("metadata") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not path.lstrip("/").startswith(folder + "/"):
            raise InputError("Entire checkpoint %s: session %d's metadata is outside its folder" % (checkpoint, i))
        sessions.append(_json_at(repo, branch, path.lstrip("/")))
    record = {"checkpoint": summary, "sessions": sessions}
    return json.dumps(record, sort_keys=True).encode(), record


def _json_at(repo: Path, branch: str, path: str) -> dict[str, Any]:
    text = git_ok(repo, "show", "%s:%s" % (branch, path))
    if text is None:
        raise InputError("no %s on %s" % (path, branch))
    try:
        doc = json.loads(text)
    except ValueError:
        raise InputError("%s on %s is not JSON" % (path, branch)) from None
    if not isinstance(doc, dict):
        raise InputError("%s on %s is not a JSON object" % (path, branch))
    return doc


def task_provenance(store: Store, task: str) -> list[tuple[EvidenceRef, dict[str, Any] | None]]:
    """The task's provenance documents in chain order, each with its evidence ref (None
    when the stored one cannot be read as one): what `receipts.declared_facts` reads.
    """
    found: list[tuple[EvidenceRef, dict[str, Any] | None]] = []
    for _, event, _ in task_events(store, task):
        if event.type is not EventType.PROVENANCE:
            continue
        for ref in event.evidence:
            if ref.check_id == "provenance" and ref.media_type == PROVENANCE_MEDIA_TYPE:
                found.append((ref, evidence_json(store, ref.digest, PROVENANCE_FORMAT)))
    return found
