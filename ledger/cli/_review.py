"""The human tier: `approve` and `reject`, signed decisions bound to one candidate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import _api as lib
from .._escape import terminal_text
from ._group import cli
from ._options import contract_option, input_option, key_option, yes_option
from ._output import exit_with
from ._shared import _candidate, _here, _ledger, _required_contract, _signer


def _decide(
    ctx: click.Context,
    task: str,
    key_name: str,
    contract_path: Path | None,
    input_spec: str,
    yes: bool,
    approve: bool,
    note: str,
) -> None:
    _, data = _required_contract(ctx, task, contract_path)
    what = "approval" if approve else "rejection"

    def confirm(summary: str) -> bool:
        click.echo(terminal_text(summary), err=True)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise lib.InputError("refusing to sign without confirmation: run on a terminal, or pass --yes")
        return click.confirm("Sign this %s?" % what, err=True)

    ledger, candidate, signer = _ledger(ctx), _candidate(input_spec), _signer(key_name)
    appended = lib.decide(
        ledger,
        task_id=task,
        contract_bytes=data,
        candidate=candidate,
        signer=signer,
        approve=approve,
        note=note,
        repo=_here(),
        confirm=confirm,
        method="scripted" if yes else "interactive",
    )
    if appended is None:
        click.echo("not signed", err=True)
        exit_with(False)
    click.echo(str(appended.body_hash))
    click.echo("%s recorded at entry %d" % (what, appended.seq), err=True)  # what will not count was on the screen


@cli.command()
@click.argument("task")
@key_option("Human-role key")
@click.option("--comment", default="", help="What you checked.")
@contract_option
@input_option()
@yes_option
@click.pass_context
def approve(
    ctx: click.Context, task: str, key_name: str, comment: str, contract_path: Path | None, input_spec: str, yes: bool
) -> None:
    """Sign an approval of this exact candidate under this exact contract."""
    _decide(ctx, task, key_name, contract_path, input_spec, yes, True, comment)


@cli.command()
@click.argument("task")
@key_option("Human-role key")
@click.option("--reason", required=True, help="Why the candidate is rejected.")
@contract_option
@input_option()
@yes_option
@click.pass_context
def reject(
    ctx: click.Context, task: str, key_name: str, reason: str, contract_path: Path | None, input_spec: str, yes: bool
) -> None:
    """Sign a rejection: it blocks until a later approval by the same key withdraws it."""
    _decide(ctx, task, key_name, contract_path, input_spec, yes, False, reason)
