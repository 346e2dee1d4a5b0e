"""The boundaries the architecture promises: a pure core, an auditor that cannot write,
and a library whose public names are all any front end needs. (Strict typing and lint
are checked by .ci/run.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_verify_never_imports_ledger() -> None:
    assert "ledger" not in _imports("verify")


def test_receipts_does_no_io() -> None:
    forbidden = {
        "sqlite3",
        "sqlite_utils",
        "os",
        "subprocess",
        "socket",
        "urllib",
        "http",
        "pathlib",
        "shutil",
        "tempfile",
        "ledger",
        "verify",
    }
    assert not (_imports("receipts") & forbidden)


def test_tests_and_benchmarks_use_the_public_library_only() -> None:
    # What the CLI can do, any other front end can do through `ledger`'s public names.
    private = []
    marker = "from ledger." + "_"  # built so that this file does not match itself
    for folder in ("tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ledger._"):
                    private.append("%s: from %s" % (path.name, node.module))
                elif isinstance(node, ast.Import):
                    private += [
                        "%s: import %s" % (path.name, a.name) for a in node.names if a.name.startswith("ledger._")
                    ]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and marker in node.value:
                    private.append("%s: a child process imports ledger privately" % path.name)
    assert not private, private


def test_every_public_library_name_resolves() -> None:
    import ledger
    from ledger import _api

    assert set(_api._WHERE) == set(ledger.__all__)
    missing = [name for name in ledger.__all__ if getattr(ledger, name, None) is None]
    assert not missing, missing


def test_packages_use_each_other_through_public_names() -> None:
    # ledger reads through verify's public API (schema, sources, the evidence reader), as an auditor's code would.
    crossing = []
    for package in ("receipts", "verify", "ledger"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    top, _, rest = node.module.partition(".")
                    if top != package and rest.startswith("_"):
                        crossing.append("%s: from %s" % (path.relative_to(ROOT), node.module))
    assert not crossing, crossing


def test_every_public_name_of_the_library_and_the_auditor_is_documented() -> None:
    import inspect

    import ledger
    import verify

    bare = [
        "%s.%s" % (mod.__name__, name)
        for mod in (ledger, verify)
        for name in mod.__all__
        if (inspect.isfunction(getattr(mod, name)) or inspect.isclass(getattr(mod, name)))
        and len(inspect.getdoc(getattr(mod, name)) or "") < 25
    ]
    assert not bare, bare


def test_every_package_directory_is_installed() -> None:
    # A subpackage missing from the install broke `pip install .` (not the editable test install).
    import fnmatch
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config.get("packages", {}).get("find", {}).get("include", [])
    packages = sorted(
        str(init.parent.relative_to(ROOT)).replace("/", ".")
        for root in ("receipts", "verify", "ledger")
        for init in (ROOT / root).rglob("__init__.py")
    )
    assert "ledger.tiers" in packages
    assert all(any(fnmatch.fnmatchcase(p, pattern) for pattern in patterns) for p in packages), (packages, patterns)
