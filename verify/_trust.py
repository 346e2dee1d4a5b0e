"""The auditor's trust root: which admin keys may have signed the genesis entry.

Trust is always the caller's choice: a pinned `TrustRoot`, or `UnsafeTrustOnFirstUse`,
which believes whatever genesis the ledger holds and is named for what it is (after
sigstore-python's `UnsafeNoOp` policy). No verification function has a default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from receipts import FormatError, Role, namespace_for
from receipts import parse_allowed_signers as receipts_parse_allowed_signers

from ._errors import CannotVerify

__all__ = ["Trust", "TrustRoot", "UnsafeTrustOnFirstUse", "parse_allowed_signers"]

_FPR = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


@dataclass(frozen=True, slots=True)
class TrustRoot:
    """Pinned admin key ids (OpenSSH SHA256 fingerprints)."""

    admin_key_ids: frozenset[str]
    source: str

    def pins(self, key_id: str) -> bool:
        """True if ``key_id`` may have signed the genesis entry."""
        return key_id in self.admin_key_ids

    def label(self, genesis_admins: tuple[str, ...]) -> str:
        return "pinned (%s)" % self.source

    @classmethod
    def from_argument(cls, value: str) -> TrustRoot:
        """A fingerprint, or the path of an ``allowed_signers`` file."""
        if _FPR.fullmatch(value):
            return cls(frozenset({value}), "fingerprint " + value)
        path = Path(value)
        if not path.is_file():
            raise CannotVerify(
                "--trust %r is neither a SHA256 key fingerprint nor a readable allowed_signers file" % value
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CannotVerify("cannot read trust file %s: %s" % (path, exc)) from None
        return cls.from_allowed_signers(text, "allowed_signers " + str(path))

    @classmethod
    def from_allowed_signers(cls, text: str, source: str) -> TrustRoot:
        """The admin keys an ``allowed_signers`` text pins; ``source`` says where it was read
        (a file, or a file on a git branch) and appears in every result.
        """
        ids = parse_allowed_signers(text)
        if not ids:
            raise CannotVerify(
                "trust file %s names no ssh-ed25519 key allowed to sign as %s" % (source, namespace_for(Role.ADMIN))
            )
        return cls(frozenset(ids), source)


@dataclass(frozen=True, slots=True)
class UnsafeTrustOnFirstUse:
    """UNSAFE: trust the genesis admin the ledger itself names. Anyone who can write a
    whole ledger passes this check; use it only to inspect, never to decide.
    """

    def pins(self, key_id: str) -> bool:
        return True

    def label(self, genesis_admins: tuple[str, ...]) -> str:
        return "UNSAFE trust on first use: genesis admin key(s) %s not pinned; pass --trust to pin" % (
            ", ".join(genesis_admins or ("?",))
        )


Trust = TrustRoot | UnsafeTrustOnFirstUse


def parse_allowed_signers(text: str) -> set[str]:
    """Key ids of the ssh-ed25519 keys that the file allows to sign in the admin namespace.
    Raises `CannotVerify` on a malformed file.
    """
    admin_ns = namespace_for(Role.ADMIN)
    try:
        lines = receipts_parse_allowed_signers(text)
    except FormatError as exc:
        raise CannotVerify(str(exc)) from None
    return {line.key_id for line in lines if line.namespaces is None or admin_ns in line.namespaces}
