"""The completion gate inside the agent's loop: `ledger hook <event>` for Claude Code and
Codex, which share one hook contract (a JSON payload on stdin; exit 2 or a JSON decision
on stdout blocks).

- PreToolUse: the one call against the contract's tool policy (`receipts.decide_tool_call`,
  the rule `ledger trace` applies to a whole trace). Denied: ``permissionDecision: deny``
  with the reason; needs a human: ``ask``; allowed: no output.
- PostToolUse: the call and a digest of its outcome appended to the session's trace, a
  hash-chained JSON Lines file under ``.ledger/traces/`` (arguments redacted).
- Stop, SubagentStop: the agent's claim recorded (agent key), the contract's checks run
  in advisory mode (nothing signed: the agent's box holds no deterministic key), and a
  stop blocked with the failing checks while the contract's repair budget lasts.
- SessionStart: the task's status and the nudge, as context for the agent.
- SessionEnd: the trace stored as evidence of a model_stopped event.

This module is on the hot path of every tool call: it imports at the top only what
PreToolUse needs, and everything else where it is used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._layout import CONTRACTS_DIR, DEFAULT_TASK_PATTERN, contract_path, find_task, task_pattern
from ._events import HOOK_EVENTS as EVENTS

if TYPE_CHECKING:
    from receipts import Contract, ToolPolicy

__all__ = [
    "EVENTS",
    "HookAnswer",
    "run_hook",
    "main",
    "answer_for",
    "finish",
    "closed_answer",
    "warm",
    "task_in",
    "select_task",
    "folds_case",
    "project_relative",
    "TRACE_DIR",
    "CURRENT_TASK",
]

TRACE_DIR = "traces"
STATE_DIR = "hooks"
CURRENT_TASK = "current-task"
_SESSION = re.compile(r"[^A-Za-z0-9._-]")
_ZERO = "0" * 64
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What the agent reads back: the exit code, and what to print on stdout and stderr;
    ``then``, work the agent need not wait for (closing the ledger once the claim is
    committed), which whoever delivers the answer runs after delivering it (`finish`).
    """

    code: int = 0
    stdout: str = ""
    stderr: str = ""
    then: Callable[[], None] | None = field(default=None, compare=False, repr=False)


class _CannotEvaluate(Exception):
    """The hook could not decide (no contract, a broken ledger, a malformed payload)."""


def _sha256(data: bytes) -> str:
    import hashlib  # only where a line is written: an allowed PreToolUse never needs it

    return hashlib.sha256(data).hexdigest()


def task_in(text: str, pattern: str = DEFAULT_TASK_PATTERN) -> str | None:
    """The first task id (``T-1``, ``ABC-123``, or the team's ``task_pattern``) in ``text``, in capitals, or None."""
    return find_task(text, pattern)


