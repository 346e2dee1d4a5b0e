"""The population of merges (issue 45): the question auditors start from is "every change
that reached the target branch in the period, and which lacked what the policy requires".
Receipts cannot answer it alone (a change pushed with no receipt has none), so the rows
come from git: the branch's first-parent history, one row per merge or direct push, each
matched to the receipts whose candidate is its commit or has its exact tree.

Eligibility is judged at the time of the merge: only receipts sealed by then count;
approvals and receipts that came later are listed as after the merge, never as covering it.
The merge time is the committer time of the commit on the first-parent line: git records
no push time, and a pusher can set it, so a later receipt is told from an earlier one by
the receipt's signed time, not by this one.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import ContractRevision, EntryKind, EventType, ReceiptsError, TaskEvent, utc_text
from verify import Trust

from .._clock import spreadsheet_time
from .._errors import InputError
from .._escape import csv_cell
from .._git import run_git
from ..keys._trust import qualified_branch
from ..store._ledger import Ledger
from ._population import ChangeRow, population

__all__ = ["MergeRow", "MERGE_COLUMNS", "merges", "merges_csv", "sample_rows"]

_FOREVER = 2**62


@dataclass(frozen=True, slots=True)
class _Commit:
    commit: str
    tree: str
    time: int
    parents: tuple[str, ...]
    author: str
    committer: str
    subject: str


@dataclass(frozen=True, slots=True)
class GateSeen:
    """One recorded gate decision: on which commit (and tree), what, and when."""

    commit: str
    tree: str | None
    decision: str
    mode: str
    created: int

    def text(self) -> str:
        return "%s (%s) at %s" % (self.decision, self.mode, utc_text(self.created))


@dataclass(frozen=True, slots=True)
class MergeRow:
    """One commit on the branch's first-parent line, as an auditor samples it."""

    commit: str
    tree: str
    merged_at: int
    kind: str  # "merge" or "direct push"
    author: str  # the change's author (a merge's second parent's), from git
    committer: str  # who put it on the branch, from git
    subject: str
    task: str | None
    receipt: str | None  # the receipt that covered it at merge time
    receipt_sealed_at: int | None
    verified: bool | None
    eligible_at_merge: bool
    required_approvals: int | None
    approvals: tuple[str, ...]  # approvers counted at merge time, by key name
    after_merge: tuple[str, ...]  # approvals and receipts that came after the merge
    approver_is_author: tuple[str, ...]
    gate: str | None
    waivers: tuple[str, ...]
    weakenings: tuple[str, ...]
    findings: tuple[str, ...]  # what an auditor must look at; empty for a clean merge

    def as_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "tree": self.tree,
            "merged_at": utc_text(self.merged_at),
            "kind": self.kind,
            "author": self.author,
            "committer": self.committer,
            "subject": self.subject,
            "task": self.task,
            "receipt": self.receipt,
            "receipt_sealed_at": None if self.receipt_sealed_at is None else utc_text(self.receipt_sealed_at),
            "verified": self.verified,
            "eligible_at_merge": self.eligible_at_merge,
            "required_approvals": self.required_approvals,
            "approvals": list(self.approvals),
            "after_merge": list(self.after_merge),
            "approver_is_author": list(self.approver_is_author),
            "gate_decision": self.gate,
            "waivers": list(self.waivers),
            "weakenings": list(self.weakenings),
            "findings": list(self.findings),
        }


MERGE_COLUMNS = (
    "commit",
    "merged_at_utc",
    "kind",
    "author",
    "committer",
    "subject",
    "task",
    "receipt",
    "receipt_sealed_at_utc",
    "verified",
    "eligible_at_merge",
    "required_approvals",
    "approvals",
    "after_merge",
    "approver_is_author",
    "gate_decision",
    "waivers",
    "weakenings",
    "findings",
)


def merges(
    ledger: Ledger,
    trust: Trust,
    repo: Path,
    branch: str,
    start: int,
    end: int,
    progress: Callable[[int], None] | None = None,
) -> list[MergeRow]:
    """Every commit that landed on ``branch``'s first-parent line in [start, end) (Unix
    seconds, by committer time), oldest first, each matched to the receipts and gate
    decisions for its commit or its tree.

    Args:
        ledger: the ledger holding the receipts.
        trust: what each receipt is verified against.
        repo: a repository holding ``branch``.
        branch: a branch name (main, origin/main, refs/heads/...).
        start: the period's first second (Unix seconds).
        end: the second after the period.
        progress: called once per receipt verified.

    Returns:
        One row per commit, oldest first.

    Raises:
        InputError: ``branch`` is not a branch, or git cannot read its history.
    """
    commits = [c for c in _first_parent(repo, branch) if start <= c.time < end]
    # Only the receipts that cover a commit of the period are verified, whenever sealed.
    wanted = frozenset(c.commit for c in commits) | frozenset(c.tree for c in commits)
    receipts = population(ledger, trust, 0, _FOREVER, progress, covering=wanted)
    gates = _gate_decisions(ledger, repo)
    required = _required_approvals(ledger)
    keys = {state.spec.name for state in ledger.keyring()}
    return [_merge_row(c, receipts, gates, required, keys) for c in commits]


