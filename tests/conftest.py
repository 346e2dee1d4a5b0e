"""Shared fixtures: deterministic keys, a sample ledger, and an attacker that can rewrite it."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from docs_as_written import Site

import receipts as r
from ledger import (
    Appended,
    CheckRun,
    Ledger,
    add_key,
    add_provenance,
    decide,
    record_tier,
    run_deterministic,
    run_judge,
    seal_receipt,
)

# The hooks' resident process (ledger/agents/_resident.py): where its socket lives, and
# whether a hook may, must or must not be answered by it.
RUNTIME_ENV = "RECEIPT_LEDGER_RUNTIME_DIR"
RESIDENT_ENV = "RECEIPT_LEDGER_RESIDENT"


def stop_resident_servers(folder: Path, ours_only: bool = False) -> list[int]:
    """Stop the resident hook servers whose sockets are in ``folder`` (``ours_only``: those
    this interpreter started, in a folder other runs share); their process ids.
    """
    stopped = []
    for lock in folder.glob("*.sock.lock"):
        text = lock.read_text().strip()
        if not text.isdigit():
            continue
        try:
            argv = Path("/proc/%s/cmdline" % text).read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ledger.agents._resident" not in argv or (ours_only and argv[0] != os.fsencode(sys.executable)):
            continue
        try:
            os.kill(int(text), signal.SIGTERM)
            stopped.append(int(text))
        except ProcessLookupError:
            pass
    return stopped


@pytest.fixture(scope="session", autouse=True)
def resident_hook_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Hooks start a resident server for the next call: the suite's live in a folder of
    the suite's own, and are stopped when it ends.
    """
    folder = tmp_path_factory.mktemp("resident")
    folder.chmod(0o700)
    os.environ[RUNTIME_ENV] = str(folder)
    yield folder
    stop_resident_servers(folder)
    # A test that builds its environment from nothing uses the default folder.
    shared = [Path("/tmp/receipt-ledger-%d" % os.getuid())]
    if os.environ.get("XDG_RUNTIME_DIR"):
        shared.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "receipt-ledger")
    for default in shared:
        if default.is_dir():
            stop_resident_servers(default, ours_only=True)


KEY_NAMES = ("admin", "ci", "judge", "alice", "bob", "sealer", "agent", "mallory")
ROLES = {
    "ci": r.Role.DETERMINISTIC,
    "judge": r.Role.JUDGE,
    "alice": r.Role.HUMAN,
    "bob": r.Role.HUMAN,
    "sealer": r.Role.SEAL,
    "agent": r.Role.AGENT,
}
TASK = "TASK-1"


JUDGE_SCRIPT = str(Path(__file__).parent / "judges" / "scripted_judge.py")


