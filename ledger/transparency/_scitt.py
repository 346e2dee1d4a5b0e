"""`ledger scitt register` and `ledger scitt receipt`: SCITT signed statements registered in
the chain as `statement` entries, and RFC 9942 receipts from the statement log they form
(docs/format.md §3.4f and §15a). The log's seal key signs both the entry and the receipt.
"""

from __future__ import annotations

from dataclasses import dataclass

from receipts import (
    ReceiptsError,
    Role,
    Signer,
    StatementRegistration,
    cose_receipt,
    decode_sign1,
    fingerprint,
    public_key_line,
    statement_issuer,
    statement_leaf,
    statement_subject,
    verify_sign1,
)

from .._errors import InputError
from ..store._ledger import Ledger

__all__ = ["Issuer", "Registration", "register_statement"]


@dataclass(frozen=True, slots=True)
class Registration:
    """Where a statement sits (its entry, its position in the statement log), the size of
    the tree the receipt is over, the receipt, and whether this call appended the entry.
    """

    seq: int
    index: int
    size: int
    receipt: bytes
    appended: bool


@dataclass(frozen=True, slots=True)
class Issuer:
    """An issuer from outside the keyring that the registration policy accepts: the
    ``iss`` its statements carry, and its public key (PEM or an OpenSSH line).
    """

    name: str
    key: bytes


def register_statement(
    ledger: Ledger, signer: Signer, statement: bytes, issuer: Issuer | None, *, append: bool = True
) -> Registration:
    """Register ``statement`` (unless it already is) and return a receipt for it.

    Steps: 1. the signer is an active seal key of the ledger (it signs the entry and the
    receipt); 2. the statement is a COSE_Sign1 of at most 64 KiB; 3. one already in the
    log is not appended again (a retry after a crash gets its receipt; its issuer was
    checked when it was appended; asked again under the writers' lock, so two registrars
    of one statement append it once); else its signature must verify under ``issuer_key``
    (PEM or an OpenSSH line) and its ``iss`` be the issuer's name, or, when none is given,
    verify under the active seal key of this ledger its kid names and its ``iss`` be the
    ledger's origin; then it is appended; 4. the receipt is over the statement log as it
    stands after the append.

    Args:
        ledger: the ledger whose log registers it.
        signer: the log's seal key.
        statement: the signed statement's bytes (a tagged COSE_Sign1).
        issuer: the issuer from outside the keyring, or None for the keyring's key its kid names.
        append: False only gives a receipt for a statement already registered.

    Raises:
        InputError: any step refuses; nothing is written.
    """
    # 1. The log's key.
    key_id = fingerprint(signer.public_key_blob)
    state = ledger.keyring().get(key_id)
    if state is None or state.revoked_at is not None or "seal" not in [r.value for r in state.spec.roles]:
        raise InputError("refused: statements are registered by an active seal key of this ledger")
    # 2. A statement.
    try:
        body = StatementRegistration(statement)
    except ReceiptsError as exc:
        raise InputError("refused: %s" % exc) from None
    # 3. Once (asked again under the writers' lock: two registrars racing append it once),
    # and only what the issuer signed.
    seq = _registered_at(ledger, body.leaf)
    appended = False
    if seq is None:
        if not append:
            raise InputError("this statement is not registered in this ledger: register it first")
        _check_issuer(ledger, statement, issuer)
        added = ledger.append_unless(body, signer, lambda: _registered_at(ledger, body.leaf) is not None)
        appended = added is not None
        seq = added.seq if added is not None else _registered_at(ledger, body.leaf)
        if seq is None:
            raise InputError("the statement was neither appended nor found: try again")
    # 4. The receipt.
    leaves = [(s, statement_leaf(b.statement)) for s, b in ledger.reader.statements()]
    index = next(i for i, (s, _) in enumerate(leaves) if s == seq)
    receipt = cose_receipt(
        [leaf for _, leaf in leaves],
        index,
        issuer=ledger.origin(),
        subject=statement_subject(statement),
        kid=key_id.encode(),
        sign=signer.sign_raw,
    )
    return Registration(seq, index, len(leaves), receipt, appended)


def _check_issuer(ledger: Ledger, statement: bytes, issuer: Issuer | None) -> None:
    """The registration policy: the statement's signature verifies under its issuer's key,
    and its ``iss`` is the one that key was given for (a key of this keyring issues as the
    ledger's origin, as `ledger export --format scitt` writes): a key accepted for one
    issuer cannot speak for another.
    """
    expected = issuer.name if issuer is not None else ledger.origin()
    try:
        key = issuer.key if issuer is not None else _issuer_in_keyring(ledger, statement)
        if not verify_sign1(decode_sign1(statement), key):
            raise InputError("refused: the statement's signature does not verify under the issuer's key")
        said = statement_issuer(statement)
    except ReceiptsError as exc:
        raise InputError("refused: %s" % exc) from None
    if said != expected:
        raise InputError(
            "refused: the statement's iss is %r, but its key was accepted for the issuer %r" % (said, expected)
        )


def _issuer_in_keyring(ledger: Ledger, statement: bytes) -> bytes:
    """The issuer key a statement's kid names, when it is an active key of the seal role (the
    registration policy, format.md §15a): never another role's, such as the agent's, whose
    private half lives where the agent runs.
    """
    kid = decode_sign1(statement).header.get(4)  # COSE label 4: kid
    name = kid.decode("utf-8", "replace") if isinstance(kid, bytes) else None
    state = ledger.keyring().get(name) if name else None
    if state is None or state.revoked_at is not None:
        raise InputError("cannot check the statement's signature: its kid names no active key here; give --issuer-key")
    if Role.SEAL not in state.spec.roles:
        raise InputError(
            "refused: the statement's kid names %s, a key without the seal role: only seal keys issue statements"
            " from this keyring (give --issuer-key for an issuer from elsewhere)" % state.spec.name
        )
    return public_key_line(state.spec.public_key).encode()


def _registered_at(ledger: Ledger, leaf: bytes) -> int | None:
    return next((s for s, b in ledger.reader.statements() if b.leaf == leaf), None)
