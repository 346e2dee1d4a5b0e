"""`waive` and `contract`: what a task must deliver and what may stop blocking."""

from __future__ import annotations

from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import contract_option, json_option, key_option
from ._output import emit
from ._shared import _Group, _ledger, _reader, _repo, _required_contract, _signer


@cli.command()
@click.argument("task")
@click.argument("check_id", metavar="CHECK")
@key_option("Admin key")
@click.option("--reason", required=True, help="Why this failing check may stop blocking.")
@click.option("--expires", required=True, help="YYYY-MM-DD (through that day, UTC) or an ISO date-time.")
@click.pass_context
def waive(ctx: click.Context, task: str, check_id: str, key_name: str, reason: str, expires: str) -> None:
    """Let a named failing check of the task's current contract stop blocking until it expires."""
    appended = lib.waive_check(
        _ledger(ctx), _signer(key_name), task, check_id, reason, lib.parse_when(expires, "--expires", end_of_day=True)
    )
    click.echo(str(appended.body_hash))
    click.echo("waiver of %s for %s recorded at entry %d" % (check_id, task, appended.seq), err=True)


@cli.group(cls=_Group)
def contract() -> None:
    """Completion contracts: register revisions and read their history."""


@contract.command("set")
@click.argument("task")
@contract_option
@key_option("Deterministic or admin key; only an admin may weaken a contract")
@click.option("--reason", default="", help="Why this revision is made; required when it weakens the contract.")
@click.option("--criteria-from", default="", help="Where its criteria came from: a person, a ticket, or the agent.")
@click.pass_context
def contract_set(
    ctx: click.Context, task: str, contract_path: Path | None, key_name: str, reason: str, criteria_from: str
) -> None:
    """Record the contract file as the task's current revision."""
    source, data = _required_contract(ctx, task, contract_path)
    signer = _signer(key_name)
    _, appended = lib.register_contract(_ledger(ctx), task, data, signer, source, reason, criteria_from)
    click.echo(lib.contract_set_line(task, data, appended))


@contract.command("show")
@click.argument("task")
@json_option
@click.pass_context
def contract_show(ctx: click.Context, task: str, as_json: bool) -> None:
    """The task's contract revisions, oldest first, with their signers and weakenings."""
    rows = lib.contract_history(_reader(ctx), task)
    if not rows and not as_json:
        raise lib.InputError("task %s has no registered contract" % task)
    emit(
        as_json,
        [r.as_dict() for r in rows],
        [_history_line(r) for r in rows],
    )


@cli.group(cls=_Group)
def sealed() -> None:
    """Sealed checks: held-out files committed to before the work, opened only by CI."""


@sealed.command("add")
@click.argument("task")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--to",
    "names",
    multiple=True,
    required=True,
    help="A deterministic-role key of the keyring (or an age1... recipient) to seal to; repeatable.",
)
@click.option(
    "--under",
    default="held_out",
    show_default=True,
    help="The folder of the checkout the files appear in when CI runs the check (a file at UNDER/NAME).",
)
@click.pass_context
def sealed_add(ctx: click.Context, task: str, paths: tuple[Path, ...], names: tuple[str, ...], under: str) -> None:
    """Encrypt held-out files (or folders) to CI's keys as .ledger/sealed/HEX.age; name the digest in TASK's contract.

    Keep the files out of the repository (a tracked file is refused), and commit the
    ciphertext and the contract's `sealed` line to the target branch before the work begins.
    """
    named = [str(p.resolve()) for p in paths]
    done = lib.seal_files(_repo(), named, lib.recipients_for(_reader(ctx).keyring(), names), under)
    click.echo(str(done.digest))
    click.echo(
        "sealed %d file(s) to %d recipient(s) in %s; in %s's check: %s"
        % (len(done.files), len(done.recipients), done.path, task, done.contract_line()),
        err=True,
    )
    if done.ignored:
        click.echo(
            "warning: git ignores %s: add the lines !sealed/ and !sealed/*.age to .ledger/.gitignore, then commit it"
            % done.path,
            err=True,
        )


@sealed.command("reveal")
@click.argument("task")
@key_option("Deterministic-role key file: the one the sets were sealed to")
@click.option(
    "--from", "rev", default="HEAD", show_default=True, help="The revision whose .ledger/sealed/ holds the sets."
)
@click.pass_context
def sealed_reveal(ctx: click.Context, task: str, key_name: str, rev: str) -> None:
    """Make TASK's sealed sets public: their files and every run's result, as evidence in the chain.

    After this, `ledger verify` re-derives each sealed check from what was revealed.
    """
    for appended in lib.reveal_sealed(_ledger(ctx), _repo(), task, _signer(key_name), rev):
        click.echo(str(appended.body_hash))
    click.echo("revealed the sealed sets of %s" % task, err=True)


def _history_line(r: lib.ContractHistoryRow) -> str:
    said = "%5d  %s  %s" % (r.seq, r.config, r.signer_name or r.signer)
    if r.weakenings:
        said += "  WEAKENS: " + "; ".join(r.weakenings)
    if r.weakenings or r.reason:
        source = "; criteria from: " + r.criteria_from if r.criteria_from else ""
        said += "  (reason: %s%s)" % (r.reason or "none recorded", source)
    return _one_line(said)


def _one_line(text: str) -> str:
    # A reason is free text: a line break in it would read as the start of another revision's row.
    return text.replace("\r", "\\r").replace("\n", "\\n")
