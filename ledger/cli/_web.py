"""The window onto the ledger: `serve` and `site build`."""

from __future__ import annotations

from pathlib import Path

import click

from .. import _api as lib
from ._group import cli
from ._options import _AuditorArgs, _CheckpointArgs, _TrustArgs, auditor_option, checkpoint_options, trust_option
from ._output import progress, ticker
from ._shared import _Group, _policy, _source, _trust


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Where to listen (put it behind your proxy).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--title", default="receipt-ledger", show_default=True, help="The site's name on every page.")
@trust_option
@checkpoint_options
@auditor_option
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    title: str,
    trust: _TrustArgs,
    checkpoints: _CheckpointArgs,
    auditors: _AuditorArgs,
) -> None:
    """Serve a read-only web view of the ledger: tasks, receipts verified on each request, search, a JSON API and a feed."""
    policy = _policy(trust, auditors, checkpoints)
    app = lib.web_app(lambda: _source(ctx), _trust(ctx, trust), title, policy)
    lib.serve_app(
        app, host, port, announce=lambda url: click.echo("serving %s (read-only; stop with Ctrl-C)" % url, err=True)
    )


@cli.group(cls=_Group)
def site() -> None:
    """The web view as a static site."""


@site.command("build")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--title", default="receipt-ledger", show_default=True, help="The site's name on every page.")
@trust_option
@checkpoint_options
@auditor_option
@click.pass_context
def site_build(
    ctx: click.Context,
    folder: Path,
    title: str,
    trust: _TrustArgs,
    checkpoints: _CheckpointArgs,
    auditors: _AuditorArgs,
) -> None:
    """Write every page of the web view into FOLDER, byte-identical for the same ledger."""
    policy = _policy(trust, auditors, checkpoints)
    with progress(False, "writing pages") as bar:
        written = lib.build_site(lambda: _source(ctx), _trust(ctx, trust), folder, title, ticker(bar), policy)
    click.echo("%d files written to %s" % (written, folder))