def _git_dir(start: Path) -> tuple[Path | None, Path | None]:
    """The work tree's root and its git directory, found without running git."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return folder, dot
        if dot.is_file():
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                target = Path(text[7:].strip())
                return folder, target if target.is_absolute() else folder / target
    return None, None


def _branch(git_dir: Path | None) -> str:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip() if git_dir else ""
    except OSError:
        return ""
    return head[len("ref: refs/heads/") :] if head.startswith("ref: refs/heads/") else ""


def select_task(environ: Mapping[str, str], ledger_dir: Path, git_dir: Path | None) -> str | None:
    """``LEDGER_TASK``, else ``.ledger/current-task`` (`ledger task start`), else a task id
    in the branch name.
    """
    if environ.get("LEDGER_TASK", "").strip():
        return environ["LEDGER_TASK"].strip()
    try:
        chosen = (ledger_dir / CURRENT_TASK).read_text(encoding="utf-8").strip()
    except OSError:
        chosen = ""
    if chosen:
        return chosen
    try:
        pattern = task_pattern(ledger_dir)
    except ValueError:
        # A broken pattern must not switch the gate off: the default ids still count here
        # (CI refuses the pattern with its own message).
        pattern = DEFAULT_TASK_PATTERN
    return task_in(_branch(git_dir), pattern)


@dataclass(frozen=True, slots=True)
class _Where:
    repo: Path  # the project: resolved, found from the hook's own directory, never the payload
    ledger_dir: Path
    task: str
    session: str
    environ: Mapping[str, str]
    call_dir: Path | None = None  # the payload's cwd, resolved; None when it lies outside the project

    @property
    def trace(self) -> Path:
        return self.ledger_dir / TRACE_DIR / (self.session + ".jsonl")

    @property
    def state_file(self) -> Path:
        return self.ledger_dir / STATE_DIR / (self.session + ".json")


def _contract_file(where: _Where) -> tuple[bytes, str] | None:
    """The task's contract: the working tree's file, else (the agent removed it, or never
    had it) the copy committed on the target branch, which CI holds it to anyway.
    """
    path = contract_path(where.ledger_dir, where.task)
    try:
        return path.read_bytes(), str(path)
    except FileNotFoundError:
        return _committed_contract(where, path)
    except OSError as exc:
        raise _CannotEvaluate("cannot read %s: %s" % (path, exc.strerror)) from None


def _committed_contract(where: _Where, path: Path) -> tuple[bytes, str] | None:
    import subprocess

    try:
        named = path.resolve().relative_to(where.repo.resolve()).as_posix()
    except ValueError:
        return None  # a ledger outside the project: no branch holds its contracts
    for branch in ("origin/main", "main"):
        try:
            shown = subprocess.run(
                ["git", "show", "%s:%s" % (branch, named)], cwd=where.repo, capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if shown.returncode == 0:
            return shown.stdout, "%s:%s" % (branch, named)
    return None


def _parsed(where: _Where, parse: Callable[[bytes, str], _T]) -> _T | None:
    """The task's contract file through ``parse`` (None if there is none); a file that
    does not parse cannot be evaluated.
    """
    found = _contract_file(where)
    if found is None:
        return None
    from receipts import ContractError

    try:
        return parse(*found)
    except (ContractError, ValueError) as exc:
        raise _CannotEvaluate("contract %s does not parse: %s" % (Path(found[1]).name, exc)) from None


def _contract(where: _Where) -> Contract | None:
    """The whole contract (the Stop hook runs its checks)."""
    from receipts import parse_contract

    return _parsed(where, parse_contract)


def _rules(where: _Where) -> tuple[ToolPolicy, tuple[str, ...], tuple[str, ...]] | None:
    """The contract's tool policy, protected paths and secret names, read with the
    contract parser's own functions without building the whole contract (this runs on
    every tool call).
    """
    from receipts import tool_rules

    return _parsed(where, tool_rules)


def _secret_names(where: _Where) -> tuple[str, ...]:
    # PostToolUse records a call that has happened: a contract it cannot read still leaves
    # the built-in token patterns to redact with.
    try:
        rules = _rules(where)
    except _CannotEvaluate:
        return ()
    return rules[2] if rules is not None else ()


def _redacted(value: Any, secret_names: tuple[str, ...], environ: Mapping[str, str]) -> Any:
    import io

    from ..tiers._redact import Redactor

    text = json.dumps(value, sort_keys=True)
    out = io.BytesIO()
    Redactor(secret_names, environ).copy(io.BytesIO(text.encode()), out)
    try:
        return json.loads(out.getvalue())
    except ValueError:
        return out.getvalue().decode("utf-8", "replace")


def _append(where: _Where, row: dict[str, Any]) -> int:
    """Append one line to the session's hash-chained trace (under a lock: an agent may run
    tools in parallel); the line's step number. Only the trace's last line is read: a hook
    runs on every tool call, and a long session must not make each one slower.
    """
    import fcntl

    where.trace.parent.mkdir(parents=True, exist_ok=True)
    with open(where.trace, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        last = _last_line(handle)
        prev = _sha256(last) if last is not None else _ZERO
        seq = _seq_after(handle, last)
        line = json.dumps({**row, "seq": seq, "prev": prev}, sort_keys=True, separators=(",", ":"))
        handle.write(line.encode() + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
        return seq


def _last_line(handle: Any) -> bytes | None:
    """The file's last line (without its newline), read from the end; None when empty."""
    end = handle.seek(0, os.SEEK_END)
    size = 4096
    while end:
        start = max(0, end - size)
        handle.seek(start)
        body = handle.read(end - start).rstrip(b"\n")
        cut = body.rfind(b"\n")
        if cut >= 0 or start == 0:
            return body[cut + 1 :] if body else None
        size *= 4
    return None


