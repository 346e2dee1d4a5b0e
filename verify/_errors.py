"""The one exception root of `verify`: "the data is bad" versus "we could not check"."""

from __future__ import annotations

__all__ = ["VerifyError", "CannotVerify", "NoLedger"]


class VerifyError(Exception):
    """Root of every error raised by `verify`."""


class CannotVerify(VerifyError):
    """The check could not run: unreadable ledger, unknown hash, bad trust file."""


class NoLedger(CannotVerify):
    """There is no ledger where one was named (a directory without its database, a
    database without the schema or a genesis entry): the caller's input, not damage.
    """
