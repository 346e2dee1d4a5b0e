"""The merge gate: a commit passes only with a verified, merge-eligible receipt for its
exact commit, or for another commit with the identical tree (a squash or rebase merge),
named in the git notes of the commit or of its tree. In advisory mode the decision is
recorded but never blocks.

Each receipt is verified from its bundle in git (``refs/receipts/``), so a fresh clone
needs no ledger and no network; only a receipt without a bundle falls back to a ledger,
opened when first needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import Digest, EventType, ReceiptsError, Signer, candidate_hash
from verify import (
    UNPROVEN_PREFIX,
    BundleSource,
    CannotVerify,
    LedgerSource,
    Result,
    Transparency,
    Trust,
    audited_entry,
    verify_receipt,
)

from .._errors import InputError, LedgerError
from .._git import resolve_commit
from ..git._notes import BUNDLE_REFS, NOTES_REF, NoteLine, attached, bundle_ref, open_bundle
from ..ladder._events import record_event
from ..store._ledger import Ledger
from ..transparency._witness import audit_store

__all__ = [
    "GATE_MODES",
    "GateResult",
    "ReceiptCheck",
    "check_receipts",
    "deciding_receipt",
    "gate_check",
    "gate",
    "verify_commit",
]

GATE_MODES = ("enforce", "advisory")

OpenLedger = Callable[[], LedgerSource]


@dataclass(frozen=True, slots=True)
class ReceiptCheck:
    """One receipt named on a revision, as verified. ``match`` is "commit" (its candidate
    is this commit), "tree" (its candidate is ``note.commit``, whose tree is this one),
    "stale" (neither), or "" when it could not be verified at all (``problem`` says why).
    """

    note: NoteLine
    origin: str
    result: Result | None
    match: str
    problem: str | None = None
    audited: bool = False  # the gate's own chain audit of the store covers this receipt (§8.1a)

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok and self.match in ("commit", "tree")

    @property
    def completeness(self) -> str:
        """How the task's completeness up to this receipt is proven (§8.1a), or "unproven"."""
        if self.audited:
            return "audited"
        return self.result.completeness if self.result is not None else "unproven"

    @property
    def complete(self) -> bool:
        return self.completeness != "unproven"

    @property
    def lets_through(self) -> bool:
        return self.ok and self.result is not None and bool(self.result.derived_eligible)

    @property
    def only_incomplete(self) -> bool:
        """Verified and not eligible, yet recording no failure: every tier record it lists
        passed, and what is missing is records (a skipped or missing tier, too few
        approvals). A merge queue's or a rerun's receipt on a reviewed tree is one.
        """
        r = self.result
        if not self.ok or r is None or self.lets_through:
            return False
        return all(line.status in ("pass", "skip", "missing") for line in r.tiers)

    def why_not(self) -> str:
        h = self.note.receipt
        if self.result is None:
            return "%s cannot be verified: %s" % (h, self.problem)
        if not self.result.ok:
            return "%s does not verify: %s" % (h, self.result.defects[0].message)
        if self.match == "stale":
            return "%s is stale: it is for candidate %s, not this commit or its tree" % (
                h,
                (self.result.candidate or "?")[:19],
            )
        return "%s is not merge-eligible: %s" % (h, "; ".join(self.result.eligibility_reasons))

    def notices(self) -> tuple[str, ...]:
        """What a reader of the decision must see besides it (as `verify` reports them)."""
        r = self.result
        if r is None:
            return ()
        return (
            tuple("WEAKENING: %s" % w for w in r.weakenings)
            + tuple("waiver in force: %s" % w for w in r.waivers)
            + tuple("stale approval (not counted): %s" % w for w in r.stale)
            + tuple("note: %s" % n for n in r.notes)
            + tuple(
                "warning: %s" % w
                for w in r.warnings
                # The gate's own audit of the store proved what this warning says is unproven.
                if not (self.audited and w.startswith(UNPROVEN_PREFIX))
            )
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "receipt": self.note.receipt,
            "named_on": self.note.on,
            "origin": self.origin,
            "match": self.match,
            "receipt_commit": self.note.commit,
            "problem": self.problem,
            "completeness": self.completeness,
            "result": self.result.as_dict() if self.result is not None else None,
        }


