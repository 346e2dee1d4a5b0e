"""Statistics over repeated trials of a task family (tasks named FAMILY@N): pass@k and
pass^k with a confidence interval, and per tier the time and tokens a run took, where the
records say (never read as zero where they do not).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from receipts import (
    CHECK_RESULT_FORMAT,
    JUDGE_RUN_FORMAT,
    Contract,
    Digest,
    EntryKind,
    ReceiptsError,
    Tier,
    TierRecord,
    tally_check_runs,
)
from verify import verify_receipt

from .._errors import InputError
from ..ladder._evidence import evidence_bytes, evidence_json, store_evidence_reader
from ..store._ledger import Ledger

__all__ = ["FamilyStats", "CheckStats", "family_of", "stats"]


@dataclass(frozen=True, slots=True)
class CheckStats:
    """One check of a family, over every run of it the deterministic records hold (each
    attempt of a check run ``runs`` times counts): how often it passed, and pass^k, the
    chance that k runs in a row all pass, estimated as C(passes, k) / C(runs, k).
    """

    check: str
    runs: int
    passes: int
    pass_all: tuple[tuple[int, float], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "passes": self.passes, **{"pass^%d" % k: v for k, v in self.pass_all}}


def family_of(task: str) -> str:
    """Trials of one task share a family: the id before the last '@' (fix-login@3 -> fix-login)."""
    return task.rsplit("@", 1)[0]


def _comb(n: int, k: int) -> int:
    return math.comb(n, k) if 0 <= k <= n else 0


def _wilson(c: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean(values: list[int]) -> int | None:
    return round(sum(values) / len(values)) if values else None


@dataclass(frozen=True, slots=True)
class FamilyStats:
    """One family's figures. A success is a trial whose latest receipt verifies and is
    merge-eligible. Rates are None below ``min_trials`` (``note`` says why).
    """

    family: str
    trials: int
    successes: int
    note: str | None = None
    success_rate: float | None = None
    success_rate_95ci: tuple[float, float] | None = None
    pass_at: tuple[tuple[int, float], ...] = ()
    pass_all: tuple[tuple[int, float], ...] = ()
    time_ms: dict[str, int | None] = field(default_factory=dict)
    judge_tokens_per_run: int | None = None
    checks: tuple[CheckStats, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"family": self.family, "trials": self.trials, "successes": self.successes}
        if self.note is not None:
            row["note"] = self.note
        else:
            row["success_rate"] = self.success_rate
            row["success_rate_95ci"] = list(self.success_rate_95ci or ())
            for (k, at), (_, every) in zip(self.pass_at, self.pass_all, strict=True):
                row["pass@%d" % k] = at
                row["pass^%d" % k] = every
        row["time_ms"] = dict(self.time_ms)
        row["cost"] = {"judge_tokens_per_run": self.judge_tokens_per_run}
        row["checks"] = {c.check: c.as_dict() for c in self.checks}
        return row


def _check_runs(ledger: Ledger, record: TierRecord, contract: Contract | None, tally: dict[str, list[int]]) -> None:
    """Add each run of each check of one deterministic record to ``tally`` (none counted
    without the contract the record names).
    """
    if contract is not None and record.tier is Tier.DETERMINISTIC:
        tally_check_runs(record, contract, store_evidence_reader(ledger), tally)


def _reply_tokens(ledger: Ledger, reply: object) -> int | None:
    """The total_tokens an OpenAI-compatible reply reports in its usage, if it does."""
    if not isinstance(reply, str):
        return None
    try:
        data = evidence_bytes(ledger, Digest.parse(reply))
        usage = json.loads(data).get("usage") if data is not None else None
    except (ValueError, AttributeError, ReceiptsError):
        return None
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else None


def _timings(ledger: Ledger, record: TierRecord, timings: dict[str, list[int]], judge_tokens: list[int]) -> None:
    """Add one record's deterministic run time, judge time and judge tokens, where all its parts report them."""
    check_ms: list[int | None] = []
    for ref in record.evidence:
        if ref.check_id.startswith("check:") and ref.check_id.count(":") == 1:
            doc = evidence_json(ledger, ref.digest, CHECK_RESULT_FORMAT)
            ms = doc.get("duration_ms") if doc is not None else None
            check_ms.append(ms if isinstance(ms, int) else None)
        elif ref.check_id == "judge:run":
            run = evidence_json(ledger, ref.digest, JUDGE_RUN_FORMAT)
            if run is None:
                continue
            asked = [s for a in run.get("attempts") or [] for s in a if isinstance(s, dict)]
            elapsed = [s.get("elapsed_ms") for s in asked]
            counted = [e for e in elapsed if isinstance(e, int)]
            if counted and len(counted) == len(elapsed):
                timings["judge"].append(sum(counted))
            tokens = [_reply_tokens(ledger, s.get("reply")) for s in asked]
            if tokens and all(t is not None for t in tokens):
                judge_tokens.append(sum(t for t in tokens if t is not None))
    # A run's time is the sum of its checks' durations; a check without one leaves it unknown.
    if check_ms and all(ms is not None for ms in check_ms):
        timings["deterministic"].append(sum(ms for ms in check_ms if ms is not None))


