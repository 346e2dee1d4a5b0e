"""`ledger scitt serve`: the registration side of SCITT over HTTP, in the shape of the SCITT
Reference APIs (SCRAPI; the working group's editor's copy at commit eb06ab0, May 2026,
published as draft-ietf-scitt-scrapi-10/11). Resources:

- ``POST /entries`` (``application/cose``): registers a signed statement (format.md §15a)
  and answers 201 with its receipt and ``Location: /entries/<id>``, ``<id>`` being the
  lowercase hex SHA-256 of the statement (its statement-log leaf's preimage);
- ``GET /entries/<id>``: a fresh receipt over the statement log as it stands, or 404;
- ``GET /.well-known/scitt-keys`` and ``/.well-known/scitt-keys/<kid>``: the log's key as a
  COSE Key Set / COSE Key (OKP, Ed25519), ``<kid>`` the base64url of the kid (ours holds
  ``/`` and ``+``, so the draft asks for that form).

Registration is synchronous (no 303). Errors are RFC 9290 concise problem details in
CBOR. The registration policy: the statement's signature verifies under one of the
issuer keys the operator gave, its ``iss`` being the one that key was given for, or under
the active seal key of this ledger its kid names, its ``iss`` being the ledger's origin.
Requests are read on threads of their own (at most 32 connections at once, each dropped
when it sends nothing for 10 s by default), so that a slow client holds only its own connection;
what touches the ledger runs on the thread that opened it, one request at a time
(`OwnerThread`: a SQLite connection is not shared between threads, and the chain's
append serialises registrations anyway). Called from another thread while no server takes
that work, the service answers 500 at once rather than wait.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import Callable, Sequence

import cbor2

from receipts import (
    ReceiptsError,
    Signer,
    decode_sign1,
    fingerprint,
    parse_public_key_blob,
    read_cose_key,
    verify_sign1,
)

from .._errors import InputError, LedgerError
from ..store._ledger import Ledger
from ._http import BoundedThreadingServer, OwnerThread, QuietHandler, listen_and_serve
from ._scitt import Issuer, register_statement

__all__ = ["ScittService", "serve_scitt"]

MAX_STATEMENT = 1 << 16
COSE = "application/cose"
PROBLEM = "application/concise-problem-details+cbor"
_Answer = tuple[int, str, bytes, dict[str, str]]


def _problem(status: int, title: str, detail: str) -> _Answer:
    return status, PROBLEM, cbor2.dumps({-1: title, -2: detail}), {}


class ScittService:
    """What the server answers, apart from HTTP: registration, receipts and keys."""

    def __init__(self, ledger: Ledger, signer: Signer, issuers: Sequence[Issuer] = ()) -> None:
        """The log's ``ledger`` and seal key, and the issuers from outside the keyring its
        policy accepts (each statement's ``iss`` must be the one its key was given for).

        Raises:
            InputError: an issuer key is neither PEM nor an OpenSSH line (refused at start,
                not ignored at each registration).
        """
        for n, issuer in enumerate(issuers, 1):
            try:
                read_cose_key(issuer.key)
            except ReceiptsError as exc:
                raise InputError("issuer key %d: %s" % (n, exc)) from None
        self.ledger, self.signer, self.issuers = ledger, signer, tuple(issuers)
        self.owner = OwnerThread()  # the ledger's thread: made where the ledger was opened
        self.kid = fingerprint(signer.public_key_blob).encode()

    def get(self, path: str) -> _Answer:
        """The answer to a GET of ``path`` (query string ignored)."""
        path = path.split("?", 1)[0].rstrip("/")
        if path.startswith("/entries/"):
            entry = path.removeprefix("/entries/")
            return self._on_ledger(lambda: self.receipt(entry))
        if path == "/.well-known/scitt-keys":
            return self.keys(None)
        if path.startswith("/.well-known/scitt-keys/"):
            return self.keys(path.removeprefix("/.well-known/scitt-keys/"))
        return _problem(404, "Not Found", "no such resource")

    def post(self, path: str, media_type: str, length: int, read: Callable[[int], bytes]) -> _Answer:
        """The answer to a POST of ``length`` bytes (``read`` gives them) to ``path``."""
        if path.rstrip("/") != "/entries":
            return _problem(404, "Not Found", "no such resource")
        if media_type != COSE:
            return _problem(415, "Unsupported Media Type", "a signed statement is sent as %s" % COSE)
        if not 0 < length <= MAX_STATEMENT:
            return _problem(400, "Malformed request", "a body of 1 to %d bytes" % MAX_STATEMENT)
        statement = read(length)  # on the request's thread: a slow sender holds only its own
        return self._on_ledger(lambda: self.register(statement))

    def _on_ledger(self, work: Callable[[], _Answer]) -> _Answer:
        """``work`` on the ledger's thread; what it did not foresee is a 500 problem, never a
        connection dropped without an answer (and the server goes on).
        """
        try:
            return self.owner.call(work)
        except Exception as exc:
            return _problem(500, "Internal error", "the log could not answer: %s" % type(exc).__name__)

    def register(self, statement: bytes) -> _Answer:
        """POST /entries: 201 with the receipt, or a problem (400 malformed or rejected)."""
        try:
            decode_sign1(statement)
        except ReceiptsError as exc:
            return _problem(400, "Malformed request", "not a signed statement: %s" % exc)
        issuer = self._issuer_for(statement)
        try:
            done = register_statement(self.ledger, self.signer, statement, issuer)
        except InputError as exc:
            return _problem(400, "Rejected", "not accepted by the registration policy: %s" % exc)
        except LedgerError as exc:
            return _problem(503, "Unavailable", "the log cannot be written: %s" % exc)
        entry = hashlib.sha256(statement).hexdigest()
        return 201, COSE, done.receipt, {"Location": "/entries/%s" % entry}

    def receipt(self, entry: str) -> _Answer:
        """GET /entries/<id>: a fresh receipt for a registered statement, or 404."""
        found = next(
            (
                b.statement
                for _, b in self.ledger.reader.statements()
                if hashlib.sha256(b.statement).hexdigest() == entry
            ),
            None,
        )
        if found is None:
            return _problem(404, "Not Found", "no registered statement has the entry id %s" % entry[:80])
        try:
            done = register_statement(self.ledger, self.signer, found, None, append=False)
        except LedgerError as exc:
            return _problem(503, "Unavailable", "no receipt can be given now: %s" % exc)
        return 200, COSE, done.receipt, {"Location": "/entries/%s" % entry}

    def keys(self, kid: str | None) -> _Answer:
        """GET /.well-known/scitt-keys[/<base64url kid>]: a COSE Key Set, or one COSE Key."""
        key = {1: 1, 3: -8, -1: 6, -2: parse_public_key_blob(self.signer.public_key_blob), 2: self.kid}
        if kid is None:
            return 200, "application/cbor", cbor2.dumps([key]), {}
        if kid != base64.urlsafe_b64encode(self.kid).decode("ascii").rstrip("="):
            return _problem(404, "No such key", "no key could be found for this kid value")
        return 200, "application/cbor", cbor2.dumps(key), {}

    def _issuer_for(self, statement: bytes) -> Issuer | None:
        """The first operator-given issuer whose key the statement verifies under; None (the
        keyring's key its kid names) when none does.
        """
        sign1 = decode_sign1(statement)
        for issuer in self.issuers:
            with contextlib.suppress(ReceiptsError):
                if verify_sign1(sign1, issuer.key):
                    return issuer
        return None


def serve_scitt(
    service: ScittService, host: str, port: int, announce: Callable[[str], None], idle_timeout_s: float = 10.0
) -> None:
    """Answer the SCRAPI resources until interrupted; ``announce`` is told the address once
    the socket listens (port 0 picks a free one). A connection that sends nothing for
    ``idle_timeout_s`` seconds is dropped.

    Raises:
        InputError: the address cannot be bound.
    """

    class Handler(QuietHandler):
        timeout = idle_timeout_s

        def do_POST(self) -> None:
            said = self.headers.get("Content-Length") or "0"
            length = int(said) if said.isdigit() else -1
            self.answer(*service.post(self.path, self.headers.get_content_type(), length, self.rfile.read))

        def do_GET(self) -> None:
            self.answer(*service.get(self.path))

    listen_and_serve(BoundedThreadingServer, Handler, host, port, announce, service.owner)
