"""What the test harness is, and what a sandboxed test run must show (docs/format.md §6a).

The candidate may write any file of its tree. Files that decide how tests are found and
run (the harness) are therefore taken from the base, and a test command is judged by the
report of what ran, with a control test that must fail, not by its exit code alone. The
runner applies these rules before it runs anything and the verifier re-applies them to
the recorded facts; both read them from here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "BASE_ENVIRONMENT",
    "HARNESS_FILE_NAMES",
    "SANDBOX_TOOL",
    "TEST_OUTCOMES",
    "defined_tests",
    "is_harness_path",
    "runs_pytest",
    "test_report_findings",
    "sandbox_findings",
]

# Files that configure pytest or Python's start-up, at any depth of the tree: conftest
# modules (hooks and fixtures), the ini files pytest reads (pytest 9 reads pytest.toml
# too), setup.cfg's and tox.ini's [pytest] sections, and site's start-up modules. A
# pyproject.toml is harness only in its [tool.pytest…] and [tool.coverage…] tables.
HARNESS_FILE_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "sitecustomize.py",
        "usercustomize.py",
        "pyproject.toml",
    }
)
SANDBOX_TOOL = "bubblewrap"
TEST_OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfailed", "xpassed"})
# The namespaces a sandbox must have made, and the only paths it may leave writable.
_NAMESPACES = frozenset({"pid", "net", "ipc", "uts"})
_WRITABLE = re.compile(r"/room|/tmp|/run/receipt-ledger-[0-9a-f]{16,64}")
# Variables every sandboxed command gets whatever the contract says (none carries a secret).
BASE_ENVIRONMENT = frozenset(
    {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONPATH", "PYTEST_ADDOPTS", "VIRTUAL_ENV"}
)
_PYTEST = re.compile(r"(^|[\s/;&|(])(py\.test|pytest)(\s|$|;|&|\|)")


def is_harness_path(path: str) -> bool:
    """Whether ``path`` (repository-relative, ``/``-separated) is part of the harness."""
    name = path.rsplit("/", 1)[-1]
    return name in HARNESS_FILE_NAMES or name.endswith(".pth")


def defined_tests(files: Mapping[str, bytes]) -> list[str]:
    """The test ids ``files`` (path: source) define, read without running them: each module
    function ``test*`` and each method ``test*`` of a class ``Test*`` (one with no
    ``__init__``) of a file named ``test_*.py`` or ``*_test.py`` (pytest's default
    discovery), as ``FILE::NAME`` or ``FILE::CLASS::NAME``, sorted by file. A file that does
    not parse defines none (its run fails anyway).
    """
    found: list[str] = []
    for path in sorted(files):
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".py") or not (name.startswith("test_") or name.endswith("_test.py")):
            continue
        try:
            tree = ast.parse(files[path], filename=path)
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found.append("%s::%s" % (path, node.name))
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                if any(isinstance(b, ast.FunctionDef) and b.name == "__init__" for b in node.body):
                    continue  # pytest does not collect a class with __init__
                found += [
                    "%s::%s::%s" % (path, node.name, b.name)
                    for b in node.body
                    if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name.startswith("test")
                ]
    return found


def runs_pytest(command: object) -> bool:
    """Whether a check's declared command runs pytest: an argument list naming ``pytest``
    (or ``py.test``) as a program or as ``-m pytest``, or a shell line that does.
    """
    if isinstance(command, str):
        return _PYTEST.search(command) is not None
    if not isinstance(command, (list, tuple)) or not all(isinstance(a, str) for a in command):
        return False
    args = list(command)
    for i, arg in enumerate(args):
        if arg.rsplit("/", 1)[-1] in ("pytest", "py.test"):
            return True
        if arg == "-m" and i + 1 < len(args) and args[i + 1] == "pytest":
            return True
    return False


def _instances(tests: Mapping[str, str], expected: str) -> list[str]:
    """The test ids that are ``expected`` itself or one of its parametrized cases."""
    return [t for t in tests if t == expected or t.startswith(expected + "[")]


def test_report_findings(facts: Mapping[str, Any]) -> list[str]:
    """Why a sandboxed pytest run does not show a pass (empty: it does), from its facts.

    The run passes only when its report shows: the control test failed and nothing else
    failed or errored; every expected test (each one the restored test files define) ran
    and passed in every case; at least one test other than the control passed; and the
    exit code is pytest's "some tests failed" (1) as the report's own status says.
    """
    report, control, expected = facts.get("report"), facts.get("control"), facts.get("expected")
    if not isinstance(control, dict) or not isinstance(control.get("id"), str):
        return ["no control test was recorded: whether this command can fail is unknown"]
    if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
        return ["the list of expected tests is missing or malformed"]
    if not isinstance(report, dict):
        return ["the test run wrote no report (it stopped before its end, or pytest never ran): what ran is unknown"]
    if _malformed(report):
        return ["the test report is malformed"]
    tests, deselected, broken = report["tests"], report["deselected"], report["collection_errors"]
    found: list[str] = []
    said = tests.get(control["id"])
    if said is None:
        found.append("this command cannot fail: the control test did not run")
    elif said != "failed":
        found.append("this command cannot fail: the control test %s" % said)
    others = {k: v for k, v in tests.items() if k != control["id"]}
    found += ["collection error in %s" % where for where in broken[:10]]
    found += _expected_findings(others, expected, deselected)
    failing = sorted(k for k, v in others.items() if v in ("failed", "error") and not _expected(k, expected))
    found += ["%s %s" % (k, others[k]) for k in failing[:10]]
    if not any(v == "passed" for v in others.values()):
        found.append("no test passed besides the control: nothing was shown to work")
    code = facts.get("exit_code")
    if code != report["exit_status"]:
        found.append("the exit code %s disagrees with the report's status %s" % (code, report["exit_status"]))
    elif code != 1:
        found.append("exit code %s: with only the control failing pytest exits 1" % code)
    return found


def _expected_findings(tests: Mapping[str, str], expected: Sequence[str], deselected: Sequence[str]) -> list[str]:
    """Each expected test that did not run, or ran in a case that did not pass."""
    found = []
    for name in expected:
        cases = _instances(tests, name)
        if not cases:
            gone = "was deselected" if _instances(dict.fromkeys(deselected, ""), name) else "did not run"
            found.append("%s %s" % (name, gone))
            continue
        bad = [c for c in cases if tests[c] != "passed"]
        if bad:
            found.append("%s %s" % (bad[0], tests[bad[0]]))
    return found


def _malformed(report: Mapping[str, Any]) -> bool:
    tests = report.get("tests")
    return (
        not isinstance(tests, dict)
        or not all(isinstance(k, str) and v in TEST_OUTCOMES for k, v in tests.items())
        or not _strings(report.get("deselected"))
        or not _strings(report.get("collection_errors"))
        or not isinstance(report.get("exit_status"), int)
        or isinstance(report.get("exit_status"), bool)
    )


def _expected(test: str, expected: Sequence[str]) -> bool:
    return any(test == e or test.startswith(e + "[") for e in expected)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def sandbox_findings(room: Mapping[str, Any], allowed_env: frozenset[str]) -> list[str]:
    """Why a clean room's recorded sandbox does not meet the contract (empty: it does).

    Args:
        room: the snapshot's ``clean_room`` document.
        allowed_env: the variables the contract lets a command see besides `BASE_ENVIRONMENT`.
    """
    box = room.get("sandbox")
    if not isinstance(box, dict):
        return ["the contract requires a sandbox; the checks ran without one"]
    if box.get("tool") != SANDBOX_TOOL:
        why = box.get("error") if isinstance(box.get("error"), str) else "tool %r" % box.get("tool")
        return ["the contract requires a sandbox; none was made (%s)" % why]
    found = []
    namespaces: Any = box.get("namespaces")
    if not _strings(namespaces) or not _NAMESPACES <= set(namespaces):
        found.append("the sandbox did not make new %s namespaces" % ", ".join(sorted(_NAMESPACES)))
    if box.get("network_cut") is not True:
        found.append("the sandbox did not cut the network")
    writable: Any = box.get("writable")
    if not _strings(writable) or any(not _WRITABLE.fullmatch(p) for p in writable):
        found.append("the sandbox left writable more than the room and its private /tmp: %r" % (writable,))
    env: Any = box.get("environment")
    if not _strings(env):
        found.append("the sandbox's environment is not recorded")
    else:
        extra = sorted(set(env) - BASE_ENVIRONMENT - allowed_env)
        if extra:
            found.append("the sandbox passed variables the contract does not declare: %s" % ", ".join(extra))
    if not isinstance(box.get("user"), int) or box.get("user") == 0:
        found.append("the sandboxed commands ran as root")
    return found
