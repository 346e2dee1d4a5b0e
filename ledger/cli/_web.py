"""The window onto the ledger: `serve` and `site build`."""

from __future__ import annotations

from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import (
    _AuditorArgs,
    _CheckpointArgs,
    _TrustArgs,
    auditor_option,
    checkpoint_options,
    client_timeout_option,
    trust_option,
)
from ._output import progress, ticker
from ._shared import _Group, _policy, _root, _source, _trust

_repo_option = click.option(
    "--repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The git repository of the target branch [default: the one holding the ledger's directory].",
)
_branch_option = click.option(
    "--branch", default="main", show_default=True, help="The target branch: the commits page lists its commits."
)


def _branch(ctx: click.Context, repo: Path | None, branch: str) -> lib.Branch:
    root = _root(ctx).resolve()
    found = repo or next((p for p in (root.parent, root) if (p / ".git").exists()), None)
    return lib.Branch(found, branch)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Where to listen (put it behind your proxy).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--title", default="receipt-ledger", show_default=True, help="The site's name on every page.")
@client_timeout_option(
    "--header-timeout", "Seconds a connection may take to send its request's headers before it is closed."
)
@_repo_option
@_branch_option
@trust_option
@checkpoint_options
@auditor_option
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    title: str,
    header_timeout: float,
    repo: Path | None,
    branch: str,
    trust: _TrustArgs,
    checkpoints: _CheckpointArgs,
    auditors: _AuditorArgs,
) -> None:
    """Serve a read-only web view of the ledger: tasks, receipts verified on each request, search, a JSON API and a feed."""
    policy = _policy(trust, auditors, checkpoints)
    index, why = lib.web_index(_root(ctx))
    if why:
        click.echo("note: %s; the first page after each start waits for it" % why, err=True)
    app = lib.web_app(lambda: _source(ctx), _trust(ctx, trust), title, policy, index, _branch(ctx, repo, branch))
    said = "serving %s (read-only; stop with Ctrl-C)"
    lib.serve_app(app, host, port, lambda url: click.echo(said % url, err=True), header_timeout)


@cli.group(cls=_Group)
def site() -> None:
    """The web view as a static site."""


@site.command("build")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--title", default="receipt-ledger", show_default=True, help="The site's name on every page.")
@_repo_option
@_branch_option
@trust_option
@checkpoint_options
@auditor_option
@click.pass_context
def site_build(
    ctx: click.Context,
    folder: Path,
    title: str,
    repo: Path | None,
    branch: str,
    trust: _TrustArgs,
    checkpoints: _CheckpointArgs,
    auditors: _AuditorArgs,
) -> None:
    """Write every page of the web view into FOLDER, byte-identical for the same ledger."""
    policy = _policy(trust, auditors, checkpoints)
    with progress(False, "writing pages") as bar:
        written = lib.build_site(
            lambda: _source(ctx), _trust(ctx, trust), folder, title, ticker(bar), policy, _branch(ctx, repo, branch)
        )
    click.echo("%d files written to %s" % (written, folder))
