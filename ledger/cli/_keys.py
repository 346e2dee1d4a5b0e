"""`init` and `keys`: the keyring's custody."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from receipts import (
    Role,
)

from .. import _api as lib
from ._group import cli
from ._options import _FILE, ROLE_CHOICE, F, json_option, store_option
from ._output import emit
from ._shared import _Group, _ledger, _reader, _root, _signer, _where


@cli.command()
@click.option("--admin", "admin_name", default="admin", show_default=True, help="Name of the admin key.")
@click.option(
    "--admin-key",
    type=_FILE,
    help="Use this existing OpenSSH Ed25519 private key (e.g. ~/.ssh/id_ed25519) instead of generating one.",
)
@click.option(
    "--origin",
    help="The log's origin, e.g. the URL prefix its tiles are served at without the scheme"
    " (default: receipt-ledger/<ledger id>). Signed in the genesis: it cannot change later.",
)
@click.option(
    "--team-store",
    help="With --store: the address every clone connects with (the writer role's), written to"
    " .ledger/config.toml (default: the store's address without the role init connects as).",
)
@store_option
@click.pass_context
def init(
    ctx: click.Context,
    admin_name: str,
    admin_key: Path | None,
    origin: str | None,
    team_store: str | None,
    store: str | None,
) -> None:
    """Create the ledger with a genesis entry signed by its admin key (with --store: the
    team's shared ledger, named in .ledger/config.toml for the team to commit).
    """
    root = _root(ctx)
    url = lib.shared_store(root, store) if store else _where(ctx).store
    team = lib.shared_store(root, team_store) if team_store else None  # checked as --store is
    done = lib.init_ledger(root, admin_name, admin_key, url, _signer, origin, team)
    ctx.call_on_close(done.ledger.close)
    click.echo("\n".join(done.said), err=True)
    click.echo("\n".join(done.lines))


@cli.group(cls=_Group)
def keys() -> None:
    """Manage the keyring: who may sign what."""


def _admin_option(f: F) -> F:
    """``--key`` names the admin key that signs the change, as ``--key`` names every other
    signer; ``--admin``, its old spelling, stays as a hidden alias for one release.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key, alias = kwargs.pop("admin_key"), kwargs.pop("admin_alias")
        if key is not None and alias is not None and key != alias:
            raise lib.InputError("--key and --admin name different admin keys: give one")
        kwargs["admin"] = key if key is not None else alias
        return f(*args, **kwargs)

    wrapper = click.option("--admin", "admin_alias", hidden=True)(wrapper)
    return click.option("--key", "admin_key", help="Admin key that signs the keyring change.")(wrapper)  # type: ignore[return-value]


def _roles_option(f: F) -> F:
    return click.option(
        "--role", "roles", multiple=True, required=True, type=ROLE_CHOICE, help="Role(s) of the key; repeatable."
    )(f)


@keys.command("generate")
@click.argument("name")
@_roles_option
@click.option("--out", type=_FILE, help="Private key path (default: the key directory).")
@click.option("--passphrase", is_flag=True, help="Encrypt the private key with a passphrase (prompted).")
@_admin_option
@click.pass_context
def keys_generate(
    ctx: click.Context, name: str, roles: Sequence[str], out: Path | None, passphrase: bool, admin: str | None
) -> None:
    """Generate an OpenSSH Ed25519 key pair and add it to the keyring (where no admin key is
    held, as on the agent's machine: only the pair, its public half for an admin to add).
    """
    ledger = _ledger(ctx)
    admin_signer = lib.held_admin(ledger, admin, _signer)
    path = out or lib.key_path(name)
    lib.refuse_inside_repo(path, ledger.root)
    secret = (
        click.prompt("Passphrase", hide_input=True, confirmation_prompt=True, err=True).encode() if passphrase else None
    )
    signer, appended = lib.create_key(ledger, admin_signer, name, [Role(r) for r in roles], path, secret)
    click.echo(lib.generated_key_note(name, roles, path, appended), err=True)
    click.echo(lib.key_line(name, signer.public_key_blob, appended))


@keys.command("add")
@click.argument("name")
@click.argument("pubkey")
@_roles_option
@_admin_option
@click.pass_context
def keys_add(ctx: click.Context, name: str, pubkey: str, roles: Sequence[str], admin: str | None) -> None:
    """Add a teammate's OpenSSH public key (a key line, or a .pub file)."""
    blob = lib.read_public_key(pubkey)
    ledger = _ledger(ctx)
    appended = lib.add_key(ledger, lib.choose_admin(ledger, admin, _signer), name, [Role(r) for r in roles], blob)
    click.echo(lib.key_line(name, blob, appended))


@keys.command("revoke")
@click.argument("name_or_id")
@click.option("--reason", default="", help="Why the key is revoked.")
@_admin_option
@click.pass_context
def keys_revoke(ctx: click.Context, name_or_id: str, reason: str, admin: str | None) -> None:
    """Revoke a key: its signatures after this entry are rejected."""
    ledger = _ledger(ctx)
    appended = lib.revoke_key(ledger, lib.choose_admin(ledger, admin, _signer), name_or_id, reason)
    click.echo("revoked %s at entry %d" % (name_or_id, appended.seq))


@keys.command("list")
@json_option
@click.pass_context
def keys_list(ctx: click.Context, as_json: bool) -> None:
    """List the keyring as it stands now, revoked keys included."""
    rows = lib.keyring_rows(_reader(ctx).keyring())
    emit(
        as_json,
        rows,
        ["%-16s %-8s %-30s %s" % (r["name"], r["status"], ",".join(r["roles"]), r["key_id"]) for r in rows],
    )


@keys.command("export-allowed-signers")
@click.option("-o", "--output", type=click.File("w"), default="-", help="Output file (default stdout).")
@click.pass_context
def keys_export(ctx: click.Context, output: Any) -> None:
    """The keyring as an OpenSSH allowed_signers file (roles as namespaces)."""
    output.write(lib.allowed_signers(_reader(ctx)))


@cli.command()
@click.option("--keep", type=click.Path(path_type=Path, file_okay=False), help="Build the demo here and keep it.")
def demo(keep: Path | None) -> None:
    """Run the whole job end to end in a throwaway workspace."""
    sys.exit(lib.run_demo(keep))