class _Ledgers:
    """The fallback source, opened once when a receipt has no bundle in git."""

    def __init__(self, opener: OpenLedger | None) -> None:
        self._opener = opener
        self._source: LedgerSource | None = None
        self.problem: str | None = None

    def get(self) -> LedgerSource | None:
        if self._source is None and self.problem is None:
            if self._opener is None:
                self.problem = "no ledger given"
            else:
                try:
                    self._source = self._opener()
                except (LedgerError, CannotVerify) as exc:
                    self.problem = str(exc)
        return self._source

    def close(self) -> None:
        if self._source is not None:
            self._source.close()


def _match(result: Result, line: NoteLine, fields: dict[str, str]) -> str:
    if result.candidate == str(candidate_hash(fields)):
        return "commit"
    # The note's commit is a hint only: the receipt's signed candidate hash must equal the
    # hash of that commit with *this* tree, which holds only if the two trees are one.
    if line.commit and result.candidate == str(candidate_hash({"commit": line.commit, "tree": fields["tree"]})):
        return "tree"
    return "stale"


def _check_one(
    repo: Path, line: NoteLine, fields: dict[str, str], trust: Trust, transparency: Transparency, ledgers: _Ledgers
) -> ReceiptCheck:
    with open_bundle(repo, line.receipt) as path:
        if path is not None:
            origin = "bundle %s" % bundle_ref(line.receipt)
            try:
                with BundleSource(path) as source:
                    # A bundle is checked against its own checkpoint, as `verify --bundle` does.
                    policy = dataclasses.replace(transparency, require_checkpoint=True)
                    result = verify_receipt(source, line.receipt, trust, policy)
            except CannotVerify as exc:
                return ReceiptCheck(line, origin, None, "", "its bundle cannot be read: %s" % exc)
            return ReceiptCheck(line, origin, result, _match(result, line, fields))
    ledger = ledgers.get()
    if ledger is None:
        return ReceiptCheck(
            line,
            "",
            None,
            "",
            "no bundle under %s (run `ledger receipts fetch`) and no ledger to read (%s)"
            % (BUNDLE_REFS, ledgers.problem),
        )
    try:
        result = verify_receipt(ledger, line.receipt, trust, transparency)
    except CannotVerify as exc:
        return ReceiptCheck(line, "ledger", None, "", str(exc))
    return ReceiptCheck(line, "ledger", result, _match(result, line, fields))


def _store_audited(
    checks: list[ReceiptCheck], trust: Trust, ledgers: _Ledgers, audit_state: Path
) -> tuple[list[ReceiptCheck], str | None]:
    """Each verified receipt marked ``audited`` when the gate's own (resumed) chain audit of
    the store covers its very entry (`verify.audited_entry`); else why the audit could not.
    """
    source = ledgers.get()
    if source is None:
        return checks, "the store cannot be read for the audit: %s" % ledgers.problem
    try:
        state = audit_store(source, trust, audit_state, evidence=False)
    except InputError as exc:
        return checks, str(exc)
    marked = [
        dataclasses.replace(c, audited=True)
        if c.result is not None
        and c.result.receipt_seq is not None
        and c.result.receipt_entry is not None
        and audited_entry(source, state, c.result.receipt_seq, c.result.receipt_entry)
        else c
        for c in checks
    ]
    return marked, None


def check_receipts(
    repo: Path,
    rev: str,
    trust: Trust,
    transparency: Transparency | None = None,
    open_ledger: OpenLedger | None = None,
    audit_state: Path | None = None,
) -> tuple[dict[str, str], list[ReceiptCheck], str | None]:
    """``rev``'s commit and tree ids, every receipt its notes (or its tree's) name, verified,
    and, with ``audit_state``, why the store audit failed (None when it passed).
    """
    fields = resolve_commit(rev, repo)
    policy = transparency or Transparency()
    ledgers = _Ledgers(open_ledger)
    try:
        checks = [_check_one(repo, line, fields, trust, policy, ledgers) for line in attached(repo, rev)]
        # The audit costs what the store's new entries cost: run it only when it decides something.
        if audit_state is None or all(c.complete or not c.ok for c in checks):
            return fields, checks, None
        checks, problem = _store_audited(checks, trust, ledgers, audit_state)
        return fields, checks, problem
    finally:
        ledgers.close()


