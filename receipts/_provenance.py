"""The agents' own provenance records (Agent Trace, git-ai authorship logs, Entire
checkpoints): their validation, what each declares (which lines of which files, which
models), and the `attribution_declared` rule over a candidate's added lines.

Pure: the ledger reads the records from files and git, the verifier from stored evidence;
both turn them into declarations here, so a record cannot mean one thing to the runner and
another to the auditor (docs/format.md §6d).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import FormatError

__all__ = [
    "PROVENANCE_FORMAT",
    "PROVENANCE_MEDIA_TYPE",
    "PROVENANCE_SOURCES",
    "AGENT_TRACE_MEDIA_TYPE",
    "Declared",
    "parse_agent_trace",
    "parse_git_ai_note",
    "parse_entire_checkpoint",
    "provenance_document",
    "declared_by",
    "declared_facts",
    "added_lines",
    "undeclared",
]

PROVENANCE_FORMAT = "receipt-ledger/provenance/v1"
PROVENANCE_MEDIA_TYPE = "application/vnd.receipt-ledger.provenance+json"
AGENT_TRACE_MEDIA_TYPE = "application/vnd.agent-trace.record+json"  # the specification's Appendix B
PROVENANCE_SOURCES = frozenset({"agent-trace", "git-ai", "entire"})
MAX_RANGES = 100_000  # per record: a bound on the work a hostile record can ask of the rule

# The published schema has said both MAJOR.MINOR and MAJOR.MINOR.PATCH (its own example
# is "0.1.0"): either is a version (ADR 0033).
_TRACE_VERSION = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?")
_CONTRIBUTOR_TYPES = frozenset({"human", "ai", "mixed", "unknown"})
_VCS_TYPES = frozenset({"git", "jj", "hg", "svn"})
_GIT_AI_SCHEMA = "authorship/3.0.0"
_GIT_AI_KEY = re.compile(r"s_[0-9a-f]{14}::t_[0-9a-f]{14}|h_[0-9a-f]{14}|[0-9a-f]{16}|[0-9a-f]{7}")
_GIT_AI_RANGES = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")
_ENTIRE_ID = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True, slots=True)
class Declared:
    """What one record declares: line ranges by file, files declared whole (a record that
    names files but not lines), and the models it names as authors.
    """

    ranges: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]
    files: tuple[str, ...]
    models: tuple[str, ...]


def _fail(source: str, where: str, why: str) -> FormatError:
    return FormatError("%s record: %s %s" % (source, where, why) if where else "%s record: %s" % (source, why))


def _require(
    source: str, obj: Any, where: str, fields: Mapping[str, type | tuple[type, ...]], required: Iterable[str]
) -> None:
    """``obj`` is an object with ``required`` present and each known field of its type;
    unknown fields are refused, as the published schemas do (additionalProperties false).
    """
    if not isinstance(obj, dict):
        raise _fail(source, where, "must be an object")
    for name in required:
        if name not in obj:
            raise _fail(source, where, "lacks %r" % name)
    for name, value in obj.items():
        kind = fields.get(name)
        if kind is None:
            raise _fail(source, where, "has an unknown field %r" % name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _fail(source, "%s.%s" % (where, name) if where else name, "has the wrong type")


def _line(source: str, value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _fail(source, where, "must be a line number (an integer from 1)")
    return value


def _contributor(obj: Any, where: str) -> str | None:
    """The model a contributor names when it is an AI (or mixed) author."""
    _require("agent-trace", obj, where, {"type": str, "model_id": str}, ("type",))
    if obj["type"] not in _CONTRIBUTOR_TYPES:
        raise _fail("agent-trace", where + ".type", "must be one of %s" % ", ".join(sorted(_CONTRIBUTOR_TYPES)))
    model = obj.get("model_id")
    if model is not None and len(model) > 250:
        raise _fail("agent-trace", where + ".model_id", "is longer than 250 characters")
    return model if obj["type"] in ("ai", "mixed") and model else None


def _relative(source: str, path: Any, where: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise _fail(source, where, "must be a file path")
    relative = str(path).removeprefix("./")
    if relative.startswith("/") or ".." in relative.split("/"):
        raise _fail(source, where, "must be relative to the repository root")
    return relative


def parse_agent_trace(data: bytes) -> dict[str, Any]:
    """An Agent Trace record (the specification's trace-record schema), validated.

    Raises:
        FormatError: not JSON, or not a trace record; the message names the field.
    """
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError("agent-trace record: not JSON (%s)" % exc) from None
    _agent_trace_declared(doc)
    assert isinstance(doc, dict)
    return doc


class _Collected:
    """Ranges and models as a record's parts are read, bounded by `MAX_RANGES`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ranges: dict[str, list[tuple[int, int]]] = {}
        self.models: set[str] = set()
        self.count = 0

    def add(self, path: str, start: int, end: int, where: str) -> None:
        if start < 1 or end < start:
            raise _fail(self.source, where, "is not a range of lines from 1 (%d-%d)" % (start, end))
        self.count += 1
        if self.count > MAX_RANGES:
            raise _fail(self.source, "", "declares more than %d ranges" % MAX_RANGES)
        self.ranges.setdefault(path, []).append((start, end))

    def declared(self, files: Iterable[str] = ()) -> Declared:
        return _declared(self.ranges, files, self.models)


def _trace_header(doc: Any) -> None:
    import uuid  # here: with datetime, a few ms of the agent hooks' start-up otherwise
    from datetime import datetime

    src = "agent-trace"
    _require(
        src,
        doc,
        "",
        {"version": str, "id": str, "timestamp": str, "vcs": dict, "tool": dict, "files": list, "metadata": dict},
        ("version", "id", "timestamp", "files"),
    )
    if not _TRACE_VERSION.fullmatch(doc["version"]):
        raise _fail(src, "version", "must be MAJOR.MINOR or MAJOR.MINOR.PATCH")
    try:
        uuid.UUID(doc["id"])
    except ValueError:
        raise _fail(src, "id", "must be a UUID") from None
    try:
        if "T" not in doc["timestamp"].upper():
            raise ValueError(doc["timestamp"])
        datetime.fromisoformat(doc["timestamp"].replace("z", "Z"))
    except ValueError:
        raise _fail(src, "timestamp", "must be an RFC 3339 date-time") from None
    if "vcs" in doc:
        _require(src, doc["vcs"], "vcs", {"type": str, "revision": str}, ("type", "revision"))
        if doc["vcs"]["type"] not in _VCS_TYPES:
            raise _fail(src, "vcs.type", "must be one of %s" % ", ".join(sorted(_VCS_TYPES)))
    if "tool" in doc:
        _require(src, doc["tool"], "tool", {"name": str, "version": str}, ("name", "version"))


def _trace_conversation(conv: Any, where: str, path: str, out: _Collected) -> None:
    src = "agent-trace"
    _require(src, conv, where, {"url": str, "contributor": dict, "ranges": list, "related": list}, ("ranges",))
    author = _contributor(conv["contributor"], where + ".contributor") if "contributor" in conv else None
    for k, rel in enumerate(conv.get("related", [])):
        _require(src, rel, "%s.related[%d]" % (where, k), {"type": str, "url": str}, ("type", "url"))
    for k, rng in enumerate(conv["ranges"]):
        rw = "%s.ranges[%d]" % (where, k)
        fields = {"start_line": int, "end_line": int, "content_hash": str, "contributor": dict}
        _require(src, rng, rw, fields, ("start_line", "end_line"))
        out.add(
            path, _line(src, rng["start_line"], rw + ".start_line"), _line(src, rng["end_line"], rw + ".end_line"), rw
        )
        # A range's own contributor overrides its conversation's (an agent hand-off).
        model = _contributor(rng["contributor"], rw + ".contributor") if "contributor" in rng else author
        if model:
            out.models.add(model)


def _agent_trace_declared(doc: Any) -> Declared:
    _trace_header(doc)
    out = _Collected("agent-trace")
    for i, file in enumerate(doc["files"]):
        where = "files[%d]" % i
        _require("agent-trace", file, where, {"path": str, "conversations": list}, ("path", "conversations"))
        path = _relative("agent-trace", file["path"], where + ".path")
        for j, conv in enumerate(file["conversations"]):
            _trace_conversation(conv, "%s.conversations[%d]" % (where, j), path, out)
    return out.declared()


def _declared(ranges: Mapping[str, list[tuple[int, int]]], files: Iterable[str], models: Iterable[str]) -> Declared:
    return Declared(
        tuple((path, _merged(spans)) for path, spans in sorted(ranges.items())),
        tuple(sorted(set(files))),
        tuple(sorted(set(models))),
    )


def _merged(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)


def _unquoted(line: str) -> str:
    if len(line) >= 2 and line.startswith('"') and line.endswith('"'):
        return line[1:-1]
    return line


def parse_git_ai_note(text: str) -> Declared:
    """A git-ai authorship log (Git AI Standard v3.0.0, the note under ``refs/notes/ai``):
    the attestation section's line ranges (AI sessions and known humans alike declare their
    lines) and the models of the sessions and prompts it attests.

    Raises:
        FormatError: not an authorship log of that schema version; the message says where.
    """
    src = "git-ai"
    attestations, divider, metadata = text.partition("\n---\n")
    if not divider:
        raise _fail(src, "", "has no '---' line between attestations and metadata")
    maps = _git_ai_metadata(metadata)
    out = _Collected(src)
    path: str | None = None
    for n, line in enumerate(attestations.split("\n"), 1):
        if not line:
            continue
        if not line.startswith(" "):
            path = _relative(src, _unquoted(line), "line %d" % n)
            continue
        key, _, spec = line[2:].partition(" ")
        if (
            path is None
            or not line.startswith("  ")
            or not _GIT_AI_KEY.fullmatch(key)
            or not _GIT_AI_RANGES.fullmatch(spec)
        ):
            raise _fail(src, "line %d" % n, "is not '  KEY RANGES' under a file")
        kind = "s" if key.startswith("s_") else "h" if key.startswith("h_") else ""
        entry = maps[kind].get(key.partition("::")[0])
        if not isinstance(entry, dict):
            raise _fail(src, "line %d" % n, "attests %s, which the metadata does not describe" % key)
        if kind != "h":  # an AI session (or a legacy prompt): its agent and model
            agent = entry.get("agent_id")
            if not isinstance(agent, dict) or not isinstance(agent.get("tool"), str):
                raise _fail(src, "metadata %s" % key, "lacks agent_id")
            if isinstance(agent.get("model"), str) and agent["model"]:
                out.models.add(agent["model"])
        for part in spec.split(","):
            first, _, last = part.partition("-")
            out.add(path, int(first), int(last or first), "line %d" % n)
    return out.declared()


def _git_ai_metadata(metadata: str) -> dict[str, dict[str, Any]]:
    """The metadata section's maps, by attestation key prefix (``s``, ``h``, none)."""
    src = "git-ai"
    try:
        meta = json.loads(metadata)
    except ValueError as exc:
        raise _fail(src, "metadata", "is not JSON (%s)" % exc) from None
    if not isinstance(meta, dict) or meta.get("schema_version") != _GIT_AI_SCHEMA:
        raise _fail(src, "metadata.schema_version", "must be %r" % _GIT_AI_SCHEMA)
    if not isinstance(meta.get("base_commit_sha"), str) or not isinstance(meta.get("prompts"), dict):
        raise _fail(src, "metadata", "lacks base_commit_sha or prompts")
    maps = {"s": meta.get("sessions", {}), "h": meta.get("humans", {}), "": meta["prompts"]}
    if not all(isinstance(m, dict) for m in maps.values()):
        raise _fail(src, "metadata", "sessions, humans and prompts must be objects")
    return maps


def parse_entire_checkpoint(checkpoint: Any, sessions: Sequence[Any]) -> Declared:
    """An Entire checkpoint (the ``metadata.json`` at ``<id[:2]>/<id[2:]>/`` of the
    ``entire/checkpoints/v1`` branch, and each session's): it names the files its sessions
    touched, not lines, so each such file is declared whole; it names agents, not models.

    Raises:
        FormatError: not a checkpoint summary with its sessions' metadata.
    """
    src = "entire"
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("checkpoint_id"), str):
        raise _fail(src, "metadata.json", "lacks checkpoint_id")
    if not _ENTIRE_ID.fullmatch(checkpoint["checkpoint_id"]):
        raise _fail(src, "checkpoint_id", "must be 12 lowercase hex digits")
    files: set[str] = set()
    for i, doc in enumerate((checkpoint, *sessions)):
        where = "metadata.json" if i == 0 else "session %d metadata.json" % (i - 1)
        touched = doc.get("files_touched") if isinstance(doc, dict) else None
        if not isinstance(touched, list):
            raise _fail(src, where, "lacks files_touched")
        if i and doc.get("checkpoint_id") != checkpoint["checkpoint_id"]:
            raise _fail(src, where, "is of another checkpoint")
        files.update(_relative(src, p, where + ".files_touched") for p in touched)
    return _declared({}, files, ())


