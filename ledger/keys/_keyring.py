"""Keyring changes signed by an admin (add a key with its roles, revoke one), and the
keyring exported as an OpenSSH allowed_signers file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from receipts import (
    Ed25519Signer,
    FormatError,
    KeyAdd,
    KeyRevoke,
    KeySpec,
    Role,
    Signer,
    allowed_signers_text,
    decode_entry,
)

from .._errors import InputError
from ..store._ledger import Appended, Store
from ._key_files import generate_key_file, key_path, refuse_inside_repo

__all__ = ["add_key", "create_key", "revoke_key", "allowed_signers", "choose_admin", "genesis_admin"]

# Loads a key by name or path (the CLI asks for a passphrase when one is needed).
LoadSigner = Callable[[str], Signer]


def choose_admin(ledger: Store, named: str | None, load: LoadSigner) -> Signer:
    """The admin key that signs a keyring change: the one named, else the first active admin
    key of this ledger whose private key is in the key folder.

    Raises:
        InputError: none is named and no admin key of this ledger is held here.
    """
    if named is not None:
        return load(named)
    held = _held_admins(ledger)
    if not held:
        raise InputError("no local private key for any admin key of this ledger; pass --key NAME or a key path")
    return load(held[0])


def _held_admins(ledger: Store) -> list[str]:
    """The active admin keys of this ledger whose private key is in the key folder."""
    return [
        state.spec.name
        for state in ledger.keyring()
        if state.revoked_at is None and Role.ADMIN in state.spec.roles and key_path(state.spec.name).is_file()
    ]


def genesis_admin(name: str, key_file: Path | None, ledger_root: Path, load: LoadSigner) -> tuple[Signer, str]:
    """The admin key a new ledger's genesis is signed by, and what was done to get it: the key
    file given; else the named key already in the key folder; else a new key generated
    there, never inside the repository (`refuse_inside_repo`).
    """
    path = key_path(name)
    if key_file is not None:
        return load(str(key_file)), "using admin key %s" % key_file
    if path.is_file():
        return load(name), "using existing admin key %s" % path
    refuse_inside_repo(path, ledger_root)
    return generate_key_file(path, name), "generated admin key %s (keep it secret)" % path


def add_key(
    ledger: Store,
    admin: Signer,
    name: str,
    roles: Sequence[Role],
    public_key: bytes,
    valid_after: int | None = None,
    valid_before: int | None = None,
) -> Appended:
    """Add a public key with its roles (an admin signs): it may sign from the next entry.
    Raises `InputError` for a bad spec or a key the keyring refuses.
    """
    try:
        spec = KeySpec(name, tuple(r for r in Role if r in roles), public_key, valid_after, valid_before)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return ledger.append(KeyAdd(spec), admin)


def revoke_key(ledger: Store, admin: Signer, name_or_id: str, reason: str) -> Appended:
    """Revoke an active key (by name or id): its signatures after this entry are refused.
    The last admin key cannot be revoked. Raises `InputError`.
    """
    ring = ledger.keyring()
    state = ring.get(name_or_id) or ring.by_name(name_or_id)
    if state is None:
        raise InputError("no active key named or with id %r" % name_or_id)
    try:
        body = KeyRevoke(state.key_id, reason)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return ledger.append(body, admin)


def allowed_signers(store: Store) -> str:
    """The keyring as it stands, as an allowed_signers file (revoked keys end at their revocation)."""
    ring = store.keyring()
    times = {}
    for state in ring:
        if state.revoked_at is not None:
            stored = store.reader.by_seq(state.revoked_at)
            if stored is not None:
                times[state.revoked_at] = decode_entry(stored.entry).time
    return allowed_signers_text(ring, times)


def held_admin(ledger: Store, named: str | None, load: LoadSigner) -> Signer | None:
    """`choose_admin`, or None when none is named and this machine holds no admin key (the
    agent's machine, a reviewer's laptop: a key made there is registered by an admin).

    Raises:
        InputError: the named key cannot be loaded.
    """
    held = _held_admins(ledger)
    # A held admin key that will not load (a wrong passphrase, a file others can read) is an
    # error, never a reason to make a key that is quietly left out of the keyring.
    return choose_admin(ledger, named, load) if named is not None or held else None


def create_key(
    store: Store, admin: Signer | None, name: str, roles: Sequence[Role], path: Path, passphrase: bytes | None = None
) -> tuple[Ed25519Signer, Appended | None]:
    """Generate an OpenSSH Ed25519 key pair at ``path`` (private file 0600) and, with an
    ``admin`` to sign it, add it to the keyring; without one, only the files are made and
    the caller says who registers the public half. If the keyring refuses it, no key file
    is left behind.
    """
    signer = generate_key_file(path, name, passphrase)
    if admin is None:
        return signer, None
    try:
        return signer, add_key(store, admin, name, roles, signer.public_key_blob)
    except BaseException:
        # A key the keyring refused would only mislead later.
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".pub").unlink(missing_ok=True)
        raise
