"""`ledger init`: a new ledger, local or on the team's shared store, and its admin key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from receipts import Digest, fingerprint

from .._config import describe_store, without_password, without_user, write_store_config
from .._errors import InputError
from .._git import git_root
from ..store._ledger import Ledger
from ._keyring import LoadSigner, genesis_admin

__all__ = ["Initialised", "init_ledger"]


@dataclass(frozen=True, slots=True)
class Initialised:
    """A new ledger: ``said`` is what was done (for stderr), ``lines`` the genesis entry
    and the admin key's fingerprint (for stdout, which scripts read).
    """

    ledger: Ledger
    said: tuple[str, ...]
    lines: tuple[str, ...]


def init_ledger(
    root: Path,
    admin_name: str,
    key_file: Path | None,
    store: str | None,
    load: LoadSigner,
    origin: str | None = None,
    team_store: str | None = None,
) -> Initialised:
    """Create the ledger at ``root`` (or on ``store``), its genesis signed by the admin key
    `genesis_admin` picks. With a store, ``root``'s config.toml names it for the team to
    commit: as ``team_store`` (the address clones connect with, the writer role's), else
    without the role init connected as, which is the owner's and must not be shared.

    Raises:
        InputError: a ledger is already there, the store URL holds a password, or the key
            cannot be had.
        StoreError: the shared store cannot be reached or created.
    """
    if team_store is not None and store is None:
        raise InputError("--team-store names the shared store's address for clones: it goes with --store")
    if any(url is not None and urlsplit(url).password is not None for url in (store, team_store)):
        # init names the store in config.toml for the team: a password there would be
        # committed, and dropping it silently would leave the next command unable to connect.
        raise InputError(
            "the store URL holds a password: give it through PGPASSWORD or ~/.pgpass and name the store"
            " without it (%s)" % without_password(store or team_store or "")
        )
    if origin is not None:
        from receipts import ReceiptsError, check_log_origin

        try:
            check_log_origin(origin)  # before a key is made: a refusal leaves nothing behind
        except ReceiptsError as exc:
            raise InputError("--origin %s: %s" % (origin, exc)) from None
    signer, got_key = genesis_admin(admin_name, key_file, root, load)
    ledger = Ledger.create(root, signer, admin_name, store=store, origin=origin)
    said = [got_key, "initialised ledger %s" % describe_store(root, store)]
    if git_root(root.parent if root.parent.exists() else Path.cwd()) is None:
        said.insert(
            0,
            "%s is not inside a git repository: the ledger works here, but receipts cannot be attached"
            " to commits, and the gate and the agent hooks need one (run `git init` first to have them)" % root.parent,
        )
    if store is not None:
        said += _team_config(root, store, team_store)
    genesis = ledger.reader.by_seq(0)
    lines = (
        "genesis entry %s" % (Digest(genesis.hash) if genesis else "?"),
        "admin key %s %s" % (admin_name, fingerprint(signer.public_key_blob)),
    )
    return Initialised(ledger, tuple(said), lines)


def _team_config(root: Path, store: str, team_store: str | None) -> list[str]:
    """config.toml for the team: the address clones connect with, never init's own role."""
    shared = team_store if team_store is not None else without_user(store)
    if not write_store_config(root, shared):
        return ["%s exists: left as it is (it is the team's file)" % (root / "config.toml")]
    said = ["wrote %s naming %s: commit it so that every clone uses the shared ledger" % (root / "config.toml", shared)]
    if team_store is None and urlsplit(store).username is not None:
        said.append(
            "  without the role you connected as (%s): each clone connects as its own PGUSER, or give the"
            " writer role's address with --team-store" % urlsplit(store).username
        )
    return said