@dataclass(frozen=True, slots=True)
class GateResult:
    """The gate's decision on one commit. ``receipt`` is the receipt that let it through."""

    commit: str
    tree: str
    candidate: Digest
    receipt: str | None
    reasons: tuple[str, ...]
    mode: str = "enforce"
    checks: tuple[ReceiptCheck, ...] = ()
    trust: str = ""
    decided_by: str | None = None  # the receipt that decided, whether it let the commit through or not

    @property
    def passed(self) -> bool:
        return self.receipt is not None

    @property
    def passing(self) -> ReceiptCheck | None:
        return next((c for c in self.checks if c.note.receipt == self.receipt), None)

    @property
    def via_tree(self) -> str | None:
        """The commit the passing receipt was made for, when it is another commit with this tree."""
        found = self.passing
        return found.note.commit if found is not None and found.match == "tree" else None

    @property
    def task(self) -> str | None:
        for check in ([self.passing] if self.passing else []) + list(self.checks):
            if check is not None and check.result is not None and check.result.task_id:
                return check.result.task_id
        return None

    @property
    def notices(self) -> tuple[str, ...]:
        found = self.passing
        return found.notices() if found is not None else ()

    @property
    def decision(self) -> str:
        return "pass" if self.passed else ("block" if self.mode == "enforce" else "would-block")

    @property
    def blocks(self) -> bool:
        """True when the caller must stop the merge (never in advisory mode)."""
        return not self.passed and self.mode == "enforce"

    def as_dict(self) -> dict[str, object]:
        return {
            "commit": self.commit,
            "tree": self.tree,
            "candidate": str(self.candidate),
            "mode": self.mode,
            "decision": self.decision,
            "pass": self.passed,
            "receipt": self.receipt,
            "via_tree_of": self.via_tree,
            "trust": self.trust,
            "notices": list(self.notices),
            "reasons": list(self.reasons),
            "receipts": [c.as_dict() for c in self.checks],
        }


def _trust_label(trust: Trust) -> str:
    return trust.label(())


def gate_check(
    repo: Path,
    rev: str,
    trust: Trust,
    transparency: Transparency | None = None,
    mode: str = "enforce",
    open_ledger: OpenLedger | None = None,
    audit_state: Path | None = None,
) -> GateResult:
    """Verify each receipt named on ``rev`` (or its tree) against ``trust``. The newest that
    verifies and is for ``rev``'s commit or tree decides; it lets ``rev`` through only when it
    is merge-eligible, its task's completeness up to it is proven (format.md §8.1a), and
    every other receipt named there verifies too (fail closed: one that does not may be a
    newer rejection whose bundle was withheld or damaged).

    Args:
        repo: the repository holding ``rev``, its notes and the receipts' bundles.
        rev: the revision to judge.
        trust: the pinned trust root.
        transparency: the checkpoint and witness policy; its auditing witnesses (a quorum of
            their cosignatures on the bundle's checkpoint) prove completeness on a fresh clone.
        mode: "enforce" or "advisory".
        open_ledger: opens the store, for receipts without a bundle and for the audit.
        audit_state: in CI that can reach the store, the gate's own audit state file: the
            gate audits the store's chain (resumed from the file, kept there) and a receipt
            whose entry that clean audit covers has its completeness proven.

    Raises:
        InputError: an unknown mode, or ``rev`` is not a commit.
    """
    if mode not in GATE_MODES:
        raise InputError("the gate's mode is one of %s" % ", ".join(GATE_MODES))
    # Unproven completeness is decided below, where the gate's own audit of the store counts too.
    policy = dataclasses.replace(transparency or Transparency(), require_complete=False)
    fields, checks, audit_problem = check_receipts(repo, rev, trust, policy, open_ledger, audit_state)
    candidate = candidate_hash(fields)
    newest = deciding_receipt(checks)
    # A receipt the notes name that cannot be verified (its bundle missing, unreadable or
    # altered) might be the newest one, and might block: nobody can tell, so it blocks.
    broken = tuple(c for c in checks if c.result is None or not c.result.ok)
    chosen = newest if newest is not None and newest.lets_through and not broken and newest.complete else None
    reasons = _why_blocked(checks, newest, chosen, broken, audit_problem, audit_state is not None)
    if not checks:
        reasons = ("no receipt is attached to %s or its tree (git notes %s)" % (fields["commit"][:12], NOTES_REF),)
    return GateResult(
        fields["commit"],
        fields["tree"],
        candidate,
        chosen.note.receipt if chosen else None,
        reasons,
        mode,
        tuple(checks),
        _trust_label(trust),
        newest.note.receipt if newest is not None else None,
    )


