"""The one exception root of `ledger`."""

from __future__ import annotations

__all__ = ["LedgerError", "InputError", "NoSuchHash", "StoreError", "NotCommitted", "CommitUnknown"]


class LedgerError(Exception):
    """Root of every error raised by `ledger`. The CLI prints it as one line and exits 2."""


class InputError(LedgerError):
    """Bad input from the user: a missing file, a malformed key, a refused keyring change."""


class NoSuchHash(InputError):
    """No entry, record or receipt hash starts as given (a lookup may go on elsewhere)."""


class StoreError(LedgerError):
    """The ledger store could not be read or written (corrupt, locked, read-only, full)."""


class NotCommitted(StoreError):
    """The connection to a shared store failed before COMMIT was sent: the server rolled
    the transaction back, so the whole operation may safely run again.
    """


class CommitUnknown(StoreError):
    """The connection failed while COMMIT was in flight: the write may have committed."""
