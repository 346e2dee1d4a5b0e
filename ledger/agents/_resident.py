"""The hooks' resident process: a warm interpreter that answers `ledger hook EVENT` for
the hooks of one installation and one user, so that a tool call does not pay for
importing the ledger.

An agent runs a hook on every tool call, as a new process. Importing what a hook needs
(the JSON and TOML parsers, the contract's rules; for a stop, the ledger, SQLite and
`cryptography`) costs several times the interpreter's own start-up. Here a hook is a
small client: it reads the payload, sends it with its working directory, umask and
environment over a Unix socket, and prints the answer. The server has the modules
imported and nothing else: for each request it forks, and the child takes the client's
environment, directory and umask and runs the same `run_hook` the client would have run
itself. Nothing is kept from one request to the next; the server holds code, not state.

The rules that keep the gate shut:

- The hook does the work itself whenever the server cannot be used: none is running, it
  runs as another user, it was started from other code (a package upgraded since, another
  interpreter or ``PYTHONPATH``), or ``RECEIPT_LEDGER_RESIDENT=0``. Then it starts one for
  the next call (at most one runs: it holds a lock).
- Once the server has accepted a request, the hook never runs it a second time: a
  request that then ends without an answer (the child killed, the server gone) is
  answered as any hook that fails is: a tool call denied, a stop blocked.
- Each side checks the other's user id (``SO_PEERCRED``); the socket lives in a
  directory only its user can enter.
- The child dies with the client: when the hook is killed (the agent's timeout), the
  child and the checks it started are killed too.

The client's half of this module is on the hot path of every tool call: it imports
``os``, ``sys`` and ``_socket`` only (``socket`` would bring ``enum``, ``json`` would
bring ``re``), and the server's imports are made in the server.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping
    from pathlib import Path

    from ._hooks import HookAnswer

__all__ = ["RESIDENT_ENV", "RUNTIME_ENV", "socket_path", "run", "serve"]

RESIDENT_ENV = "RECEIPT_LEDGER_RESIDENT"  # "0" (or off, no, false): every hook does its own work; "require"
RUNTIME_ENV = "RECEIPT_LEDGER_RUNTIME_DIR"  # where the socket lives; default $XDG_RUNTIME_DIR or /tmp
_MAGIC = b"RLH1"
_ACCEPTED = b"A"
_DECLINED = b"D"
_STALE = b"stale"  # the server's code changed on disk: it is leaving, start a new one
_IDLE_SECONDS = 900.0  # a server nobody has called for this long exits
_READ_SECONDS = 10.0  # the most a server waits for a client's whole request
_MAX_MESSAGE = 1 << 28  # 256 MiB: far beyond any payload an agent sends
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../ledger
_OFF = ("0", "off", "no", "false")
_REQUIRED = "require"  # only the server may answer: a hook it cannot answer fails closed (benchmarks, tests)


# -- the wire: length-prefixed frames, written and read here ---------------------------------


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _frames(data: bytes) -> list[bytes]:
    """Split a message into its frames; ValueError when it is not one."""
    out, at = [], 0
    while at < len(data):
        if at + 4 > len(data):
            raise ValueError("a frame's length is cut off")
        size = int.from_bytes(data[at : at + 4], "big")
        at += 4
        if at + size > len(data):
            raise ValueError("a frame is cut off")
        out.append(data[at : at + size])
        at += size
    return out


def _request(event: str, raw: bytes) -> bytes:
    umask = os.umask(0o022)
    os.umask(umask)
    environ = b"\0".join(k + b"=" + v for k, v in os.environb.items())
    fields = (_MAGIC, event.encode(), os.getcwdb(), b"%d" % umask, os.fsencode(sys.executable), os.fsencode(_PACKAGE))
    body = b"".join(_frame(f) for f in (*fields, environ, raw))
    return _frame(body)


def _answer_bytes(answer: HookAnswer) -> bytes:
    body = b"".join(_frame(f) for f in (b"%d" % answer.code, answer.stdout.encode(), answer.stderr.encode()))
    return _frame(body)


def _read_message(conn: object) -> bytes | None:
    """One length-prefixed message from ``conn``, or None when the peer closed early or
    announced more than `_MAX_MESSAGE`.
    """
    data = bytearray()
    while len(data) < 4:
        chunk = conn.recv(65536)  # type: ignore[attr-defined]
        if not chunk:
            return None
        data += chunk
    size = int.from_bytes(data[:4], "big")
    if size > _MAX_MESSAGE:
        return None
    while len(data) < 4 + size:
        chunk = conn.recv(max(65536, 4 + size - len(data)))  # type: ignore[attr-defined]
        if not chunk:
            return None
        data += chunk
    return bytes(data[4 : 4 + size])


# -- where the socket lives -----------------------------------------------------------------


def _fnv(data: bytes) -> int:
    # 32-bit FNV-1a: a name per installation, without importing hashlib on the hot path.
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def socket_path(environ: Mapping[str, str] | None = None, create: bool = False) -> str | None:
    """The socket of this installation's server for this user, or None when there is no
    safe place for it (a directory someone else owns or can write, a path too long for a
    Unix socket). ``create`` makes the directory (mode 0700) when it is missing.
    """
    env = os.environ if environ is None else environ
    uid = os.getuid()
    folder = env.get(RUNTIME_ENV) or (
        os.path.join(env["XDG_RUNTIME_DIR"], "receipt-ledger")
        if env.get("XDG_RUNTIME_DIR")
        else "/tmp/receipt-ledger-%d" % uid  # checked below: ours, mode 0700
    )
    try:
        if create:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    # A directory another user could enter or replace would let them answer our hooks.
    if st.st_uid != uid or (st.st_mode & 0o077) or (st.st_mode & 0o170000) != 0o040000:
        return None
    name = "hooks-%08x.sock" % _fnv(os.fsencode(sys.executable) + b"\0" + os.fsencode(_PACKAGE))
    path = os.path.join(folder, name)
    return path if len(os.fsencode(path)) < 100 else None


def _peer_uid(conn: object) -> int:
    import _socket

    cred = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # type: ignore[attr-defined]
    return int.from_bytes(cred[4:8], sys.byteorder)


# -- the client: `ledger hook EVENT` -------------------------------------------------------------


def run(event: str) -> int:
    """`ledger hook EVENT`: the payload from stdin, answered by the resident server when
    one can be used, else here; the answer to stdout and stderr.

    Returns:
        The hook's exit code.
    """
    raw = sys.stdin.buffer.read()
    mode = os.environ.get(RESIDENT_ENV, "").strip().lower()
    path = None if mode in _OFF else socket_path(create=True)
    here = _Here(event, raw, required=mode == _REQUIRED)
    if path is None:
        return here(spawn=None)
    import _socket

    if not hasattr(_socket, "SO_PEERCRED"):  # not Linux: no way to check who answers
        return here(spawn=None)
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    accepted = False
    try:
        try:
            conn.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return here(spawn=path)  # none is running: start one for the next call
        if _peer_uid(conn) != os.getuid():
            return here(spawn=None)
        conn.sendall(_request(event, raw))
        first = conn.recv(1)
        if first != _ACCEPTED:
            # Declined, or gone, before doing anything: the work is still ours to do.
            stale = first == b"" or (first == _DECLINED and _read_message(conn) == _STALE)
            return here(spawn=path if stale else None)
        accepted = True
        message = _read_message(conn)
        failure = "the resident hook process ended without an answer"
    except OSError as exc:
        if not accepted:
            return here(spawn=None)
        message, failure = None, "the resident hook process failed: %s" % exc
    finally:
        conn.close()
    try:
        code, out, err = _frames(message) if message is not None else (b"", b"", b"")
        return _emit(int(code), out.decode(), err.decode())
    except ValueError:
        pass
    # Accepted, then no answer: it may have done part of the work, so it is not done again.
    return _closed(event, failure)


def _emit(code: int, out: str, err: str) -> int:
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.stdout.flush()
    return code


def _closed(event: str, reason: str) -> int:
    from ._hooks import closed_answer

    answer = closed_answer(event, reason)
    return _emit(answer.code, answer.stdout, answer.stderr)


class _Here:
    """The hook answered in this process (or, when the server is required, refused),
    then a server started for the next call when ``spawn`` names its socket.
    """

    __slots__ = ("event", "raw", "required")

    def __init__(self, event: str, raw: bytes, required: bool) -> None:
        self.event, self.raw, self.required = event, raw, required

    def __call__(self, spawn: str | None) -> int:
        if self.required:
            code = _closed(self.event, "no resident hook process answered (%s=%s)" % (RESIDENT_ENV, _REQUIRED))
        else:
            from ._hooks import answer_for, finish

            answer = answer_for(self.event, self.raw, os.environ)
            code = _emit(answer.code, answer.stdout, answer.stderr)
            finish(answer)
        if spawn is not None:
            sys.stderr.flush()
            _start_server(spawn)
        return code


def _start_server(path: str) -> None:
    """Start a server in the background, detached from the agent: its own session, no
    terminal, and none of the hook's pipes (the agent reads them to their end).
    """
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        return
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 65536)
        os.chdir("/")  # hold no project's directory; -P: nor import from one
        os.execv(sys.executable, [sys.executable, "-P", "-m", "ledger.agents._resident", path])
    finally:
        os._exit(0)


# -- the server -----------------------------------------------------------------------------


def _loaded_files() -> dict[str, tuple[int, int]]:
    """Each loaded module file of ours and its (mtime, size): the code this server runs."""
    roots = tuple(os.path.join(os.path.dirname(_PACKAGE), p) + os.sep for p in ("ledger", "receipts", "verify"))
    out = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.startswith(roots):
            st = os.stat(name)
            out[name] = (st.st_mtime_ns, st.st_size)
    return out


def _unchanged(files: dict[str, tuple[int, int]]) -> bool:
    try:
        for name, (mtime, size) in files.items():
            st = os.stat(name)
            if (st.st_mtime_ns, st.st_size) != (mtime, size):
                return False
    except OSError:
        return False
    return True


_REHEARSAL_CONTRACT = """version = 1
task = "TASK-1"
goal = "a rehearsal"
kind = "code"
owned_files = ["a.txt"]

