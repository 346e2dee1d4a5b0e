"""A published tile log held to what its auditor kept and asks (docs/format.md §9a): the
tiles audited from their files alone (`audit_tiles`), then the checkpoint the auditor kept
(`--since`), the witness quorum and a tlog-policy's log lines, as a receipt's step 8 holds
a ledger's checkpoint to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from receipts import (
    Checkpoint,
    ReceiptsError,
    Tile,
    is_valid_note_signature,
    parse_checkpoint,
    parse_note,
    parse_verifier_key,
    root_from_tiles,
    tiles_for_size,
)

from ._errors import CannotVerify
from ._policy import Transparency, log_in_policy, witnessed
from ._result import Defect
from ._tiles import TileAudit, audit_tiles

__all__ = ["audit_tiles_under"]

_HASH = 32


def audit_tiles_under(read: Callable[[str], bytes | None], log_vkey: str, policy: Transparency) -> TileAudit:
    """`audit_tiles`, then:

      5. with a kept checkpoint (``policy.since``): it is this log's, signed by its key
         (else `since-checkpoint`), and the published log extends it: no smaller (else
         `history-rewritten`, a rollback) and holding its root at its size (else `split-view`);
      6. the published checkpoint meets the witness quorum (`witness-quorum`) and a
         tlog-policy's log lines (`log-not-in-policy`).

    Args:
        read: the published files by name.
        log_vkey: the log's verifier key.
        policy: what the auditor kept and asks.

    Raises:
        CannotVerify: as `audit_tiles`; or the kept checkpoint is no checkpoint.
    """
    audit = audit_tiles(read, log_vkey)
    if not audit.ok:
        return audit
    note = parse_note(read("checkpoint") or b"")
    published = parse_checkpoint(note.text)
    tiles = {t: read(t.path()) or b"" for t in tiles_for_size(published.size) if t.level is not None}
    found = _as_kept(policy, log_vkey, published, tiles)
    quorum, _ = witnessed(note, published.size, None, policy)
    found += (quorum if policy.wants_quorum else []) + log_in_policy(note, policy)
    return dataclasses.replace(audit, defects=(*audit.defects, *found))


def _as_kept(policy: Transparency, log_vkey: str, published: Checkpoint, tiles: dict[Tile, bytes]) -> list[Defect]:
    """5. The kept checkpoint is this log's, and the published log extends it."""
    if policy.since is None:
        return []
    name, key, _ = parse_verifier_key(log_vkey)
    try:
        note = parse_note(policy.since)
        kept = parse_checkpoint(note.text)
    except ReceiptsError as exc:
        raise CannotVerify("the checkpoint you kept (--since) is not one: %s" % exc) from None
    if kept.origin != name or not is_valid_note_signature(note, name, key):
        return [Defect("since-checkpoint", "the checkpoint you kept is not this log's, signed by its key")]
    if kept.size > published.size:
        return [
            Defect(
                "history-rewritten",
                "the published log (size %d) is behind the checkpoint you kept (size %d): it was rolled back"
                % (published.size, kept.size),
            )
        ]

    def prefix(tile: Tile) -> bytes:  # a tile of the kept size is a prefix of the published one
        wider = next(t for t in tiles if (t.level, t.index) == (tile.level, tile.index) and t.width >= tile.width)
        return tiles[wider][: tile.width * _HASH]

    try:
        same = root_from_tiles(kept.size, prefix) == kept.root
    except (StopIteration, ReceiptsError):
        same = False
    if same:
        return []
    message = (
        "the published log at size %d does not hold the root of the checkpoint you kept at that size: a split view"
    )
    return [Defect("split-view", message % kept.size)]
