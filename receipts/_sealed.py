"""Sealed check sets: held-out tests committed to before the work, run where the agent
cannot look, revealed after (docs/format.md §6e).

A sealed set's plaintext is the canonical CBOR of {"format", "files"}: every file's
repository-relative path to its exact bytes. Its content digest (§2) is what a contract's
check names (``sealed = "blake3:…"``), so the commitment is signed with the contract
revision before the work begins. The ciphertext is age v1 (C2SP age.md) to the
deterministic role's keys; encryption is the writer's, never this module's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._cbor import canonical_dumps, canonical_loads
from ._digest import Digest, content_digest
from ._errors import FormatError
from ._harness import defined_tests, test_report_findings

__all__ = [
    "SEALED_SET_FORMAT",
    "SEALED_SET_MEDIA_TYPE",
    "SEALED_RESULT_MEDIA_TYPE",
    "AGE_MEDIA_TYPE",
    "MAX_SEALED_FILES",
    "MAX_SEALED_BYTES",
    "MAX_SEALED_PATH",
    "pack_sealed_set",
    "unpack_sealed_set",
    "sealed_set_digest",
    "sealed_file_name",
    "RevealedSet",
    "revealed_findings",
]

SEALED_SET_FORMAT = "receipt-ledger/sealed-set/v1"
SEALED_SET_MEDIA_TYPE = "application/vnd.receipt-ledger.sealed-set+cbor"
# A sealed check's full result (its report, control, expected tests and facts), as age
# ciphertext to the key that ran it; and any other evidence kept encrypted until reveal.
SEALED_RESULT_MEDIA_TYPE = "application/vnd.receipt-ledger.sealed-result+age"
AGE_MEDIA_TYPE = "application/age"
# Within canonical CBOR's 1 MiB document limit (§1): 256 paths of at most 200 characters
# and 900 KiB of file bytes leave room for the encoding.
MAX_SEALED_FILES = 256
MAX_SEALED_PATH = 200
MAX_SEALED_BYTES = 900 << 10
# A relative path of non-empty components, none of them `.` or `..`, no backslash or NUL.
_PATH = re.compile(r"(?!/)(?:(?!\.\.?(?:/|$))[^/\\\x00]+)(?:/(?!\.\.?(?:/|$))[^/\\\x00]+)*")


def _check_files(files: Mapping[str, bytes]) -> None:
    if not files:
        raise FormatError("a sealed set holds at least one file")
    if len(files) > MAX_SEALED_FILES:
        raise FormatError("a sealed set holds at most %d files" % MAX_SEALED_FILES)
    total = 0
    for path, data in files.items():
        if not isinstance(path, str) or len(path) > MAX_SEALED_PATH or _PATH.fullmatch(path) is None:
            raise FormatError(
                "sealed file path %r is not a plain relative path (at most %d characters)" % (path, MAX_SEALED_PATH)
            )
        if not isinstance(data, bytes):
            raise FormatError("sealed file %s is not bytes" % path)
        total += len(data)
    if total > MAX_SEALED_BYTES:
        raise FormatError("a sealed set holds at most %d bytes of files" % MAX_SEALED_BYTES)


def pack_sealed_set(files: Mapping[str, bytes]) -> bytes:
    """The plaintext of a sealed set holding ``files`` (path: bytes).

    Raises:
        FormatError: no file, too many or too large, or a path that is not a plain
            relative path (``a/b.py``: no leading ``/``, no ``.`` or ``..`` component).
    """
    _check_files(files)
    return canonical_dumps({"format": SEALED_SET_FORMAT, "files": dict(files)})


def unpack_sealed_set(data: bytes) -> dict[str, bytes]:
    """The files of a sealed set's plaintext; only the canonical encoding is read, so one
    set has one digest.

    Raises:
        FormatError: not a sealed set, or not in canonical form.
    """
    try:
        doc: Any = canonical_loads(data)
    except (FormatError, ValueError) as exc:
        raise FormatError("a sealed set is not canonical CBOR: %s" % exc) from None
    if not isinstance(doc, dict) or set(doc) != {"format", "files"} or doc["format"] != SEALED_SET_FORMAT:
        raise FormatError("not a %s document" % SEALED_SET_FORMAT)
    files = doc["files"]
    if not isinstance(files, dict):
        raise FormatError("a sealed set's files are not a map")
    _check_files(files)
    if canonical_dumps(doc) != data:
        raise FormatError("a sealed set is not in canonical form")
    return dict(files)


def sealed_set_digest(data: bytes) -> Digest:
    """The digest a contract names a sealed set by: its plaintext's content digest (§2)."""
    return content_digest(data)


def sealed_file_name(digest: Digest) -> str:
    """Where a sealed set's ciphertext is kept in the repository."""
    return ".ledger/sealed/%s.age" % digest.hex


@dataclass(frozen=True, slots=True)
class RevealedSet:
    """What a reveal made public for one sealed set (§6e): its plaintext and the plaintext
    results of the runs, by the digest each record committed to (None: unreadable).
    """

    plaintext: bytes | None
    results: Mapping[str, bytes | None] = field(default_factory=dict)


def revealed_findings(sealed: str, run: Mapping[str, Any], reveal: RevealedSet) -> list[str]:
    """Why a revealed sealed run does not pass (empty: it does): the set must hash to the
    contract's digest and the result to the record's; then the result is judged by the
    report rule (`test_report_findings`), and every test the set defines must have been
    expected of the run.
    """
    if reveal.plaintext is None or str(sealed_set_digest(reveal.plaintext)) != sealed:
        return ["the revealed sealed set does not hash to %s, the digest the contract commits to" % sealed]
    committed = run.get("result")
    data = reveal.results.get(committed) if isinstance(committed, str) else None
    if data is None:
        return ["the reveal holds no readable result for this run (%s)" % committed]
    if str(content_digest(data)) != committed:
        return ["the revealed result does not hash to %s, the digest the record commits to" % committed]
    try:
        files = unpack_sealed_set(reveal.plaintext)
        full: Any = json.loads(data)
    except (FormatError, ValueError, RecursionError):
        return ["the revealed set or result cannot be read"]
    if not isinstance(full, dict):
        return ["the revealed result is not an object"]
    found = test_report_findings(full)
    expected: list[Any] = full["expected"] if isinstance(full.get("expected"), list) else []
    found += ["held-out test %s was not expected of the run" % t for t in defined_tests(files) if t not in expected]
    return found
