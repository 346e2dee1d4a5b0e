"""Retention and the period's record: `retention set`, `prune`, `report`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from receipts import Digest

from .. import _api as lib
from ._group import cli
from ._options import _FILE, _TrustArgs, json_option, key_option, trust_option
from ._output import emit, warn_if_unsafe, write_out
from ._shared import _here, _ledger, _reader, _resolved, _signer, _trust


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
    return (_here() or Path.cwd(), branch) if branch else None


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
@click.option(
    "--merges",
    metavar="BRANCH",
    help="One row per commit that reached BRANCH (its first-parent history, from git), not per receipt.",
)
@click.option("--sample", type=int, help="With --merges: draw this many rows, reproducibly (with --seed).")
@click.option("--seed", default="0", show_default=True, help="The sample's seed: the same seed draws the same rows.")
@click.option(
    "--export-sample",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --sample: export each sampled row's receipt bundle into this folder.",
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
    merges: str | None,
    sample: int | None,
    seed: str,
    export_sample: Path | None,
    trust: _TrustArgs,
    as_json: bool,
) -> None:
    """The population of changes in a period (--from, --to): one row per sealed receipt,
    each verified; or, with HASH --html, the auditor's page for one receipt.

    An auditor samples from the population: commit, tree, task, contract, author model,
    each tier, approvers and how they approved, waivers, eligibility and the gate's decision.
    With --merges BRANCH the rows are the commits that reached the branch instead.
    """
    if merges is not None or sample is not None or export_sample is not None:
        _merges_report(ctx, merges, (from_text, to_text), (as_csv, as_json), trust, (sample, seed, export_sample))
        return
    if hash_text is not None:
        _receipt_page(ctx, hash_text, output, trust, not as_html or bool(from_text or to_text or as_csv or as_json))
        return
    start, end = lib.period(None if as_html else from_text, to_text)
    _one_format(as_csv, as_json)
    root = _trust(ctx, trust)
    rows = lib.population(_reader(ctx), root, start, end, reached_on=_in_this_repository(reached))
    if as_csv:
        warn_if_unsafe(root)
        click.echo(lib.population_csv(rows), nl=False)
        return
    emit(as_json, [row.as_dict() for row in rows], lib.population_lines(rows, from_text or "", to_text or ""), root)


def _one_format(as_csv: bool, as_json: bool) -> None:
    if as_csv and as_json:
        raise lib.InputError("choose --csv or --json")


def _receipt_page(ctx: click.Context, hash_text: str, output: Path | None, trust: _TrustArgs, misused: bool) -> None:
    if misused:
        raise lib.InputError("a receipt's report is `ledger report HASH --html`")
    write_out(output, lib.receipt_page(_reader(ctx), _resolved(ctx, hash_text), _trust(ctx, trust)))


def _merges_report(
    ctx: click.Context,
    branch: str | None,
    when: tuple[str | None, str | None],
    formats: tuple[bool, bool],
    trust: _TrustArgs,
    sampling: tuple[int | None, str, Path | None],
) -> None:
    (as_csv, as_json), (size, seed, export_to) = formats, sampling
    if branch is None:
        raise lib.InputError("--sample draws from --merges BRANCH")
    _one_format(as_csv, as_json)
    if export_to is not None and size is None:
        raise lib.InputError("--export-sample exports a sample: add --sample N")
    start, end = lib.period(*when)
    root = _trust(ctx, trust)
    repo = _here() or Path.cwd()
    reader = _reader(ctx)
    rows = lib.merges(reader, root, repo, branch, start, end)
    if size is not None:
        rows = lib.sample_rows(rows, size, seed)
    if export_to is not None:
        _export_sample(reader, rows, export_to)
    if as_csv:
        warn_if_unsafe(root)
        click.echo(lib.merges_csv(rows), nl=False)
        return
    emit(as_json, [row.as_dict() for row in rows], lib.merges_lines(rows, branch, when[0] or "", when[1] or ""), root)


def _export_sample(reader: lib.Ledger, rows: list[lib.MergeRow], folder: Path) -> None:
    # Each sampled row's receipt, as the bundle an auditor re-checks offline; a row with no
    # receipt has nothing to export and says so (it is a finding in the population already).
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        if row.receipt is None:
            click.echo("no receipt to export for %s" % row.commit[:12], err=True)
            continue
        lib.export_bundle(reader, Digest.parse(row.receipt), folder / ("%s.zip" % row.receipt.replace(":", "-")))
        click.echo("exported %s" % (folder / ("%s.zip" % row.receipt.replace(":", "-"))), err=True)
