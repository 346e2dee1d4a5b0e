"""The commands of `docs/*.md`, read from their fenced blocks so that a test runs what a
reader copies, never a copy of it that could drift.

The only changes made to a block are the site's names (host, database, roles), through
`on_site`, which says each one."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_HEADING = re.compile(r"^## (.+)$", re.M)


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: the section it stands in (the `## ` heading), its language, its text."""

    section: str
    lang: str
    text: str


def blocks(doc: str, section_prefix: str, lang: str) -> list[Block]:
    """The ``lang`` blocks of ``docs/<doc>`` under headings that start with ``section_prefix``."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(text, 0, match.start())
        section = headings[-1] if headings else ""
        if match.group(1) == lang and section.startswith(section_prefix):
            found.append(Block(section, lang, match.group(2)))
    assert found, "docs/%s has no %s block under a heading starting %r" % (doc, lang, section_prefix)
    return found


@dataclass(frozen=True, slots=True)
class Site:
    """Where the docs' example names land on the test's server: ``db.example/ledger`` is the
    test database on 127.0.0.1, and each ``ledger_<role>`` a role of this test's own
    (roles are global to a PostgreSQL cluster: two runs at once must not share them)."""

    database: str
    role_prefix: str
    host: str = "127.0.0.1:5432"

    def role(self, name: str) -> str:
        return "%s_%s" % (self.role_prefix, name)

    def apply(self, text: str) -> str:
        text = re.sub(r"\bledger_(owner|writer|auditor)\b", lambda m: self.role(m.group(1)), text)
        text = text.replace("@db.example/ledger", "@%s/%s" % (self.host, self.database))
        return re.sub(r"\bDATABASE ledger\b", "DATABASE " + self.database, text)


def paragraphs(block: Block) -> list[tuple[str, str]]:
    """A shell block's paragraphs (separated by blank lines), each with its heading comment."""
    out = []
    for paragraph in block.text.strip().split("\n\n"):
        first = paragraph.splitlines()[0]
        assert first.startswith("# "), "a paragraph of %r does not say where it runs: %r" % (block.section, first)
        out.append((first[2:], paragraph))
    return out


def run_shell(
    script: str, cwd: Path, env: dict[str, str], *, answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``script`` under bash with errexit and pipefail, as a reader pasting it into a shell
    would want it to stop at the first failure. With ``answer``, stdin is a terminal that
    the person types ``answer`` into (commands that ask before signing read it there)."""
    command = ["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", script]
    if answer is None:
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode())
        return subprocess.run(
            command, cwd=cwd, env=env, stdin=terminal, capture_output=True, text=True, timeout=300, check=False
        )
    finally:
        os.close(terminal)
        os.close(controller)
