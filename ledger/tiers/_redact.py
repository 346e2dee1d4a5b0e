"""Secret redaction before anything is persisted. Line by line, so that output of any
size streams through, and every redaction is counted with where it happened.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

__all__ = ["Redactor", "Redaction"]

_PATTERNS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("github-token", re.compile(rb"\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}\b")),
    ("aws-access-key-id", re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("api-key", re.compile(rb"\bsk-[A-Za-z0-9_-]{20,}\b")),
    ("slack-token", re.compile(rb"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("jwt", re.compile(rb"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer-token", re.compile(rb"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{16,}")),
)
_KEY_BEGIN = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_KEY_END = re.compile(rb"-----END [A-Z0-9 ]*PRIVATE KEY-----")
_MIN_SECRET = 4  # shorter values would redact ordinary words


@dataclass
class Redaction:
    what: str
    count: int = 0
    lines: list[int] = field(default_factory=list)

    def as_dict(self, stream: str) -> dict[str, object]:
        return {"stream": stream, "what": self.what, "count": self.count, "lines": self.lines[:50]}


class Redactor:
    """Redacts known token patterns and the values of the named secret variables."""

    def __init__(self, secret_names: Iterable[str], environ: Mapping[str, str]) -> None:
        self._secrets = [
            (("env:" + n), environ[n].encode()) for n in secret_names if len(environ.get(n, "")) >= _MIN_SECRET
        ]
        # Longest first, so that a secret containing another is replaced whole.
        self._secrets.sort(key=lambda s: -len(s[1]))

    def copy(self, src: BinaryIO, dst: BinaryIO) -> list[Redaction]:
        found: dict[str, Redaction] = {}
        in_key = False
        for number, line in enumerate(src, start=1):
            hits: list[str] = []
            if in_key or _KEY_BEGIN.search(line):
                in_key = not _KEY_END.search(line)
                line, hits = b"[REDACTED:private-key]\n", ["private-key"]
            else:
                for name, value in self._secrets:
                    n = line.count(value)
                    if n:
                        line = line.replace(value, b"[REDACTED:" + name.encode() + b"]")
                        hits += [name] * n
                for name, pattern in _PATTERNS:
                    line, n = pattern.subn(b"[REDACTED:" + name.encode() + b"]", line)
                    hits += [name] * n
            for name in hits:
                red = found.setdefault(name, Redaction(name))
                red.count += 1
                if not red.lines or red.lines[-1] != number:
                    red.lines.append(number)
            dst.write(line)
        return list(found.values())
