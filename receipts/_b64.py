"""Canonical base64: one text per byte string, so that no stored text can change
while decoding to the same bytes (RFC 4648 section 3.5).
"""

from __future__ import annotations

import base64
import binascii

from ._errors import FormatError

__all__ = ["b64decode_canonical"]


def b64decode_canonical(text: str, what: str) -> bytes:
    """Decode standard padded base64, refusing any text that is not the exact encoding
    of its bytes: non-zero pad bits, missing padding, whitespace, other alphabets.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise FormatError("%s is not base64" % what) from None
    # validate=True still accepts non-zero bits after the last full byte: a flipped
    # bit there would change the stored text without changing what it means.
    if base64.b64encode(raw).decode("ascii") != text:
        raise FormatError("%s is not canonical base64" % what)
    return raw
