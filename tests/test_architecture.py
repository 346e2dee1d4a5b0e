"""The boundaries the architecture promises: a pure core, an auditor that cannot write,
and a library whose public names are all any front end needs. (Strict typing and lint
are checked by .ci/run.)"""

from __future__ import annotations

import ast
import subprocess
import sys
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

    def is_private(module: str) -> bool:
        # ledger._api, and any module inside a room (ledger.store._ledger): a part named _x.
        parts = module.split(".")
        return parts[0] == "ledger" and any(p.startswith("_") for p in parts[1:])

    for folder in ("tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and is_private(node.module):
                    private.append("%s: from %s" % (path.name, node.module))
                elif isinstance(node, ast.Import):
                    private += ["%s: import %s" % (path.name, a.name) for a in node.names if is_private(a.name)]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and marker in node.value:
                    private.append("%s: a child process imports ledger privately" % path.name)
    assert not private, private


def test_every_public_library_name_resolves() -> None:
    import ledger
    from ledger import _api

    assert set(_api._WHERE) == set(ledger.__all__)
    missing = [name for name in ledger.__all__ if getattr(ledger, name, None) is None]
    assert not missing, missing


# The packages whose public names load on first use: where the table is, and the package.
LAZY_FACES = (
    ("receipts/__init__.py", "receipts"),
    ("verify/__init__.py", "verify"),
    ("ledger/_api.py", "ledger"),
    ("ledger/tiers/__init__.py", "ledger.tiers"),
)


def _face_imports(path: Path) -> dict[str, str]:
    """Each name a face imports from its own package's modules, at the top or in its
    ``if TYPE_CHECKING:`` block, with the module (relative, as ``_WHERE`` names it).
    """
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            imports = node.body
        elif isinstance(node, ast.ImportFrom):
            imports = [node]
        else:
            continue
        for imp in imports:
            if isinstance(imp, ast.ImportFrom) and imp.level == 1:
                found.update({alias.asname or alias.name: imp.module or "" for alias in imp.names})
    return found


def test_each_lazy_public_face_lists_the_same_names_in_its_three_places() -> None:
    # A lazily loaded package writes each public name three times: the import type checkers
    # read, __all__, and the table the loader reads (_WHERE). Python 3.11 offers no one
    # place all three can read from without importing every module; this keeps them one list.
    import importlib

    for where, package in LAZY_FACES:
        face = importlib.import_module(package)
        table = importlib.import_module(where[: -len(".py")].replace("/", ".").removesuffix(".__init__"))._WHERE
        assert _face_imports(ROOT / where) == table, package
        assert len(face.__all__) == len(set(face.__all__)), "%s: a name listed twice in __all__" % package
        assert set(face.__all__) == set(table), package


def test_every_public_verifier_name_resolves_and_loads_on_first_use() -> None:
    # verify's names load lazily (its __init__), so that a writer's start does not pay for
    # the whole verifier; each name must still be there, from the module the table says.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, verify; assert 'verify._verifier' not in sys.modules, 'eager';"
            "from verify import LedgerSource; assert 'verify._verifier' not in sys.modules, 'eager';"
            "missing = [n for n in verify.__all__ if getattr(verify, n, None) is None];"
            "assert not missing and set(verify._WHERE) == set(verify.__all__), missing",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


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


def _module_graph() -> dict[str, set[str]]:
    """Each module of the three packages and the modules it imports: at the top, inside
    functions and under TYPE_CHECKING alike (a cycle hidden from the interpreter is still
    one a reader must hold in their head). ``from pkg import name`` counts as importing
    ``pkg.name`` when that is a module, else ``pkg``."""
    modules: dict[str, Path] = {}
    for package in ("receipts", "verify", "ledger"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                subs = {base + "." + a.name for a in node.names} & modules.keys()
                targets |= subs if len(subs) == len(node.names) else subs | {base}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert not _cycles(_module_graph())


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The rule above must be able to fail: a graph with a loop through three modules.
    graph = _module_graph()
    graph["verify._errors"] = graph["verify._errors"] | {"verify._result"}
    assert _cycles(graph) == [["verify._errors", "verify._result", "verify._state"]]
    # Imports inside functions and under TYPE_CHECKING are edges too.
    assert "ledger.store._postgres" in graph["ledger.store._ledger"] and "ledger.store._ledger" in graph["ledger._api"]


def test_files_are_replaced_only_through_the_one_atomic_writer() -> None:
    # ledger/_files.py flushes the file and its directory; a hand-rolled rename elsewhere
    # is how five writers once skipped the flush. The blob store streams into its own
    # temporary files (content-addressed, swept when a writer dies) and is the exception.
    # The hooks' resident process renames its listening socket into place: no data to flush.
    allowed = {"ledger/_files.py", "ledger/store/_sqlite.py", "ledger/agents/_resident.py"}
    rolled = []
    for path in (ROOT / "ledger").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename", "mkstemp"):
                owner = ast.unparse(node.value)
                if owner in ("os", "tempfile") and str(path.relative_to(ROOT)) not in allowed:
                    rolled.append("%s:%d %s.%s" % (path.relative_to(ROOT), node.lineno, owner, node.attr))
    assert not rolled, rolled


def test_each_command_module_is_a_room_not_a_house() -> None:
    # ledger/cli/ was one 1,900-line module; one module per concern keeps each readable
    # whole, and a new group of commands gets a module of its own.
    longest = max((len(p.read_text().splitlines()), p.name) for p in (ROOT / "ledger" / "cli").glob("*.py"))
    assert longest[0] <= 300, longest
    assert not (ROOT / "ledger" / "cli.py").exists()


def _command_bodies(source: str) -> list[tuple[str, int]]:
    """Each click command's name and the lines of its body (its docstring left out)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) for d in node.decorator_list):
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            end = body[-1].end_lineno or body[-1].lineno
            found.append((node.name, end - body[0].lineno + 1))
    return found


def test_commands_are_thin() -> None:
    # A command parses its options, makes one library call and renders with the library's
    # renderer: logic a front end would need lives in `ledger`, where the next one finds it.
    long = [
        "%s:%s (%d lines)" % (path.name, name, n)
        for path in (ROOT / "ledger" / "cli").glob("*.py")
        for name, n in _command_bodies(path.read_text())
        if n > 15
    ]
    assert not long, long


def test_the_command_measure_counts_a_long_command() -> None:
    lines = "\n".join("    x%d = %d" % (i, i) for i in range(16))
    body = '@cli.command()\ndef c() -> None:\n    """Doc."""\n' + lines + "\n"
    assert _command_bodies(body) == [("c", 16)]


def test_commands_leave_sources_and_rules_to_the_library() -> None:
    # No dispatch on what kind of source a command holds, and from `receipts` only the
    # types that name options and values (a rule or an encoding is the library's to call).
    offences = []
    for path in (ROOT / "ledger" / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance" and "Source" in ast.unparse(node):
                offences.append("%s:%d isinstance on a source" % (path.name, node.lineno))
            if isinstance(node, ast.ImportFrom) and node.module == "receipts":
                offences += [
                    "%s:%d imports %s from receipts" % (path.name, node.lineno, a.name)
                    for a in node.names
                    if not a.name[:1].isupper() or a.name.isupper()
                ]
    assert not offences, offences


def _long_functions(path: Path, limit: int) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append("%s:%d %s (%d lines)" % (path.relative_to(ROOT), node.lineno, node.name, length))
    return found


def test_functions_fit_on_a_screen() -> None:
    # Sixty lines, docstring included: a function a reviewer can hold whole. Tables of
    # data are module constants, so they never count.
    long = [
        f
        for package in ("receipts", "verify", "ledger")
        for p in (ROOT / package).rglob("*.py")
        for f in _long_functions(p, 60)
    ]
    assert not long, long


def test_the_library_is_laid_out_by_concern() -> None:
    # A newcomer finds the room for a change by its name: ledger/'s top level holds the
    # sub-packages, the public API table and a few small modules every room shares.
    top = ROOT / "ledger"
    shared = {p.name for p in top.glob("*.py")} - {"__init__.py", "__main__.py", "_api.py", "_entry.py"}
    assert shared <= {
        "_clock.py",
        "_config.py",
        "_environment.py",
        "_errors.py",
        "_escape.py",
        "_files.py",
        "_git.py",
        "_layout.py",
    }
    assert all(len((top / name).read_text().splitlines()) <= 160 for name in shared), shared
    rooms = {p.name for p in top.iterdir() if (p / "__init__.py").is_file()}
    assert rooms == {
        "agents",
        "audit",
        "ci",
        "cli",
        "demo",
        "exports",
        "git",
        "keys",
        "ladder",
        "store",
        "tiers",
        "transparency",
        "views",
        "web",
    }
    # Each room says what it holds, in its package docstring.
    assert all(len(ast.get_docstring(ast.parse((top / r / "__init__.py").read_text())) or "") > 60 for r in rooms)


# The floors of ledger/, lowest first: a sub-package imports only those below it (issue 46).
FLOORS = (
    "store",
    "keys",
    "ladder",
    "tiers",
    "transparency",
    "exports",
    "git",
    "views",
    "web",
    "agents",
    "ci",
    "audit",
    "demo",
    "cli",
)


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a sub-package of ledger/ into one on its own floor or above (top-level
    modules such as `ledger._api` and `ledger._git` belong to no floor)."""

    def floor(module: str) -> int | None:
        parts = module.split(".")
        return FLOORS.index(parts[1]) if parts[0] == "ledger" and len(parts) > 1 and parts[1] in FLOORS else None

    found = []
    for module, targets in sorted(graph.items()):
        here = floor(module)
        for target in sorted(targets):
            there = floor(target)
            if (
                here is not None
                and there is not None
                and there >= here
                and module.split(".")[1] != target.split(".")[1]
            ):
                found.append("%s -> %s" % (module, target))
    return found


def test_floors_only_go_down() -> None:
    rooms = {p.name for p in (ROOT / "ledger").iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(FLOORS)
    assert not _upward_imports(_module_graph())


def test_the_floor_rule_finds_an_import_upwards() -> None:
    graph = _module_graph()
    graph["ledger.store._ledger"] = graph["ledger.store._ledger"] | {"ledger.keys._trust"}
    assert _upward_imports(graph) == ["ledger.store._ledger -> ledger.keys._trust"]
