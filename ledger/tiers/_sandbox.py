"""The sandbox every command of a clean room runs in: bubblewrap (``bwrap``), the tool
Flatpak builds on (docs/adr/0037).

Inside: the room (a fresh copy of the candidate's checkout) at ``/room``, writable; a
private ``/tmp``; the system directories and the Python installations on ``PATH``
read-only; new PID, IPC, UTS, network and cgroup namespaces (so no parent in ``/proc``,
no network but a loopback of its own); the environment the caller gives and nothing
else; no capabilities; not root (run as root, bwrap builds the mounts and ``setpriv``
then drops to ``nobody`` before anything of the candidate runs). Nothing of the runner
is bound: no key folder, no ledger, no real checkout, no agent socket. What was bound is
stated in the snapshot (`Sandbox.document`) and checked by the verifier (§6a).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import SANDBOX_TOOL

__all__ = ["ROOM", "NOBODY", "Sandbox", "make_sandbox"]

ROOM = "/room"
NOBODY = 65534
_SYSTEM = ("/usr", "/etc")
_TOP_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_NAMESPACES = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A sandbox that can be made here: how to run a command in it."""

    bwrap: str
    version: str
    setpriv: str | None  # set when running as root: the privilege drop inside
    read_only: tuple[str, ...]  # host directories bound read-only at the same path
    path: str  # the PATH a command sees: the host's entries that are bound

    @property
    def user(self) -> int:
        return NOBODY if self.setpriv else os.getuid()

    def argv(
        self,
        room: Path,
        command: Sequence[str],
        read_only: Mapping[Path, str] | None = None,
        writable: Mapping[Path, str] | None = None,
    ) -> list[str]:
        """``command`` run in the sandbox with ``room`` at `ROOM` as its directory, and the
        extra host paths given bound at the sandbox paths they map to.
        """
        argv = [self.bwrap, *_NAMESPACES, "--die-with-parent", "--new-session"]
        if not self.setpriv:
            argv.append("--unshare-user")
        for top in _SYSTEM:
            argv += ["--ro-bind", top, top]
        for name in _TOP_LINKS:
            host = Path("/") / name
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), str(host)]
        # The private /tmp first: a Python installed under /tmp (a CI clone's venv) is bound on top of it.
        argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
        made: set[str] = set()
        for host_dir in self.read_only:
            argv += _parents(host_dir, made) + ["--ro-bind", host_dir, host_dir]
        argv += ["--bind", str(room), ROOM]
        for source, inside in (read_only or {}).items():
            argv += _parents(inside, made) + ["--ro-bind", str(source), inside]
        for source, inside in (writable or {}).items():
            argv += _parents(inside, made) + ["--bind", str(source), inside]
        argv += ["--chdir", ROOM, "--"]
        if self.setpriv:
            argv += [
                self.setpriv,
                "--reuid=%d" % NOBODY,
                "--regid=%d" % NOBODY,
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        return argv + list(command)

    def prepare(self, tree: Path) -> None:
        """Hand ``tree`` to the sandbox's user (it writes there; root owns it otherwise)."""
        if self.setpriv:
            for where, dirs, files in os.walk(tree):
                os.chown(where, NOBODY, NOBODY, follow_symlinks=False)
                for name in (*dirs, *files):
                    os.chown(os.path.join(where, name), NOBODY, NOBODY, follow_symlinks=False)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` as a sandboxed command gets it: the bound PATH, its own HOME and TMPDIR."""
        inside = dict(env)
        inside.update(PATH=self.path, HOME="/tmp", TMPDIR="/tmp")
        return inside

    def document(self, environment: Sequence[str], writable: Sequence[str]) -> dict[str, object]:
        return {
            "tool": SANDBOX_TOOL,
            "version": self.version,
            "namespaces": ["pid", "net", "ipc", "uts", "cgroup"],
            "network_cut": True,
            "user": self.user,
            "writable": sorted({ROOM, "/tmp", *writable}),
            "read_only": sorted({*_SYSTEM, *self.read_only}),
            "environment": sorted(set(environment)),
        }


def _parents(inside: str, made: set[str]) -> list[str]:
    """Directories to make, traversable, above a bind point the sandbox's root lacks."""
    out: list[str] = []
    parts = Path(inside).parts[1:-1]
    for n in range(1, len(parts) + 1):
        where = "/" + "/".join(parts[:n])
        if where in made or any(where == top or where.startswith(top + "/") for top in _SYSTEM):
            continue
        if where in ("/tmp", "/proc", "/dev", ROOM) or where.startswith(ROOM + "/"):
            continue
        made.add(where)
        out += ["--perms", "0755", "--dir", where]
    return out


def _pythons(environ: Mapping[str, str]) -> list[str]:
    """The Python installations commands may need, outside the system directories: this
    interpreter's, and each virtual environment on PATH with the installation it is of.
    """
    found = [sys.base_prefix, sys.prefix]
    for entry in environ.get("PATH", "").split(os.pathsep):
        venv = Path(entry).parent
        cfg = venv / "pyvenv.cfg"
        if entry and cfg.is_file():
            found.append(str(venv))
            for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    found.append(str(Path(value.strip()).parent))
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in found}):
        if any(path == top or path.startswith(top + "/") for top in _SYSTEM) or path == "/":
            continue
        if not any(path.startswith(k + "/") for k in kept):
            kept.append(path)
    return kept


def make_sandbox(environ: Mapping[str, str]) -> Sandbox | str:
    """The sandbox this machine can make, or why it can make none.

    Args:
        environ: the runner's environment: its PATH finds bwrap and says which Pythons to bind.
    """
    search = environ.get("PATH", os.defpath)
    bwrap = shutil.which("bwrap", path=search)
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    setpriv = None
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv", path=search)
        if setpriv is None:
            return "running as root, and setpriv (util-linux) is missing to drop to an unprivileged user"
    try:
        said = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "bwrap cannot run: %s" % exc
    version = said.stdout.strip().rpartition(" ")[2] or "unknown"
    read_only = tuple(_pythons(environ))
    bound = (*_SYSTEM, *("/" + name for name in _TOP_LINKS), *read_only)
    path = os.pathsep.join(
        entry
        for entry in environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
        if entry and any(os.path.realpath(entry) == b or os.path.realpath(entry).startswith(b + "/") for b in bound)
    )
    box = Sandbox(bwrap, version, setpriv, read_only, path or "/usr/local/bin:/usr/bin:/bin")
    with tempfile.TemporaryDirectory(prefix="receipt-ledger-probe-") as empty:
        probe = subprocess.run(
            box.argv(Path(empty), ["true"]),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={"PATH": box.path},
        )
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return "bwrap cannot make a sandbox here: %s" % (lines[-1] if lines else "exit %d" % probe.returncode)
    return box