def _seq_after(handle: Any, last: bytes | None) -> int:
    """The next step number: one after the last line's own ``seq``; a last line that does
    not say (a damaged trace) is counted the slow way, as the whole file's lines.
    """
    if last is None:
        return 1
    try:
        seq = json.loads(last)["seq"]
        if isinstance(seq, int) and not isinstance(seq, bool):
            return seq + 1
    except (ValueError, KeyError, TypeError):
        pass
    handle.seek(0)
    return len(handle.read().splitlines()) + 1


def _steps(where: _Where) -> int:
    try:
        with open(where.trace, "rb") as handle:
            return _seq_after(handle, _last_line(handle)) - 1
    except FileNotFoundError:
        return 0


# -- the events ----------------------------------------------------------------------------------


def folds_case(folder: Path) -> bool:
    """Whether the file system holding ``folder`` treats names differing only in case as one
    (macOS and Windows by default): probed on the project's own .git or .ledger entry.
    """
    for name in (".git", ".ledger"):
        try:
            return os.path.samefile(folder / name, folder / name.upper())
        except OSError:
            continue
    return False


def project_relative(
    repo: Path, call_dir: Path | None, tool: str, args: Any, protected: tuple[str, ...], fold: bool | None = None
) -> tuple[Any, tuple[str, ...]]:
    """A write tool's arguments with its path resolved to the project-relative form the
    protected globs are written in, and those globs; other tools' arguments unchanged.

    The path is resolved, not compared: a relative path against the payload's cwd, then
    ``..`` and symbolic links on the real file system; where the file system folds case
    (``fold``, probed when None) the path and the globs are both case-folded.

    Args:
        repo: the project's resolved root.
        call_dir: the payload's resolved cwd, or None when it lies outside the project.
        tool: the tool's name; only `receipts.WRITE_TOOLS` write a named file.
        args: the tool's input as the payload gives it.
        protected: the contract's protected path globs.
        fold: whether the file system folds case (None: `folds_case` probes it).

    Returns:
        The arguments and the globs to decide the call with (`receipts.decide_tool_call`).

    Raises:
        _CannotEvaluate: a write whose path is missing or not a string, a payload whose cwd
            lies outside the project, or a path that cannot be resolved.
    """
    from receipts import WRITE_TOOLS

    name = WRITE_TOOLS.get(tool)
    if name is None:
        return args, protected
    value = args.get(name) if isinstance(args, dict) else None
    if not isinstance(value, str) or not value or "\x00" in value:
        raise _CannotEvaluate("%s names no file to write (%s)" % (tool, name))
    if call_dir is None:
        raise _CannotEvaluate("the payload's cwd lies outside the project %s" % repo)
    try:
        real = (call_dir / value).resolve()
    except (OSError, RuntimeError) as exc:  # a symbolic-link loop, an unreadable folder
        raise _CannotEvaluate("cannot resolve %s: %s" % (value, exc)) from None
    try:
        relative = real.relative_to(repo).as_posix()
    except ValueError:
        relative = real.as_posix()  # outside the project: no protected glob (they are relative) matches
    if folds_case(repo) if fold is None else fold:
        return {**args, name: relative.casefold()}, tuple(g.casefold() for g in protected)
    return {**args, name: relative}, protected


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _permission(decision: str, reason: str) -> HookAnswer:
    doc = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": "receipt-ledger: " + reason,
        }
    }
    return HookAnswer(0, json.dumps(doc) + "\n")


# What an agent never writes, whatever its contract says: the agents' own hook settings
# (a write there could switch the gate off). The ledger's folder is added per project.
_AGENT_SETTINGS = (".claude/settings.json", ".claude/settings.local.json", ".codex/hooks.json", ".codex/config.toml")


def _always_protected(where: _Where) -> tuple[str, ...]:
    """The ledger's own files (its database, contracts, trust pin, config, traces) and the
    agents' hook settings, as globs relative to the project.
    """
    try:
        ledger = where.ledger_dir.resolve().relative_to(where.repo.resolve()).as_posix()
    except ValueError:
        return _AGENT_SETTINGS  # a ledger outside the project is out of the agent's reach here
    return (ledger + "/*", *_AGENT_SETTINGS)


