"""Task events and side effects. Events record what happened around the ladder (a
claim, a model stop, a gate decision); an effect (a merge, a deploy) is begun once per
idempotency key and only for a verified, merge-eligible receipt of the exact candidate.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from receipts import (
    Digest,
    EntryKind,
    EventType,
    EvidenceRef,
    LadderReceipt,
    ReceiptsError,
    Signer,
    TaskEvent,
    Tier,
    decode_as,
)

from .. import _clock
from .._environment import environment_digest
from .._errors import InputError
from ..store._ledger import Appended, Ledger, Store

if TYPE_CHECKING:
    from verify import Trust

__all__ = ["append_event", "record_event", "task_events", "begin_effect", "end_effect", "verified_receipt"]


def append_event(
    store: Store,
    signer: Signer,
    task: str,
    etype: EventType,
    candidate: Digest | None,
    fields: dict[str, str],
    evidence: Sequence[EvidenceRef] = (),
) -> Appended:
    """Append one signed event of ``task``; bad values are `InputError`."""
    try:
        body = TaskEvent(task, etype, candidate, tuple(sorted(fields.items())), tuple(evidence), _clock.now())
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None
    return store.append(body, signer)


def record_event(
    store: Store,
    signer: Signer,
    task: str,
    etype: EventType,
    candidate: Digest | None,
    fields: dict[str, str] | None = None,
    attachment: Path | bytes | None = None,
) -> Appended:
    """A claim, a model stop, a gate decision or a verified success. A claim's summary (a
    file, or its bytes) is stored as evidence of what was claimed, never as evidence that
    it is true.
    """
    evidence = []
    if attachment is not None:
        if isinstance(attachment, bytes):
            digest, size = store.put_blob_stream(io.BytesIO(attachment))
        else:
            digest, size = store.put_blob_file(attachment)
        evidence.append(EvidenceRef("summary", digest, size, "text/plain"))
    return append_event(store, signer, task, etype, candidate, fields or {}, evidence)


def task_events(store: Store, task: str | None = None) -> list[tuple[int, TaskEvent, str]]:
    """Events (of one task, or all) in chain order: (seq, event, signer key id)."""
    return [
        (stored.seq, body, signer)
        for stored, body, signer in store.bodies(EntryKind.EVENT, task)
        if isinstance(body, TaskEvent)
    ]


def verified_receipt(ledger: Ledger, task: str, trust: Trust) -> tuple[LadderReceipt, str] | None:
    """The task's latest receipt with its hash, if it verifies against ``trust`` and is
    merge-eligible; None otherwise.
    """
    for stored in reversed(list(ledger.entries(task=task))):
        if stored.kind == EntryKind.RECEIPT.value:
            receipt_hash = str(Digest(stored.body_hash))
            from verify import verify_receipt  # the verifier loads only where a receipt is checked

            res = verify_receipt(ledger.reader, receipt_hash, trust)
            return (decode_as(LadderReceipt, stored.body), receipt_hash) if res.ok and res.derived_eligible else None
    return None


def begin_effect(
    ledger: Ledger, signer: Signer, task: str, kind: str, key: str, target: str, candidate: Digest, *, trust: Trust
) -> Appended:
    """Record that a side effect is about to happen. Refused if the key was used before (no
    double send) or if the candidate, contract or environment changed since approval.
    """
    for seq, event, _ in task_events(ledger):
        if event.type is EventType.EFFECT_BEGIN and event.field("key") == key:
            raise InputError("refused: effect %s was already begun at entry %d (no double send)" % (key, seq))
    found = verified_receipt(ledger, task, trust)
    if found is None:
        raise InputError("refused: task %s has no verified, merge-eligible receipt" % task)
    receipt, receipt_hash = found
    if receipt.input_hash != candidate:
        raise InputError(
            "refused: the candidate changed since approval (the receipt covers %s)" % receipt.input_hash.short()
        )
    latest = ledger.latest_contract(task)
    if latest is None or latest.config_hash != receipt.config_hash:
        raise InputError("refused: the contract changed since approval")
    det = receipt.entry(Tier.DETERMINISTIC)
    for digest in det.records if det else ():
        record = ledger.record(digest)
        if record is not None and record.environment != environment_digest():
            raise InputError("refused: the environment changed since the candidate was verified")
    return append_event(
        ledger,
        signer,
        task,
        EventType.EFFECT_BEGIN,
        candidate,
        {"key": key, "kind": kind, "target": target, "receipt": receipt_hash},
    )


def end_effect(ledger: Ledger, signer: Signer, key: str, outcome: str, note: str) -> Appended:
    """Record how a begun effect ended (confirmed, failed or unknown); a confirmed or
    failed effect cannot end twice.
    """
    begun = [
        (seq, e) for seq, e, _ in task_events(ledger) if e.type is EventType.EFFECT_BEGIN and e.field("key") == key
    ]
    if not begun:
        raise InputError("no effect was begun with idempotency key %s" % key)
    _, begin = begun[-1]
    results = [
        e.field("outcome")
        for _, e, _ in task_events(ledger, begin.task_id)
        if e.type is EventType.EFFECT_RESULT and e.field("key") == key
    ]
    if results and results[-1] in ("confirmed", "failed"):
        raise InputError("effect %s already ended: %s" % (key, results[-1]))
    return append_event(
        ledger,
        signer,
        begin.task_id,
        EventType.EFFECT_RESULT,
        begin.candidate,
        {"key": key, "outcome": outcome, "note": note},
    )
