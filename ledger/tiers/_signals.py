"""Completion signals, each evaluated for real: the facts a check produced, captured as
evidence. The verdict of a check is not decided here but by `receipts.derive_check`,
the same rule the verifier uses.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import io
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from receipts import (
    AGE_MEDIA_TYPE,
    CHECK_RESULT_FORMAT,
    SEALED_RESULT_MEDIA_TYPE,
    Check,
    Contract,
    Digest,
    EvidenceRef,
    added_lines,
    content_digest,
    declared_facts,
    declared_params,
    runs_pytest,
    sealed_file_name,
    test_report_findings,
)

from .. import _clock
from .._errors import InputError
from .._git import git, run_git
from ..store._ledger import Store
from ._harness import control_plugin, expected_tests, read_report
from ._redact import Redactor
from ._sandbox import Sandbox
from ._sealed import exposures, open_sealed_set, seal_bytes
from ._snapshot import worktree_roots

__all__ = ["READ_ONLY_TYPES", "RUNNING_GROUPS", "Context", "Evaluated", "evaluate"]

# The process groups of the checks running in this process (each runs in a session of its
# own): whoever answers a hook kills them when the agent gives up on it (agents/_resident.py).
RUNNING_GROUPS: set[int] = set()
# The check types that read files and run nothing: they cannot leave files behind.
READ_ONLY_TYPES = frozenset({"path_exists", "file_contains", "schema_valid", "attribution_declared"})

_GLOB = re.compile(r"[*?\[]")
_MAX_MATCHES = 100


@dataclass
class Context:
    repo: Path
    contract: Contract
    store: Store
    redactor: Redactor
    deadline: float
    environ: dict[str, str]
    command_prefix: tuple[str, ...] = ()  # what every check command runs under (a clean room's network cut)
    diff: bytes | None = None  # the candidate's diff against its base (the snapshot's), for attribution_declared
    sandbox: Sandbox | None = None  # a clean room's: each command runs in it, on a fresh copy of the room
    sandbox_refused: str | None = None  # why no command may run (the contract needs a sandbox; none was made)
    expected: tuple[str, ...] = ()  # the tests the restored test files define (a pytest run must pass each)
    last_tree: Path | None = None  # where the last sandboxed command ran (a build's artifact is read there)
    # Sealed checks (§6e): the base the set is read from, the candidate (its exposure), the
    # deterministic key's identity that opens it and its recipient line that seals the output.
    base: str | None = None
    candidate: Digest | None = None
    sealed_key: bytes | None = None
    sealed_recipient: str | None = None
    encrypt_to: str | None = None  # set while a sealed check runs: its streams are stored encrypted
    extra_read_only: dict[Path, str] = field(default_factory=dict)  # the held-out files, bound in
    extra_expected: tuple[str, ...] = ()  # the held-out tests, which the run must pass too
    _worktrees: list[Path] | None = None

    def worktrees(self) -> list[Path]:
        if self._worktrees is None:
            self._worktrees = worktree_roots(self.repo)
        return self._worktrees


@dataclass
class Evaluated:
    result: dict[str, Any]
    refs: list[EvidenceRef] = field(default_factory=list)


def _resolve(ctx: Context, value: str) -> tuple[str | None, str | None]:
    """(repository-relative path, the worktree path it was translated from). A path that
    lives in a linked worktree is checked in the main checkout: the worktree will go.
    """
    repo = ctx.repo.resolve()
    p = Path(value)
    translated = None
    if p.is_absolute():
        resolved = Path(os.path.normpath(p))
        for root in ctx.worktrees():
            root = root.resolve()
            if resolved.is_relative_to(root):
                translated, resolved = value, repo / resolved.relative_to(root)
                break
        if not resolved.is_relative_to(repo):
            return None, translated
        rel = resolved.relative_to(repo).as_posix()
    else:
        rel = os.path.normpath(value)
        if rel == ".." or rel.startswith("../") or rel.startswith("/"):
            return None, None
    if rel == ".git" or rel.startswith(".git/"):
        return None, translated
    return rel, translated


def _path_exists(ctx: Context, check: Check) -> dict[str, Any]:
    value = str(check.param("path"))
    rel, translated = _resolve(ctx, value)
    if rel is None:
        return {
            "path": value,
            "checked": None,
            "translated_from": translated,
            "escaped": True,
            "exists": False,
            "matches": [],
        }
    if _GLOB.search(rel):
        matches = sorted(os.path.relpath(m, ctx.repo) for m in glob.glob(str(ctx.repo / rel), recursive=True))
        matches = [m for m in matches if not m.startswith(".git/")]
    else:
        matches = [rel] if os.path.lexists(ctx.repo / rel) else []
    return {
        "path": value,
        "checked": rel,
        "translated_from": translated,
        "escaped": False,
        "exists": bool(matches),
        "matches": matches[:_MAX_MATCHES],
    }


def _scrubbed_env(ctx: Context, check: Check) -> dict[str, str]:
    env = {"PATH": ctx.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    for name in ("HOME", "TMPDIR", "VIRTUAL_ENV"):
        if name in ctx.environ:
            env[name] = ctx.environ[name]
    for name in list(check.param("env", ())) + list(ctx.contract.secret_env):
        if name in ctx.environ:
            env[str(name)] = ctx.environ[name]
    return env


def _store_stream(
    ctx: Context, raw: Path, check: Check, stream: str, out: Evaluated
) -> tuple[str, list[dict[str, object]]]:
    media = "text/plain"
    with tempfile.TemporaryFile() as clean, raw.open("rb") as src:
        redactions = ctx.redactor.copy(src, clean)
        clean.seek(0)
        if ctx.encrypt_to is None:
            digest, size = ctx.store.put_blob_stream(clean)
        else:  # a sealed check's output is no one's to read before reveal
            digest, size = ctx.store.put_blob_stream(io.BytesIO(seal_bytes(clean.read(), [ctx.encrypt_to])))
            media = AGE_MEDIA_TYPE
    out.refs.append(EvidenceRef("check:%s:%s" % (check.id, stream), digest, size, media))
    return str(digest), [r.as_dict(stream) for r in redactions]


def _named_paths(command: Any, tree: Path, bound: tuple[str, ...] = ()) -> list[str]:
    """The paths of the room a command names (a test run limited to them), or [] for none;
    ``bound``: paths the sandbox will bind in (a sealed set's files), which count as there.
    """
    try:
        words = shlex.split(command) if isinstance(command, str) else [str(w) for w in command]
    except ValueError:
        return []  # a shell line shlex cannot split: every expected test is held to it
    named = []
    for word in words[1:]:
        if word.startswith("-") or word in ("pytest", "py.test"):
            continue
        rel = os.path.normpath(word)
        there = (tree / rel).exists() or any(b == rel or b.startswith(rel + "/") for b in bound)
        if not rel.startswith(("..", "/")) and there:
            named.append(rel)
    return named


def _expected_for(ctx: Context, command: Any, tree: Path) -> list[str]:
    """The expected tests a command's run must show: those under the paths it names, or all."""
    named = _named_paths(command, tree, tuple(p.removeprefix("/room/") for p in ctx.extra_read_only.values()))
    if not named or "." in named:
        return list(ctx.expected)
    return [t for t in ctx.expected if any(t.split("::")[0] == p or t.startswith(p + "/") for p in named)]


def _nothing_to_record(facts: dict[str, Any]) -> None:
    """A command whose run leaves no report of ours (not pytest, or not sandboxed)."""


def _in_sandbox(
    ctx: Context, argv: list[str], env: dict[str, str], command: Any, check: Check
) -> tuple[list[str], dict[str, str], Path, Callable[[dict[str, Any]], None]]:
    """``argv`` made to run in the sandbox, on a fresh copy of the room (an earlier command
    cannot change what a later one sees): the argv, its environment, where to start it,
    and what records the run's report afterwards (a pytest run's, with its control).
    """
    assert ctx.sandbox is not None
    if ctx.last_tree is not None:
        shutil.rmtree(ctx.last_tree.parent, ignore_errors=True)
    # Beside the room, in the folder that goes with it: the last copy is removed with the room.
    run = Path(tempfile.mkdtemp(prefix="sandboxed-", dir=ctx.repo.parent))
    tree = run / "tree"
    subprocess.run(["cp", "-a", "--reflink=auto", str(ctx.repo), str(tree)], check=True, capture_output=True)
    for inside in ctx.extra_read_only.values():  # a held-out file's folder, made as the sandbox's user sees it
        (tree / inside.removeprefix("/room/")).parent.mkdir(parents=True, exist_ok=True)
    ctx.sandbox.prepare(tree)
    ctx.last_tree = tree
    read_only: dict[Path, str] = dict(ctx.extra_read_only)
    writable: dict[Path, str] = {}
    record: Callable[[dict[str, Any]], None] = _nothing_to_record
    if check.type == "test_passes" and runs_pytest(command):
        tag = secrets.token_hex(8)
        report_dir, plugin_dir = run / "report", run / "plugin"
        report_dir.mkdir()
        plugin_dir.mkdir()
        ctx.sandbox.prepare(report_dir)
        inside = "/run/receipt-ledger-%s" % tag
        plugin = control_plugin(inside + "/report.json")
        (plugin_dir / (plugin.module + ".py")).write_bytes(plugin.source)
        writable[report_dir] = inside
        read_only[plugin_dir] = "/opt/receipt-ledger-%s" % tag
        env["PYTHONPATH"] = os.pathsep.join(p for p in (read_only[plugin_dir], env.get("PYTHONPATH")) if p)
        env["PYTEST_ADDOPTS"] = "-p %s" % plugin.module
        # The held-out tests are expected whatever the command names: a run that skips them fails.
        expected = _expected_for(ctx, command, tree) + list(ctx.extra_expected)

        def record(facts: dict[str, Any]) -> None:
            facts["control"] = plugin.fact()
            facts["expected"] = expected
            facts["report"] = read_report(report_dir / "report.json")

    return ctx.sandbox.argv(tree, argv, read_only, writable), ctx.sandbox.environment(env), run, record


def _run(
    ctx: Context, check: Check, command: Any, shell: bool, timeout: float, out: Evaluated, label: str
) -> dict[str, Any]:
    argv = [*ctx.command_prefix, *(["/bin/sh", "-c", command] if shell else list(command))]
    env, cwd = _scrubbed_env(ctx, check), ctx.repo
    record: Callable[[dict[str, Any]], None] = _nothing_to_record
    if ctx.sandbox is not None:
        argv, env, cwd, record = _in_sandbox(ctx, argv, env, command, check)
    facts: dict[str, Any] = {
        "command": command,
        "shell": shell,
        "timeout_s": round(timeout, 3),
        "exit_code": None,
        "timed_out": False,
        "error": None,
    }
    with tempfile.TemporaryDirectory(prefix="receipt-ledger-run-") as tmp:
        stdout, stderr = Path(tmp) / "stdout", Path(tmp) / "stderr"
        started = time.monotonic()
        with stdout.open("wb") as so, stderr.open("wb") as se:
            proc = None
            try:
                if ctx.sandbox_refused is not None:  # never outside the sandbox the contract requires
                    facts["error"] = "not run: the contract requires a sandbox and %s" % ctx.sandbox_refused
                else:
                    proc = subprocess.Popen(
                        argv,
                        cwd=cwd,
                        env=env,
                        stdout=so,
                        stderr=se,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
            except OSError as exc:
                facts["error"] = "%s: %s" % (argv[0], exc.strerror or exc)
            if proc is not None:
                RUNNING_GROUPS.add(proc.pid)
                try:
                    facts["exit_code"] = proc.wait(timeout=max(timeout, 0.001))
                except subprocess.TimeoutExpired:
                    facts["timed_out"] = True
                    # The whole process group: a test runner's children must not outlive it.
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
                finally:
                    RUNNING_GROUPS.discard(proc.pid)
        facts["duration_ms"] = int((time.monotonic() - started) * 1000)
        streams, redactions = {}, []
        for name, path in (("stdout", stdout), ("stderr", stderr)):
            streams[name], found = _store_stream(ctx, path, check, label + name, out)
            redactions += found
    facts["streams"] = streams
    facts["redactions"] = redactions
    if facts["error"] is None:
        record(facts)
    return facts


def _timeout(ctx: Context, check: Check) -> float:
    declared = check.param("timeout_s", ctx.contract.check_timeout_s)
    return max(0.0, min(float(declared), ctx.deadline - time.monotonic()))


def _test_passes(ctx: Context, check: Check, out: Evaluated) -> dict[str, Any]:
    if check.param("sealed") is not None:
        return _sealed_test(ctx, check, out)
    return _run(
        ctx, check, declared_params(check)["command"], bool(check.param("shell", False)), _timeout(ctx, check), out, ""
    )


def _git_bytes(repo: Path, *args: str) -> bytes | None:
    """Git's standard output as bytes, or None if it failed."""
    done = run_git(repo, *args)
    return done.stdout if done.returncode == 0 else None


def _sealed_refusal(ctx: Context, check: Check, exposure: int) -> str | None:
    """Why a sealed check is not run here (None: it is): only the signed tier in a sandboxed
    clean room, with the deterministic key's own identity, within the exposure cap.
    """
    if ctx.sandbox is None:
        return "a sealed check runs only in the sandboxed clean room (the signed tier in CI)"
    if ctx.base is None:
        return "no base revision holds the sealed set"
    if ctx.sealed_key is None or ctx.sealed_recipient is None:
        return "the deterministic key is not a key file this runner holds: it cannot open a sealed set"
    cap = check.param("max_exposures")
    if isinstance(cap, int) and exposure > cap:
        return (
            "exposure cap reached: this would be candidate %d run against the sealed set, the contract allows %d;"
            " a human decides (a new sealed set, or a cap an admin raises)" % (exposure, cap)
        )
    return None


def _sealed_test(ctx: Context, check: Check, out: Evaluated) -> dict[str, Any]:
    """A sealed check (§6e): the set read from the base and opened with the deterministic
    key, its files bound read-only into the sandbox at their paths, the run judged by the
    report rule with the held-out tests expected; in the public facts only the outcome and
    counts, the output and the full result stored as age ciphertext to the same key.
    """
    digest = Digest.parse(str(check.param("sealed")))
    assert ctx.candidate is not None
    exposure = exposures([row.record for row in ctx.store.records_for(ctx.contract.task_id)], check.id, ctx.candidate)
    public: dict[str, Any] = {
        "command": declared_params(check)["command"],
        "shell": bool(check.param("shell", False)),
        "exit_code": None,
        "timed_out": False,
        "error": _sealed_refusal(ctx, check, exposure),
    }
    if public["error"] is not None:
        return public
    assert ctx.base is not None and ctx.sealed_key is not None and ctx.sealed_recipient is not None
    holder = Path(tempfile.mkdtemp(prefix="sealed-", dir=ctx.repo.parent))
    try:
        where = sealed_file_name(digest)
        shown = _git_bytes(ctx.repo, "show", "%s:%s" % (ctx.base, where))
        if shown is None:
            public["error"] = "the base %s holds no %s" % (ctx.base[:12], where)
            return public
        files = open_sealed_set(shown, ctx.sealed_key, digest)
        for path, data in files.items():
            (holder / path).parent.mkdir(parents=True, exist_ok=True)
            (holder / path).write_bytes(data)
            (holder / path).chmod(0o644)
        holder.chmod(0o755)
        ctx.extra_read_only = {holder / path: "/room/" + path for path in files}
        ctx.extra_expected = tuple(expected_tests(holder, list(files)))
        ctx.encrypt_to = ctx.sealed_recipient
        facts = _run(ctx, check, public["command"], public["shell"], _timeout(ctx, check), out, "")
    except InputError as exc:
        public["error"] = str(exc)
        return public
    finally:
        ctx.extra_read_only, ctx.extra_expected, ctx.encrypt_to = {}, (), None
        shutil.rmtree(holder, ignore_errors=True)
    return _sealed_public(ctx, check, public, facts, exposure, out)


def _sealed_public(
    ctx: Context, check: Check, public: dict[str, Any], facts: dict[str, Any], exposure: int, out: Evaluated
) -> dict[str, Any]:
    """What of a sealed run is public: its outcome and counts; the full facts sealed."""
    assert ctx.sealed_recipient is not None
    if "control" in facts:
        found = test_report_findings(facts)
    else:
        found = [] if facts["exit_code"] == 0 and not facts["timed_out"] and not facts["error"] else ["exit code"]
    report = facts.get("report") if isinstance(facts.get("report"), dict) else {}
    tests = report.get("tests", {}) if isinstance(report, dict) else {}
    control = (facts.get("control") or {}).get("id")
    counts: dict[str, int] = {}
    for test, outcome in tests.items():
        if test != control:
            counts[outcome] = counts.get(outcome, 0) + 1
    said = ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())) or "no test report"
    # The record commits to the plaintext's digest: a later reveal is checked against it by anyone.
    plain = json.dumps(facts, sort_keys=True).encode()
    digest, size = ctx.store.put_blob_stream(io.BytesIO(seal_bytes(plain, [ctx.sealed_recipient])))
    out.refs.append(EvidenceRef("check:%s:sealed" % check.id, digest, size, SEALED_RESULT_MEDIA_TYPE))
    public.update(
        exit_code=facts["exit_code"],
        timed_out=facts["timed_out"],
        error=facts["error"],
        sealed_run={
            "exposure": exposure,
            "passed": not found,
            "counts": counts,
            "summary": ("passed: %s" if not found else "failed: %s") % said,
            "result": str(content_digest(plain)),
        },
    )
    return public


