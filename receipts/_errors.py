"""The one exception root of `receipts`, split by what went wrong."""

from __future__ import annotations

__all__ = ["ReceiptsError", "FormatError", "SignatureError", "KeyringError"]


class ReceiptsError(Exception):
    """Root of every error raised by `receipts`."""


class FormatError(ReceiptsError):
    """Bytes or values that are not of the specified form (the data is bad)."""


class SignatureError(ReceiptsError):
    """A well-formed signature that does not verify for the key, namespace and message."""


class KeyringError(ReceiptsError):
    """A key that may not sign what it signed: unknown, revoked, out of validity or of role."""
