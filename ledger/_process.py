"""The completion gate around the ladder: events, effects, agent traces, the task
lifecycle derived from the chain, the verification nudge and trial statistics."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import (
    CHECK_RESULT_FORMAT,
    CHECK_RESULT_MEDIA_TYPE,
    JUDGE_RUN_FORMAT,
    SNAPSHOT_FORMAT,
    SNAPSHOT_MEDIA_TYPE,
    Contract,
    Digest,
    EntryKind,
    EventType,
    EvidenceRef,
    LadderReceipt,
    ReceiptsError,
    Signer,
    Step,
    TaskEvent,
    TaskState,
    Tier,
    TierRecord,
    ToolPolicy,
    Verdict,
    decode_body,
    decode_entry,
    derive_check,
    derive_deterministic,
    derive_state,
    integrity_failure,
    parse_evidence_json,
    thaw,
)
from verify import verify_receipt

from . import _clock
from ._errors import InputError
from ._ops import environment_digest
from ._store import Appended, Ledger, Store

__all__ = [
    "record_event", "ingest_trace", "decide_calls", "begin_effect", "end_effect", "task_state", "nudge", "stats",
    "process_facts", "TRACE_DECISIONS_FORMAT",
]

TRACE_DECISIONS_FORMAT = "receipt-ledger/trace-decisions/v1"
MAX_TRACE = 64 << 20


def _event(store: Store, signer: Signer, task: str, etype: EventType, candidate: Digest | None,
           fields: dict[str, str], evidence: Sequence[EvidenceRef] = ()) -> Appended:
    try:
        body = TaskEvent(task, etype, candidate, tuple(sorted(fields.items())), tuple(evidence), _clock.now())
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None
    return store.append(body, signer)


def record_event(store: Store, signer: Signer, task: str, etype: EventType, candidate: Digest | None,
                 fields: dict[str, str] | None = None, attachment: Path | None = None) -> Appended:
    """A claim, a model stop, a gate decision or a verified success. A claim's summary is
    stored as evidence of what was claimed, never as evidence that it is true."""
    evidence = []
    if attachment is not None:
        digest, size = store.put_blob_file(attachment)
        evidence.append(EvidenceRef("summary", digest, size, "text/plain"))
    return _event(store, signer, task, etype, candidate, fields or {}, evidence)


# -- agent traces --------------------------------------------------------------------------


def decide_calls(policy: ToolPolicy, lines: Sequence[bytes]) -> list[dict[str, Any]]:
    """One decision per call: approved, rejected or requires_human, with the reason."""
    import jsonschema

    schemas = {tool: thaw(schema) for tool, schema in policy.schemas}
    decisions = []
    for step, raw in enumerate(lines, start=1):
        try:
            call = json.loads(raw)
            tool, args = call["tool"], call.get("arguments", call.get("args", {}))
            if not isinstance(tool, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            decisions.append({"step": step, "tool": None, "decision": "rejected", "reason": "not a tool call: %r" % raw[:80]})
            continue
        decision, reason = "approved", "allowed by the contract's tool policy"
        if tool in policy.denied:
            decision, reason = "rejected", "tool %s is denied" % tool
        elif policy.allowed and tool not in policy.allowed:
            decision, reason = "rejected", "tool %s is not among the allowed tools" % tool
        elif policy.max_steps is not None and step > policy.max_steps:
            decision, reason = "rejected", "step %d is over the limit of %d" % (step, policy.max_steps)
        elif tool in schemas:
            errors = sorted(jsonschema.validators.validator_for(schemas[tool])(schemas[tool]).iter_errors(args), key=str)
            if errors:
                decision, reason = "rejected", "arguments fail the %s schema: %s" % (tool, errors[0].message)
        if decision == "approved" and tool in policy.requires_human:
            decision, reason = "requires_human", "tool %s needs a human's approval" % tool
        decisions.append({"step": step, "tool": tool, "decision": decision, "reason": reason})
    return decisions


def ingest_trace(store: Store, signer: Signer, task: str, contract: Contract, trace: Path, candidate: Digest | None) -> tuple[Appended, list[dict[str, Any]]]:
    try:
        data = trace.read_bytes()
    except OSError as exc:
        raise InputError("cannot read trace %s: %s" % (trace, exc)) from None
    if len(data) > MAX_TRACE:
        raise InputError("trace %s is larger than %d bytes" % (trace, MAX_TRACE))
    lines = [line for line in data.splitlines() if line.strip()]
    decisions = decide_calls(contract.tools, lines)
    trace_digest, trace_size = store.put_blob_stream(io.BytesIO(data))
    doc = {"format": TRACE_DECISIONS_FORMAT, "trace": str(trace_digest), "decisions": decisions}
    dec_bytes = json.dumps(doc, indent=1, sort_keys=True).encode()
    dec_digest, dec_size = store.put_blob_stream(io.BytesIO(dec_bytes))
    counts = {k: str(sum(1 for d in decisions if d["decision"] == k)) for k in ("approved", "rejected", "requires_human")}
    evidence = [EvidenceRef("trace", trace_digest, trace_size, "application/jsonl"),
                EvidenceRef("trace:decisions", dec_digest, dec_size, "application/json")]
    return _event(store, signer, task, EventType.TRACE, candidate, {"calls": str(len(decisions)), **counts}, evidence), decisions


def _events(store: Store, task: str | None = None) -> list[tuple[int, TaskEvent, str]]:
    return [(stored.seq, body, signer) for stored, body, signer in store.bodies(EntryKind.EVENT, task) if isinstance(body, TaskEvent)]


def process_facts(store: Store, task: str, contract: Contract, candidate: Digest) -> dict[str, Any] | None:
    """What the deterministic tier records about the agent's process: from the latest trace."""
    if contract.tools == ToolPolicy():
        return None
    traces = [(seq, e) for seq, e, _ in _events(store, task) if e.type is EventType.TRACE]
    if not traces:
        return {"trace": None, "calls": 0, "rejected_calls": 0, "unapproved_human_calls": 0}
    _, latest = traces[-1]
    ref = next((e for e in latest.evidence if e.check_id == "trace:decisions"), None)
    try:
        doc = parse_evidence_json(store.blob_path(ref.digest).read_bytes(), TRACE_DECISIONS_FORMAT) if ref else None
    except (OSError, ReceiptsError):
        doc = None
    decisions = doc.get("decisions") if doc else None
    if not isinstance(decisions, list):
        return {"trace": None, "calls": 0, "rejected_calls": 0, "unapproved_human_calls": 0}
    approved_by_human = any(row.record.tier is Tier.HUMAN and row.record.verdict is Verdict.PASS and row.record.input_hash == candidate
                            for row in store.records_for(task))
    needs_human = sum(1 for d in decisions if d.get("decision") == "requires_human")
    return {"trace": str(ref.digest) if ref else None, "calls": len(decisions),
            "rejected_calls": sum(1 for d in decisions if d.get("decision") == "rejected"),
            "unapproved_human_calls": 0 if approved_by_human else needs_human}