def _read(ctx: Context, value: str) -> tuple[str | None, bytes | None]:
    rel, _ = _resolve(ctx, value)
    if rel is None:
        return None, None
    try:
        return rel, (ctx.repo / rel).read_bytes()
    except OSError:
        return rel, None


def _file_contains(ctx: Context, check: Check) -> dict[str, Any]:
    rel, data = _read(ctx, str(check.param("path")))
    facts: dict[str, Any] = {
        "path": check.param("path"),
        "file_digest": None,
        "matched": False,
        "line": None,
        "column": None,
    }
    if data is None:
        return facts
    facts["file_digest"] = str(content_digest(data))
    text = data.decode("utf-8", "replace")
    literal, regex = check.param("literal"), check.param("regex")
    if literal is not None:
        pos = text.find(str(literal))
    else:
        try:
            m = re.search(str(regex), text, re.MULTILINE)
        except re.error as exc:
            facts["error"] = "bad regex: %s" % exc
            return facts
        pos = m.start() if m else -1
    if pos >= 0:
        facts.update(matched=True, line=text.count("\n", 0, pos) + 1, column=pos - (text.rfind("\n", 0, pos) + 1) + 1)
    return facts


def _absence(ctx: Context, check: Check, out: Evaluated) -> dict[str, Any]:
    literal, regex = check.param("literal"), check.param("regex")
    scope = [
        str(p) for p in (check.param("paths") or ([check.param("path_glob")] if check.param("path_glob") else ["*"]))
    ]
    facts: dict[str, Any] = {
        "pattern": literal if literal is not None else regex,
        "mode": "literal" if literal is not None else "regex",
        "scope": scope,
        "files_searched": 0,
        "matches": [],
        "completed": False,
    }
    try:
        pattern = re.compile(re.escape(str(literal)) if literal is not None else str(regex))
        tracked = git(ctx.repo, "ls-files", "-z").decode("utf-8", "surrogateescape").split("\0")
        coverage = []
        for path in sorted(p for p in tracked if p and any(fnmatch.fnmatch(p, g) for g in scope)):
            try:
                data = (ctx.repo / path).read_bytes()
            except OSError:
                continue  # deleted in the working tree: not searched, so not counted
            coverage.append({"path": path, "digest": str(content_digest(data))})
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
                if pattern.search(line) and len(facts["matches"]) < _MAX_MATCHES:
                    facts["matches"].append("%s:%d" % (path, n))
        facts["files_searched"] = len(coverage)
        blob = json.dumps({"scope": scope, "files": coverage}, sort_keys=True, indent=1).encode()
        digest, size = ctx.store.put_blob_stream(io.BytesIO(blob))
        out.refs.append(EvidenceRef("check:%s:coverage" % check.id, digest, size, "application/json"))
        facts["coverage"] = str(digest)
        facts["completed"] = True
    except (re.error, OSError) as exc:
        facts["error"] = str(exc)
    return facts


