"""The one exception root of `verify`: "the data is bad" versus "we could not check"."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._result import Result

__all__ = ["VerifyError", "CannotVerify", "NoLedger", "VerificationFailed"]


class VerifyError(Exception):
    """Root of every error raised by `verify`."""


class CannotVerify(VerifyError):
    """The check could not run: unreadable ledger, unknown hash, bad trust file."""


class NoLedger(CannotVerify):
    """There is no ledger where one was named (a directory without its database, a
    database without the schema or a genesis entry): the caller's input, not damage."""


class VerificationFailed(VerifyError):
    """The check ran and found defects; ``result`` holds them."""

    def __init__(self, result: Result) -> None:
        first = result.defects[0].message if result.defects else "rejected"
        super().__init__("verification failed with %d defect(s): %s" % (len(result.defects), first))
        self.result = result
