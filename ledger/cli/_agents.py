"""The agent's loop: `hook`, `task`, `claim`, `stopped`, `trace`, `evidence`, `effect`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from receipts import (
    EventType,
)

from .. import _api as lib
from ..agents._hooks import EVENTS as HOOK_EVENTS
from ._group import cli
from ._options import _FILE, F, _TrustArgs, contract_option, input_option, json_option, key_option, trust_option
from ._output import emit, exit_with
from ._shared import _candidate, _Group, _here, _ledger, _repo, _required_contract, _root, _signer, _trust


@cli.group(cls=_Group)
def hook() -> None:
    """The completion gate inside an agent's loop (Claude Code, Codex): `ledger hook EVENT`
    reads the agent's JSON payload on stdin; `install` writes the agent's configuration.
    """


def _hook_event(event: str) -> None:
    @hook.command(event, help="The %s hook: the agent's JSON payload on stdin." % HOOK_EVENTS[event])
    @click.pass_context
    def run(ctx: click.Context) -> None:
        from ..agents._hooks import main as hook_main

        # `ledger --dir D hook EVENT` (the plain form skips click: see ledger._entry).
        chosen = ctx.find_root().params.get("ledger_dir")
        sys.exit(hook_main(event, {**os.environ, "LEDGER_DIR": str(chosen)} if chosen else None))


for _event in HOOK_EVENTS:
    _hook_event(_event)


def _agent_options(f: F) -> F:
    f = click.option(
        "--scope",
        type=click.Choice(["project", "user"]),
        default="project",
        show_default=True,
        help="project: the repository's settings (commit them for the team); user: your home directory's.",
    )(f)
    return click.option("--agent", required=True, type=click.Choice(["claude-code", "codex"]))(f)


@hook.command("install")
@_agent_options
@json_option
@click.pass_context
def hook_install(ctx: click.Context, agent: str, scope: str, as_json: bool) -> None:
    """Write the agent's hook configuration (merged, idempotent), and warn about signing
    keys the agent could read.
    """
    path = lib.settings_path(agent, scope, _here())
    warnings = lib.key_custody_warnings(_root(ctx))
    res = lib.install_hooks(path, agent, warnings)
    for line in res.warnings:
        click.echo("warning: %s" % line, err=True)
    emit(
        as_json,
        res.as_dict(),
        ["%s: %s" % (path, ("added " + ", ".join(res.added)) if res.added else "already installed, nothing changed")],
    )


@hook.command("uninstall")
@_agent_options
@json_option
def hook_uninstall(agent: str, scope: str, as_json: bool) -> None:
    """Remove the handlers `hook install` added, and nothing else."""
    path = lib.settings_path(agent, scope, _here())
    res = lib.uninstall_hooks(path)
    emit(
        as_json,
        res.as_dict(),
        ["%s: %s" % (path, ("removed " + ", ".join(res.removed)) if res.removed else "none of ours, nothing changed")],
    )


@cli.group(cls=_Group)
def task() -> None:
    """Which task this working copy is on (the agent hooks read it)."""


@task.command("start")
@click.argument("task_id", metavar="TASK")
@click.pass_context
def task_start(ctx: click.Context, task_id: str) -> None:
    """Select TASK for this working copy (.ledger/current-task, not committed)."""
    lib.start_task(_root(ctx), task_id)
    click.echo("current task: %s" % task_id)


@task.command("stop")
@click.pass_context
def task_stop(ctx: click.Context) -> None:
    """Clear the selected task."""
    lib.start_task(_root(ctx), None)
    click.echo("no current task")


@cli.command()
@click.argument("task")
@key_option("The agent's key (role agent)")
@click.option("--summary", type=_FILE, help="The agent's own summary (stored, never believed).")
@input_option("The candidate claimed as done.")
@click.pass_context
def claim(ctx: click.Context, task: str, key_name: str, summary: Path | None, input_spec: str) -> None:
    """Record the agent's claim that the task is done (answer_proposed)."""
    appended = lib.record_event(
        _ledger(ctx), _signer(key_name), task, EventType.ANSWER_PROPOSED, _candidate(input_spec), attachment=summary
    )
    click.echo("claim recorded at entry %d: it proves nothing until the ladder runs" % appended.seq)


