"""The deterministic tier as an evaluator the agent cannot reach (docs/format.md §6a).

A version 2 contract runs a code task's checks in the sandboxed clean room: a candidate's
test finds no key, no ledger, no real checkout, no parent process and no network; every
harness file is the base's, so a conftest, an ini file or a plugin the candidate brings
does not change how its tests are judged; and the run is judged by its report and a
control test that must fail, so an exit at import or a harness that cannot fail fails.
Each cheat below is one an agent used on the landed `main` before this (issue 43).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import SIGNERS, ci_check, git
from ledger import (
    CheckRun,
    InputError,
    Ledger,
    TargetContract,
    make_sandbox,
    register_contract,
    register_in_force,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by .ci/run")

TEST = "from app import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\ndef test_add_negative():\n    assert add(-1, 1) == 0\n"
BROKEN = "def add(a, b):\n    return a - b\n"
HONEST = "def add(a, b):\n    return a + b\n"
FLIP_FAILURES = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
)


def _contract(flags: str = "") -> bytes:
    """A version 2 contract: the sandboxed clean room and the harness from the base by default."""
    return (
        'version = 2\ntask = "TASK-1"\ngoal = "add adds"\nowned_files = ["app.py"]\n'
        'test_files = ["tests/*"]\n\n'
        '[[checks]]\nid = "tests"\ntype = "test_passes"\n'
        'command = [%s, "-m", "pytest", "-q", %s"-p", "no:cacheprovider", "tests"]\n'
        % (json.dumps(sys.executable), flags)
    ).encode()


def _repo(tmp: Path, files: dict[str, str], base_files: dict[str, str] | None = None) -> Path:
    """main: add() not done and its tests; task-1: the candidate's files."""
    repo = tmp / "agent"
    (repo / "tests").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    base = {"app.py": BROKEN, "tests/test_app.py": TEST, ".gitignore": "__pycache__/\n", **(base_files or {})}
    for path, text in base.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    git(repo, "checkout", "-qb", "task-1")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: done", "--allow-empty")
    return repo


def _check(
    ledger: Ledger, repo: Path, contract: bytes | None = None, environ: dict[str, str] | None = None
) -> CheckRun:
    return ci_check(ledger, repo, contract or _contract(), environ)


def _room(ledger: Ledger, run: CheckRun) -> dict[str, object]:
    ref = next(e for e in run.record.evidence if e.check_id == "snapshot")
    room = json.loads(ledger.blob_path(ref.digest).read_bytes())["clean_room"]
    assert isinstance(room, dict)
    return room


def _stdout(ledger: Ledger, run: CheckRun) -> str:
    ref = next(e for e in run.record.evidence if e.check_id == "check:tests:stdout")
    return ledger.blob_path(ref.digest).read_text()


def _fails(run: CheckRun, *said: str) -> None:
    assert run.outcome.verdict is r.Verdict.FAIL, run.outcome
    why = " | ".join(run.outcome.reasons)
    for words in said:
        assert words in why, why