# -- effects -----------------------------------------------------------------------------------


def _verified_receipt(ledger: Ledger, task: str) -> tuple[LadderReceipt, str] | None:
    for stored in reversed(list(ledger.entries(task=task))):
        if stored.kind == EntryKind.RECEIPT.value:
            receipt = decode_body(EntryKind.RECEIPT, stored.body)
            assert isinstance(receipt, LadderReceipt)
            res = verify_receipt(ledger.reader, str(Digest(stored.body_hash)), ledger.genesis_trust())
            return (receipt, str(Digest(stored.body_hash))) if res.ok and res.derived_eligible else None
    return None


def begin_effect(ledger: Ledger, signer: Signer, task: str, kind: str, key: str, target: str, candidate: Digest) -> Appended:
    """Record that a side effect is about to happen. Refused if the key was used before (no
    double send) or if the candidate, contract or environment changed since approval."""
    for seq, event, _ in _events(ledger):
        if event.type is EventType.EFFECT_BEGIN and event.field("key") == key:
            raise InputError("refused: effect %s was already begun at entry %d (no double send)" % (key, seq))
    found = _verified_receipt(ledger, task)
    if found is None:
        raise InputError("refused: task %s has no verified, merge-eligible receipt" % task)
    receipt, receipt_hash = found
    if receipt.input_hash != candidate:
        raise InputError("refused: the candidate changed since approval (the receipt covers %s)" % receipt.input_hash.short())
    latest = ledger.latest_contract(task)
    if latest is None or latest.config_hash != receipt.config_hash:
        raise InputError("refused: the contract changed since approval")
    det = receipt.entry(Tier.DETERMINISTIC)
    for digest in det.records if det else ():
        stored = ledger.find(digest)
        record = decode_body(EntryKind.TIER_RECORD, stored.body) if stored else None
        if isinstance(record, TierRecord) and record.environment != environment_digest():
            raise InputError("refused: the environment changed since the candidate was verified")
    return _event(ledger, signer, task, EventType.EFFECT_BEGIN, candidate,
                  {"key": key, "kind": kind, "target": target, "receipt": receipt_hash})