@cli.command()
@click.argument("task")
@key_option("The agent's key (role agent)")
@click.option("--reason", default="", help="Why the model stopped (end of turn, budget, error).")
@click.pass_context
def stopped(ctx: click.Context, task: str, key_name: str, reason: str) -> None:
    """Record that the model stopped (which is not a claim of success)."""
    appended = lib.record_event(
        _ledger(ctx), _signer(key_name), task, EventType.MODEL_STOPPED, None, {"reason": reason}
    )
    click.echo("model_stopped recorded at entry %d" % appended.seq)


@cli.command()
@click.argument("task")
@click.argument("trace_file", type=_FILE)
@key_option("The deterministic runner's key: it decides each call")
@contract_option
@input_option()
@json_option
@click.pass_context
def trace(
    ctx: click.Context,
    task: str,
    trace_file: Path,
    key_name: str,
    contract_path: Path | None,
    input_spec: str,
    as_json: bool,
) -> None:
    """Ingest an agent's tool-call log (JSON Lines) and decide each call against the contract's tool policy.

    Exit 0 if every call was approved, 1 otherwise.
    """
    _, data = _required_contract(ctx, task, contract_path)
    repo = _here()
    _, decisions = lib.ingest_trace(
        _ledger(ctx), _signer(key_name), task, data, trace_file, _candidate(input_spec), repo
    )
    emit(as_json, [d.as_dict() for d in decisions], lib.trace_lines(decisions))
    exit_with(all(d.decision == "approved" for d in decisions))


@cli.group(cls=_Group)
def evidence() -> None:
    """The agents' own records, taken as evidence."""


@evidence.command("add")
@click.argument("task")
@click.option("--agent-trace", "agent_trace", type=_FILE, help="An Agent Trace record (JSON).")
@click.option("--git-ai", "git_ai", is_flag=True, help="The git-ai note (refs/notes/ai) of the --input commit.")
@click.option("--entire", "entire", metavar="ID", help="An Entire checkpoint (entire/checkpoints/v1).")
@key_option("The agent's key (role agent)")
@input_option("The candidate the record describes (and, with --git-ai, whose note to read).")
@json_option
@click.pass_context
def evidence_add(
    ctx: click.Context,
    task: str,
    agent_trace: Path | None,
    git_ai: bool,
    entire: str | None,
    key_name: str,
    input_spec: str,
    as_json: bool,
) -> None:
    """Validate an agent's provenance record and store it under a signed provenance event.

    The contract's attribution_declared check and the judge's different-family rule read it.
    """
    added = lib.add_provenance(
        _ledger(ctx),
        _signer(key_name),
        task,
        _candidate(input_spec),
        repo=_repo(),
        agent_trace=agent_trace,
        git_ai=input_spec if git_ai else None,
        entire=entire,
    )
    emit(as_json, added.as_dict(), added.lines())


@cli.group(cls=_Group)
def effect() -> None:
    """Side effects (merge, deploy, message): begun once per idempotency key, then resolved."""


@effect.command("begin")
@click.argument("task")
@click.option("--kind", required=True, help="merge, deploy, message, ...")
@click.option(
    "--idempotency-key", "key", required=True, help="A key that names this effect; a second begin is refused."
)
@click.option("--target", default="", help="What the effect acts on.")
@key_option("Seal key")
@input_option("The candidate the effect is for.")
@trust_option
@click.pass_context
def effect_begin(
    ctx: click.Context,
    task: str,
    kind: str,
    key: str,
    target: str,
    key_name: str,
    input_spec: str,
    trust: _TrustArgs,
) -> None:
    """Record an effect about to happen; refused without a receipt for this exact candidate
    that verifies against the trust root.
    """
    root = _trust(ctx, trust, judges_candidate=True)
    appended = lib.begin_effect(
        _ledger(ctx), _signer(key_name), task, kind, key, target, _candidate(input_spec), trust=root
    )
    click.echo("effect %s begun at entry %d" % (key, appended.seq))


def _end(outcome: str) -> click.Command:
    @click.argument("idempotency_key")
    @key_option("Seal key")
    @click.option("--note", default="", help="How the outcome was read back.")
    @click.pass_context
    def command(ctx: click.Context, idempotency_key: str, key_name: str, note: str) -> None:
        appended = lib.end_effect(_ledger(ctx), _signer(key_name), idempotency_key, outcome, note)
        click.echo("effect %s %s at entry %d" % (idempotency_key, outcome, appended.seq))

    command.__doc__ = "Record that the effect's outcome is %s." % outcome
    return click.command()(command)


effect.add_command(_end("confirmed"), "confirm")
effect.add_command(_end("failed"), "fail")
effect.add_command(_end("unknown"), "unknown")