[[checks]]
id = "a"
type = "file_contains"
path = "a.txt"
literal = "a"
"""


def _scratch_project(tmp: Path, path: str) -> Path:
    """A project in ``tmp`` with a contract, a commit, a ledger and an agent's key; the
    process's environment and directory set for it (the caller restores them).
    """
    import subprocess

    from receipts import Role

    from ..keys._key_files import generate_key_file
    from ..keys._keyring import add_key
    from ..store._ledger import Ledger

    repo, keys = tmp / "repo", tmp / "keys"
    (repo / ".ledger" / "contracts").mkdir(parents=True)
    keys.mkdir(mode=0o700)
    (repo / ".ledger" / "contracts" / "TASK-1.toml").write_text(_REHEARSAL_CONTRACT)
    (repo / "a.txt").write_text("a\n")
    os.environ.clear()
    os.environ.update(
        PATH=path,
        HOME=str(tmp),
        RECEIPT_LEDGER_KEYS=str(keys),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="rehearsal",
        GIT_AUTHOR_EMAIL="rehearsal@example.invalid",
        GIT_COMMITTER_NAME="rehearsal",
        GIT_COMMITTER_EMAIL="rehearsal@example.invalid",
    )
    os.chdir(repo)
    for git in (["init", "-q", "-b", "task-1"], ["add", "-A"], ["commit", "-qm", "TASK-1: rehearsal"]):
        subprocess.run(["git", *git], check=True, capture_output=True)
    admin = generate_key_file(keys / "admin", "admin")
    agent = generate_key_file(keys / "agent", "agent")
    ledger = Ledger.create(repo / ".ledger", admin, "admin")
    try:
        add_key(ledger, admin, "agent", [Role.AGENT], agent.public_key_blob)
    finally:
        ledger.close()
    return repo


def _rehearse() -> None:
    """Answer every event once, on a scratch project in a temporary directory, so that
    what a first call sets up (compiled patterns, SQLite's and `cryptography`'s
    first-use work) is done here once, not in every child. Nothing of it is kept but the
    caches of pure functions: the project, its ledger and its keys are deleted.
    """
    import contextlib
    import json
    import tempfile
    from pathlib import Path

    from ._events import HOOK_EVENTS as EVENTS
    from ._hooks import run_hook

    saved, here = dict(os.environ), os.getcwd()
    try:
        with tempfile.TemporaryDirectory(prefix="receipt-ledger-rehearsal-") as tmp:
            repo = _scratch_project(Path(tmp), saved.get("PATH", os.defpath))
            for event, name in EVENTS.items():
                payload: dict[str, object] = {"session_id": "rehearsal", "cwd": str(repo), "hook_event_name": name}
                if event.endswith("tool-use"):
                    payload.update(tool_name="Bash", tool_input={"command": "true"}, tool_use_id="rehearsal")
                    payload["tool_response"] = {"stdout": "", "stderr": "", "interrupted": False}
                run_hook(event, json.dumps(payload).encode(), os.environ, repo)
    except Exception:  # a rehearsal that fails only leaves the first calls slower
        pass
    finally:
        os.environ.clear()
        os.environ.update(saved)
        with contextlib.suppress(OSError):
            os.chdir(here)


def _listen(path: str) -> tuple[socket.socket, int]:
    """A socket listening on ``path`` (mode 0600), renamed into place only once it listens:
    a client finds the old socket or a working one. The socket, and its inode (a later
    server's replaces it, and this one then leaves the path alone).
    """
    import contextlib
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fresh = "%s.%d" % (path, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    old = os.umask(0o177)
    try:
        listener.bind(fresh)
    finally:
        os.umask(old)
    listener.listen(64)
    os.replace(fresh, path)
    return listener, os.stat(path).st_ino


def serve(path: str) -> int:
    """Run the server on ``path`` until it has been idle for a while or its code changes on
    disk (or it is sent SIGTERM). Exits at once when one is running already (the lock).

    Returns:
        The process's exit code.
    """
    import contextlib
    import fcntl
    import gc
    import select
    import signal

    lock = open(os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600), "r+")  # held for life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server runs
    lock.seek(0)
    lock.truncate()
    lock.write("%d\n" % os.getpid())
    lock.flush()
    from ._hooks import warm

    warm()
    _rehearse()
    files = _loaded_files()
    # Children live for one request: no collection is worth the copy-on-write faults a
    # collector's walk over the inherited objects would cost.
    gc.disable()
    gc.freeze()
    pythonpath = os.environ.get("PYTHONPATH", "")
    listener, mine = _listen(path)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stopped: the socket is removed on the way out
    news_r, news_w = os.pipe()  # a spare says it took a request (b"t") or found our code changed (b"s")
    life_r, life_w = os.pipe()  # never written: its end tells a waiting spare that the server is gone
    try:
        while True:
            # One spare at a time waits for the next request, already forked and warm:
            # neither the fork nor its first copy-on-write faults are paid by a hook.
            if os.fork() == 0:
                for fd in (news_r, life_w):
                    os.close(fd)
                lock.close()
                _spare(listener, (news_w, life_r), files, pythonpath)  # never returns
            ready = select.select([news_r], [], [], _IDLE_SECONDS)[0]
            if not ready or os.read(news_r, 1) != b"t":
                return 0  # idle, or our code changed
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == mine:
                os.unlink(path)  # before the spare learns we are gone: no new client finds it


def _spare(listener: socket.socket, pipes: tuple[int, int], files: dict[str, tuple[int, int]], pythonpath: str) -> None:
    """A forked child that waits for one request, tells the server it took it (so that the
    server forks the next spare) and answers it; it exits when the server does.
    """
    import gc
    import select

    news, life = pipes
    try:
        gc.unfreeze()
        del gc.get_objects()[:]  # copy now the pages a request would write (reference counts)
        gc.freeze()
        while True:
            ready = select.select([listener.fileno(), life], [], [])[0]
            if life in ready:
                os._exit(0)  # the server is gone
            try:
                conn, _ = listener.accept()
            except OSError:  # the client gave up between the two calls
                continue
            break
        os.write(news, b"t")
        listener.close()
        os.close(life)
        verdict = _admit(conn, files, pythonpath)
        if isinstance(verdict, bytes):  # our code changed: the client starts a new server
            conn.sendall(_DECLINED + _frame(verdict))
            os.write(news, b"s")
        elif verdict is not None:
            os.close(news)
            _child(conn, *verdict)  # never returns
    finally:
        os._exit(0)


def _admit(
    conn: object, files: dict[str, tuple[int, int]], pythonpath: str
) -> tuple[list[bytes], dict[bytes, bytes]] | bytes | None:
    """The request's fields and the client's environment when this server may answer it;
    ``_STALE`` when its code changed; None when the client is turned away (it then does
    the work itself).
    """
    if _peer_uid(conn) != os.getuid():
        return None
    conn.settimeout(_READ_SECONDS)  # type: ignore[attr-defined]
    try:
        message = _read_message(conn)
        fields = _frames(message) if message is not None else []
    except (OSError, ValueError):
        return None
    if len(fields) != 8 or fields[0] != _MAGIC:
        return None
    if not _unchanged(files):
        return _STALE
    environ = dict(item.split(b"=", 1) for item in fields[6].split(b"\0") if b"=" in item)
    same = (
        fields[4] == os.fsencode(sys.executable)
        and fields[5] == os.fsencode(_PACKAGE)
        and environ.get(b"PYTHONPATH", b"") == os.fsencode(pythonpath)
    )
    if not same:
        conn.sendall(_DECLINED + _frame(b"other code"))  # type: ignore[attr-defined]
        return None
    conn.settimeout(None)  # type: ignore[attr-defined]
    return fields, environ


def _child(conn: object, fields: list[bytes], environ: dict[bytes, bytes]) -> None:
    """Answer one request as the client would have answered it itself, then exit."""
    import contextlib
    import signal
    import threading

    from ..tiers._signals import RUNNING_GROUPS

    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the checks wait for their processes
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setpgid(0, 0)
        conn.sendall(_ACCEPTED)  # type: ignore[attr-defined]
        event, cwd, umask = fields[1].decode(), fields[2], int(fields[3])
        os.environb.clear()
        os.environb.update(environ)
        os.chdir(cwd)
        os.umask(umask)

        answered = threading.Event()

        def watch() -> None:
            # The client never writes again: end of stream means it is gone (killed by the
            # agent's timeout, say), and so must be this child and the checks it started;
            # unless it left with the answer, and what is left is the answer's `then`.
            try:
                conn.recv(1)  # type: ignore[attr-defined]
            except OSError:
                pass
            if answered.is_set():
                return
            for group in list(RUNNING_GROUPS):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
            os.killpg(0, signal.SIGKILL)

        threading.Thread(target=watch, daemon=True).start()
        from ._hooks import answer_for, finish

        answer = answer_for(event, fields[7], os.environ)
        answered.set()  # before sending: the client may leave as soon as it has read it
        conn.sendall(_answer_bytes(answer))  # type: ignore[attr-defined]
        finish(answer)
        code = 0
    finally:
        os._exit(code)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]) if len(sys.argv) == 2 else 2)
