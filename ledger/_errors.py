"""The one exception root of `ledger`."""

from __future__ import annotations

__all__ = ["LedgerError", "InputError", "StoreError"]


class LedgerError(Exception):
    """Root of every error raised by `ledger`. The CLI prints it as one line and exits 2."""


class InputError(LedgerError):
    """Bad input from the user: a missing file, a malformed key, a refused keyring change."""


class StoreError(LedgerError):
    """The ledger store could not be read or written (corrupt, locked, read-only, full)."""
