"""`ledger monitor`: follow a log from a state file and raise one alert per event that
needs a person's look (docs/witnesses.md).

Each pass:
  1. proves the newest checkpoint consistent with the one kept in the state (the root of
     its prefix recomputed from the entries); one that is not is a split view: both signed
     checkpoints are saved as evidence and the kept one stays;
  2. reads the entries appended since the state's position, through the web view's index
     (built from the whole chain, so a contract revision is compared with the one before):
     a contract weakening, a key added or revoked, and a receipt the verifier rejects
     (verified by proof, as `ledger verify` does) are each an alert;
  3. a newest checkpoint that misses the witness quorum asked for is an alert;
  4. keeps each new alert as pending in the state (with the new position, in one
     write), then sends each pending alert (a line, and a webhook POST where configured)
     and moves it to sent: an endpoint that does not take one leaves it pending for the
     next pass, and a restarted monitor re-proves and sends nothing twice (a crash
     between a send and its record resends that one alert).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import EntryKind, MemoryTree, SignedNote, leaf_hash, parse_checkpoint, parse_note, tree_root
from verify import LedgerSource, Transparency, Trust, cosignature_statuses, verify_receipt

from .._errors import InputError, StoreError
from .._files import write_atomic
from ..web._index import ChainIndex

__all__ = ["Alert", "monitor_once", "webhook_sender", "MONITOR_STATE_FORMAT", "MonitorSetup", "follow_log"]

MONITOR_STATE_FORMAT = "receipt-ledger/monitor-state@1"


@dataclass(frozen=True, slots=True)
class Alert:
    """One event: its kind (fork, rejection, weakening, key, quorum), a stable id, where
    in the log, and what happened in one line.
    """

    kind: str
    id: str
    message: str
    seq: int | None = None
    task: str | None = None
    evidence: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "message": self.message,
            "seq": self.seq,
            "task": self.task,
            "evidence": list(self.evidence),
        }


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not taken: urllib would follow it with a GET (the alert lost) to an
    address nobody configured; the 3xx is the endpoint not taking the alert.
    """

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def webhook_sender(url: str) -> Callable[[Alert], None]:
    """POST each alert as JSON to ``url`` (one the user configured), and only there: a
    redirect is not followed.

    Raises (when called):
        StoreError: the endpoint did not take it (the alert stays unsent, to retry).
    """
    opener = urllib.request.build_opener(_NoRedirect)

    def send(alert: Alert) -> None:
        data = json.dumps(alert.document(), sort_keys=True).encode()
        request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
        try:
            with opener.open(request, timeout=30):
                pass
        except (urllib.error.URLError, OSError) as exc:
            raise StoreError("the webhook %s did not take alert %s: %s" % (url, alert.id, exc)) from None

    return send


@dataclass(frozen=True, slots=True)
class MonitorSetup:
    """What a monitor is given: the trust and witness policy receipts are verified under,
    its state file, where split views' checkpoints go (default: beside the state), and
    the webhook alerts are POSTed to (none: alerts are only told).
    """

    trust: Trust
    policy: Transparency
    state: Path
    evidence_dir: Path | None = None
    webhook: str | None = None


def follow_log(
    open_source: Callable[[], LedgerSource],
    setup: MonitorSetup,
    every: int | None,
    tell: Callable[[Alert], None],
    say: Callable[[str], None] | None = None,
) -> int:
    """One pass (``every`` None), or a pass every ``every`` seconds until interrupted.

    Returns:
        How many alerts the passes raised.
    """
    post = webhook_sender(setup.webhook) if setup.webhook else None

    def send(alert: Alert) -> None:
        if post is not None:
            post(alert)  # first: an alert the endpoint did not take stays unsent
        tell(alert)

    raised = 0
    while True:
        with open_source() as source:
            evidence = setup.evidence_dir or setup.state.parent
            raised += len(monitor_once(source, setup.trust, setup.policy, setup.state, evidence, send, say))
        if every is None:
            return raised
        try:
            time.sleep(every)
        except KeyboardInterrupt:
            return raised


def monitor_once(
    source: LedgerSource,
    trust: Trust,
    policy: Transparency,
    state_path: Path,
    evidence_dir: Path,
    send: Callable[[Alert], None],
    baseline: Callable[[str], None] | None = None,
) -> list[Alert]:
    """One pass of the monitor (the module's steps); returns the alerts sent in it. The
    first pass (no state file yet) takes the log as found as its baseline and sends none,
    but says what it found there to ``baseline``: a baseline is never silent health.

    Raises:
        InputError: the state file is not a monitor's.
        StoreError: an alert could not be sent (it is sent on the next pass).
    """
    first_pass = not state_path.exists()
    state = _read_state(state_path)
    alerts: list[Alert] = []
    # 1. The newest checkpoint, proven to extend the kept one.
    newest = source.newest_checkpoint()
    kept = state.get("checkpoint")
    if newest is not None:
        fork = _split_view(source, kept, newest[1], evidence_dir) if kept else None
        if fork is not None:
            alerts.append(fork)
        else:
            state["checkpoint"] = newest[1]
    # 2. The entries since the last pass.
    index = ChainIndex()
    index.update(source)
    for row in index.rows_between(state["seq"] + 1, index.count()):
        alerts.extend(_entry_alerts(row, source, trust, policy))
    state["seq"] = index.count() - 1
    # 3. The witness quorum on the newest checkpoint.
    if newest is not None and policy.wants_quorum:
        short = _quorum_short(parse_note(newest[1]), policy)
        if short:
            message = "witness quorum lost at size %d: %s" % (newest[0], short)
            alerts.append(Alert("quorum", "quorum:%d" % newest[0], message))
    if first_pass:  # the log as found is the baseline: alerts are for what changes from here
        if baseline is not None:
            baseline(baseline_text(index.count(), alerts))
        alerts = []
    # 4. New alerts are kept as pending with the new position, in one write; then each
    # pending one is sent and moved to sent. A send that fails leaves it pending.
    known = set(state["sent"]) | {a["id"] for a in state["pending"]}
    state["pending"] += [a.document() for a in alerts if a.id not in known]
    _write_state(state_path, state)
    sent = []
    while state["pending"]:
        alert = _alert(state["pending"][0])
        send(alert)
        state["pending"].pop(0)
        state["sent"].append(alert.id)
        _write_state(state_path, state)
        sent.append(alert)
    return sent


