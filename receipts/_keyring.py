"""Keyring bodies and the keyring as it stands at a point of the chain.

The keyring is never stored as mutable state: it is replayed from the chain's genesis,
key_add and key_revoke entries, so the authority of a signature is judged by the
keyring as it stood when the entry was appended.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ._errors import FormatError, KeyringError
from ._model import FORMAT_VERSION, Role, check_text, check_time
from ._sshsig import fingerprint, parse_public_key_blob

__all__ = ["KeySpec", "Genesis", "KeyAdd", "KeyRevoke", "KeyState", "Keyring"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_LEDGER_ID = re.compile(r"[0-9a-f]{32}")
# A log origin the team names (C2SP tlog-tiles: its URL prefix without the scheme): a
# signed-note key name (no spaces, no '+') of printable ASCII.
_ORIGIN = re.compile(r"[!-*,-~]{1,200}")


def _roles_in_order(roles: tuple[Role, ...]) -> bool:
    order = list(Role)
    positions = [order.index(r) for r in roles]
    return bool(roles) and positions == sorted(set(positions))


@dataclass(frozen=True, slots=True)
class KeySpec:
    """A key as a keyring entry declares it: who, which roles, which public key, when valid."""

    name: str
    roles: tuple[Role, ...]
    public_key: bytes
    valid_after: int | None = None
    valid_before: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise FormatError("key name must be 1-64 characters of [A-Za-z0-9._@-]: %r" % (self.name,))
        if not isinstance(self.roles, tuple) or not all(isinstance(r, Role) for r in self.roles):
            raise FormatError("roles must be a tuple of Role")
        if not _roles_in_order(self.roles):
            raise FormatError(
                "roles must be distinct, non-empty and in the order admin, deterministic, judge, human, seal, agent"
            )
        if not isinstance(self.public_key, bytes):
            raise FormatError("public key must be an SSH public key blob")
        parse_public_key_blob(self.public_key)
        for name in ("valid_after", "valid_before"):
            value = getattr(self, name)
            if value is not None:
                check_time(value, name)
        if self.valid_after is not None and self.valid_before is not None and self.valid_after >= self.valid_before:
            raise FormatError("valid_after must be before valid_before")

    @property
    def key_id(self) -> str:
        return fingerprint(self.public_key)


def check_log_origin(origin: object) -> str:
    """A log origin a genesis may name.

    Raises:
        FormatError: not 1-200 printable ASCII characters without spaces or '+'.
    """
    if not isinstance(origin, str) or _ORIGIN.fullmatch(origin) is None:
        raise FormatError("a log origin is 1-200 printable ASCII characters, no spaces and no '+'")
    return origin


@dataclass(frozen=True, slots=True)
class Genesis:
    ledger_id: str
    created: int
    keys: tuple[KeySpec, ...]
    version: int = FORMAT_VERSION
    log_origin: str | None = None  # the origin the team named; None: receipt-ledger/<ledger id>

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported genesis version %r" % (self.version,))
        if self.log_origin is not None:
            check_log_origin(self.log_origin)
        if not isinstance(self.ledger_id, str) or _LEDGER_ID.fullmatch(self.ledger_id) is None:
            raise FormatError("ledger id must be 32 lowercase hex digits")
        check_time(self.created, "created")
        if not isinstance(self.keys, tuple) or not all(isinstance(k, KeySpec) for k in self.keys):
            raise FormatError("genesis keys must be a tuple of KeySpec")
        if not any(Role.ADMIN in k.roles for k in self.keys):
            raise FormatError("genesis must hold at least one admin key")

    @property
    def origin(self) -> str:
        """The log's origin and checkpoint key name (format.md §9): the one the genesis
        names, else ``receipt-ledger/<ledger id>``.
        """
        return self.log_origin if self.log_origin is not None else "receipt-ledger/" + self.ledger_id


@dataclass(frozen=True, slots=True)
class KeyAdd:
    key: KeySpec
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported key_add version %r" % (self.version,))
        if not isinstance(self.key, KeySpec):
            raise FormatError("key_add must hold a KeySpec")


@dataclass(frozen=True, slots=True)
class KeyRevoke:
    key_id: str
    reason: str
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported key_revoke version %r" % (self.version,))
        if not isinstance(self.key_id, str) or not self.key_id.startswith("SHA256:") or len(self.key_id) != 50:
            raise FormatError("key id must be an OpenSSH SHA256 fingerprint")
        check_text(self.reason, "revocation reason", empty_ok=True)


@dataclass(frozen=True, slots=True)
class KeyState:
    spec: KeySpec
    available_from: int  # first sequence number the key may sign
    revoked_at: int | None = None  # sequence number of the revocation entry
    revoke_reason: str | None = None

    @property
    def key_id(self) -> str:
        return self.spec.key_id


@dataclass(frozen=True, slots=True)
class Keyring:
    """An immutable keyring; each change returns a new one."""

    ledger_id: str
    states: tuple[KeyState, ...] = field(default=())

    @classmethod
    def from_genesis(cls, genesis: Genesis) -> Keyring:
        ring = cls(genesis.ledger_id)
        for spec in genesis.keys:
            ring = ring._with(spec, available_from=0)
        return ring

    def __iter__(self) -> Iterator[KeyState]:
        return iter(self.states)

    def get(self, key_id: str) -> KeyState | None:
        for state in self.states:
            if state.key_id == key_id:
                return state
        return None

    def by_name(self, name: str) -> KeyState | None:
        for state in self.states:
            if state.spec.name == name and state.revoked_at is None:
                return state
        return None

    def _with(self, spec: KeySpec, available_from: int) -> Keyring:
        if self.get(spec.key_id) is not None:
            raise KeyringError("key %s is already in the keyring (a revoked key cannot return)" % spec.key_id)
        if self.by_name(spec.name) is not None:
            raise KeyringError("a key named %r is already active" % spec.name)
        return Keyring(self.ledger_id, self.states + (KeyState(spec, available_from),))

    def with_added(self, spec: KeySpec, seq: int) -> Keyring:
        """The keyring after a key_add entry at ``seq``: the key may sign from ``seq + 1``."""
        return self._with(spec, available_from=seq + 1)

    def with_revoked(self, key_id: str, seq: int, reason: str) -> Keyring:
        """The keyring after a key_revoke entry at ``seq``: the key may not sign after it."""
        state = self.get(key_id)
        if state is None:
            raise KeyringError("cannot revoke unknown key %s" % key_id)
        if state.revoked_at is not None:
            raise KeyringError("key %s is already revoked" % key_id)
        if Role.ADMIN in state.spec.roles:
            admins = [s for s in self.states if s.revoked_at is None and Role.ADMIN in s.spec.roles]
            if len(admins) == 1:
                raise KeyringError("cannot revoke the last admin key: nobody could change the keyring after it")
        revoked = KeyState(state.spec, state.available_from, seq, reason)
        return Keyring(self.ledger_id, tuple(revoked if s is state else s for s in self.states))

    def authorize(self, key_id: str, role: Role, seq: int, time: int) -> KeyState:
        """The key's state if it may sign an entry of ``role`` at ``seq`` and ``time``; else raise."""
        state = self.get(key_id)
        if state is None:
            raise KeyringError("signer %s is not in the keyring" % key_id)
        name = "%s (%s)" % (state.spec.name, key_id)
        if seq < state.available_from:
            raise KeyringError("key %s was not yet in the keyring at entry %d" % (name, seq))
        if state.revoked_at is not None and seq > state.revoked_at:
            raise KeyringError("key %s was revoked at entry %d, before entry %d" % (name, state.revoked_at, seq))
        if role not in state.spec.roles:
            raise KeyringError("key %s has no %s role" % (name, role))
        spec = state.spec
        if spec.valid_after is not None and time < spec.valid_after:
            raise KeyringError("key %s is not valid until %d; entry time is %d" % (name, spec.valid_after, time))
        if spec.valid_before is not None and time >= spec.valid_before:
            raise KeyringError("key %s expired at %d; entry time is %d" % (name, spec.valid_before, time))
        return state