def test_the_honest_fix_passes_and_its_record_names_the_sandbox(env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    run = _check(ledger, _repo(env[0].parent, {"app.py": HONEST}))
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome
    assert run.rows[0][:3] == ("tests", "pass", "2 test(s) passed; the control test failed, as it must")
    box = _room(ledger, run)["sandbox"]
    assert isinstance(box, dict)
    assert box["tool"] == "bubblewrap" and box["network_cut"] is True and box["user"] != 0
    assert set(box["writable"]) - {"/room", "/tmp"} == set()  # a report folder is bound per run, not here
    assert {"pid", "net", "ipc", "uts"} <= set(box["namespaces"])


# -- nothing of the runner is reachable from a candidate's test ---------------------------

PROBE = """import json, os, socket, sys


def _try(what, action):
    try:
        return "%s: REACHED %s" % (what, action())
    except Exception as exc:
        return "%s: blocked (%s)" % (what, type(exc).__name__)


def test_probe():
    keys, ledger, real = os.environ.get("PROBE_KEYS", "{keys}"), "{ledger}", "{real}"
    said = [
        _try("key folder", lambda: os.listdir(keys)),
        _try("key file", lambda: open(os.path.join(keys, "ci"), "rb").read()[:8].hex()),
        _try("key variable", lambda: os.environ["LEDGER_DETERMINISTIC_KEY"]),
        _try("ledger", lambda: os.listdir(ledger)),
        _try("real checkout", lambda: os.listdir(real)),
        _try("write real checkout", lambda: open(os.path.join(real, "pwned"), "w").write("x")),
        _try("alternates", lambda: open(".git/objects/info/alternates").read()),
        _try("agent socket", lambda: os.environ["SSH_AUTH_SOCK"]),
        _try("parent environ", lambda: open("/proc/%d/environ" % os.getppid(), "rb").read()[:40]),
        _try("pid 1 environ", lambda: open("/proc/1/environ", "rb").read()[:40]),
        _try("host processes", lambda: [p for p in os.listdir("/proc") if p.isdigit() and int(p) > 50] or 1 / 0),
        _try("network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2)),
        _try("root-only file", lambda: open("/etc/shadow").read(8)),
    ]
    print("\\nPROBE " + json.dumps(said))
"""


def _accept_once(listener: socket.socket) -> None:
    try:
        listener.accept()
    except OSError:
        pass  # closed by the test: nothing ever connected


def test_from_inside_a_candidates_test_nothing_of_the_runner_is_reachable(
    env: tuple[Path, Ledger], tmp_path: Path
) -> None:
    ledger = env[1]
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    (keys / "ci").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0\n")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    threading.Thread(target=_accept_once, args=(listener,), daemon=True).start()
    repo = _repo(env[0].parent, {"app.py": HONEST})
    probe = PROBE.replace("{keys}", str(keys)).replace("{ledger}", str(ledger.root)).replace("{real}", str(repo))
    (repo / "tests" / "test_probe.py").write_text(probe.replace("{port}", str(listener.getsockname()[1])))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: probe")
    agent_socket = tmp_path / "agent.sock"
    run = _check(
        ledger,
        repo,
        _contract('"-s", '),  # the probe's print, uncaptured
        environ={
            "RECEIPT_LEDGER_KEYS": str(keys),
            "PROBE_KEYS": str(keys),
            "LEDGER_DETERMINISTIC_KEY": "secret-key-material",
            "SSH_AUTH_SOCK": str(agent_socket),
            "PGPASSWORD": "hunter2",
        },
    )
    listener.close()
    out = _stdout(ledger, run)
    assert "PROBE " in out, out
    said = json.loads(next(line for line in out.splitlines() if line.startswith("PROBE "))[6:])
    reached = [line for line in said if "REACHED" in line]
    assert reached == [], reached
    assert len(said) == 13
    assert not (repo / "pwned").exists()
    assert "secret-key-material" not in out and "hunter2" not in out
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome  # the probe itself passed: the sandbox held


# -- the harness comes from the base: each cheat of issue 43, point 2 ---------------------


@pytest.mark.parametrize(
    ("cheat", "files", "reason"),
    [
        ("root conftest flips failures", {"conftest.py": FLIP_FAILURES}, "test_add failed"),
        ("new tests/conftest flips failures", {"tests/conftest.py": FLIP_FAILURES}, "test_add failed"),
        (
            "new tests/conftest skips every test",
            {
                "tests/conftest.py": "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
                "    for item in items:\n        item.add_marker(pytest.mark.skip)\n"
            },
            "test_add failed",
        ),
        (
            "new tests/conftest ignores the restored test",
            {"tests/conftest.py": "collect_ignore = ['test_app.py']\n"},
            "test_add failed",
        ),
        ("pytest.ini collects only", {"pytest.ini": "[pytest]\naddopts = --co\n"}, "test_add failed"),
        (
            "pytest.ini loads a plugin of the candidate's",
            {"pytest.ini": "[pytest]\naddopts = -p cheat\n", "cheat.py": FLIP_FAILURES},
            "test_add failed",
        ),
        (
            "pyproject's pytest table collects only",
            {"pyproject.toml": '[project]\nname = "app"\n\n[tool.pytest.ini_options]\naddopts = "--co"\n'},
            "test_add failed",
        ),
        ("os._exit(0) at import", {"app.py": "import os\nos._exit(0)\n"}, "the test run wrote no report"),
        ("sys.exit(0) at import", {"app.py": "import sys\nsys.exit(0)\n"}, "test_add did not run"),
        (
            "a sitecustomize that exits",
            {"sitecustomize.py": "import os\nos._exit(0)\n"},
            "test_add failed",
        ),
    ],
)
def test_a_cheat_on_the_harness_fails_the_deterministic_tier(
    env: tuple[Path, Ledger], cheat: str, files: dict[str, str], reason: str
) -> None:
    ledger = env[1]
    run = _check(ledger, _repo(env[0].parent, files))
    _fails(run, reason)
    room = _room(ledger, run)
    harness = [p for p in files if r.is_harness_path(p)]
    assert sorted(harness) == sorted(p for p in [*room["restored"], *room["removed"]] if p in harness)  # type: ignore[misc]


def test_the_candidates_pyproject_keeps_its_own_tables_and_the_bases_pytest_ones(env: tuple[Path, Ledger]) -> None:
    base = '[project]\nname = "app"\n\n[tool.pytest.ini_options]\naddopts = "-ra"\n'
    mine = '[project]\nname = "app"\nversion = "2"\n\n[tool.pytest.ini_options]\naddopts = "--co"\n'
    ledger = env[1]
    run = _check(ledger, _repo(env[0].parent, {"app.py": HONEST, "pyproject.toml": mine}, {"pyproject.toml": base}))
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome
    assert _room(ledger, run)["restored"] == ["pyproject.toml"]


def test_a_check_that_cannot_fail_fails_on_integrity(env: tuple[Path, Ledger]) -> None:
    """A plugin hidden in the candidate's code, turning every result into a pass: the control passes too."""
    ledger = env[1]
    patch = (
        "import _pytest.reports\n_orig = _pytest.reports.TestReport.from_item_and_call\n\n\n"
        "def _always(item, call):\n    report = _orig(item, call)\n    report.outcome = 'passed'\n    return report\n\n\n"
        "_pytest.reports.TestReport.from_item_and_call = staticmethod(_always)\n"
    )
    tests = "import patch  # noqa\n\n\ndef test_nothing():\n    pass\n"
    run = _check(ledger, _repo(env[0].parent, {"patch.py": patch, "tests/test_aaa.py": tests}))
    _fails(run, "this command cannot fail: the control test passed")


def test_a_contract_that_needs_a_sandbox_runs_nothing_without_one(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    ledger = env[1]
    repo = _repo(env[0].parent, {"app.py": HONEST})
    # A version 1 clean-room contract did not ask for one: it runs with the network cut, as it always did.
    v1 = _contract().replace(b"version = 2", b"version = 1") + b"\n[policy]\nclean_room = true\n"
    assert r.parse_contract(v1).sandbox is False and r.parse_contract(v1).clean_room is True
    old = _check(ledger, repo, v1, environ={"PATH": str(tmp_path)})
    assert old.outcome.verdict is r.Verdict.PASS, old.outcome
    assert _room(ledger, old)["sandbox"] == {"tool": None, "error": "bubblewrap (bwrap) is not installed"}
    # Version 2 requires one (a strengthening: no admin needed). The runner's PATH finds no
    # bwrap: the command is not run outside a sandbox, and the tier fails.
    refused = _check(ledger, repo, environ={"PATH": str(tmp_path)})
    _fails(
        refused, "not run: the contract requires a sandbox", "sandbox: the contract requires a sandbox; none was made"
    )


# -- the contract in force comes from the ledger or the target branch ----------------------

IN_FORCE = json.loads((Path(__file__).parent / "vectors" / "contract_in_force.json").read_text())


def _text(spec: str | dict[str, str] | None) -> bytes | None:
    if spec is None or spec == "no-branch":
        return None
    text: str = IN_FORCE["base"]
    edits: dict[str, str] = {} if isinstance(spec, str) else spec
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    return text.encode()


@pytest.mark.parametrize("case", IN_FORCE["cases"], ids=[c["name"] for c in IN_FORCE["cases"]])
def test_contract_in_force_vector(case: dict[str, Any], env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    if case["registered"] is not None:
        register_contract(ledger, "TASK-1", _text(case["registered"]) or b"", SIGNERS["ci"])
    target = None
    if case["target"] != "no-branch":
        target = TargetContract("main:.ledger/contracts/TASK-1.toml", _text(case["target"]))
    mine = _text(case["candidate"] or "base")
    assert mine is not None
    try:
        contract, _ = register_in_force(ledger, "TASK-1", mine, SIGNERS["ci"], "candidate", target)
    except InputError as exc:
        assert str(exc).startswith(case["expect"]), str(exc)
        return
    assert case["expect"] == "in force: human_approvals %d" % contract.human_approvals
    assert ledger.latest_contract("TASK-1") is not None


def test_the_readmes_contract_is_the_secure_one() -> None:
    """What a team copies from the README runs its checks sandboxed, the harness from the base."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    contract = r.parse_contract(block.encode(), "README.md")
    assert contract.version == 2 and contract.clean_room and contract.sandbox and contract.test_files
    assert any(r.requires_report(contract, check) for check in contract.checks)


def test_a_version_2_contract_that_opts_out_says_so_in_every_verdict(env: tuple[Path, Ledger]) -> None:
    ledger = env[1]
    opted_out = _contract().replace(b'test_files = ["tests/*"]', b'test_files = ["tests/*"]\n[policy]\nsandbox = false')
    assert r.parse_contract(opted_out).clean_room and not r.parse_contract(opted_out).sandbox
    run = _check(ledger, _repo(env[0].parent, {"app.py": HONEST}), opted_out)
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome
    assert "the contract opts out of the sandboxed clean room" in " ".join(run.outcome.warnings)


def test_a_sandboxed_check_leaves_no_folder_behind(
    env: tuple[Path, Ledger], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))  # every folder the runner makes, here
    run = _check(env[1], _repo(env[0].parent, {"app.py": HONEST}))
    assert run.outcome.verdict is r.Verdict.PASS, run.outcome
    assert list(temp.iterdir()) == []


def test_a_python_installed_under_tmp_is_visible_in_the_sandbox(tmp_path: Path) -> None:
    """A CI clone's virtual environment lives under /tmp, where the sandbox mounts its own
    private /tmp: the environment must be bound on top of it, traversable, read-only."""
    venv = tmp_path / "clone" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "marker").write_text("bound\n")
    box = make_sandbox({"PATH": "%s:/usr/bin:/bin" % (venv / "bin")})
    assert not isinstance(box, str), box
    room = tmp_path / "room"
    room.mkdir()
    box.prepare(room)
    argv = box.argv(room, ["sh", "-c", "cat %s && ! touch %s/new" % (venv / "bin" / "marker", venv / "bin")])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env={"PATH": box.path})
    assert done.returncode == 0 and done.stdout == "bound\n", done.stderr