def baseline_text(entries: int, found: list[Alert]) -> str:
    """What a first pass found in the history it took as its baseline, by kind."""
    counts: dict[str, int] = {}
    for alert in found:
        counts[alert.kind] = counts.get(alert.kind, 0) + 1
    said = ", ".join("%d %s" % (n, kind) for kind, n in sorted(counts.items())) or "nothing to alert on"
    return "BASELINE taken at %d entries; the history holds %s (not alerted: alerts are for what changes from here)" % (
        entries,
        said,
    )


def _alert(doc: dict[str, Any]) -> Alert:
    return Alert(doc["kind"], doc["id"], doc["message"], doc["seq"], doc["task"], tuple(doc["evidence"]))


def _quorum_short(note: SignedNote, policy: Transparency) -> str | None:
    """Why the checkpoint misses the quorum asked for, or None when it meets it."""
    verified = {name for name, status in cosignature_statuses(note, policy) if status.startswith("verified")}
    counted = sum(1 for w in policy.witnesses if w.name in verified)
    if counted < policy.quorum:
        return "%d of the %d --witness cosignatures required" % (counted, policy.quorum)
    if policy.tlog_policy is not None:
        met, signed = policy.tlog_policy.witnessed(note)
        if not met:
            return "cosignatures of %s do not meet the policy's quorum %s" % (
                ", ".join(signed) or "none",
                policy.tlog_policy.quorum,
            )
    return None


def _entry_alerts(row: Any, source: LedgerSource, trust: Trust, policy: Transparency) -> list[Alert]:
    if row.kind == EntryKind.CONTRACT and row.weakened:
        message = "contract of %s weakened at entry %d by %s: %s" % (
            row.task,
            row.seq,
            row.signer_name or row.signer,
            "; ".join(row.weakened),
        )
        return [Alert("weakening", "weakening:%d" % row.seq, message, row.seq, row.task)]
    if row.kind in (EntryKind.KEY_ADD, EntryKind.KEY_REVOKE):
        message = "%s at entry %d, signed by %s" % (row.summary, row.seq, row.signer_name or row.signer)
        return [Alert("key", "key:%d" % row.seq, message, row.seq)]
    if row.kind == EntryKind.RECEIPT:
        result = verify_receipt(source, row.body_hash, trust, policy)
        if not result.ok:
            codes = ", ".join(sorted({d.code for d in result.defects}))
            message = "receipt %s of %s at entry %d is rejected: %s" % (row.body_hash, row.task, row.seq, codes)
            return [Alert("rejection", "rejection:%d" % row.seq, message, row.seq, row.task)]
    return []


def _split_view(source: LedgerSource, kept_text: str, newest_text: str, evidence_dir: Path) -> Alert | None:
    """A fork alert when the newest checkpoint does not extend the kept one, both signed
    notes saved as evidence; None when it does.
    """
    kept, newest = parse_checkpoint(parse_note(kept_text).text), parse_checkpoint(parse_note(newest_text).text)
    if newest.size >= kept.size:
        leaves = [leaf_hash(stored.entry) for stored in source.entries_between(0, kept.size)]
        if len(leaves) == kept.size and tree_root(MemoryTree(leaves), kept.size) == kept.root:
            return None
    name = "fork-%d-%s" % (kept.size, base64.urlsafe_b64encode(newest.root).decode("ascii")[:12])
    files = []
    for label, text in (("kept", kept_text), ("seen", newest_text)):
        path = evidence_dir / ("%s.%s.checkpoint" % (name, label))
        write_atomic(path, text.encode(), mode=0o644)
        files.append(str(path))
    message = "split view: the log's checkpoint at size %d does not extend the one kept at size %d (both saved)" % (
        newest.size,
        kept.size,
    )
    return Alert(
        "fork",
        "fork:%d:%s" % (kept.size, base64.b64encode(newest.root).decode("ascii")),
        message,
        evidence=tuple(files),
    )


def _read_state(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"format": MONITOR_STATE_FORMAT, "seq": -1, "checkpoint": None, "sent": [], "pending": []}
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError("cannot read monitor state %s: %s" % (path, exc)) from None
    if not isinstance(state, dict) or state.get("format") != MONITOR_STATE_FORMAT:
        raise InputError("%s is not a monitor state (%s)" % (path, MONITOR_STATE_FORMAT))
    state.setdefault("pending", [])
    return state


def _write_state(path: Path, state: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())