def deciding_receipt(checks: Sequence[ReceiptCheck]) -> ReceiptCheck | None:
    """The newest verified receipt of the candidate: an older eligible one must not outvote a
    later rejection or a later weakening. Sealed in the same second, the one that blocks wins
    (fail closed); then the exact commit before a same-tree one.

    One exception (format.md §12): a newest receipt that records no failure, only missing
    records (a merge queue's or a rerun's receipt on the reviewed tree, without its
    approvals), does not outvote the newest eligible receipt of the same task under the
    same contract revision sealed before it: nothing new failed. A failing check, a
    judge's doubt or a human rejection in it still decides.
    """
    verified = [c for c in checks if c.ok and c.result is not None]

    def order(c: ReceiptCheck) -> tuple[int, bool, bool]:
        return (c.result.sealed_at or 0 if c.result else 0, not c.lets_through, c.match == "commit")

    newest = max(verified, key=order, default=None)
    if newest is None or newest.result is None or not newest.only_incomplete:
        return newest
    same = (newest.result.task_id, newest.result.config)
    earlier = [
        c
        for c in verified
        if c.lets_through
        and c.result is not None
        and (c.result.task_id, c.result.config) == same
        and order(c) <= order(newest)
    ]
    return max(earlier, key=order, default=newest)


def _why_blocked(
    checks: list[ReceiptCheck],
    newest: ReceiptCheck | None,
    chosen: ReceiptCheck | None,
    broken: tuple[ReceiptCheck, ...],
    audit_problem: str | None,
    audited: bool,
) -> tuple[str, ...]:
    """Why the gate does not let the revision through (empty when it does)."""
    unverified = tuple(c.why_not() for c in checks if not c.ok)
    if newest is not None and newest.lets_through and not broken and not newest.complete:
        # By proof, a rejection that every later pointer skips would not be seen (§8.1a).
        how = (
            "the gate's audit of the store failed: %s" % audit_problem
            if audit_problem
            else "the gate's audit of the store does not cover this receipt's entry"
            if audited
            else "the gate did not audit the store (--audit-state)"
        )
        return (
            "the completeness of task %s up to %s is unproven: no quorum of auditing witnesses cosigned its"
            " checkpoint (.ledger/auditing-witnesses on the target branch, or --auditing-witness), and %s"
            % (newest.result.task_id if newest.result else "?", newest.note.receipt, how),
        )
    if broken and newest is not None and newest.lets_through:
        return (
            "%d receipt(s) named on this revision cannot be verified, and any of them may be newer than %s and"
            " block it: every receipt the notes name must verify" % (len(broken), newest.note.receipt),
        ) + unverified
    if newest is not None and chosen is None:
        return ("the newest receipt decides: " + newest.why_not(),) + unverified
    return unverified


def gate(
    repo: Path,
    rev: str,
    trust: Trust,
    *,
    transparency: Transparency | None = None,
    mode: str = "enforce",
    open_ledger: OpenLedger | None = None,
    audit_state: Path | None = None,
    recorder: tuple[Ledger, Signer] | None = None,
    task: str | None = None,
) -> GateResult:
    """`gate_check`, and with ``recorder`` (a ledger and a seal key) the decision recorded
    as a gate event, plus a verified-success event when an enforcing gate passes. Advisory
    mode must record.
    """
    if mode == "advisory" and recorder is None:
        raise InputError("advisory mode records its decision: pass --key (a seal key)")
    result = gate_check(repo, rev, trust, transparency, mode, open_ledger, audit_state)
    if recorder is not None:
        ledger, signer = recorder
        task_id = task or result.task
        if task_id is None:
            raise InputError("cannot tell which task this decision is for: pass --task")
        record_event(
            ledger,
            signer,
            task_id,
            EventType.GATE_DECISION,
            result.candidate,
            {
                "mode": mode,
                "decision": result.decision,
                "commit": result.commit,
                "tree": result.tree,  # what it judged: a merge commit's tree is its change's
                "receipt": result.receipt or "",
                "decided_by": result.decided_by or "",
            },
        )
        if result.passed and mode == "enforce":
            record_event(
                ledger,
                signer,
                task_id,
                EventType.SUCCESS_VERIFIED,
                result.candidate,
                {"receipt": result.receipt or "", "commit": result.commit},
            )
    return result


def verify_commit(
    repo: Path,
    rev: str,
    trust: Trust,
    transparency: Transparency | None = None,
    open_ledger: OpenLedger | None = None,
) -> list[ReceiptCheck]:
    """Verify every receipt named on ``rev`` or its tree; `InputError` if none is."""
    try:
        _, checks, _ = check_receipts(repo, rev, trust, transparency, open_ledger)
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None
    if not checks:
        raise InputError("no receipt is attached to %s or its tree (git notes %s)" % (rev, NOTES_REF))
    return checks