def provenance_document(source: str, record: Any) -> dict[str, Any]:
    """The evidence document for one record as read (§6d): what the verifier re-reads.

    Raises:
        FormatError: the record does not validate.
    """
    doc = {"format": PROVENANCE_FORMAT, "source": source, "record": record}
    declared_by(doc)
    return doc


def declared_by(doc: Mapping[str, Any]) -> Declared:
    """What a provenance document declares, read again from the record it holds.

    Raises:
        FormatError: an unknown source, or a record that does not validate.
    """
    source, record = doc.get("source"), doc.get("record")
    if source == "agent-trace":
        return _agent_trace_declared(record)
    if source == "git-ai":
        if not isinstance(record, dict) or not isinstance(record.get("note"), str):
            raise FormatError("git-ai record: lacks its note")
        return parse_git_ai_note(record["note"])
    if source == "entire":
        if not isinstance(record, dict) or not isinstance(record.get("sessions"), list):
            raise FormatError("entire record: lacks its sessions")
        return parse_entire_checkpoint(record.get("checkpoint"), record["sessions"])
    raise FormatError("unknown provenance source %r" % source)


def declared_facts(records: Sequence[tuple[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """The `attribution_declared` facts that follow from the task's provenance documents
    (digest, document or None when it could not be read): the runner records them and the
    verifier computes them again from the stored documents.
    """
    ranges: dict[str, list[tuple[int, int]]] = {}
    files: set[str] = set()
    models: set[str] = set()
    unreadable: list[str] = []
    for digest, doc in records:
        try:
            if doc is None:
                raise FormatError("missing")
            declared = declared_by(doc)
        except FormatError:
            unreadable.append(digest)
            continue
        for path, spans in declared.ranges:
            ranges.setdefault(path, []).extend(spans)
        files.update(declared.files)
        models.update(declared.models)
    merged = _declared(ranges, files, models)
    return {
        "records": [digest for digest, _ in records],
        "unreadable": unreadable,
        "declared_ranges": {path: [list(s) for s in spans] for path, spans in merged.ranges},
        "declared_files": list(merged.files),
        "models": list(merged.models),
    }


_HUNK = re.compile(rb"@@ -[0-9]+(?:,[0-9]+)? \+([0-9]+)(?:,[0-9]+)? @@")
_ESCAPE = re.compile(r"\\([0-7]{3}|.)")
_C_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "r": "\r", "v": "\v"}


def added_lines(diff: bytes) -> dict[str, list[list[int]]]:
    """The lines a git diff adds, as inclusive ranges of the new file's line numbers, by
    path. A binary file's change is its line 1 (a whole-file declaration or a range over
    line 1 covers it); removed lines and deleted files leave nothing to declare.
    """
    added: dict[str, list[tuple[int, int]]] = {}
    path: str | None = None
    line = 0
    for raw in diff.split(b"\n"):
        if raw.startswith(b"diff --git "):
            # The new name, for a binary patch (which has no +++ line); +++ corrects it.
            header = raw[11:].decode("utf-8", "replace")
            quoted = header.endswith('"') and ' "b/' in header
            name = '"' + header.rsplit(' "', 1)[1] if quoted else "b/" + header.rsplit(" b/", 1)[-1]
            path, line = (_diff_path(name, "b/") if quoted or " b/" in header else None), 0
        elif raw.startswith(b"deleted file mode"):
            path = None
        elif raw.startswith(b"+++ ") and not line:
            name = raw[4:].decode("utf-8", "replace").removesuffix("\t")  # git's mark of a name with a space
            path = None if name == "/dev/null" else _diff_path(name, "b/")
        elif raw == b"GIT binary patch" or raw.startswith(b"Binary files "):
            if path is not None:
                added.setdefault(path, []).append((1, 1))
            path = None
        elif path is not None and (m := _HUNK.match(raw)):
            line = int(m.group(1))
        elif path is not None and line and raw.startswith(b"+"):
            added.setdefault(path, []).append((line, line))
            line += 1
        elif path is not None and line and raw.startswith(b" "):
            line += 1
    return {p: [list(s) for s in _merged(spans)] for p, spans in sorted(added.items())}


def _diff_path(name: str, prefix: str) -> str:
    """A path as git prints it in a diff: C-quoted when unusual, after its ``b/`` prefix."""
    if name.startswith('"') and name.endswith('"'):
        octets = bytearray()
        text = name[1:-1]
        pos = 0
        for m in _ESCAPE.finditer(text):
            octets += text[pos : m.start()].encode()
            code = m.group(1)
            octets += bytes([int(code, 8)]) if len(code) == 3 else _C_ESCAPES.get(code, code).encode()
            pos = m.end()
        octets += text[pos:].encode()
        name = octets.decode("utf-8", "replace")
    return name.removeprefix(prefix)


def undeclared(changed: Mapping[str, Any], ranges: Mapping[str, Any], files: Iterable[str]) -> list[str]:
    """Each changed file's lines that no record declares, as ``path lines a-b, c``.

    Raises:
        FormatError: the facts are not ranges by path.
    """
    whole = set(files)
    out = []
    for path, spans in sorted(changed.items()):
        if path in whole:
            continue
        have = _spans(ranges.get(path, []))
        missing = []
        for start, end in _spans(spans):
            cursor = start
            for a, b in have:
                if b < cursor or a > end:
                    continue
                if a > cursor:
                    missing.append((cursor, a - 1))
                cursor = max(cursor, b + 1)
            if cursor <= end:
                missing.append((cursor, end))
        if missing:
            out.append("%s lines %s" % (path, ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in missing)))
    return out


def _spans(value: Any) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list) or not all(
        isinstance(s, list) and len(s) == 2 and all(isinstance(n, int) and not isinstance(n, bool) for n in s)
        for s in value
    ):
        raise FormatError("line ranges must be [start, end] pairs")
    return _merged((a, b) for a, b in value)
