"""A search index built from the chain as read by the verifier's source, kept current by
reading only the entries appended since it last looked. It finds receipts by commit,
tree, task, check, signer, approver, verdict and date; it never decides anything (the
pages verify a receipt on each request).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from receipts import (
    SNAPSHOT_FORMAT,
    Contract,
    ContractRevision,
    Digest,
    EntryKind,
    KeyAdd,
    KeyRevoke,
    LadderReceipt,
    ReceiptsError,
    StatementRegistration,
    TaskEvent,
    Tier,
    TierRecord,
    decode_body,
    decode_entry,
    fingerprint,
    statement_subject,
    tally_check_runs,
    weakenings,
)
from verify import LedgerSource, evidence_reader, read_evidence

__all__ = ["ChainIndex", "IndexRow"]


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One entry as the index knows it: what a list or a search shows of it."""

    seq: int
    kind: str
    task: str | None
    body_hash: str
    time: int
    signer: str  # the key's fingerprint
    signer_name: str
    summary: str
    verdict: str | None = None  # a tier record's verdict; a receipt's claim ("eligible" / "not eligible")
    tier: str | None = None
    candidate: str | None = None
    checks: tuple[str, ...] = ()
    evidence: tuple[tuple[str, str, int], ...] = ()  # a tier record's (check id, digest, size)
    text: str = ""  # a contract revision's text
    weakened: tuple[str, ...] = ()  # how a contract revision lowers the bar of the one before

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "task": self.task,
            "hash": self.body_hash,
            "time": self.time,
            "signer": self.signer,
            "signer_name": self.signer_name,
            "summary": self.summary,
            "verdict": self.verdict,
            "tier": self.tier,
            "candidate": self.candidate,
            "checks": list(self.checks),
            "evidence": [{"check_id": c, "digest": d, "size": n} for c, d, n in self.evidence],
            "weakened": list(self.weakened),
        }


class ChainIndex:
    """Rows of every entry, the key names, and each candidate's commit and tree (from its
    deterministic snapshot), updated incrementally. Safe to share between request threads.
    """

    def __init__(self) -> None:
        self.rows: list[IndexRow] = []
        self.names: dict[str, str] = {}
        self.commits: dict[str, tuple[str, str]] = {}  # candidate -> (commit, tree)
        self.receipts: dict[str, IndexRow] = {}  # candidate -> its newest receipt
        # Lookups a page makes without scanning the chain: a receipt's page stays as fast at
        # a million entries as at a thousand (bench/web.py).
        self.by_hash: dict[str, IndexRow] = {}
        self.by_task: dict[str, list[IndexRow]] = {}
        self.by_kind: dict[str, list[IndexRow]] = {}
        self.contracts: dict[str, Contract] = {}  # task -> its newest contract revision, parsed
        self.by_config: dict[str, Contract] = {}  # a revision's config hash -> it, parsed
        # Family (the task id before its last '@') -> check id -> [runs, passes], each run
        # judged by `receipts.derive_check` under the contract its record names.
        self.check_runs: dict[str, dict[str, list[int]]] = {}
        self._lock = threading.Lock()

    def update(self, source: LedgerSource) -> int:
        """Read the entries appended since the last update; how many there were."""
        with self._lock:
            start, stop = len(self.rows), source.count()
            for stored in source.entries_between(start, stop):
                row = self._row(source, stored.seq, stored.kind, stored.task, stored.entry, stored.body)
                self.rows.append(row)
                self.by_hash[row.body_hash] = row
                self.by_kind.setdefault(row.kind, []).append(row)
                if row.task:
                    self.by_task.setdefault(row.task, []).append(row)
                if row.kind == EntryKind.RECEIPT and row.candidate:
                    self.receipts[row.candidate] = row
            return stop - start

    def _row(self, source: LedgerSource, seq: int, kind: str, task: str | None, entry: bytes, body: bytes) -> IndexRow:
        try:
            head = decode_entry(entry)
            decoded = decode_body(EntryKind(kind), body)
        except (ReceiptsError, ValueError):
            return IndexRow(seq, kind, task, "", 0, "", "", "an entry that does not decode")
        signer = sys.intern(head.signer)
        if isinstance(decoded, KeyAdd):
            self.names[fingerprint(decoded.key.public_key)] = decoded.key.name
        base = IndexRow(seq, kind, task, str(head.body_hash), head.time, signer, self.names.get(signer, ""), kind)
        return _described(base, decoded, source, self)

    def search(
        self,
        text: str = "",
        verdict: str = "",
        since: int | None = None,
        until: int | None = None,
        kinds: Iterable[str] = (),
    ) -> list[IndexRow]:
        """Rows matching every given criterion, newest first. ``text`` matches a commit or
        tree (a prefix of 7 or more hex digits), a task, a check id, a signer's name or
        fingerprint, or an entry's hash (or a prefix of it).
        """
        wanted = set(kinds)
        needle = text.strip().lower()
        found = []
        for row in reversed(self.rows):
            if wanted and row.kind not in wanted:
                continue
            if verdict and row.verdict != verdict:
                continue
            if (since is not None and row.time < since) or (until is not None and row.time >= until):
                continue
            if needle and not self._matches(row, needle):
                continue
            found.append(row)
        return found

    def _matches(self, row: IndexRow, needle: str) -> bool:
        if needle in (row.task or "").lower() or needle in row.signer_name.lower() or needle == row.signer.lower():
            return True
        if any(needle == c.lower() for c in row.checks):
            return True
        hexish = needle.removeprefix("blake3:")
        if len(hexish) >= 7 and row.body_hash.removeprefix("blake3:").startswith(hexish):
            return True
        commit, tree = self.commits.get(row.candidate or "", ("", ""))
        return len(needle) >= 7 and (commit.startswith(needle) or tree.startswith(needle))

    def of_kind(self, *kinds: str) -> list[IndexRow]:
        """The rows of these kinds, in chain order."""
        rows = [row for kind in kinds for row in self.by_kind.get(kind, [])]
        return sorted(rows, key=lambda row: row.seq) if len(kinds) > 1 else rows

    def tasks(self) -> dict[str, list[IndexRow]]:
        """Each task's rows, in chain order, tasks by their newest entry first."""
        return dict(sorted(self.by_task.items(), key=lambda item: -item[1][-1].seq))


