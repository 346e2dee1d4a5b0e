"""`ledger show` for each thing a hash names (`ladder._shown`): an entry with its body
(a contract's as its TOML), a contract revision, or evidence as its text with its type.
"""

from __future__ import annotations

from typing import Any

from receipts import utc_text

from ..ladder._evidence import blob_preview
from ..ladder._shown import Shown
from ..store._ledger import Ledger
from ._render import entry_document, entry_lines

__all__ = ["shown_views"]

PREVIEW_LINES = 200


def shown_views(ledger: Ledger, shown: Shown) -> tuple[dict[str, Any], list[str]]:
    """The document (``--json``) and the lines a person reads for ``shown``.

    Args:
        ledger: where it was found (for the entry, the names of signers, the evidence's bytes).
        shown: what `find_shown` found.
    """
    names = {s.key_id: s.spec.name for s in ledger.keyring()}
    if shown.kind == "entry" and shown.entry is not None:
        stored = ledger.find(shown.entry)
        assert stored is not None  # find_shown found it
        return entry_document(stored), entry_lines(stored, names)
    if shown.kind == "contract" and shown.revision is not None:
        text = shown.revision.contract.decode("utf-8", "replace")
        doc = {"contract": str(shown.digest), "task": shown.revision.task_id, "entry_seq": shown.seq, "toml": text}
        head = "contract   %s of %s (revision at entry %s)" % (shown.digest, shown.revision.task_id, shown.seq)
        return doc, [head, "", *text.rstrip("\n").splitlines()]
    text, note = blob_preview(ledger, shown.digest, PREVIEW_LINES)
    ref, record = shown.ref, shown.record
    doc = {
        "evidence": str(shown.digest),
        "media_type": ref.media_type if ref else None,
        "size": ref.size if ref else None,
        "check": ref.check_id if ref else None,
        "task": record.task_id if record else None,
        "text": text,
        "truncated": note,
    }
    said = (
        "evidence   %s (%s, %d bytes) of check %s, %s tier of %s, recorded %s"
        % (
            shown.digest,
            ref.media_type,
            ref.size,
            ref.check_id,
            record.tier.value,
            record.task_id,
            utc_text(record.created),
        )
        if ref and record
        else "evidence   %s (named by no tier record)" % shown.digest
    )
    return doc, [said, "", *text.rstrip("\n").splitlines(), *([note] if note else [])]