def end_effect(ledger: Ledger, signer: Signer, key: str, outcome: str, note: str) -> Appended:
    begun = [(seq, e) for seq, e, _ in _events(ledger) if e.type is EventType.EFFECT_BEGIN and e.field("key") == key]
    if not begun:
        raise InputError("no effect was begun with idempotency key %s" % key)
    _, begin = begun[-1]
    results = [e.field("outcome") for _, e, _ in _events(ledger, begin.task_id) if e.type is EventType.EFFECT_RESULT and e.field("key") == key]
    if results and results[-1] in ("confirmed", "failed"):
        raise InputError("effect %s already ended: %s" % (key, results[-1]))
    return _event(ledger, signer, begin.task_id, EventType.EFFECT_RESULT, begin.candidate, {"key": key, "outcome": outcome, "note": note})


# -- the lifecycle -------------------------------------------------------------------------------


def _det_step(store: Store, rec: TierRecord, contract: Contract | None) -> Step:
    failing: set[str] = set()
    integrity = False
    if contract is not None:
        results: dict[str, Any] = {}
        snapshot = None
        for ref in rec.evidence:
            try:
                if ref.check_id == "snapshot" and ref.media_type == SNAPSHOT_MEDIA_TYPE:
                    snapshot = parse_evidence_json(store.blob_path(ref.digest).read_bytes(), SNAPSHOT_FORMAT)
                elif ref.check_id.startswith("check:") and ref.media_type == CHECK_RESULT_MEDIA_TYPE:
                    results[ref.check_id[6:]] = parse_evidence_json(store.blob_path(ref.digest).read_bytes(), CHECK_RESULT_FORMAT)
            except (OSError, ReceiptsError):
                continue
        outcome = derive_deterministic(contract, results, snapshot)
        integrity = integrity_failure(outcome.reasons)
        failing = {c.id for c in contract.checks if not derive_check(c, results.get(c.id))[0]}
    return Step("det", str(rec.input_hash), rec.verdict.value, failing=frozenset(failing), integrity=integrity)


def task_state(store: Store, task: str) -> TaskState:
    contracts = {rev.config_hash: rev.parse() for _, rev in store.contract_revisions(task)}
    latest = store.latest_contract(task)
    contract = latest.parse() if latest else None
    steps: list[Step] = []
    claims = []
    for stored in store.entries(task=task):
        kind = stored.kind
        if kind == EntryKind.TIER_RECORD.value:
            rec = decode_body(EntryKind.TIER_RECORD, stored.body)
            assert isinstance(rec, TierRecord)
            if rec.tier is Tier.DETERMINISTIC:
                steps.append(_det_step(store, rec, contracts.get(rec.config_hash)))
            else:
                signer = decode_entry(stored.entry).signer
                steps.append(Step(rec.tier.value, str(rec.input_hash), rec.verdict.value, key=signer))
        elif kind == EntryKind.RECEIPT.value:
            receipt = decode_body(EntryKind.RECEIPT, stored.body)
            assert isinstance(receipt, LadderReceipt)
            steps.append(Step("receipt", str(receipt.input_hash), "eligible" if receipt.merge_eligible else "not"))
        elif kind == EntryKind.EVENT.value:
            ev = decode_body(EntryKind.EVENT, stored.body)
            assert isinstance(ev, TaskEvent)
            cand = str(ev.candidate) if ev.candidate else None
            if ev.type is EventType.ANSWER_PROPOSED:
                steps.append(Step("claim", cand))
                claims.append(str(stored.seq))
            elif ev.type is EventType.MODEL_STOPPED:
                steps.append(Step("stopped", cand))
            elif ev.type is EventType.SUCCESS_VERIFIED:
                steps.append(Step("verified", cand))
            elif ev.type is EventType.EFFECT_BEGIN:
                steps.append(Step("effect_begin", cand, key=ev.field("key")))
            elif ev.type is EventType.EFFECT_RESULT:
                steps.append(Step("effect_result", cand, key=ev.field("key"), outcome=ev.field("outcome")))
    tiers = contract.required_tiers if contract else ()
    return derive_state(steps, human_approvals=contract.human_approvals if contract else 1,
                        repair_attempts=contract.repair_attempts if contract else 5,
                        no_progress_after=contract.no_progress_after if contract else 3,
                        judge_required=Tier.JUDGE in tiers, human_required=Tier.HUMAN in tiers)


# -- the verification nudge ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Nudge:
    window: int
    claims: int
    unverified: int
    share: float
    threshold: float
    alert: bool
    recent_unverified: tuple[str, ...]


