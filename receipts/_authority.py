"""Who may sign what, applied to entries: the signer's role and signature (§4, §5) and
the keyring replayed from keyring entries. One definition for the writer's own replay,
the chain walk and the transparency check.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._chain import Entry
from ._codec import Body, entry_signed_bytes
from ._errors import KeyringError, ReceiptsError
from ._keyring import Genesis, KeyAdd, KeyRevoke, Keyring, KeyState
from ._model import Role
from ._sshsig import namespace_for, sshsig_namespace, sshsig_verify

__all__ = ["signing_role", "authorize_entry", "check_entry_signature", "next_keyring", "replay_keyring"]


def signing_role(entry: Entry, roles: tuple[Role, ...]) -> Role:
    """The one of ``roles`` whose namespace the entry's signature is made in.
    Raises `SignatureError` (malformed signature) or `KeyringError` (another namespace).
    """
    claimed = sshsig_namespace(entry.signature)
    for role in roles:
        if namespace_for(role) == claimed:
            return role
    raise KeyringError(
        "entry %d is signed in namespace %r; it needs %s"
        % (entry.seq, claimed, " or ".join(namespace_for(r) for r in roles))
    )


def authorize_entry(ring: Keyring, entry: Entry, roles: tuple[Role, ...]) -> tuple[KeyState, Role]:
    """The signer's key state and role if the keyring lets it sign this entry; the signature
    itself is not checked. Raises `KeyringError` or `SignatureError`.
    """
    role = signing_role(entry, roles)
    return ring.authorize(entry.signer, role, entry.seq, entry.time), role


def check_entry_signature(ring: Keyring, entry: Entry, roles: tuple[Role, ...]) -> KeyState:
    """`authorize_entry`, then the SSHSIG over the entry's signed bytes. Raises
    `KeyringError` (not authorized) or `SignatureError` (does not verify).
    """
    state, role = authorize_entry(ring, entry, roles)
    sshsig_verify(state.spec.public_key, namespace_for(role), entry_signed_bytes(entry), entry.signature)
    return state


def next_keyring(ring: Keyring | None, body: Body, seq: int) -> Keyring | None:
    """The keyring after the entry at ``seq`` (unchanged unless it is a keyring entry).
    Raises `KeyringError` for a change the keyring refuses.
    """
    if isinstance(body, Genesis):
        return Keyring.from_genesis(body)
    if ring is None:
        return None
    if isinstance(body, KeyAdd):
        return ring.with_added(body.key, seq)
    if isinstance(body, KeyRevoke):
        return ring.with_revoked(body.key_id, seq, body.reason)
    return ring


def replay_keyring(changes: Iterable[tuple[Entry, Body]], *, verify_signatures: bool) -> Keyring | None:
    """The keyring after these keyring entries, in order; None before a genesis.

    With ``verify_signatures`` an entry whose admin signature or change fails grants
    nothing and is skipped (the chain walk reports it); without, as the writer replays its
    own committed entries, a refused change raises `KeyringError`.
    """
    ring: Keyring | None = None
    for entry, body in changes:
        if verify_signatures:
            # A genesis is signed by an admin it names itself; later changes by the ring so far.
            signers = Keyring.from_genesis(body) if isinstance(body, Genesis) else ring
            if signers is None:
                continue
            try:
                check_entry_signature(signers, entry, (Role.ADMIN,))
                ring = next_keyring(ring, body, entry.seq)
            except ReceiptsError:
                continue
        else:
            ring = next_keyring(ring, body, entry.seq)
    return ring