def _described(base: IndexRow, body: object, source: LedgerSource, index: ChainIndex) -> IndexRow:
    if isinstance(body, TierRecord):
        checks = tuple(
            sorted(
                {
                    ref.check_id[6:].partition("#")[0].partition(":")[0]
                    for ref in body.evidence
                    if ref.check_id.startswith("check:")
                }
            )
        )
        if body.tier is Tier.DETERMINISTIC:
            _remember_commit(body, source, index)
            _count_check_runs(body, source, index)
        summary = "%s %s" % (body.tier.value, body.verdict.value)
        return dataclasses.replace(
            base,
            summary=summary,
            verdict=body.verdict.value,
            tier=body.tier.value,
            candidate=str(body.input_hash),
            checks=checks,
            evidence=tuple((ref.check_id, str(ref.digest), ref.size) for ref in body.evidence),
        )
    if isinstance(body, LadderReceipt):
        claim = "eligible" if body.merge_eligible else "not eligible"
        return dataclasses.replace(base, summary="receipt: %s" % claim, verdict=claim, candidate=str(body.input_hash))
    if isinstance(body, TaskEvent):
        # What the agent or person said (a claim's summary, a reason) is shown as they said it,
        # cut short: it is a statement recorded, not a fact checked.
        said = body.field("summary") or body.field("reason")
        summary = "event %s" % body.type.value + (": %s" % said[:200] if said else "")
        return dataclasses.replace(base, summary=summary, candidate=_text(body.candidate))
    if isinstance(body, ContractRevision):
        return _revision(base, body, index)
    if isinstance(body, KeyAdd):
        roles = ", ".join(role.value for role in body.key.roles)
        return dataclasses.replace(base, summary="key added: %s (%s)" % (body.key.name, roles))
    if isinstance(body, KeyRevoke):
        name = index.names.get(body.key_id, "")
        said = "%s (%s)" % (name, body.key_id) if name else body.key_id
        return dataclasses.replace(base, summary="key revoked: %s: %s" % (said, body.reason[:200]))
    if isinstance(body, StatementRegistration):
        # The subject is the issuer's words, shown as such (the pages escape it).
        subject = statement_subject(body.statement) or "(no subject)"
        return dataclasses.replace(base, summary="SCITT statement registered: %s" % subject[:200])
    return base


def _revision(base: IndexRow, body: ContractRevision, index: ChainIndex) -> IndexRow:
    """A contract revision, with the weakenings the verifier's rule finds against the last."""
    text = body.contract.decode("utf-8", "replace")
    try:
        new = body.parse()
    except ReceiptsError as exc:
        return dataclasses.replace(base, summary="contract revision that does not parse: %s" % exc, text=text)
    old = index.contracts.get(body.task_id)
    index.contracts[body.task_id] = new
    index.by_config[str(body.config_hash)] = new
    lowered = weakenings(old, new) if old is not None else ()
    summary = "contract revision" + (": WEAKENED" if lowered else "")
    return dataclasses.replace(base, summary=summary, text=text, weakened=lowered)


def _text(digest: Digest | None) -> str | None:
    return None if digest is None else str(digest)


def _count_check_runs(record: TierRecord, source: LedgerSource, index: ChainIndex) -> None:
    contract = index.by_config.get(str(record.config_hash))
    if contract is not None:
        tally = index.check_runs.setdefault(record.task_id.rsplit("@", 1)[0], {})
        tally_check_runs(record, contract, evidence_reader(source), tally)


def _remember_commit(record: TierRecord, source: LedgerSource, index: ChainIndex) -> None:
    if str(record.input_hash) in index.commits:
        return
    for ref in record.evidence:
        if ref.check_id == "snapshot":
            doc = read_evidence(source, ref.digest, SNAPSHOT_FORMAT)
            if doc and isinstance(doc.get("commit"), str) and isinstance(doc.get("tree"), str):
                index.commits[str(record.input_hash)] = (doc["commit"], doc["tree"])
            return
