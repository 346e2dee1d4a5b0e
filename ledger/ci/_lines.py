"""The gate's decision and `verify --commit`'s receipts as lines for a CI log, beside the
results they render (`_gate`).
"""

from __future__ import annotations

from collections.abc import Iterable
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


def commit_lines(checks: Iterable[ReceiptCheck]) -> list[str]:
    """`verify --commit`: each receipt named on the commit or its tree, verified."""
    blocks = []
    for check in checks:
        head = ["named on the %s's note; verified from %s" % (check.note.on, check.origin or "nowhere")]
        if check.match == "tree":
            head.append("for commit %s, whose tree is this one" % (check.note.commit or "?")[:12])
        elif check.match == "stale":
            head.append("STALE: its candidate is neither this commit nor its tree")
        if check.result is None:
            blocks.append("\n".join(["receipt   %s" % check.note.receipt, "CANNOT VERIFY: %s" % check.problem]))
        else:
            blocks.append("\n".join(verify_lines(check.result) + head))
    return ["\n\n".join(blocks)]
