"""Which evidence a verdict is derived from (§6a, §6b, §6c). Those items must always be
present and re-hash; the rest (raw command output, diffs, attachments) is kept for people
and may be redacted from a bundle, which verify then reports as not checked.
"""

from __future__ import annotations

from ._deterministic import CHECK_RESULT_MEDIA_TYPE, SNAPSHOT_MEDIA_TYPE
from ._human import HUMAN_DECISION_ID
from ._judge import JUDGE_RUN_MEDIA_TYPE
from ._model import EvidenceRef, Tier

__all__ = ["is_derivation_input"]


def is_derivation_input(tier: Tier, ref: EvidenceRef) -> bool:
    """True for an evidence item the tier's verdict rule reads: a deterministic record's
    snapshot and check results, a judge record's run and replies, a human record's decision.
    """
    if tier is Tier.DETERMINISTIC:
        return (ref.check_id == "snapshot" and ref.media_type == SNAPSHOT_MEDIA_TYPE) or (
            ref.check_id.startswith("check:") and ref.media_type == CHECK_RESULT_MEDIA_TYPE
        )
    if tier is Tier.JUDGE:
        return (ref.check_id == "judge:run" and ref.media_type == JUDGE_RUN_MEDIA_TYPE) or ref.check_id.startswith(
            "judge:reply:"
        )
    return ref.check_id == HUMAN_DECISION_ID