def _first_parent(repo: Path, branch: str) -> list[_Commit]:
    try:
        full = qualified_branch(repo, branch)
    except InputError:
        raise InputError("--merges takes a branch (main, origin/main, refs/heads/...), not %r" % branch) from None
    fmt = "%H%x00%T%x00%ct%x00%P%x00%an <%ae>%x00%cn <%ce>%x00%s%x1e"
    listed = run_git(repo, "log", "--first-parent", "--format=" + fmt, "--end-of-options", full, "--")
    if listed.returncode != 0:
        said = listed.stderr.decode(errors="replace").strip().splitlines()
        raise InputError("cannot read the history of %s: %s" % (full, said[0] if said else "git failed"))
    found = []
    for record in listed.stdout.decode(errors="replace").split("\x1e"):
        parts = record.strip("\n").split("\x00")
        if len(parts) == 7:
            commit, tree, when, parents, author, committer, subject = parts
            found.append(_Commit(commit, tree, int(when), tuple(parents.split()), author, committer, subject))
    found.reverse()
    authors = _second_parent_authors(repo, [c.parents[1] for c in found if len(c.parents) > 1])
    return [
        _Commit(c.commit, c.tree, c.time, c.parents, authors.get(c.parents[1], c.author), c.committer, c.subject)
        if len(c.parents) > 1
        else c
        for c in found
    ]


def _second_parent_authors(repo: Path, commits: list[str]) -> dict[str, str]:
    # A merge's change was written by whoever wrote the branch it merged, not by the merger.
    if not commits:
        return {}
    listed = run_git(repo, "log", "--no-walk", "--format=%H%x00%an <%ae>", "--stdin", stdin="\n".join(commits).encode())
    pairs = (line.split("\x00", 1) for line in listed.stdout.decode(errors="replace").splitlines() if "\x00" in line)
    return {commit: author for commit, author in pairs}


def _gate_decisions(ledger: Ledger, repo: Path) -> list[GateSeen]:
    # A decision names the commit it judged; one recorded before decisions named their tree
    # gets it from git, so a decision on a merge commit is found by the tree it judged.
    events = [
        body
        for _stored, body, _signer in ledger.bodies(EntryKind.EVENT)
        if isinstance(body, TaskEvent) and body.type is EventType.GATE_DECISION and body.field("commit")
    ]
    untreed = sorted({str(e.field("commit")) for e in events if not e.field("tree")})
    trees = _trees_of(repo, untreed)
    return [
        GateSeen(
            str(e.field("commit")),
            e.field("tree") or trees.get(str(e.field("commit"))),
            e.field("decision") or "?",
            e.field("mode") or "?",
            e.created,
        )
        for e in events
    ]