def nudge(store: Store, window: int = 50, threshold: float = 0.3) -> Nudge:
    """Over the last ``window`` claims, the share with no deterministic run on the claimed
    candidate after the claim. Alert above ``threshold`` (strictly), with at least 3 claims."""
    claims: list[tuple[int, str, str | None]] = []
    runs: list[tuple[int, str, str]] = []
    for stored in store.entries():
        if stored.kind == EntryKind.EVENT.value:
            ev = decode_body(EntryKind.EVENT, stored.body)
            assert isinstance(ev, TaskEvent)
            if ev.type is EventType.ANSWER_PROPOSED:
                claims.append((stored.seq, ev.task_id, str(ev.candidate) if ev.candidate else None))
        elif stored.kind == EntryKind.TIER_RECORD.value:
            rec = decode_body(EntryKind.TIER_RECORD, stored.body)
            assert isinstance(rec, TierRecord)
            if rec.tier is Tier.DETERMINISTIC:
                runs.append((stored.seq, rec.task_id, str(rec.input_hash)))
    recent = claims[-window:]
    unverified = [(seq, task) for seq, task, cand in recent
                  if not any(rseq > seq and rtask == task and (cand is None or rcand == cand) for rseq, rtask, rcand in runs)]
    share = len(unverified) / len(recent) if recent else 0.0
    return Nudge(window, len(recent), len(unverified), share, threshold, len(recent) >= 3 and share > threshold,
                 tuple(task for _, task in reversed(unverified[-5:])))


# -- statistics over trials ------------------------------------------------------------------------


def _comb(n: int, k: int) -> int:
    return math.comb(n, k) if 0 <= k <= n else 0


def _wilson(c: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def family_of(task: str) -> str:
    """Trials of one task share a family: the id before the last '@' (fix-login@3 -> fix-login)."""
    return task.rsplit("@", 1)[0]


def _reply_tokens(ledger: Ledger, reply: object) -> int | None:
    """The total_tokens an OpenAI-compatible reply reports in its usage, if it does."""
    if not isinstance(reply, str):
        return None
    try:
        usage = json.loads(ledger.blob_path(Digest.parse(reply)).read_bytes()).get("usage")
    except (OSError, ValueError, AttributeError, ReceiptsError):
        return None
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total >= 0 else None


def stats(ledger: Ledger, prefix: str = "", ks: Sequence[int] = (1, 5), min_trials: int = 5) -> list[dict[str, Any]]:
    tasks: dict[str, list[str]] = {}
    for stored in ledger.entries():
        if stored.task and stored.task.startswith(prefix):
            tasks.setdefault(family_of(stored.task), [])
            if stored.task not in tasks[family_of(stored.task)]:
                tasks[family_of(stored.task)].append(stored.task)
    out = []
    trust = ledger.genesis_trust()
    for family, trials in sorted(tasks.items()):
        successes = 0
        timings: dict[str, list[int]] = {"deterministic": [], "judge": []}
        judge_tokens: list[int] = []  # per judge run, only where every reply reported its usage
        for task in trials:
            receipts = [s for s in ledger.entries(task=task) if s.kind == EntryKind.RECEIPT.value]
            if receipts:
                res = verify_receipt(ledger.reader, str(Digest(receipts[-1].body_hash)), trust)
                successes += bool(res.ok and res.derived_eligible)
            for rr in ledger.records_for(task):
                check_ms: list[int | None] = []
                for ref in rr.record.evidence:
                    if ref.check_id.startswith("check:") and ref.check_id.count(":") == 1:
                        try:
                            doc = parse_evidence_json(ledger.blob_path(ref.digest).read_bytes(), CHECK_RESULT_FORMAT)
                        except (OSError, ReceiptsError):
                            check_ms.append(None)
                            continue
                        ms = (doc.get("facts") or {}).get("duration_ms")
                        check_ms.append(ms if isinstance(ms, int) else None)
                    elif ref.check_id == "judge:run":
                        try:
                            run = parse_evidence_json(ledger.blob_path(ref.digest).read_bytes(), JUDGE_RUN_FORMAT)
                        except (OSError, ReceiptsError):
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
        n, c = len(trials), successes
        row: dict[str, Any] = {"family": family, "trials": n, "successes": c}
        if n < min_trials:
            row["note"] = "too few trials for a meaningful figure (%d < %d)" % (n, min_trials)
        else:
            low, high = _wilson(c, n)
            row["success_rate"] = round(c / n, 4)
            row["success_rate_95ci"] = [round(low, 4), round(high, 4)]
            for k in ks:
                if k <= n:
                    row["pass@%d" % k] = round(1 - _comb(n - c, k) / _comb(n, k), 4)
                    row["pass^%d" % k] = round(_comb(c, k) / _comb(n, k), 4)
        row["time_ms"] = {tier: (round(sum(v) / len(v)) if v else None) for tier, v in timings.items()}
        # The judge's token usage is the only cost a record carries; None when no reply reported it.
        row["cost"] = {"judge_tokens_per_run": round(sum(judge_tokens) / len(judge_tokens)) if judge_tokens else None}
        out.append(row)
    return out