def _load_doc(path: str, data: bytes) -> Any:
    if path.endswith(".toml"):
        return tomllib.loads(data.decode("utf-8"))
    return json.loads(data.decode("utf-8"))


def _schema_valid(ctx: Context, check: Check) -> dict[str, Any]:
    import jsonschema

    facts: dict[str, Any] = {
        "path": check.param("path"),
        "schema": check.param("schema"),
        "artifact_digest": None,
        "schema_digest": None,
        "valid": False,
        "errors": [],
    }
    _, artifact = _read(ctx, str(check.param("path")))
    _, schema_bytes = _read(ctx, str(check.param("schema")))
    if artifact is None or schema_bytes is None:
        facts["errors"] = ["%s is missing" % ("artifact" if artifact is None else "schema")]
        return facts
    facts["artifact_digest"], facts["schema_digest"] = str(content_digest(artifact)), str(content_digest(schema_bytes))
    try:
        doc = _load_doc(str(check.param("path")), artifact)
        schema = json.loads(schema_bytes.decode("utf-8"))
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
        errors = sorted(validator_cls(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    except (ValueError, UnicodeDecodeError, tomllib.TOMLDecodeError, jsonschema.SchemaError) as exc:
        facts["errors"] = ["cannot validate: %s" % str(exc).splitlines()[0]]
        return facts
    facts["errors"] = [
        "%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message) for e in errors[:20]
    ]
    facts["valid"] = not errors
    return facts


def _artifact_digest(ctx: Context, check: Check, built: bool = False) -> str | None:
    """The artifact's digest: where the last command ran after a build (a sandbox's own copy)."""
    where = ctx.last_tree if built and ctx.last_tree is not None else ctx.repo
    _, data = _read(dataclasses.replace(ctx, repo=where), str(check.param("path")))
    return None if data is None else str(content_digest(data))


def _hash_stable(ctx: Context, check: Check, out: Evaluated) -> dict[str, Any]:
    if check.param("digest") is not None:
        return {"path": check.param("path"), "mode": "pinned", "digests": [_artifact_digest(ctx, check)], "builds": []}
    builds, digests = [], []
    command = declared_params(check)["command"]
    for n in (1, 2):
        facts = _run(ctx, check, command, isinstance(command, str), _timeout(ctx, check), out, "build%d-" % n)
        builds.append(facts)
        ok = facts["exit_code"] == 0 and not facts["timed_out"]
        digests.append(_artifact_digest(ctx, check, built=True) if ok else None)
    return {"path": check.param("path"), "mode": "rebuild", "digests": digests, "builds": builds}


def _attribution_declared(ctx: Context, check: Check, out: Evaluated) -> dict[str, Any]:
    """The candidate's added lines and what the task's provenance records declare (§6d);
    the records go with the result as its evidence, for the verifier to read again.
    """
    from ..ladder._provenance import task_provenance

    if ctx.diff is None:
        return {}  # no snapshot diff (the agent's loop): cannot be evaluated here
    records = task_provenance(ctx.store, ctx.contract.task_id)
    for n, (ref, _) in enumerate(records):
        out.refs.append(dataclasses.replace(ref, check_id="check:%s:provenance:%d" % (check.id, n)))
    facts = declared_facts([(str(ref.digest), doc) for ref, doc in records])
    return {"changed": added_lines(ctx.diff), **facts}


def evaluate(ctx: Context, check: Check) -> Evaluated:
    """Run one check and capture what it did. Unknown types produce no facts, which the
    verdict rule reads as a fail with the reason.
    """
    out = Evaluated(result={})
    started = _clock.now()
    clock = time.monotonic()
    if check.type == "path_exists":
        facts = _path_exists(ctx, check)
    elif check.type == "test_passes":
        facts = _test_passes(ctx, check, out)
    elif check.type == "file_contains":
        facts = _file_contains(ctx, check)
    elif check.type == "absence_verified":
        facts = _absence(ctx, check, out)
    elif check.type == "schema_valid":
        facts = _schema_valid(ctx, check)
    elif check.type == "hash_stable":
        facts = _hash_stable(ctx, check, out)
    elif check.type == "attribution_declared":
        facts = _attribution_declared(ctx, check, out)
    else:
        facts = {}
    out.result = {
        "format": CHECK_RESULT_FORMAT,
        "id": check.id,
        "type": check.type,
        "declared": declared_params(check),
        "facts": facts,
        "started": started,
        # Every check is timed, not only commands: a run's time is the sum of its checks'.
        "duration_ms": int((time.monotonic() - clock) * 1000),
    }
    return out
