"""Retention and the period's record: `retention set`, `prune`, `report`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import _FILE, _TrustArgs, json_option, key_option, trust_option
from ._output import emit, warn_if_unsafe, write_out
from ._shared import _ledger, _reader, _resolved, _signer, _trust


@cli.group()
def retention() -> None:
    """The retention policy: how long evidence no verdict is derived from is kept."""


@retention.command("set")
@click.option("--max-age-days", type=click.IntRange(1, 36500), required=True, help="Evidence older than this may go.")
@click.option("--hold", "holds", multiple=True, help="A task under a legal hold: nothing of it goes. Repeatable.")
@key_option("Admin key that signs the policy")
@click.pass_context
def retention_set(ctx: click.Context, max_age_days: int, holds: Sequence[str], key_name: str) -> None:
    """Sign a retention policy into the chain (the newest one is in force)."""
    appended = lib.set_retention(_ledger(ctx), _signer(key_name), max_age_days * 86400, holds)
    click.echo(str(appended.body_hash))
    click.echo("retention policy recorded at entry %d" % appended.seq, err=True)


@cli.command("prune")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@json_option
@click.pass_context
def prune_cmd(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Delete the evidence blobs the retention policy lets go; entries, tree and
    checkpoints stay, and verify reports each removed item as removed under the policy.
    """
    report = lib.prune(_ledger(ctx), dry_run=dry_run)
    lines = ["%s %s %s (%d bytes)" % ("would remove" if dry_run else "removed", t, d, n) for t, d, n in report.removed]
    lines.append(
        "%s %d blob(s), %d bytes, under the retention policy of entry %d; %d kept under a legal hold"
        % (
            "would remove" if dry_run else "removed",
            len(report.removed),
            report.bytes,
            report.policy_entry,
            report.held,
        )
    )
    emit(as_json, report.as_dict(), lines)


def _in_this_repository(branch: str | None) -> tuple[Path, str] | None:
    return (lib.git_root(Path.cwd()) or Path.cwd(), branch) if branch else None


@cli.command()
@click.argument("hash_text", metavar="[HASH]", required=False)
@click.option("--from", "from_text", help="First day (UTC date, or an ISO 8601 time).")
@click.option("--to", "to_text", help="Last day, included (UTC date, or an ISO 8601 time, excluded).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header line, for a spreadsheet.")
@click.option("--html", "as_html", is_flag=True, help="With HASH: the auditor's page for that receipt.")
@click.option("-o", "--output", type=_FILE, help="With --html: write the page here instead of stdout.")
@click.option(
    "--reached",
    metavar="BRANCH",
    help="Mark each change whose commit, or a commit with its exact tree, is on BRANCH (e.g. origin/main).",
)
@trust_option
@json_option
@click.pass_context
def report(
    ctx: click.Context,
    hash_text: str | None,
    from_text: str | None,
    to_text: str | None,
    as_csv: bool,
    as_html: bool,
    output: Path | None,
    reached: str | None,
    trust: _TrustArgs,
    as_json: bool,
) -> None:
    """The population of changes in a period (--from, --to): one row per sealed receipt,
    each verified; or, with HASH --html, the auditor's page for one receipt.

    An auditor samples from the population: commit, tree, task, contract, author model,
    each tier, approvers and how they approved, waivers, eligibility and the gate's decision.
    """
    if hash_text is not None:
        if not as_html or from_text or to_text or as_csv or as_json:
            raise lib.InputError("a receipt's report is `ledger report HASH --html`")
        write_out(output, lib.receipt_page(_reader(ctx), _resolved(ctx, hash_text), _trust(ctx, trust)))
        return
    start, end = lib.period(None if as_html else from_text, to_text)
    if as_csv and as_json:
        raise lib.InputError("choose --csv or --json")
    root = _trust(ctx, trust)
    rows = lib.population(_reader(ctx), root, start, end, reached_on=_in_this_repository(reached))
    if as_csv:
        warn_if_unsafe(root)
        click.echo(lib.population_csv(rows), nl=False)
        return
    emit(as_json, [row.as_dict() for row in rows], lib.population_lines(rows, from_text or "", to_text or ""), root)
