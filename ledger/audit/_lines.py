"""The auditor's tables as lines for a terminal: the population of receipts, the merges
that reached a branch, and pass@k over trials, beside the rows they render.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._merges import MergeRow
    from ._population import ChangeRow
    from ._stats import FamilyStats

__all__ = ["stats_lines", "population_lines", "merges_lines"]


def _shown(value: object, unit: str = "") -> str:
    return "not recorded" if value is None else "%s%s" % (value, unit)


def stats_lines(rows: Sequence[FamilyStats]) -> list[str]:
    """`ledger stats`: per family, pass@k and pass^k with the success rate's interval, and the costs."""
    lines = []
    for row in rows:
        costs = "  mean time per run: deterministic %s, judge %s; judge tokens per run: %s" % (
            _shown(row.time_ms.get("deterministic"), " ms"),
            _shown(row.time_ms.get("judge"), " ms"),
            _shown(row.judge_tokens_per_run),
        )
        per_check = "".join(
            "\n  check %s: %d of %d runs passed%s"
            % (c.check, c.passes, c.runs, "".join("  pass^%d=%.3f" % kv for kv in c.pass_all))
            for c in row.checks
        )
        if row.note is not None:
            lines.append(
                "%-24s n=%d successes=%d: %s\n%s%s"
                % (row.family, row.trials, row.successes, row.note, costs, per_check)
            )
            continue
        figures = "  ".join(
            "pass@%d=%.3f  pass^%d=%.3f" % (*at, *every) for at, every in zip(row.pass_at, row.pass_all, strict=True)
        )
        low, high = row.success_rate_95ci or (0.0, 1.0)
        lines.append(
            "%-24s n=%d successes=%d rate=%.3f (95%% CI %.3f-%.3f)  %s\n%s%s"
            % (row.family, row.trials, row.successes, row.success_rate or 0.0, low, high, figures, costs, per_check)
        )
    return lines


def population_lines(rows: Sequence[ChangeRow], from_text: str, to_text: str) -> list[str]:
    """`ledger report --from --to`: one line per sealed receipt (with the gate's decision
    it made, and whether its change reached the branch when `--reached` asked), then the count.
    """
    reached = {None: "", True: " merged", False: " not-merged"}
    lines = [
        "%s  %s  %-16s %-12s eligible=%s verified=%s gate=%s%s  %s"
        % (
            datetime.datetime.fromtimestamp(row.sealed_at, datetime.UTC).strftime("%Y-%m-%d %H:%M"),
            row.receipt[:19] + "…",
            row.task,
            (row.commit or "-")[:12],
            "yes" if row.merge_eligible else "no",
            "yes" if row.verified else "NO",
            (row.gate or "-").split(" ", 1)[0],
            reached[row.reached],
            ", ".join("%s (%s)" % (a["name"], a["method"]) for a in row.approvers) or "no approvers",
        )
        for row in rows
    ]
    lines.append("%d sealed receipt(s) from %s to %s" % (len(rows), from_text, to_text))
    return lines


def merges_lines(rows: Sequence[MergeRow], branch: str, from_text: str, to_text: str) -> list[str]:
    """`ledger report --merges`: the count and how many need a look first, then one block
    per commit on the branch (findings first, so a clean merge is one line).
    """
    flagged = [row for row in rows if row.findings]
    lines = [
        "%d commit(s) reached %s from %s to %s; %d need a look" % (len(rows), branch, from_text, to_text, len(flagged))
    ]
    for row in rows:
        lines.append(
            "%s  %s  %-11s %-16s %s  %s"
            % (
                datetime.datetime.fromtimestamp(row.merged_at, datetime.UTC).strftime("%Y-%m-%d %H:%M"),
                row.commit[:12],
                row.kind,
                row.task or "-",
                "eligible at merge" if row.eligible_at_merge else "NOT ELIGIBLE AT MERGE",
                "approved by %s of %s required" % (", ".join(row.approvals) or "nobody", row.required_approvals)
                if row.required_approvals is not None
                else "no contract",
            )
        )
        lines += ["    ! %s" % finding for finding in row.findings]
        lines += ["    after the merge: %s" % text for text in row.after_merge]
    return lines
