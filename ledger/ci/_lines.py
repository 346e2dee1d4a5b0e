"""The gate's decision and `verify --commit`'s receipts as lines for a CI log, beside the
results they render (`_gate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from verify import completeness_text

from ..views._render import verify_lines

if TYPE_CHECKING:
    from ._gate import GateResult, ReceiptCheck

__all__ = ["gate_lines", "commit_lines"]


def gate_lines(result: GateResult) -> list[str]:
    """The gate's decision for a CI log: the decision, where it came from, and every
    weakening, waiver and stale approval the passing receipt carries.
    """
    if result.passed:
        lines = ["GATE PASS: %s has verified, merge-eligible receipt %s" % (result.commit[:12], result.receipt)]
        if result.via_tree:
            lines.append(
                "  via its tree %s: the receipt is for commit %s, whose tree is identical (a squash or rebase merge)"
                % (result.tree[:12], result.via_tree[:12])
            )
        passing = result.passing
        if passing is not None:
            lines.append("  verified from %s" % (passing.origin or "?"))
            lines.append(
                "  completeness: %s"
                % completeness_text(passing.completeness, passing.result.certified_by if passing.result else ())
            )
        lines += ["  %s" % n for n in result.notices]
    else:
        lines = [
            "GATE %s: %s%s"
            % (
                "FAIL" if result.mode == "enforce" else "WOULD BLOCK (advisory)",
                result.commit[:12],
                "" if result.mode == "enforce" else "; recorded, not blocking",
            )
        ]
        lines += ["  %s" % reason for reason in result.reasons]
    lines.append("  trust: %s" % result.trust)
    return lines


def commit_lines(checks: Sequence[ReceiptCheck], decides: ReceiptCheck | None) -> list[str]:
    """`verify --commit`: the decision first (the receipt that decides, as the gate picks it,
    and why each other one does not), then each receipt verified, the deciding one first.
    """
    if decides is None:
        lines = ["NOT MERGE-ELIGIBLE: no receipt on this commit or its tree verified"]
    elif decides.lets_through:
        lines = ["MERGE-ELIGIBLE: decided by receipt %s, the newest verified receipt of it" % decides.note.receipt]
    else:
        lines = ["NOT MERGE-ELIGIBLE: decided by receipt %s: %s" % (decides.note.receipt, decides.why_not())]
    for check in checks:
        if check is not decides:
            lines.append("  does not decide: %s" % _not_deciding(check, decides))
    blocks = []
    for check in sorted(checks, key=lambda c: c is not decides):
        head = ["named on the %s's note; verified from %s" % (check.note.on, check.origin or "nowhere")]
        if check.match == "tree":
            head.append("for commit %s, whose tree is this one" % (check.note.commit or "?")[:12])
        elif check.match == "stale":
            head.append("STALE: its candidate is neither this commit nor its tree")
        if check.result is None:
            blocks.append("\n".join(["receipt   %s" % check.note.receipt, "CANNOT VERIFY: %s" % check.problem]))
        else:
            blocks.append("\n".join(verify_lines(check.result) + head))
    return ["\n".join(lines), "", "\n\n".join(blocks)]


def _not_deciding(check: ReceiptCheck, decides: ReceiptCheck | None) -> str:
    if not check.ok or decides is None:
        return check.why_not()
    return "%s is older than the deciding receipt (or sealed with it and outvoted)" % check.note.receipt