def _pre_tool_use(where: _Where, payload: dict[str, Any] | None, problem: str | None) -> HookAnswer:
    try:
        rules = _rules(where)
    except _CannotEvaluate as exc:
        return _permission("deny", "cannot evaluate the tool policy: %s" % exc)
    from receipts import REJECTED, REQUIRES_HUMAN, decide_tool_call

    if rules is None:
        # A task with no contract is blocked, not open: nothing says what it may do.
        return _permission(
            "deny",
            "task %s has no contract (%s, nor on main): it is blocked until its contract is committed"
            % (where.task, contract_path(where.ledger_dir, where.task)),
        )
    policy, protected, secrets = rules
    protected = (*protected, *_always_protected(where))
    tool = payload.get("tool_name") if payload else None
    if problem is not None or not isinstance(tool, str):
        return _permission("deny", "cannot evaluate this call: %s" % (problem or "the payload names no tool"))
    args = payload.get("tool_input", {}) if payload else {}
    try:
        seen_args, seen_protected = project_relative(where.repo, where.call_dir, tool, args, protected)
    except _CannotEvaluate as exc:
        return _permission("deny", "cannot evaluate this call: %s" % exc)
    decided = decide_tool_call(policy, _steps(where) + 1, tool, seen_args, seen_protected)
    if decided.decision not in (REJECTED, REQUIRES_HUMAN):
        return HookAnswer()
    _append(
        where,
        {
            "event": "PreToolUse",
            "time": int(time.time()),
            "tool": tool,
            "arguments": _redacted(args, secrets, where.environ),
            "tool_use_id": str((payload or {}).get("tool_use_id") or ""),
            "decision": decided.decision,
            "reason": decided.reason,
        },
    )
    return _permission("deny" if decided.decision == REJECTED else "ask", decided.reason)


def _post_tool_use(where: _Where, payload: dict[str, Any] | None, problem: str | None) -> HookAnswer:
    if payload is None or not isinstance(payload.get("tool_name"), str):
        return HookAnswer(1, "", "receipt-ledger: PostToolUse not recorded: %s\n" % (problem or "no tool_name"))
    response = json.dumps(payload.get("tool_response"), sort_keys=True, separators=(",", ":"), default=str)
    _append(
        where,
        {
            "event": "PostToolUse",
            "time": int(time.time()),
            "tool": payload["tool_name"],
            "arguments": _redacted(payload.get("tool_input", {}), _secret_names(where), where.environ),
            "tool_use_id": str(payload.get("tool_use_id") or ""),
            "decision": "executed",
            "output_sha256": _sha256(response.encode()),
        },
    )
    return HookAnswer()


def _state(where: _Where) -> dict[str, Any]:
    try:
        loaded = json.loads(where.state_file.read_text(encoding="utf-8"))
        return loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(where: _Where, state: dict[str, Any]) -> None:
    from .._files import write_atomic

    # Not flushed to the disk, which every Stop would pay for: a power loss may only reset
    # the repair count (more repair rounds, never fewer blocks) and the model, since
    # `_state` reads a missing or empty file as none.
    write_atomic(where.state_file, json.dumps(state, sort_keys=True).encode("utf-8"), durable=False)


def _open_ledger(where: _Where, read_only: bool = False) -> Any:
    from .._config import shared_store
    from ..store._ledger import Ledger

    store = shared_store(where.ledger_dir, where.environ.get("LEDGER_STORE"))
    return Ledger.open(where.ledger_dir, read_only=read_only, store=store)


class _Candidate:
    """The candidate HEAD names, resolved by git in a thread: a Stop starts it before its
    checks run and reads it when it records the claim, so the git process runs beside the
    checks instead of after them.
    """

    def __init__(self, repo: Path) -> None:
        import threading

        self._found: list[Any] = []
        self._thread = threading.Thread(target=self._resolve, args=(repo,), daemon=True)
        self._thread.start()

    def _resolve(self, repo: Path) -> None:
        from receipts import candidate_hash

        from .._git import resolve_candidate
        from ..git._loose import head_candidate

        try:
            fields = head_candidate(repo, os.environ)
            self._found.append(resolve_candidate("HEAD", repo) if fields is None else candidate_hash(fields))
        except Exception as exc:  # raised where the claim is recorded, and reported there
            self._found.append(exc)

    def result(self) -> Any:
        self._thread.join()
        if isinstance(self._found[0], Exception):
            raise self._found[0]
        return self._found[0]