def _contracts(ledger: Ledger, task: str) -> dict[Digest, Contract]:
    """The task's contract revisions that parse, by config hash (verify reports the others)."""
    found = {}
    for _, revision in ledger.contract_revisions(task):
        try:
            found[revision.config_hash] = revision.parse()
        except ReceiptsError:
            continue
    return found


def _per_check(tally: dict[str, list[int]], ks: Sequence[int]) -> tuple[CheckStats, ...]:
    return tuple(
        CheckStats(cid, runs, passes, tuple((k, round(_comb(passes, k) / _comb(runs, k), 4)) for k in ks if k <= runs))
        for cid, (runs, passes) in sorted(tally.items())
    )


def parse_ks(text: str) -> tuple[int, ...]:
    """``--k``'s comma-separated whole numbers (`InputError` otherwise)."""
    try:
        return tuple(int(k) for k in text.split(",") if k.strip())
    except ValueError:
        raise InputError("--k takes whole numbers, comma-separated") from None


def stats(ledger: Ledger, prefix: str = "", ks: Sequence[int] = (1, 5), min_trials: int = 5) -> list[FamilyStats]:
    """One `FamilyStats` per family whose tasks start with ``prefix``, sorted by family."""
    families: dict[str, list[str]] = {}
    for stored in ledger.entries():
        if stored.task and stored.task.startswith(prefix):
            trials = families.setdefault(family_of(stored.task), [])
            if stored.task not in trials:
                trials.append(stored.task)
    trust = ledger.genesis_trust()
    out = []
    for family, trials in sorted(families.items()):
        successes = 0
        timings: dict[str, list[int]] = {"deterministic": [], "judge": []}
        judge_tokens: list[int] = []  # per judge run, only where every reply reported its usage
        tally: dict[str, list[int]] = {}
        for task in trials:
            contracts = _contracts(ledger, task)
            receipts = [s for s in ledger.entries(task=task) if s.kind == EntryKind.RECEIPT.value]
            if receipts:
                res = verify_receipt(ledger.reader, str(Digest(receipts[-1].body_hash)), trust)
                successes += bool(res.ok and res.derived_eligible)
            for row in ledger.records_for(task):
                _timings(ledger, row.record, timings, judge_tokens)
                _check_runs(ledger, row.record, contracts.get(row.record.config_hash), tally)
        n, c = len(trials), successes
        time_ms = {tier: _mean(v) for tier, v in timings.items()}
        checks = _per_check(tally, ks)
        if n < min_trials:
            out.append(
                FamilyStats(
                    family,
                    n,
                    c,
                    note="too few trials for a meaningful figure (%d < %d)" % (n, min_trials),
                    time_ms=time_ms,
                    judge_tokens_per_run=_mean(judge_tokens),
                    checks=checks,
                )
            )
            continue
        low, high = _wilson(c, n)
        out.append(
            FamilyStats(
                family,
                n,
                c,
                success_rate=round(c / n, 4),
                success_rate_95ci=(round(low, 4), round(high, 4)),
                pass_at=tuple((k, round(1 - _comb(n - c, k) / _comb(n, k), 4)) for k in ks if k <= n),
                pass_all=tuple((k, round(_comb(c, k) / _comb(n, k), 4)) for k in ks if k <= n),
                time_ms=time_ms,
                judge_tokens_per_run=_mean(judge_tokens),
                checks=checks,
            )
        )
    return out
