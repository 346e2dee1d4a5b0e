"""`ledger hook install|uninstall`: the hook configuration of Claude Code and Codex,
merged into what is there and removed again without touching anyone else's hooks.

Both agents read the same shape: ``{"hooks": {EVENT: [{"matcher": ..., "hooks":
[{"type": "command", "command": ..., "timeout": SECONDS}]}]}}``. Claude Code keeps it in
``.claude/settings.json`` (project) or ``~/.claude/settings.json`` (user), beside other
settings; Codex in ``.codex/hooks.json`` or ``$CODEX_HOME/hooks.json`` (``~/.codex``).
Ours are recognised by their command, ``ledger hook <event>``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._files import write_atomic
from ._hooks import CURRENT_TASK, EVENTS

__all__ = [
    "AGENTS",
    "HookInstall",
    "key_custody_warnings",
    "start_task",
    "readable_signing_keys",
    "install_hooks",
    "uninstall_hooks",
    "settings_path",
    "hook_command",
    "plugin_dir",
]

AGENTS = ("claude-code", "codex")
# Codex has no SessionEnd event; its SessionStart, Stop and tool events match Claude Code's.
_AGENT_EVENTS = {
    "claude-code": tuple(EVENTS),
    "codex": ("session-start", "pre-tool-use", "post-tool-use", "stop", "subagent-stop"),
}
# Seconds: a Stop runs the contract's checks; the other events must stay quick.
_TIMEOUTS = {"stop": 600, "subagent-stop": 600, "session-end": 60}
_DEFAULT_TIMEOUT = 30


# What the installed command runs: `ledger`'s entry point, by this interpreter's absolute
# path. `-P` keeps the project's own directory off the import path (run with `-m` or `-c`,
# Python would put it first, and a `ledger.py` the agent writes there would answer its own
# hooks); `-c` rather than `-m` spares every tool call the import of `runpy`.
_ENTRY = "from ledger._entry import main; main()"


def hook_command(event: str, runner: str | None = None) -> str:
    """The shell command an agent runs for ``event``, failing closed. ``runner`` is how
    ``ledger`` is run: by default this interpreter by its absolute path (an agent's PATH
    need not hold ``ledger``); the shipped plugin uses ``ledger`` from PATH. An agent
    treats a hook that exits with anything but 2 as a non-blocking error, so a hook that
    cannot run at all (126, 127: not found, moved, removed) exits 2 instead: the gate stays
    shut and says why, rather than silently letting the agent through.
    """
    run = runner if runner is not None else "%s -P -c %s" % (shlex.quote(sys.executable), shlex.quote(_ENTRY))
    said = "receipt-ledger: cannot run %s: blocking until it can (ledger hook install)" % (
        runner or "ledger with " + sys.executable
    ).replace("'", "")
    return "%s hook %s; rc=$?; if [ $rc -eq 126 ] || [ $rc -eq 127 ]; then echo '%s' >&2; exit 2; fi; exit $rc" % (
        run,
        event,
        said,
    )


def plugin_dir() -> Path:
    """The Claude Code plugin shipped with the package (``hooks/hooks.json`` inside)."""
    return Path(__file__).resolve().parent / "plugins" / "claude-code"


def settings_path(agent: str, scope: str, repo: Path | None, environ: dict[str, str] | None = None) -> Path:
    """Where ``agent`` reads its hooks for ``scope``: the repository's file (project) or
    the one in the home directory (user; Codex honours ``CODEX_HOME``).
    """
    env = os.environ if environ is None else environ
    if agent not in AGENTS:
        raise InputError("--agent is one of %s" % ", ".join(AGENTS))
    if scope == "project":
        if repo is None:
            raise InputError("--scope project needs a git repository (or use --scope user)")
        return repo / (".claude/settings.json" if agent == "claude-code" else ".codex/hooks.json")
    home = Path(env.get("HOME") or Path.home())
    if agent == "claude-code":
        return home / ".claude" / "settings.json"
    return Path(env["CODEX_HOME"]) / "hooks.json" if env.get("CODEX_HOME") else home / ".codex" / "hooks.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InputError("cannot read %s: %s" % (path, exc.strerror)) from None
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise InputError("%s is not valid JSON (%s): fix or move it first, nothing was written" % (path, exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("hooks", {}), dict):
        raise InputError("%s does not hold a JSON object with a hooks object: nothing was written" % path)
    return doc


def _write(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))


def _ours(handler: Any) -> bool:
    # The bare form of earlier releases, `python -m ledger hook`, and `hook_command`'s form.
    command = str(handler.get("command", "")) if isinstance(handler, dict) else ""
    return re.search(r"(^| )ledger hook [a-z-]+|%s' hook [a-z-]+" % re.escape(_ENTRY), command) is not None


@dataclass(frozen=True, slots=True)
class HookInstall:
    path: Path
    added: tuple[str, ...]  # event names written now (empty: already there)
    removed: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "added": list(self.added),
            "removed": list(self.removed),
            "warnings": list(self.warnings),
        }


def install_hooks(path: Path, agent: str, warnings: tuple[str, ...] = ()) -> HookInstall:
    """Add one matcher group per event calling ``ledger hook <event>``, unless it is there."""
    doc = _load(path)
    hooks = doc.setdefault("hooks", {})
    added = []
    for event in _AGENT_EVENTS[agent]:
        name = EVENTS[event]
        groups = hooks.setdefault(name, [])
        if not isinstance(groups, list):
            raise InputError("%s: hooks.%s is not a list: nothing was written" % (path, name))
        command = hook_command(event)
        if any(
            isinstance(g, dict) and any(isinstance(h, dict) and h.get("command") == command for h in g.get("hooks", []))
            for g in groups
        ):
            continue
        # An older handler of ours (the bare `ledger hook` form) is replaced, not doubled.
        groups[:] = [
            {**g, "hooks": [h for h in g["hooks"] if not _ours(h)]}
            if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            else g
            for g in groups
        ]
        groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        group: dict[str, Any] = {
            "hooks": [{"type": "command", "command": command, "timeout": _TIMEOUTS.get(event, _DEFAULT_TIMEOUT)}]
        }
        if name in ("PreToolUse", "PostToolUse"):
            group = {"matcher": "*", **group}
        groups.append(group)
        added.append(name)
    if added:
        _write(path, doc)
    return HookInstall(path, tuple(added), (), warnings)


def uninstall_hooks(path: Path) -> HookInstall:
    """Remove our handlers only; a group or event left empty by that goes too."""
    doc = _load(path)
    hooks = doc.get("hooks", {})
    removed = []
    for name in list(hooks):
        groups = hooks[name]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                kept_groups.append(group)
                continue
            kept = [h for h in group["hooks"] if not _ours(h)]
            if len(kept) != len(group["hooks"]):
                removed.append(name)
            if kept:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups:
            hooks[name] = kept_groups
        else:
            del hooks[name]
    if removed:
        if not hooks:
            doc.pop("hooks", None)
        _write(path, doc)
    return HookInstall(path, (), tuple(dict.fromkeys(removed)))


def readable_signing_keys(key_dir: Path, roles: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Warnings for private keys of the deterministic, judge, seal or admin roles that the
    agent's user can read: hooks run as that user, so the agent could sign with them.
    """
    out = []
    for name, key_roles in sorted(roles.items()):
        strong = [r for r in key_roles if r in ("deterministic", "judge", "seal", "admin")]
        path = key_dir / name
        if not strong or not path.is_file():
            continue
        try:
            readable = os.access(path, os.R_OK) and bool(path.stat().st_mode & stat.S_IRUSR)
        except OSError:
            continue
        if readable:
            out.append(
                "private key %s (%s) is readable here: the agent could sign as %s; keep only the agent key on"
                " the agent's machine" % (path, ", ".join(strong), "/".join(strong))
            )
    return tuple(out)


def key_custody_warnings(ledger_root: Path) -> tuple[str, ...]:
    """`readable_signing_keys` for this ledger's keyring and key directory (none if there
    is no ledger to read roles from).
    """
    from ..keys._key_files import key_dir
    from ..store._ledger import Ledger

    try:
        ledger = Ledger.open(ledger_root, read_only=True)
    except Exception:
        return ()
    try:
        roles = {s.spec.name: tuple(r.value for r in s.spec.roles) for s in ledger.keyring() if s.revoked_at is None}
    finally:
        ledger.close()
    return readable_signing_keys(key_dir(), roles)


def start_task(ledger_root: Path, task: str | None) -> None:
    """Write (or, with None, remove) ``.ledger/current-task``."""
    from receipts import FormatError, check_task_id

    path = ledger_root / CURRENT_TASK
    if task is None:
        path.unlink(missing_ok=True)
        return
    try:
        check_task_id(task)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    ledger_root.mkdir(parents=True, exist_ok=True)
    path.write_text(task + "\n", encoding="utf-8")