class _Recording:
    """The agent's key loaded and the ledger opened, for one signed event. A Stop makes it
    before its checks run, beside git resolving the candidate; a failure to load or open
    is kept and raised by `record`, where a claim that cannot be recorded is reported.
    """

    def __init__(self, where: _Where) -> None:
        from ..keys._key_files import load_signer

        self.where, self.ledger, self.failure = where, None, None
        try:
            self.signer = load_signer(where.environ.get("LEDGER_AGENT_KEY", "agent"))
            self.ledger = _open_ledger(where)
        except Exception as exc:  # raised by record, and reported there
            self.failure = exc

    def record(self, kind: str, fields: dict[str, str], attachment: bytes | None, candidate: _Candidate | None) -> str:
        """Append the agent-signed event (a claim, on ``candidate``, or a stop); its entry number as text."""
        from receipts import EventType

        from ..ladder._events import record_event

        if self.failure is not None:
            raise self.failure
        if self.ledger is None:
            raise _CannotEvaluate("the ledger is not open")
        etype = EventType.ANSWER_PROPOSED if kind == "claim" else EventType.MODEL_STOPPED
        claimed = candidate.result() if candidate is not None else None
        appended = record_event(
            self.ledger, self.signer, self.where.task, etype, claimed, fields, attachment=attachment
        )
        return str(appended.seq)

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()


def _stop(where: _Where, payload: dict[str, Any] | None, problem: str | None, event: str) -> HookAnswer:
    state = _state(where)
    active = bool(payload and payload.get("stop_hook_active"))
    turn = (payload or {}).get("turn_id")
    if not active and (turn is None or turn != state.get("turn")):
        # A fresh stop (a new turn), not the continuation of a repair loop we started. Within
        # one turn (Codex names it) the count goes on, whatever the flag says: a harness
        # that never sets it must not get an endless loop.
        state["blocks"] = 0
    state["turn"] = turn
    # git resolves the candidate while the key loads, the ledger opens and the checks run.
    candidate = _Candidate(where.repo)
    recording = _Recording(where)
    try:
        advice = _advisory(where, problem)
        blocks = int(state.get("blocks") or 0)
        stops = advice.verdict in ("pass", "deferred")
        outcome = "stopped" if stops else ("blocked" if blocks < advice.repairs else "budget-spent")
        fields = {
            "session": where.session,
            "hook": event,
            "advisory": advice.verdict,
            "failing": str(len(advice.failing)) if advice.verdict == "fail" else "0",
            "outcome": outcome,
            "verified": "advisory-pass" if advice.verdict == "pass" else "no",
        }
        if advice.deferred:
            fields["deferred"] = str(len(advice.deferred))
        recorded = _claimed(recording, fields, _claim_context(payload or {}, state, fields), candidate)
        return _stop_answer(where, state, advice, (outcome, recorded, blocks), recording.close)
    except BaseException:
        recording.close()
        raise


