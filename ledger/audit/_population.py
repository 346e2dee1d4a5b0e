"""The population of changes in a period (issue 16): one row per sealed receipt, the
facts an auditor samples from (SOC 2 CC8.1 and its kin ask for exactly this list). Each
row's receipt is verified first, against the caller's trust, and the row says so.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import (
    HUMAN_DECISION_FORMAT,
    HUMAN_DECISION_ID,
    JUDGE_RUN_FORMAT,
    JUDGE_RUN_MEDIA_TYPE,
    ContractRevision,
    Digest,
    EntryKind,
    EventType,
    LadderReceipt,
    ReceiptsError,
    TaskEvent,
    Tier,
    TierRecord,
    decision_method,
    utc_text,
)
from verify import Trust, verify_receipt

from .._clock import spreadsheet_time
from .._errors import InputError
from .._escape import csv_cell
from .._git import run_git
from ..keys._trust import qualified_branch
from ..ladder._evidence import evidence_json, snapshot_of
from ..store._ledger import Ledger, RecordRow

__all__ = ["ChangeRow", "mark_reached", "population", "population_csv", "POPULATION_COLUMNS"]


@dataclass(frozen=True, slots=True)
class ChangeRow:
    """One sealed receipt of the period, as an auditor samples it."""

    receipt: str
    sealed_at: int
    task: str
    commit: str | None
    tree: str | None
    contract: str
    contract_entry: int | None
    author_model: str | None
    tiers: tuple[tuple[str, str], ...]  # (tier, verdict as verified)
    approvers: tuple[dict[str, Any], ...]  # name, key, time, method, decision
    waivers: tuple[str, ...]
    merge_eligible: bool
    verified: bool
    defects: tuple[str, ...]
    gate: str | None  # the latest gate decision this receipt made, if any
    reached: bool | None = None  # its change is on the target branch (None: not asked)
    weakenings: tuple[str, ...] = ()  # the contract's weakenings up to the receipt, as verified

    def as_dict(self) -> dict[str, Any]:
        return {
            "receipt": self.receipt,
            "sealed_at": self.sealed_at,
            "task": self.task,
            "commit": self.commit,
            "tree": self.tree,
            "contract": self.contract,
            "contract_entry": self.contract_entry,
            "author_model": self.author_model,
            "tiers": dict(self.tiers),
            "approvers": list(self.approvers),
            "waivers": list(self.waivers),
            "weakenings": list(self.weakenings),
            "merge_eligible": self.merge_eligible,
            "verified": self.verified,
            "defects": list(self.defects),
            "gate_decision": self.gate,
            "reached_target": self.reached,
        }


POPULATION_COLUMNS = (
    "receipt",
    "sealed_at_utc",
    "task",
    "commit",
    "tree",
    "contract",
    "contract_entry",
    "author_model",
    "deterministic",
    "judge",
    "human",
    "approvers",
    "waivers",
    "weakenings",
    "merge_eligible",
    "verified",
    "defects",
    "gate_decision",
    "reached_target",
)


def population(
    ledger: Ledger,
    trust: Trust,
    start: int,
    end: int,
    progress: Callable[[int], None] | None = None,
    *,
    reached_on: tuple[Path, str] | None = None,
    covering: frozenset[str] | None = None,
) -> list[ChangeRow]:
    """Every receipt sealed in [start, end) (Unix seconds, by the receipt's signed date),
    in chain order, each verified against ``trust`` (by proof where a checkpoint covers it),
    and with ``reached_on`` (a repository and its target branch) marked by `mark_reached`;
    with ``covering`` (commits and trees), only the receipts whose candidate's commit or
    tree is one of them are verified and listed.
    """
    rows = []
    names = {state.key_id: state.spec.name for state in ledger.keyring()}
    tasks: dict[str, _Task] = {}  # a task's records, contracts and events, read once for all its receipts
    for stored, body, _signer in ledger.bodies(EntryKind.RECEIPT):
        if not isinstance(body, LadderReceipt) or not start <= body.created < end:
            continue
        task = tasks.get(body.task_id) or tasks.setdefault(body.task_id, _Task.read(ledger, body.task_id))
        snapshot = _snapshot(ledger, body, task)
        if covering is not None and not _covers(snapshot, covering):
            continue
        rows.append(_row(ledger, trust, Digest(stored.body_hash), body, names, task, snapshot))
        if progress is not None:
            progress(1)
    return rows if reached_on is None else mark_reached(rows, *reached_on)


@dataclass(frozen=True, slots=True)
class _Task:
    records: dict[Digest, RecordRow]
    revisions: tuple[tuple[int, ContractRevision], ...]
    gates: tuple[TaskEvent, ...]

    @classmethod
    def read(cls, ledger: Ledger, task: str) -> _Task:
        return cls(
            {row.digest: row for row in ledger.records_for(task)},
            tuple(ledger.contract_revisions(task)),
            tuple(
                body
                for _stored, body, _signer in ledger.bodies(EntryKind.EVENT, task)
                if isinstance(body, TaskEvent) and body.type is EventType.GATE_DECISION
            ),
        )


def _row(
    ledger: Ledger,
    trust: Trust,
    digest: Digest,
    receipt: LadderReceipt,
    names: dict[str, str],
    task: _Task,
    snapshot: dict[str, Any],
) -> ChangeRow:
    result = verify_receipt(ledger.reader, str(digest), trust)
    listed = [task.records[d] for slot in receipt.entries for d in slot.records if d in task.records]
    author_model = None
    approvers = []
    for row in listed:
        if row.record.tier is Tier.JUDGE:
            author_model = _author_model(ledger, row.record) or author_model
        elif row.record.tier is Tier.HUMAN:
            doc = _decision(ledger, row.record) or {}
            approvers.append(
                {
                    "name": names.get(row.signer, "?"),
                    "key": row.signer,
                    "time": row.record.created,
                    "method": decision_method(doc),
                    "decision": doc.get("decision", "?"),
                }
            )
    revision = next(
        ((seq, rev) for seq, rev in task.revisions if rev.config_hash == receipt.config_hash),
        None,
    )
    contract_entry = revision[0] if revision is not None else None
    if author_model is None and revision is not None:
        try:
            author_model = revision[1].parse().author_model
        except ReceiptsError:
            pass  # verify reports a contract that does not parse
    return ChangeRow(
        receipt=str(digest),
        sealed_at=receipt.created,
        task=receipt.task_id,
        commit=snapshot.get("commit"),
        tree=snapshot.get("tree"),
        contract=str(receipt.config_hash),
        contract_entry=contract_entry,
        author_model=author_model,
        tiers=tuple((t.tier.value, t.status) for t in result.tiers),
        approvers=tuple(approvers),
        waivers=result.waivers,
        merge_eligible=bool(result.derived_eligible) and result.ok,
        verified=result.ok,
        defects=tuple("%s: %s" % (d.code, d.message) for d in result.defects),
        gate=_gate(task.gates, digest, receipt, snapshot.get("tree")),
        weakenings=result.weakenings,
    )


def _covers(snapshot: dict[str, Any], covering: frozenset[str]) -> bool:
    return snapshot.get("commit") in covering or snapshot.get("tree") in covering


def _snapshot(ledger: Ledger, receipt: LadderReceipt, task: _Task) -> dict[str, Any]:
    """The snapshot (commit, tree, ...) of the receipt's newest listed deterministic record."""
    listed = [task.records.get(d) for slot in receipt.entries for d in slot.records]
    deterministic = [row for row in listed if row is not None and row.record.tier is Tier.DETERMINISTIC]
    return (snapshot_of(ledger, deterministic[-1].record) or {}) if deterministic else {}


def mark_reached(rows: list[ChangeRow], repo: Path, target: str) -> list[ChangeRow]:
    """``rows``, each marked with whether its change reached the branch ``target``: its
    commit, or a commit with its exact tree (a squash or rebase merge of the reviewed
    tree), is in the branch's history. Which receipt let it through is the gate's
    decision column; this one tells merged changes from abandoned ones and reruns.

    Raises:
        InputError: ``target`` is not a branch (`qualified_branch`) or names no commit.
    """
    try:
        full = qualified_branch(repo, target)
    except InputError:
        raise InputError("--reached takes a branch (main, origin/main, refs/heads/...), not %r" % target) from None
    listed = run_git(repo, "log", "--format=%H %T", "--end-of-options", full, "--")
    if listed.returncode != 0:
        said = listed.stderr.decode(errors="replace").strip().splitlines()
        raise InputError("cannot read the history of %s: %s" % (full, said[0] if said else "git failed"))
    on_branch = set(listed.stdout.decode().split())
    return [dataclasses.replace(row, reached=bool({row.commit, row.tree} & on_branch)) for row in rows]


def _decision(ledger: Ledger, record: TierRecord) -> dict[str, Any] | None:
    for ref in record.evidence:
        if ref.check_id == HUMAN_DECISION_ID:
            return evidence_json(ledger, ref.digest, HUMAN_DECISION_FORMAT)
    return None


def _author_model(ledger: Ledger, record: TierRecord) -> str | None:
    for ref in record.evidence:
        if ref.check_id == "judge:run" and ref.media_type == JUDGE_RUN_MEDIA_TYPE:
            run = evidence_json(ledger, ref.digest, JUDGE_RUN_FORMAT) or {}
            model = run.get("author_model")
            return model if isinstance(model, str) else None
    return None


def _gate(gates: tuple[TaskEvent, ...], digest: Digest, receipt: LadderReceipt, tree: str | None) -> str | None:
    """The latest gate decision this receipt made: a decision names the receipt that
    decided it (``decided_by``), which let the commit through or blocked it, whatever
    commit it judged (the gate runs on the merge commit: another candidate, the same tree).
    A decision recorded before that field existed names only the receipt that let it
    through, and a block only its candidate, and since decisions name their tree, a block
    by tree: such a block counts for each receipt of that candidate or tree, since any of
    them may have decided it.
    """
    decision = None
    for event in gates:
        decided_by = event.field("decided_by") or event.field("receipt")
        if decided_by == str(digest) or (
            not decided_by and (event.candidate == receipt.input_hash or (tree and event.field("tree") == tree))
        ):
            decision = "%s (%s)" % (event.field("decision") or "?", event.field("mode") or "?")
    return decision


def population_csv(rows: list[ChangeRow]) -> str:
    """The rows as CSV (RFC 4180, a header line first); lists joined with "; "."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(POPULATION_COLUMNS)
    for row in rows:
        tiers = dict(row.tiers)
        # Every cell may carry ledger text (a contract's author_model, a waiver's reason).
        cells = [
            row.receipt,
            spreadsheet_time(row.sealed_at),  # a spreadsheet shows a date, not an epoch
            row.task,
            row.commit or "",
            row.tree or "",
            row.contract,
            "" if row.contract_entry is None else row.contract_entry,
            row.author_model or "",
            tiers.get("deterministic", ""),
            tiers.get("judge", ""),
            tiers.get("human", ""),
            "; ".join(
                "%s %s %s at %s (%s)" % (a["name"], a["key"], a["decision"], utc_text(a["time"]), a["method"])
                for a in row.approvers
            ),
            "; ".join(row.waivers),
            "; ".join(row.weakenings),
            "yes" if row.merge_eligible else "no",
            "yes" if row.verified else "no",
            "; ".join(row.defects),
            row.gate or "",
            "" if row.reached is None else "yes" if row.reached else "no",
        ]
        writer.writerow([csv_cell(str(cell)) for cell in cells])
    return out.getvalue()
