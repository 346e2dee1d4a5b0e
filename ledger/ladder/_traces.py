"""Agent traces: an agent's tool calls decided against the contract's tool policy (the
rule is `receipts.decide_tool_calls`), stored as evidence with a trace event, and the
process facts the deterministic tier records from the latest trace.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from receipts import (
    REJECTED,
    REQUIRES_HUMAN,
    Contract,
    Digest,
    EventType,
    EvidenceRef,
    ReceiptsError,
    Signer,
    Tier,
    ToolDecision,
    ToolPolicy,
    Verdict,
    decide_tool_calls,
    parse_contract,
)

from .._errors import InputError
from .._files import read_bounded
from ..store._ledger import Appended, Store
from ._events import append_event, task_events
from ._evidence import evidence_json

__all__ = ["TRACE_DECISIONS_FORMAT", "MAX_TRACE", "ingest_trace", "process_facts"]

TRACE_DECISIONS_FORMAT = "receipt-ledger/trace-decisions/v1"
MAX_TRACE = 64 << 20


def ingest_trace(
    store: Store,
    signer: Signer,
    task: str,
    contract: Contract | bytes,
    trace: Path,
    candidate: Digest | None,
    root: Path | None = None,
) -> tuple[Appended, tuple[ToolDecision, ...]]:
    """Decide every call of a JSON Lines trace (writes to the contract's protected paths
    included, relative to the repository ``root``), store the trace and the decisions, and
    append a trace event counting them. ``contract`` may be the contract file's bytes.
    """
    if isinstance(contract, bytes):
        try:
            contract = parse_contract(contract)
        except ReceiptsError as exc:
            raise InputError(str(exc)) from None
    data = read_bounded(trace, "trace", MAX_TRACE)
    decisions = decide_tool_calls(
        contract.tools,
        [line for line in data.splitlines() if line.strip()],
        contract.protected_paths,
        str(root) if root is not None else "",
    )
    trace_digest, trace_size = store.put_blob_stream(io.BytesIO(data))
    doc = {"format": TRACE_DECISIONS_FORMAT, "trace": str(trace_digest), "decisions": [d.as_dict() for d in decisions]}
    dec_digest, dec_size = store.put_blob_stream(io.BytesIO(json.dumps(doc, indent=1, sort_keys=True).encode()))
    counts = {k: str(sum(1 for d in decisions if d.decision == k)) for k in ("approved", REJECTED, REQUIRES_HUMAN)}
    evidence = [
        EvidenceRef("trace", trace_digest, trace_size, "application/jsonl"),
        EvidenceRef("trace:decisions", dec_digest, dec_size, "application/json"),
    ]
    appended = append_event(
        store, signer, task, EventType.TRACE, candidate, {"calls": str(len(decisions)), **counts}, evidence
    )
    return appended, decisions


_NO_TRACE: dict[str, Any] = {"trace": None, "calls": 0, "rejected_calls": 0, "unapproved_human_calls": 0}


def process_facts(store: Store, task: str, contract: Contract, candidate: Digest) -> dict[str, Any] | None:
    """What the deterministic tier records about the agent's process: from the latest trace."""
    if contract.tools == ToolPolicy():
        return None
    traces = [e for _, e, _ in task_events(store, task) if e.type is EventType.TRACE]
    if not traces:
        return dict(_NO_TRACE)
    ref = next((e for e in traces[-1].evidence if e.check_id == "trace:decisions"), None)
    doc = evidence_json(store, ref.digest, TRACE_DECISIONS_FORMAT) if ref else None
    decisions = doc.get("decisions") if doc else None
    if ref is None or not isinstance(decisions, list):
        return dict(_NO_TRACE)
    approved_by_human = any(
        row.record.tier is Tier.HUMAN and row.record.verdict is Verdict.PASS and row.record.input_hash == candidate
        for row in store.records_for(task)
    )
    needs_human = sum(1 for d in decisions if isinstance(d, dict) and d.get("decision") == REQUIRES_HUMAN)
    return {
        "trace": str(ref.digest),
        "calls": len(decisions),
        "rejected_calls": sum(1 for d in decisions if isinstance(d, dict) and d.get("decision") == REJECTED),
        "unapproved_human_calls": 0 if approved_by_human else needs_human,
    }