def _stop_answer(
    where: _Where,
    state: dict[str, Any],
    advice: _Advice,
    decided: tuple[str, str | None, int],
    then: Callable[[], None],
) -> HookAnswer:
    """The Stop's answer from its checks and its recorded claim, the repair count saved."""
    outcome, recorded, blocks = decided
    failing, budget = advice.failing, advice.repairs
    later = (
        "Deferred to CI: %s." % "; ".join("%s (%s)" % (check, why) for check, why in advice.deferred)
        if advice.deferred
        else ""
    )
    # A claim that could not be recorded is not a failing check: the agent cannot repair the
    # key's place. It is said once, to the agent with the checks and to the user.
    unrecorded = "receipt-ledger: %s" % recorded if recorded is not None else ""
    if outcome == "blocked":
        state["blocks"] = blocks + 1
        _save_state(where, state)
        table = "\n".join("- %s: %s" % (check, why) for check, why in failing)
        reason = (
            "receipt-ledger: %s is not done: %d check(s) of its contract fail (repair attempt %d of %d):\n%s\n"
            "Fix them, then stop again. (Advisory: the signed checks still run in CI.)"
            % (where.task, len(failing), blocks + 1, budget, table)
        )
        reason += "\n" + later if later else ""
        reason += "\n" + unrecorded if unrecorded else ""
        doc = {"decision": "block", "reason": reason, **({"systemMessage": unrecorded} if unrecorded else {})}
        return HookAnswer(0, json.dumps(doc) + "\n", then=then)
    state["blocks"] = 0
    _save_state(where, state)
    claim = "no claim recorded" if unrecorded else "claim recorded"
    if outcome == "budget-spent":
        kept = "no claim recorded" if unrecorded else "the claim recorded as unverified"
        said = ["receipt-ledger: repair budget of %d spent; stopping with %s" % (budget, kept)]
        said += [later] if later else []
    elif later:
        what = "the %d check(s) run pass (advisory)" % advice.ran if advice.ran else "no check ran within the budget"
        said = ["receipt-ledger: %s; %s. %s" % (claim, what, later)]
    else:
        said = ["receipt-ledger: %s; the checks pass (advisory)" % claim]
    if not unrecorded:
        return HookAnswer(0, "", "\n".join(said) + "\n", then=then)
    warning = "%s; %s" % (unrecorded, _KEY_HINT)
    return HookAnswer(0, json.dumps({"systemMessage": warning}) + "\n", "\n".join([*said, warning]) + "\n", then)


_KEY_HINT = (
    "the agent's key is `agent` in ~/.config/receipt-ledger/keys (or LEDGER_AGENT_KEY: a key name or a file),"
    " its public half added by an admin (docs/agents.md)"
)


def _claimed(
    recording: _Recording, fields: dict[str, str], attachment: bytes | None, candidate: _Candidate
) -> str | None:
    """Record the claim; None, or why it could not be recorded."""
    try:
        recording.record("claim", fields, attachment, candidate)
    except Exception as exc:  # said to the agent, and the stop blocked while the budget lasts
        return "the claim could not be recorded: %s" % (str(exc).splitlines() or [type(exc).__name__])[0]
    return None


@dataclass(frozen=True, slots=True)
class _Advice:
    """The Stop's unsigned run of the contract's checks."""

    failing: tuple[tuple[str, str], ...]  # (check id, why), for the agent
    verdict: str  # pass, fail, unevaluated, or deferred (nothing failed, some left to CI)
    repairs: int  # the contract's repair budget
    deferred: tuple[tuple[str, str], ...] = ()  # (check id, why) left to CI by the time budget
    ran: int = 0  # how many checks ran


def _advisory(where: _Where, problem: str | None) -> _Advice:
    """Run the contract's checks unsigned, within its Stop budget when it sets one."""
    repairs = 5
    try:
        if problem is not None:
            raise _CannotEvaluate(problem)
        contract = _contract(where)
        if contract is None:
            raise _CannotEvaluate("no contract for %s in %s" % (where.task, where.ledger_dir / CONTRACTS_DIR))
        repairs = contract.repair_attempts
        from ..tiers._deterministic import run_in_loop

        run = run_in_loop(where.repo, contract, environ=dict(where.environ), budget_s=contract.stop_budget_s)
        failing = tuple((check, _with_output(why, tail)) for check, ok, why, tail in run.rows if not ok)
        verdict = "fail" if failing else ("deferred" if run.deferred else "pass")
        return _Advice(failing, verdict, repairs, run.deferred, len(run.rows))
    except Exception as exc:  # a check runner that breaks is a reason to keep going, within the budget
        why = "cannot evaluate: %s" % (str(exc).splitlines() or [type(exc).__name__])[0]
        return _Advice((("(hook)", why),), "unevaluated", repairs)


def _with_output(why: str, tail: str) -> str:
    """A failing check's reason with the last lines it printed, indented under it."""
    if not tail:
        return why
    return "%s; its last output:\n%s" % (why, "\n".join("    " + line for line in tail.splitlines()))


