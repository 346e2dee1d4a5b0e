"""What `ledger show` finds for a hash any command printed: an entry (a record, a receipt,
by its entry or body hash), a contract revision by its contract hash, or evidence by its
digest, whole or by the prefix a table printed (issue 46).
"""

from __future__ import annotations

from dataclasses import dataclass

from receipts import ContractRevision, Digest, EntryKind, EvidenceRef, TierRecord, decode_as

from .._errors import InputError, NoSuchHash
from .._layout import NOT_A_HASH, hash_prefix
from ..store._ledger import Ledger
from ._evidence import resolve_blob

__all__ = ["Shown", "find_shown"]


@dataclass(frozen=True, slots=True)
class Shown:
    """One thing a hash names. ``kind`` is ``entry``, ``contract`` or ``evidence``; an
    entry and a contract carry their entry's hash, evidence the record that lists it
    (None for a blob no record names) and its reference there (type and size).
    """

    kind: str
    digest: Digest
    entry: Digest | None = None
    revision: ContractRevision | None = None
    seq: int | None = None
    record: TierRecord | None = None
    ref: EvidenceRef | None = None


def find_shown(ledger: Ledger, text: str) -> Shown:
    """The entry, contract revision or evidence ``text`` names, tried in that order.

    Args:
        ledger: the ledger to look in.
        text: a hash as a command printed it: whole, or its first 8 or more hex digits.

    Raises:
        InputError: it is no hash nor a table's prefix of one, names nothing, or names
            several things of one kind (they are listed).
    """
    prefix = hash_prefix(text)
    if prefix is None:
        raise InputError(NOT_A_HASH % (text[:80],))
    try:
        digest = ledger.resolve(text)
        if ledger.find(digest) is not None:
            return Shown("entry", digest, entry=digest)
    except NoSuchHash:
        pass  # maybe a contract's or evidence's; an ambiguous prefix is refused as it is
    contracts = {
        str(rev.config_hash): (seq, rev)
        for seq, rev in ledger.contract_revisions()
        if rev.config_hash.value.hex().startswith(prefix)
    }
    if len(contracts) > 1:
        raise InputError("%s is ambiguous: it starts contracts %s; give more digits" % (prefix, ", ".join(contracts)))
    if contracts:
        ((name, (seq, rev)),) = contracts.items()
        return Shown("contract", Digest.parse(name), revision=rev, seq=seq)
    try:
        blob = resolve_blob(ledger, text)
    except InputError:
        raise InputError("no entry, record, receipt, contract or evidence hash starts with %s" % prefix) from None
    return _evidence(ledger, blob)


def _evidence(ledger: Ledger, blob: Digest) -> Shown:
    # The newest record naming the blob says what it is; its digest's bytes sit in the
    # record's body, so only those bodies are decoded (shown, never decided on).
    for stored in reversed(list(ledger.reader.iter_entries(kind=EntryKind.TIER_RECORD.value))):
        if blob.value in stored.body:
            record = decode_as(TierRecord, stored.body)
            ref = next((r for r in record.evidence if r.digest == blob), None)
            if ref is not None:
                return Shown("evidence", blob, record=record, ref=ref)
    return Shown("evidence", blob)
