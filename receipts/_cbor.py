"""The canonical CBOR profile: one encoding per value, checked on the way in.

cbor2's ``canonical=True`` sorts map keys length-first (RFC 7049 §3.9); for keys that
are all text strings that order is the same as RFC 8949 §4.2.1's bytewise order of the
encoded keys, so we allow text keys only. cbor2 also accepts trailing bytes, duplicate
keys, indefinite lengths and tags on decode; re-encoding and comparing rejects them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import cbor2

from ._errors import FormatError

__all__ = ["canonical_dumps", "canonical_loads", "MAX_DOCUMENT_SIZE"]

# A record is a few hundred bytes; a keyring with hundreds of keys a few tens of KiB.
MAX_DOCUMENT_SIZE = 1 << 20
_MAX_DEPTH = 16
_INT_MIN = -(1 << 64)
_INT_MAX = (1 << 64) - 1


_LEAVES = frozenset({str, bytes, bool, type(None)})


def _check(value: object, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise FormatError("CBOR nesting deeper than %d" % _MAX_DEPTH)
    if type(value) in _LEAVES:
        return
    children: Iterable[object]
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise FormatError("integer outside the CBOR major type 0/1 range")
        return
    if isinstance(value, dict):
        for key in value:
            if type(key) is not str and not isinstance(key, str):
                raise FormatError("CBOR map key is not a text string")
        children = value.values()
    elif isinstance(value, (list, tuple)):
        children = value
    elif isinstance(value, (str, bytes)):
        return
    else:
        raise FormatError("value of type %s is not allowed in canonical CBOR" % type(value).__name__)
    # This runs on every encode and decode: an exact-type test skips the call for a leaf,
    # unless that leaf would sit deeper than the limit.
    leaves_ok = depth < _MAX_DEPTH
    for item in children:
        if not (leaves_ok and type(item) in _LEAVES):
            _check(item, depth + 1)


def canonical_dumps(value: object) -> bytes:
    """Encode ``value`` (None, bool, int, str, bytes, list/tuple, dict with str keys)."""
    _check(value)
    return bytes(cbor2.dumps(value, canonical=True))


def canonical_loads(data: bytes) -> Any:
    """Decode ``data``, accepting it only if it is the canonical encoding of its value."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FormatError("CBOR input must be bytes")
    data = bytes(data)
    if not data:
        raise FormatError("empty CBOR document")
    if len(data) > MAX_DOCUMENT_SIZE:
        raise FormatError("CBOR document larger than %d bytes" % MAX_DOCUMENT_SIZE)
    try:
        value = cbor2.loads(data)
    except Exception as exc:  # cbor2 raises several unrelated types on malformed input
        raise FormatError("malformed CBOR: %s" % exc) from None
    _check(value)
    if cbor2.dumps(value, canonical=True) != data:
        raise FormatError("CBOR is not in canonical form")
    return value