def _claim_context(payload: dict[str, Any], state: dict[str, Any], fields: dict[str, str]) -> bytes | None:
    """Add the model and the transcript's digest to the claim's fields; the agent's last
    message, the claim's attachment, if the harness gave one.
    """
    model = payload.get("model") or state.get("model")
    if isinstance(model, str) and model:
        fields["model"] = model[:200]
    message = payload.get("last_assistant_message")
    attachment = message.encode() if isinstance(message, str) and message else None
    transcript = payload.get("transcript_path")
    if attachment is None and isinstance(transcript, str) and transcript:
        try:
            fields["transcript_sha256"] = _sha256(Path(transcript).read_bytes())
        except OSError:
            fields["transcript_sha256"] = "unreadable"
    return attachment


def _session_start(where: _Where, payload: dict[str, Any] | None) -> HookAnswer:
    state = _state(where)
    model = (payload or {}).get("model")
    if isinstance(model, str) and model and state.get("model") != model:
        state["model"] = model
        _save_state(where, state)
    from ..ladder._status import status_report
    from ..views._render import status_lines

    ledger = None
    try:
        ledger = _open_ledger(where, read_only=True)
        lines = status_lines(status_report(ledger, where.task))
    except Exception as exc:  # the agent starts either way, told why there is no status
        lines = ["the ledger cannot be read: %s" % (str(exc).splitlines() or [type(exc).__name__])[0]]
    except BaseException:
        if ledger is not None:
            ledger.close()
        raise
    text = "receipt-ledger: task %s. Its status, from the chain:\n%s\n" % (where.task, "\n".join(lines))
    text += "Your claim of done is checked against the contract's checks when you stop.\n"
    doc = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return HookAnswer(0, json.dumps(doc) + "\n", then=None if ledger is None else ledger.close)


def _session_end(where: _Where, payload: dict[str, Any] | None) -> HookAnswer:
    try:
        data = where.trace.read_bytes()
    except FileNotFoundError:
        data = b""
    lines = data.splitlines()
    fields = {
        "reason": "session end: %s" % str((payload or {}).get("reason") or "unknown")[:100],
        "session": where.session,
        "calls": str(len(lines)),
        "trace_head": _sha256(lines[-1]) if lines else _ZERO,
    }
    recording = _Recording(where)
    try:
        recording.record("stop", fields, data or None, None)
    except Exception as exc:
        recording.close()
        return HookAnswer(1, "", "receipt-ledger: the session's trace was not recorded: %s\n" % exc)
    except BaseException:
        recording.close()
        raise
    said = "receipt-ledger: the session's trace (%d calls) is stored as evidence\n" % len(lines)
    return HookAnswer(0, "", said, recording.close)


def run_hook(event: str, raw: bytes, environ: Mapping[str, str], cwd: Path | None = None) -> HookAnswer:
    """One hook invocation: ``event`` (a key of `EVENTS`), the payload's bytes, the
    environment. Never raises for a bad payload: the answer says why. Returns when all of
    its work is done (its ``then`` already run).
    """
    answer = _answer(event, raw, environ, cwd)
    finish(answer)
    return HookAnswer(answer.code, answer.stdout, answer.stderr)


def finish(answer: HookAnswer) -> None:
    """Run the work ``answer`` left for after its delivery. Nothing the agent was told
    depends on it (the claim is committed before the answer exists), so a failure here
    changes no answer.
    """
    if answer.then is not None:
        with contextlib.suppress(Exception):  # closing a committed ledger: nothing to tell anyone
            answer.then()