def _trees_of(repo: Path, commits: Iterable[str]) -> dict[str, str]:
    wanted = list(commits)
    if not wanted:
        return {}
    listed = run_git(repo, "log", "--no-walk", "--format=%H %T", "--stdin", stdin="\n".join(wanted).encode())
    pairs = (line.split() for line in listed.stdout.decode(errors="replace").splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def _required_approvals(ledger: Ledger) -> dict[str, int]:
    # By contract revision (config hash): what the receipt's own contract required.
    required = {}
    for _stored, body, _signer in ledger.bodies(EntryKind.CONTRACT):
        if isinstance(body, ContractRevision):
            try:
                required[str(body.config_hash)] = body.parse().human_approvals
            except ReceiptsError:
                continue  # verify reports a contract that does not parse
    return required


def _merge_row(
    c: _Commit, receipts: list[ChangeRow], gates: list[GateSeen], required: dict[str, int], keys: set[str]
) -> MergeRow:
    covering = [row for row in receipts if c.commit == row.commit or c.tree == row.tree]
    before = [row for row in covering if row.sealed_at <= c.time]
    after = [row for row in covering if row.sealed_at > c.time]
    chosen = _counted(before)
    counted = tuple(sorted(a["name"] for a in chosen.approvers if a["decision"] == "approve")) if chosen else ()
    late = _after_merge(chosen, after, c.time)
    selves = tuple(sorted({name for name in counted if _same_person(name, c.author)}))
    gate = _gate_on(gates, c)
    findings = _findings(c, chosen, after, late, selves, gate)
    return MergeRow(
        commit=c.commit,
        tree=c.tree,
        merged_at=c.time,
        kind="merge" if len(c.parents) > 1 else "direct push",
        author=c.author,
        committer=c.committer,
        subject=c.subject,
        task=chosen.task if chosen else (after[0].task if after else None),
        receipt=chosen.receipt if chosen else None,
        receipt_sealed_at=chosen.sealed_at if chosen else None,
        verified=chosen.verified if chosen else None,
        eligible_at_merge=bool(chosen and chosen.merge_eligible),
        required_approvals=required.get(chosen.contract) if chosen else None,
        approvals=counted,
        after_merge=late,
        approver_is_author=selves,
        gate=gate.text() if gate else None,
        waivers=chosen.waivers if chosen else (),
        weakenings=chosen.weakenings if chosen else (),
        findings=findings,
    )


def _counted(before: list[ChangeRow]) -> ChangeRow | None:
    # The newest eligible receipt sealed by the merge; else the newest one, to show why not.
    eligible = [row for row in before if row.merge_eligible]
    pool = eligible or before
    return max(pool, key=lambda row: row.sealed_at) if pool else None


def _after_merge(chosen: ChangeRow | None, after: list[ChangeRow], merged_at: int) -> tuple[str, ...]:
    seen: set[tuple[str, int]] = set()
    said = []
    for row in [*([chosen] if chosen else []), *after]:
        for a in row.approvers:
            if a["time"] > merged_at and a["decision"] == "approve" and (a["name"], a["time"]) not in seen:
                seen.add((a["name"], a["time"]))
                said.append("approval by %s at %s" % (a["name"], utc_text(a["time"])))
    said += [
        "receipt %s sealed at %s (%s)"
        % (row.receipt[:19], utc_text(row.sealed_at), "eligible" if row.merge_eligible else "not eligible")
        for row in after
    ]
    return tuple(said)


def _same_person(key_name: str, git_identity: str) -> bool:
    # A key is named for its holder; git names the author "Name <email>". Either the name or
    # the email (or its local part) equal to the key's name, ignoring case, is the same person.
    name, _, rest = git_identity.partition(" <")
    email = rest.rstrip(">")
    wanted = key_name.casefold()
    return wanted in {name.strip().casefold(), email.casefold(), email.partition("@")[0].casefold()}


def _gate_on(gates: list[GateSeen], c: _Commit) -> GateSeen | None:
    judged = [g for g in gates if g.commit == c.commit or (g.tree is not None and g.tree == c.tree)]
    return max(judged, key=lambda g: g.created) if judged else None


def _findings(
    c: _Commit,
    chosen: ChangeRow | None,
    after: list[ChangeRow],
    late: tuple[str, ...],
    selves: tuple[str, ...],
    gate: GateSeen | None,
) -> tuple[str, ...]:
    found = []
    if chosen is None:
        found.append(
            "receipt only after the merge" if after else "no receipt covers this commit or its tree",
        )
    elif not chosen.verified:
        found.append("its receipt does not verify")
    elif not chosen.merge_eligible:
        found.append("not eligible at merge")
    if any(text.startswith("approval by") for text in late):
        found.append("approved after the merge")
    if selves:
        found.append("approved by its author: %s" % ", ".join(selves))
    if gate is not None and gate.decision != "pass":
        found.append("the gate decided %s" % gate.decision)
    if chosen is not None and chosen.waivers:
        found.append("rests on a waiver")
    if chosen is not None and chosen.weakenings:
        found.append("its contract was weakened")
    return tuple(found)


def sample_rows(rows: list[MergeRow], size: int, seed: str) -> list[MergeRow]:
    """A reproducible sample of ``size`` rows (all of them when there are fewer), in the
    population's order: the same rows, seed and size always draw the same sample.

    Raises:
        InputError: ``size`` is not positive.
    """
    if size < 1:
        raise InputError("--sample takes a positive number of rows")
    picked = sorted(random.Random(seed).sample(range(len(rows)), min(size, len(rows))))
    return [rows[i] for i in picked]


def merges_csv(rows: list[MergeRow]) -> str:
    """The rows as CSV (RFC 4180, a header line first); lists joined with "; ", every cell
    escaped for spreadsheets (`csv_cell`): a commit subject is anyone's text.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(MERGE_COLUMNS)
    for row in rows:
        cells: list[object] = [
            row.commit,
            spreadsheet_time(row.merged_at),
            row.kind,
            row.author,
            row.committer,
            row.subject,
            row.task or "",
            row.receipt or "",
            spreadsheet_time(row.receipt_sealed_at),
            "" if row.verified is None else "yes" if row.verified else "no",
            "yes" if row.eligible_at_merge else "no",
            "" if row.required_approvals is None else row.required_approvals,
            "; ".join(row.approvals),
            "; ".join(row.after_merge),
            "; ".join(row.approver_is_author),
            row.gate or "",
            "; ".join(row.waivers),
            "; ".join(row.weakenings),
            "; ".join(row.findings),
        ]
        writer.writerow([csv_cell(str(cell)) for cell in cells])
    return out.getvalue()
