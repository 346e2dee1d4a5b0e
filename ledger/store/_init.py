"""`ledger init`: a new ledger, local or on the team's shared store, and its admin key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from receipts import Digest, fingerprint

from .._config import describe_store, write_store_config
from ..keys._keyring import LoadSigner, genesis_admin
from ._ledger import Ledger

__all__ = ["Initialised", "init_ledger"]


@dataclass(frozen=True, slots=True)
class Initialised:
    """A new ledger: ``said`` is what was done (for stderr), ``lines`` the genesis entry
    and the admin key's fingerprint (for stdout, which scripts read).
    """

    ledger: Ledger
    said: tuple[str, ...]
    lines: tuple[str, ...]


def init_ledger(root: Path, admin_name: str, key_file: Path | None, store: str | None, load: LoadSigner) -> Initialised:
    """Create the ledger at ``root`` (or on ``store``, named then in ``root``'s config.toml
    for the team to commit), its genesis signed by the admin key `genesis_admin` picks.

    Raises:
        InputError: a ledger is already there, or the key cannot be had.
        StoreError: the shared store cannot be reached or created.
    """
    signer, got_key = genesis_admin(admin_name, key_file, root, load)
    ledger = Ledger.create(root, signer, admin_name, store=store)
    said = [got_key, "initialised ledger %s" % describe_store(root, store)]
    if store is not None and write_store_config(root, store):
        said.append("wrote %s: commit it so that every clone uses the shared ledger" % (root / "config.toml"))
    genesis = ledger.reader.by_seq(0)
    lines = (
        "genesis entry %s" % (Digest(genesis.hash) if genesis else "?"),
        "admin key %s %s" % (admin_name, fingerprint(signer.public_key_blob)),
    )
    return Initialised(ledger, tuple(said), lines)