def _answer(event: str, raw: bytes, environ: Mapping[str, str], cwd: Path | None = None) -> HookAnswer:
    name = EVENTS[event]
    payload: dict[str, Any] | None = None
    problem = None
    try:
        loaded = json.loads(raw)
        if isinstance(loaded, dict):
            payload = loaded
        else:
            problem = "the payload is not a JSON object"
    except (ValueError, UnicodeDecodeError) as exc:
        problem = "the payload is not JSON (%s)" % exc
    if payload is not None and payload.get("hook_event_name") not in (None, name):
        problem = "the payload is for %r, not %s" % (payload.get("hook_event_name"), name)
    # The project is where the agent's harness runs the hook (Claude Code also names it in
    # CLAUDE_PROJECT_DIR), never the payload's word: a payload whose cwd lies elsewhere would
    # otherwise find no contract there, and allow everything.
    start = Path(environ.get("CLAUDE_PROJECT_DIR") or cwd or Path.cwd()).resolve()
    repo, git_dir = _git_dir(start)
    root = repo or start
    said = Path(str(payload["cwd"])) if payload and isinstance(payload.get("cwd"), str) and payload["cwd"] else None
    call_dir = root if said is None else (said if said.is_absolute() else root / said).resolve()
    ledger_dir = Path(environ["LEDGER_DIR"]) if environ.get("LEDGER_DIR") else root / ".ledger"
    task = select_task(environ, ledger_dir, git_dir)
    if task is None:
        if name == "SessionStart":
            note = (
                "receipt-ledger: no task selected (LEDGER_TASK, `ledger task start TASK`, or a task id in the"
                " branch name); the completion gate does nothing this session.\n"
            )
            return HookAnswer(0, json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": note}}))
        return HookAnswer()
    session = _SESSION.sub("_", str((payload or {}).get("session_id") or "unknown-session"))[:128]
    where = _Where(root, ledger_dir, task, session, environ, call_dir if _inside(call_dir, root) else None)
    if name == "PreToolUse":
        return _pre_tool_use(where, payload, problem)
    if name == "PostToolUse":
        return _post_tool_use(where, payload, problem)
    if name in ("Stop", "SubagentStop"):
        return _stop(where, payload, problem, name)
    if name == "SessionStart":
        return _session_start(where, payload)
    return _session_end(where, payload)


def closed_answer(event: str, reason: str) -> HookAnswer:
    """The answer of a hook that could not evaluate ``event``: it fails closed. A tool
    call is denied and a stop blocked (both say why); the other events exit 1.
    """
    said = "receipt-ledger could not evaluate %s: %s" % (EVENTS[event], reason)
    if event == "pre-tool-use":
        return _permission("deny", said[len("receipt-ledger ") :])
    if event in ("stop", "subagent-stop"):
        return HookAnswer(0, json.dumps({"decision": "block", "reason": said}) + "\n")
    return HookAnswer(1, "", said + "\n")


def answer_for(event: str, raw: bytes, environ: Mapping[str, str]) -> HookAnswer:
    """`run_hook` that never raises (a hook that fails unexpectedly still answers, closed),
    and that leaves the answer's ``then`` to the caller, to run after delivering it.
    """
    try:
        return _answer(event, raw, environ)
    except Exception as exc:  # never a traceback into the agent's loop
        return closed_answer(event, (str(exc).splitlines() or [type(exc).__name__])[0])


def main(event: str, environ: Mapping[str, str] | None = None) -> int:
    """`ledger hook EVENT` in this process: the payload from stdin, the answer to stdout
    and stderr, the exit code returned.
    """
    answer = answer_for(event, sys.stdin.buffer.read(), os.environ if environ is None else environ)
    sys.stdout.write(answer.stdout)
    sys.stderr.write(answer.stderr)
    sys.stdout.flush()
    finish(answer)
    return answer.code


def warm() -> None:
    """Import what the hooks import where they use it: the resident process
    (`_resident`) loads these once, so that no hook it answers pays for them.
    """
    import contextlib
    import fcntl
    import hashlib
    import io
    import tempfile

    from cryptography.hazmat.primitives.serialization import ssh

    import receipts

    from .._config import shared_store
    from .._files import write_atomic
    from .._git import resolve_candidate
    from ..git._loose import head_candidate
    from ..keys._key_files import load_signer
    from ..keys._ssh_agent import AgentSigner
    from ..ladder._events import record_event
    from ..ladder._status import status_report
    from ..store._ledger import Ledger
    from ..tiers._deterministic import run_in_loop
    from ..tiers._redact import Redactor
    from ..views._render import status_lines

    del fcntl, hashlib, io, tempfile, ssh, AgentSigner, shared_store, write_atomic, resolve_candidate, load_signer
    del head_candidate
    del record_event, status_report, Ledger, run_in_loop, Redactor, status_lines
    task_in("", DEFAULT_TASK_PATTERN)  # the compiled pattern is kept in `re`'s cache
    for name in (
        *("Contract", "ContractError", "EventType", "ToolPolicy", "decide_tool_call", "parse_contract"),
        *("tool_rules", "WRITE_TOOLS", "REJECTED", "REQUIRES_HUMAN"),
    ):
        getattr(receipts, name)
    with contextlib.suppress(ImportError):  # the shared store's driver, when installed
        import psycopg

        del psycopg
