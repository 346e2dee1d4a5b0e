"""`ledger checkpoint --tsa URL`: an RFC 3161 time-stamp over the checkpoint just signed,
obtained from the authority the user configured (the only network call, and only when
asked), stored as a blob and recorded in the chain by the seal key (format.md §9).
"""

from __future__ import annotations

import hashlib
import io
import urllib.error
import urllib.parse
import urllib.request

from receipts import CheckpointTimestamp, ReceiptsError, SignedNote, Signer, content_digest

from .._errors import InputError
from ..store._ledger import Appended, Ledger

__all__ = ["check_tsa_url", "timestamp_checkpoint"]

_MAX_REPLY = 1 << 20


def check_tsa_url(url: str) -> str:
    """``url`` if it names a time-stamping authority as `--tsa` must: http or https, with a host.

    Raises:
        InputError: it does not (said before anything is signed or written).
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("--tsa is the http(s) URL of a time-stamping authority (RFC 3161), not %r" % url[:200])
    return url


def timestamp_checkpoint(ledger: Ledger, signer: Signer, url: str, note: SignedNote, size: int) -> Appended:
    """Ask the authority at ``url`` to time-stamp ``note``'s signed text, check that its
    reply is granted and stamps exactly that text (with our nonce), then store the reply
    and append a `CheckpointTimestamp` signed by ``signer`` (a seal key). Nothing is
    written unless the reply checks out; every failure is `InputError`.
    """
    import rfc3161_client

    text = note.text.encode("utf-8")
    request = (
        rfc3161_client.TimestampRequestBuilder()
        .data(text)
        .hash_algorithm(rfc3161_client.HashAlgorithm.SHA256)
        .nonce(nonce=True)
        .build()
    )
    http = urllib.request.Request(
        url, data=request.as_bytes(), headers={"Content-Type": "application/timestamp-query"}, method="POST"
    )
    try:
        with urllib.request.urlopen(http, timeout=30) as reply:
            data = reply.read(_MAX_REPLY + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise InputError("the time-stamping authority at %s did not answer: %s" % (url, exc)) from None
    if len(data) > _MAX_REPLY:
        raise InputError("the time-stamping authority's reply is larger than %d bytes" % _MAX_REPLY)
    try:
        response = rfc3161_client.decode_timestamp_response(data)
    except ValueError as exc:
        raise InputError("the time-stamping authority's reply is not an RFC 3161 response: %s" % exc) from None
    imprint = response.tst_info.message_imprint if response.status == 0 else None
    if imprint is None or imprint.message != hashlib.sha256(text).digest() or response.tst_info.nonce != request.nonce:
        raise InputError("the time-stamping authority did not grant a time-stamp over this checkpoint")
    digest, stored = ledger.put_blob_stream(io.BytesIO(data))
    try:
        body = CheckpointTimestamp(size, content_digest(text), digest, stored)
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None
    return ledger.append(body, signer)