def judge_table(*args: str, **settings: object) -> str:
    """A [judge] table for the scripted command judge, answering as ``args`` say."""
    command = [sys.executable, JUDGE_SCRIPT, *args]
    lines = ["[judge]", 'backend = "command"', "command = %s" % json.dumps(command), "timeout_s = 10"]
    lines += ["%s = %s" % (k, json.dumps(v)) for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def contract_bytes(
    task: str = TASK,
    command: str = "print('1 passed')",
    extra: str = "",
    kind: str = "code",
    owned: tuple[str, ...] = ("app.py",),
    judge: str | None = None,
    top: str = "",
) -> bytes:
    """A contract whose one test runs ``command`` with this interpreter, judged by the
    scripted judge (accepting at 0.9 unless ``judge`` says otherwise)."""
    return (
        """version = 1
%s
task = "%s"
goal = "a test task"
kind = "%s"
owned_files = %s
evidence_required = ["tests"]

[policy]
required_tiers = ["deterministic", "judge", "human"]

[budgets]
check_timeout_s = 20
total_timeout_s = 60

%s
[[checks]]
id = "tests"
type = "test_passes"
command = [%s, "-c", %s]
%s"""
        % (
            top,
            task,
            kind,
            json.dumps(list(owned)),
            judge if judge is not None else judge_table("accept", "0.9"),
            json.dumps(sys.executable),
            json.dumps(command),
            extra,
        )
    ).encode()


CONTRACT = contract_bytes()
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV)
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(path: Path, message: str = "TASK-1: add app") -> Path:
    """A real repository: an initial commit, then a change with ``message``."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("readme\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    (path / "app.py").write_text("print('hello')\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return path


def seeded_signer(name: str) -> r.Ed25519Signer:
    """A fixed key per name, so that vectors and signatures are reproducible."""
    seed = r.content_digest(b"receipt-ledger test key " + name.encode()).value
    return r.Ed25519Signer(Ed25519PrivateKey.from_private_bytes(seed))


SIGNERS = {name: seeded_signer(name) for name in KEY_NAMES}
BY_KEY_ID = {r.fingerprint(s.public_key_blob): s for s in SIGNERS.values()}
ADMIN_ID = r.fingerprint(SIGNERS["admin"].public_key_blob)
CANDIDATE = r.candidate_hash({"commit": "a" * 40, "tree": "b" * 40})
OTHER_CANDIDATE = r.candidate_hash({"commit": "c" * 40, "tree": "d" * 40})


@dataclass
class Sample:
    root: Path
    receipt: str
    records: dict[r.Tier, r.Digest]
    evidence_dir: Path
    repo: Path
    contract: bytes


def sign_decision(
    ledger: Ledger,
    repo: Path,
    contract: bytes,
    candidate: r.Digest,
    signer: r.Signer,
    *,
    approve: bool = True,
    note: str = "reviewed",
    task: str = "TASK-1",
) -> Appended | None:
    """A human decision on ``candidate`` signed by ``signer``, the reviewer agreeing to sign
    what they are shown (the tests' stand-in for a person at a terminal)."""
    return decide(
        ledger,
        task_id=task,
        contract_bytes=contract,
        candidate=candidate,
        signer=signer,
        approve=approve,
        note=note,
        repo=repo,
        confirm=lambda shown: True,
    )


def filler_record(
    ledger: Ledger,
    task: str = "TASK-1",
    verdict: r.Verdict = r.Verdict.PASS,
    tier: r.Tier = r.Tier.HUMAN,
    signer: str = "alice",
    contract: bytes = b"shared",
) -> Appended:
    """A tier record appended by hand: cheap filler for chains a test grows, signed by a key
    with the role (``SIGNERS[signer]``), about one fixed candidate under ``contract``."""
    _, appended = record_tier(
        ledger,
        task_id=task,
        tier=tier,
        verdict=verdict,
        signer=SIGNERS[signer],
        config_hash=r.config_hash(contract),
        input_hash=r.candidate_hash({"commit": "c" * 40}),
    )
    return appended


def flaky_command(counter: Path, failing_run: int = 2) -> str:
    """Python for a test that fails on its ``failing_run``-th run only (counted in ``counter``)."""
    return (
        "import pathlib, sys; p = pathlib.Path(%r); n = int(p.read_text()) + 1 if p.exists() else 1;"
        " p.write_text(str(n)); print('run', n); sys.exit(1 if n == %d else 0)" % (str(counter), failing_run)
    )


def build_sample(
    tmp: Path,
    verdicts: dict[r.Tier, r.Verdict] | None = None,
    judge: str | None = None,
    command: str | None = None,
    check_extra: str = "",
    top: str = "",
    clean_room: bool = False,
    provenance: Path | None = None,
    store: str | None = None,
    sandboxed: bool = False,
) -> Sample:
    """A ledger with keys for every role, a real deterministic run on a real repository
    (passing unless ``verdicts`` says FAIL; its `tests` check runs ``command`` when given,
    with ``check_extra`` lines added to the check, ``top`` lines at the contract's top, in a
    clean room when asked, after the agent added the Agent Trace record ``provenance``),
    hand-made judge and human records, and a receipt; on the shared ``store`` when given.
    ``sandboxed``: the check is pytest on a test the base holds, run in the sandboxed clean
    room, and the candidate brings a conftest.py of its own (which the room removes)."""
    verdicts = verdicts or {t: r.Verdict.PASS for t in r.LADDER}
    root = tmp / "ledger"
    ev = tmp / "evidence"
    ev.mkdir(exist_ok=True)
    repo = make_repo(tmp / "repo")
    ledger = Ledger.create(root, SIGNERS["admin"], "admin", store=store)
    for name, role in ROLES.items():
        add_key(ledger, SIGNERS["admin"], name, [role], SIGNERS[name].public_key_blob)
    if command is None:
        command = "print('1 passed')" if verdicts[r.Tier.DETERMINISTIC] is r.Verdict.PASS else "raise SystemExit(1)"
    judge_mode = {r.Verdict.PASS: ("accept", "0.9"), r.Verdict.FAIL: ("reject", "0.9")}[verdicts[r.Tier.JUDGE]]
    contract = contract_bytes(command=command, judge=judge or judge_table(*judge_mode), extra=check_extra, top=top)
    if sandboxed:
        repo, contract = _sandboxed(repo, contract)
        clean_room = True
    if provenance is not None:
        add_provenance(ledger, SIGNERS["agent"], TASK, None, repo=repo, agent_trace=provenance)
    run = run_deterministic(
        ledger,
        repo=repo,
        task_id=TASK,
        contract_bytes=contract,
        source="c.toml",
        signer=SIGNERS["ci"],
        clean_room=clean_room,
    )
    assert run.outcome.verdict is verdicts[r.Tier.DETERMINISTIC], run.outcome
    records = {r.Tier.DETERMINISTIC: run.appended.body_hash}
    judged = run_judge(
        ledger, task_id=TASK, contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
    )
    records[r.Tier.JUDGE] = judged.appended.body_hash
    if judge is None:
        assert judged.outcome.verdict is (
            r.Verdict.SKIP if verdicts[r.Tier.DETERMINISTIC] is not r.Verdict.PASS else verdicts[r.Tier.JUDGE]
        )
    approval = decide(
        ledger,
        task_id=TASK,
        contract_bytes=contract,
        candidate=run.record.input_hash,
        signer=SIGNERS["alice"],
        approve=verdicts[r.Tier.HUMAN] is r.Verdict.PASS,
        note="reviewed",
        repo=repo,
        confirm=lambda shown: True,
    )
    assert approval is not None
    records[r.Tier.HUMAN] = approval.body_hash
    _, sealed = seal_receipt(ledger, task_id=TASK, signer=SIGNERS["sealer"], input_hash=run.record.input_hash)
    ledger.close()
    return Sample(root, str(sealed.body_hash), records, ev, repo, contract)


def ci_check(
    ledger: Ledger, repo: Path, contract: bytes, environ: dict[str, str] | None = None, clean_room: bool = False
) -> CheckRun:
    """CI's deterministic tier on TASK-1's candidate at ``repo``'s HEAD against main, with
    this process's environment (``environ`` added) and no bytecode written into the tree."""
    return run_deterministic(
        ledger,
        repo=repo,
        task_id=TASK,
        contract_bytes=contract,
        source="c.toml",
        signer=SIGNERS["ci"],
        base="main",
        clean_room=clean_room,
        environ={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(environ or {})},
    )


# A candidate's probe tries each thing and says what it reached (test_sandbox, test_action).
PROBE_TRY = """
def _try(what, action):
    try:
        return "%s: REACHED %s" % (what, action())
    except Exception as exc:
        return "%s: blocked (%s)" % (what, type(exc).__name__)
"""


def _sandboxed(repo: Path, contract: bytes) -> tuple[Path, bytes]:
    """`build_sample`'s sandboxed variant: the base holds a test, the candidate a conftest.py."""
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text("def test_app():\n    assert True\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tests")
    (repo / "conftest.py").write_text("# the candidate's own, never run\n")
    (repo / "app.py").write_text("print('hello, sandbox')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: app, with a conftest of its own")
    pytest_argv = json.dumps([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
    lines = [
        "command = %s" % pytest_argv if line.startswith("command = ") and '"-c"' in line else line
        for line in contract.decode().splitlines()
    ]
    text = "\n".join(lines).replace("[policy]\n", "[policy]\nclean_room = true\nsandbox = true\n", 1)
    return repo, ('test_files = ["tests/*"]\n' + text + "\n").encode()


def other_records(
    task: str, n: int, verdict: r.Verdict = r.Verdict.PASS, start: int = 0, distinct: bool = True
) -> list[r.TierRecord]:
    """n deterministic records of another task (each on a candidate of its own when
    ``distinct``), as a writer would append them: filler that grows the log."""
    env = r.domain_hash(r.Domain.ENVIRONMENT, task.encode())
    return [
        r.new_tier_record(
            task_id=task,
            tier=r.Tier.DETERMINISTIC,
            config_hash=env,
            input_hash=r.candidate_hash({"commit": "%040d" % (start + i)}) if distinct else env,
            evidence=(),
            verdict=verdict,
            verifier="test",
            verifier_version="0",
            environment=env,
            created=1764633600 + i,
        )
        for i in range(n)
    ]


@pytest.fixture
def env(tmp_path: Path) -> tuple[Path, Ledger]:
    """A real repository (tests/conftest.make_repo) and a ledger with a key for every role."""
    repo = make_repo(tmp_path / "repo")
    ledger = Ledger.create(tmp_path / "ledger", SIGNERS["admin"], "admin")
    for name, role in ROLES.items():
        add_key(ledger, SIGNERS["admin"], name, [role], SIGNERS[name].public_key_blob)
    return repo, ledger


@pytest.fixture
def ledger_dir(tmp_path: Path) -> Path:
    """A ledger (no repository) with a key for every role, closed."""
    root = tmp_path / "ledger"
    ledger = Ledger.create(root, SIGNERS["admin"], "admin")
    for name, role in ROLES.items():
        add_key(ledger, SIGNERS["admin"], name, [role], SIGNERS[name].public_key_blob)
    ledger.close()
    return root


@pytest.fixture
def sample(tmp_path: Path) -> Sample:
    return build_sample(tmp_path)


# -- the attacker -------------------------------------------------------------------------


@dataclass
class Row:
    entry: r.Entry
    body: bytes


def read_rows(root: Path) -> list[Row]:
    conn = sqlite3.connect(root / "ledger.db")
    rows = [Row(r.decode_entry(e), b) for e, b in conn.execute("SELECT entry, body FROM entries ORDER BY seq")]
    conn.close()
    return rows


def role_for(kind: r.EntryKind, body: bytes) -> r.Role:
    return r.required_role(kind, r.decode_body(kind, body))


def write_rows(root: Path, rows: list[Row], resign_from: int = 0, role: Callable[[Row], r.Role] | None = None) -> None:
    """Replace the chain with ``rows``: renumber nothing, but from ``resign_from`` on,
    recompute body hashes and links and re-sign each entry with its signer's key, as an
    attacker holding every key would. Rows before ``resign_from`` are written as given."""
    out = []
    prev: r.Digest | None = None
    ring: r.Digest | None = None
    last_task: dict[str, r.Digest] = {}
    for i, row in enumerate(rows):
        entry = row.entry
        task = _task_of(entry.kind, row.body)
        if i >= resign_from:
            kind = entry.kind
            entry = dataclasses.replace(
                entry,
                seq=i,
                prev=prev,
                body_hash=r.body_hash(kind, row.body),
                ring=ring,
                task_prev=last_task.get(task) if task else None,
            )
            signer = BY_KEY_ID[entry.signer]
            ns = r.namespace_for((role(row) if role else _safe_role(kind, row.body)).value)
            entry = dataclasses.replace(entry, signature=r.sshsig_sign(signer, ns, r.entry_signed_bytes(entry)))
        data = r.encode_entry(entry)
        prev = r.entry_hash(data)
        if entry.kind in r.KEYRING_KINDS:
            ring = prev
        if task:
            last_task[task] = prev
        out.append((entry, data, row.body))
    conn = sqlite3.connect(root / "ledger.db")
    with conn:
        conn.execute("DELETE FROM entries")
        for i, (entry, data, body) in enumerate(out):
            task = _task_of(entry.kind, body)  # the index column as the store writes it
            conn.execute(
                "INSERT INTO entries (seq, hash, kind, body_hash, task, entry, body) VALUES (?,?,?,?,?,?,?)",
                (i, r.entry_hash(data).value, entry.kind.value, entry.body_hash.value, task, data, body),
            )
    conn.close()


def _task_of(kind: r.EntryKind, body: bytes) -> str | None:
    if kind not in r.TASK_ENTRY_KINDS:
        return None
    try:
        return getattr(r.decode_body(kind, body), "task_id", None)
    except r.ReceiptsError:
        return None


def _safe_role(kind: r.EntryKind, body: bytes) -> r.Role:
    try:
        return role_for(kind, body)
    except r.ReceiptsError:
        return r.Role.DETERMINISTIC


def find_row(rows: list[Row], digest: r.Digest) -> int:
    for i, row in enumerate(rows):
        if row.entry.body_hash == digest:
            return i
    raise KeyError(digest)


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `ledger` in a real subprocess (tracebacks would show on stderr)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([*LEDGER, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120)


# The ledger of this interpreter, whatever is on PATH.
LEDGER = [sys.executable, "-m", "ledger"]


def cli_repo_with_lower_tiers(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A repository with TASK-1's contract committed, a ledger made by `ledger init`, keys
    for ci, judge and alice made by the CLI, and the deterministic and judge tiers run:
    ready for a person to approve. Returns the repository and the key environment."""
    repo = make_repo(tmp / "repo")
    (repo / ".ledger" / "contracts").mkdir(parents=True)
    (repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract_bytes())
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: contract")
    keys = {"RECEIPT_LEDGER_KEYS": str(tmp / "keys")}
    for args in (
        ("init",),
        ("keys", "generate", "ci", "--role", "deterministic"),
        ("keys", "generate", "judge", "--role", "judge"),
        ("keys", "generate", "alice", "--role", "human"),
        ("check", "TASK-1", "--key", "ci"),
        ("judge", "TASK-1", "--key", "judge"),
    ):
        res = run_cli(*args, cwd=repo, env=keys)
        assert res.returncode == 0, (args, res.stderr)
    return repo, keys


def write_private_key(path: Path, name: str) -> Path:
    """The fixed test key ``name`` as an OpenSSH private key file, mode 0600 as OpenSSH wants."""
    from cryptography.hazmat.primitives import serialization

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        seeded_signer(name)._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    return path


# -- a real PostgreSQL server -------------------------------------------------------------------

PG_ENV = "RECEIPT_LEDGER_TEST_PG"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def _with_database(url: str, name: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url)._replace(path="/" + name).geturl()


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The server's URL (``RECEIPT_LEDGER_TEST_PG``, else the project's machines' default).
    Unreachable: the test is skipped with the reason, except under CI=true, where it fails."""
    url = os.environ.get(PG_ENV, PG_DEFAULT)
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=10).close()
    except Exception as exc:  # ImportError or any connection failure: say which
        reason = "no PostgreSQL server for the shared-store tests at %s (%s: %s)" % (url, type(exc).__name__, exc)
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return url


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A new database of its own on the real server, dropped afterwards."""
    import psycopg

    name = "rl_test_" + secrets.token_hex(6)
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute("CREATE DATABASE " + name)
    try:
        yield _with_database(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name)


@pytest.fixture
def team_site(pg_server: str) -> Iterator[tuple[Site, str]]:
    """Where docs/team.md's database and roles land on the test server (their names made
    unique: roles are global to a cluster), dropped afterwards; yields the site and the
    superuser's URL, with which the docs' SQL makes them."""
    import psycopg

    token = secrets.token_hex(4)
    here = Site(database="rl_team_" + token, role_prefix="rl_team_" + token)
    try:
        yield here, pg_server
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % here.database)
            for role in ("owner", "writer", "auditor"):
                admin.execute("DROP ROLE IF EXISTS %s" % here.role(role))


# -- receipts that travel with the code (test_travel, test_action) ------------------------------

LADDER = (
    ("check", "TASK-1", "--key", "ci"),
    ("judge", "TASK-1", "--key", "judge"),
    ("approve", "TASK-1", "--key", "alice", "--yes"),
)


def ok(*args: str, cwd: Path, env: dict[str, str]) -> str:
    res = run_cli(*args, cwd=cwd, env=env)
    assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res.stdout.strip()


AUDITOR_NAME = "witness.test/auditor"


def auditor_key(top: Path) -> Path:
    """The team's auditing witness's own key (outside every keyring), made once per world."""
    key = top / "auditing-witness" / "w1"
    if not key.exists():
        key.parent.mkdir(parents=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


def auditor_line(top: Path) -> str:
    """That witness as ``NAME KEY``, for `--auditing-witness` and `witness add`."""
    return "%s %s" % (AUDITOR_NAME, auditor_key(top).with_suffix(".pub").read_text().strip())


def auditors_file(top: Path) -> bytes:
    """`.ledger/auditing-witnesses` naming that witness, as the team commits it to main."""
    return (
        "# the auditing witness whose cosignature proves a task complete\nquorum 1\n%s\n" % auditor_line(top)
    ).encode()


def audited_cosign(repo: Path, env: dict[str, str], *dir_args: str) -> None:
    """The auditing witness audits the ledger's chain (resuming its own state), cosigns the
    newest checkpoint, and the cosignature is stored on it (`witness add`)."""
    key = auditor_key(repo.parent)
    note = repo.parent / "auditing-witness" / "checkpoint"
    note.write_text(ok(*dir_args, "checkpoint", "--key", "sealer", cwd=repo, env=env) + "\n")
    log_key = Path(env["RECEIPT_LEDGER_KEYS"]) / "sealer.pub"
    cosigned = ok(
        *dir_args,
        "witness",
        "cosign",
        str(note),
        "--key",
        str(key),
        "--name",
        AUDITOR_NAME,
        "--log-key",
        str(log_key),
        "--state",
        str(key.parent / "witness-state.json"),
        "--audit",
        str(key.parent / "audit-state.json"),
        "--trust",
        str(repo / ".ledger" / "allowed_signers"),
        cwd=repo,
        env=env,
    )
    note.write_text(cosigned + "\n")
    ok(*dir_args, "witness", "add", str(note), "--witness", auditor_line(repo.parent), cwd=repo, env=env)


def ladder(repo: Path, env: dict[str, str], *dir_args: str, contract: Path | None = None, audited: bool = True) -> str:
    """Run the three tiers on HEAD, seal, have the auditing witness cosign a checkpoint
    covering the receipt (unless not ``audited``), attach; the receipt hash."""
    extra = ("--contract", str(contract)) if contract else ()
    for args in LADDER:
        ok(*dir_args, *args, *(extra if args[0] != "approve" or contract else ()), cwd=repo, env=env)
    receipt = ok(*dir_args, "seal", "TASK-1", "--key", "sealer", *extra, cwd=repo, env=env)
    if audited:
        audited_cosign(repo, env, *dir_args)
    ok(*dir_args, "attach", receipt, "--key", "sealer", cwd=repo, env=env)
    return receipt


@pytest.fixture(scope="module")
def travel_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare origin whose main holds the trust pin and the contract, and a clone `dev` with
    a ledger, keys and a task branch through the whole ladder, its receipt pushed."""
    top = tmp_path_factory.mktemp("travel")
    env = {"RECEIPT_LEDGER_KEYS": str(top / "keys"), **GIT_ENV}
    seed = make_repo(top / "seed", message="initial app")
    ok("init", cwd=seed, env=env)
    (seed / ".ledger" / "contracts").mkdir()
    (seed / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract_bytes())
    (seed / ".ledger" / "auditing-witnesses").write_bytes(auditors_file(top))
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "ledger: trust root, auditing witness and TASK-1's contract")
    git(top, "clone", "-q", "--bare", str(seed), str(top / "origin.git"))
    git(top, "clone", "-q", str(top / "origin.git"), str(top / "dev"))
    shutil.move(str(seed / ".ledger" / "ledger.db"), str(top / "dev" / ".ledger" / "ledger.db"))
    shutil.move(str(seed / ".ledger" / "blobs"), str(top / "dev" / ".ledger" / "blobs"))
    shutil.rmtree(seed)
    dev = top / "dev"
    for name, role in (("ci", "deterministic"), ("judge", "judge"), ("alice", "human"), ("sealer", "seal")):
        ok("keys", "generate", name, "--role", role, cwd=dev, env=env)
    git(dev, "checkout", "-qb", "task-1")
    (dev / "app.py").write_text("print('hello, receipts')\n")
    git(dev, "commit", "-qam", "TASK-1: greet")
    git(dev, "push", "-q", "origin", "task-1")
    (top / "receipt").write_text(ladder(dev, env))
    ok("receipts", "push", cwd=dev, env=env)
    return top


@pytest.fixture
def world(travel_built: Path, tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    shutil.copytree(travel_built, tmp_path / "w", symlinks=True)
    top = tmp_path / "w"
    # The clone's origin points at the copied bare repository, not the module's.
    git(top / "dev", "remote", "set-url", "origin", str(top / "origin.git"))
    return top, {"RECEIPT_LEDGER_KEYS": str(top / "keys"), **GIT_ENV}, (top / "receipt").read_text()


def fresh_clone(top: Path, name: str, branch: str = "task-1") -> Path:
    """`git clone` into an empty directory: no ledger database, no keys."""
    git(top, "clone", "-q", "--branch", branch, str(top / "origin.git"), str(top / name))
    clone = top / name
    assert not (clone / ".ledger" / "ledger.db").exists()
    return clone


NO_KEYS = {"RECEIPT_LEDGER_KEYS": "/nonexistent/keys", **GIT_ENV}


def free_port() -> int:
    """A port free on 127.0.0.1 just now, for a docs block that names a fixed one (the one
    change made to such a block)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shared_vectors(name: str) -> Path:
    """A third-party vector set from `../shared/vectors/` beside the project (or beside the
    repository a clone was made from), read in place, never copied in; skipped, saying so,
    on a machine that has none."""
    here = Path(__file__).resolve().parent.parent
    places = [here.parent / "shared" / "vectors" / name]
    origin = subprocess.run(
        ["git", "-C", str(here), "config", "--get", "remote.origin.url"], capture_output=True, text=True
    ).stdout.strip()
    if origin and "://" not in origin and Path(origin).is_dir():
        places.append(Path(origin).resolve().parent / "shared" / "vectors" / name)
    for place in places:
        if place.is_dir():
            return place
    pytest.skip("the third-party vectors ../shared/vectors/%s are not on this machine" % name)


def sealed_repo(top: Path) -> tuple[Path, dict[str, str], str]:
    """A repository whose HEAD went through the whole ladder from the command line: the
    trust pin and the contract committed on main, a key per role in ``top/keys``, a
    receipt sealed. Returns the repository, the environment and the receipt's hash."""
    repo = make_repo(top / "repo")
    env = {"RECEIPT_LEDGER_KEYS": str(top / "keys"), **GIT_ENV}
    assert run_cli("init", cwd=repo, env=env).returncode == 0
    # The team commits the trust pin on main; the gate reads it from there.
    git(repo, "add", ".ledger")
    git(repo, "commit", "-qm", "ledger: trust root")
    (repo / ".ledger" / "contracts").mkdir(parents=True)
    (repo / ".ledger" / "contracts" / "TASK-1.toml").write_bytes(contract_bytes())
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "TASK-1: contract")
    steps = [
        ("keys", "generate", "ci", "--role", "deterministic"),
        ("keys", "generate", "judge", "--role", "judge"),
        ("keys", "generate", "alice", "--role", "human"),
        ("keys", "generate", "sealer", "--role", "seal"),
        *LADDER,
    ]
    for args in steps:
        res = run_cli(*args, cwd=repo, env=env)
        assert res.returncode == 0, (args, res.stderr)
    sealed = run_cli("seal", "TASK-1", "--key", "sealer", cwd=repo, env=env)
    assert sealed.returncode == 0, sealed.stderr
    return repo, env, sealed.stdout.strip()
