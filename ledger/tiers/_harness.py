"""The harness from the base, and what a sandboxed pytest run reports (docs/format.md §6a).

In a clean room every harness file (`receipts.is_harness_path`) is the base's: a changed
or deleted one is restored, a new one removed, and a pyproject.toml keeps the candidate's
text but the base's ``[tool.pytest…]`` and ``[tool.coverage…]`` tables. A pytest command
then runs with a plugin of ours, loaded from outside the room under a name the candidate
cannot predict, that adds a control test which must fail and writes what ran, by test id,
where the room cannot write.
"""

from __future__ import annotations

import json
import re
import secrets
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import TEST_OUTCOMES, content_digest, defined_tests

__all__ = ["ControlPlugin", "control_plugin", "expected_tests", "merge_pytest_tables", "read_report"]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]\n]*?)\s*\]\]?\s*(#.*)?$")
_HARNESS_TABLE = re.compile(r"""^["']?tool["']?\s*\.\s*["']?(pytest|coverage)["']?(\s*\.|$)""")
_MAX_REPORT = 4 << 20


def _sections(text: str) -> list[tuple[str | None, str]]:
    """The file cut at each table header: (the header's name, or None before the first, text)."""
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines(keepends=True):
        m = _HEADER.match(line)
        if m:
            out.append((m.group(1), [line]))
        else:
            out[-1][1].append(line)
    return [(name, "".join(lines)) for name, lines in out]


def _split(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the harness tables, everything else) of a parsed pyproject."""
    tool: dict[str, Any] = doc["tool"] if isinstance(doc.get("tool"), dict) else {}
    harness: dict[str, Any] = {k: tool[k] for k in ("pytest", "coverage") if k in tool}
    rest = dict(doc)
    if "tool" in doc:
        rest["tool"] = {k: v for k, v in tool.items() if k not in harness}
        if not rest["tool"] and isinstance(doc.get("tool"), dict):
            rest.pop("tool")
    return harness, rest


def merge_pytest_tables(candidate: bytes, base: bytes | None) -> bytes | None:
    """The candidate's pyproject.toml with the base's pytest and coverage tables in place of
    its own; the base's whole file where the two cannot be told apart that way (the result
    is checked by parsing it), and None (remove it) where the base had none and the
    candidate's cannot be parsed.
    """
    base_text = (base or b"").decode("utf-8", "replace")
    text = candidate.decode("utf-8", "replace")
    kept = [body for name, body in _sections(text) if name is None or not _HARNESS_TABLE.match(name)]
    added = [body for name, body in _sections(base_text) if name is not None and _HARNESS_TABLE.match(name)]
    merged = "".join(kept)
    if added:
        merged = merged.rstrip("\n") + "\n\n" + "".join(added)
    try:
        want_harness, _ = _split(tomllib.loads(base_text))
        _, want_rest = _split(tomllib.loads(text))
        got_harness, got_rest = _split(tomllib.loads(merged))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return base
    if got_harness != want_harness or got_rest != want_rest:
        return base
    return merged.encode("utf-8")


def expected_tests(folder: Path, files: Iterable[str]) -> list[str]:
    """The test ids the given files under ``folder`` define (`receipts.defined_tests`); a
    file that cannot be read defines none (its run fails anyway).
    """
    found: dict[str, bytes] = {}
    for path in files:
        try:
            found[path] = (folder / path).read_bytes()
        except OSError:
            continue
    return defined_tests(found)


@dataclass(frozen=True, slots=True)
class ControlPlugin:
    """The plugin a sandboxed pytest run loads: its module name, source, and the control."""

    module: str
    source: bytes
    control: str  # the control test's id

    def fact(self) -> dict[str, str]:
        return {"id": self.control, "digest": str(content_digest(self.source))}


_PLUGIN = '''"""receipt-ledger's control and report for one sandboxed run (docs/format.md section 6a)."""
import json
import os

import pytest

_REPORT = %(report)r
_CONTROL = %(control)r
_tests = {}
_deselected = []
_broken = []


class _Control(pytest.Item):
    def runtest(self):
        raise AssertionError(%(message)r)

    def repr_failure(self, excinfo):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, 0, self.name


def pytest_collection_modifyitems(session, config, items):
    items.append(_Control.from_parent(session, name=_CONTROL))


def pytest_deselected(items):
    _deselected.extend(item.nodeid for item in items)


def pytest_collectreport(report):
    if report.failed:
        _broken.append(report.nodeid or "(session)")


def pytest_runtest_logreport(report):
    xfail = hasattr(report, "wasxfail")
    nodeid = _CONTROL if report.nodeid.rpartition("::")[2] == _CONTROL else report.nodeid
    if report.when == "teardown":
        if report.failed:
            _tests[nodeid] = "error"
        return
    if report.when == "setup":
        if report.passed:
            return
        outcome = "error" if report.failed else ("xfailed" if xfail else "skipped")
    elif report.passed:
        outcome = "xpassed" if xfail else "passed"
    elif report.failed:
        outcome = "failed"
    else:
        outcome = "xfailed" if xfail else "skipped"
    _tests[nodeid] = outcome


def pytest_sessionfinish(session, exitstatus):
    doc = {
        "runner": "pytest",
        "tests": _tests,
        "deselected": _deselected,
        "collection_errors": _broken,
        "exit_status": int(exitstatus),
    }
    part = _REPORT + ".part"
    with open(part, "w", encoding="utf-8") as out:
        json.dump(doc, out)
    os.replace(part, _REPORT)
'''


def control_plugin(report_path: str) -> ControlPlugin:
    """A fresh plugin writing its report to ``report_path`` (a path inside the sandbox)."""
    # No fixed part in any name: code under test that would spare the control by name cannot know it.
    module = "_%s" % secrets.token_hex(8)
    control = "test_%s" % secrets.token_hex(12)
    message = "assertion %s failed" % secrets.token_hex(8)
    source = _PLUGIN % {"report": report_path, "control": control, "message": message}
    return ControlPlugin(module, source.encode("utf-8"), control)


def read_report(path: Path) -> dict[str, Any] | None:
    """The report a run left, or None when it left none or not one of its shape."""
    try:
        if path.stat().st_size > _MAX_REPORT:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), dict):
        return None
    if not all(isinstance(v, str) and v in TEST_OUTCOMES for v in doc["tests"].values()):
        return None
    return doc
