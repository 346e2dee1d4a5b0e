"""The merge gate: a commit passes only with a verified, merge-eligible receipt for its
exact commit and tree, attached as a git note. In advisory mode the decision is recorded
but never blocks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from receipts import Digest, EventType, Signer, candidate_hash
from verify import Result, Source, Transparency, Trust, verify_receipt

from ._errors import InputError
from ._events import record_event
from ._git import resolve_commit
from ._git_notes import NOTES_REF, attached
from ._store import Ledger

__all__ = ["GATE_MODES", "GateResult", "gate_check", "gate", "verify_commit"]

GATE_MODES = ("enforce", "advisory")


@dataclass(frozen=True, slots=True)
class GateResult:
    """The gate's decision on one commit. ``receipt`` is the receipt that let it through."""

    commit: str
    tree: str
    candidate: Digest
    receipt: str | None
    reasons: tuple[str, ...]
    mode: str = "enforce"
    attached: tuple[str, ...] = ()  # every receipt hash the commit's note names

    @property
    def passed(self) -> bool:
        return self.receipt is not None

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
            "reasons": list(self.reasons),
        }


def gate_check(
    ledger: Ledger, repo: Path, rev: str, trust: Trust, require_checkpoint: bool = False, mode: str = "enforce"
) -> GateResult:
    """Verify each receipt attached to ``rev`` against ``trust``; the first that verifies, is
    merge-eligible and covers ``rev``'s exact commit and tree lets it through."""
    if mode not in GATE_MODES:
        raise InputError("the gate's mode is one of %s" % ", ".join(GATE_MODES))
    fields = resolve_commit(rev, repo)
    candidate = candidate_hash(fields)
    reasons: list[str] = []
    hashes = attached(repo, rev)
    if not hashes:
        reasons.append("no receipt is attached to %s (git notes %s)" % (fields["commit"][:12], NOTES_REF))
    for h in hashes:
        res = verify_receipt(ledger.reader, h, trust, Transparency(require_checkpoint=require_checkpoint))
        if res.candidate != str(candidate):
            reasons.append(
                "%s is stale: it is for candidate %s, not this commit's tree" % (h, (res.candidate or "?")[:19])
            )
        elif not res.ok:
            reasons.append("%s does not verify: %s" % (h, res.defects[0].message))
        elif not res.derived_eligible:
            reasons.append("%s is not merge-eligible: %s" % (h, "; ".join(res.eligibility_reasons)))
        else:
            return GateResult(fields["commit"], fields["tree"], candidate, h, tuple(reasons), mode, tuple(hashes))
    return GateResult(fields["commit"], fields["tree"], candidate, None, tuple(reasons), mode, tuple(hashes))


def _task_of(ledger: Ledger, result: GateResult) -> str:
    for h in ([result.receipt] if result.receipt else []) + list(result.attached):
        stored = ledger.find(Digest.parse(h))
        if stored is not None and stored.task:
            return stored.task
    raise InputError("cannot tell which task this decision is for: pass --task")


def gate(
    ledger: Ledger,
    repo: Path,
    rev: str,
    trust: Trust,
    *,
    require_checkpoint: bool = False,
    mode: str = "enforce",
    signer: Signer | None = None,
    task: str | None = None,
) -> GateResult:
    """`gate_check`, and with ``signer`` (a seal key) the decision recorded as a gate event,
    plus a verified-success event when an enforcing gate passes. Advisory mode must record."""
    if mode == "advisory" and signer is None:
        raise InputError("advisory mode records its decision: pass --key (a seal key)")
    result = gate_check(ledger, repo, rev, trust, require_checkpoint, mode)
    if signer is not None:
        task_id = task or _task_of(ledger, result)
        record_event(
            ledger,
            signer,
            task_id,
            EventType.GATE_DECISION,
            result.candidate,
            {"mode": mode, "decision": result.decision, "commit": result.commit, "receipt": result.receipt or ""},
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
    source: Source, repo: Path, rev: str, trust: Trust, transparency: Transparency | None = None
) -> list[Result]:
    """Verify every receipt attached to ``rev``; `InputError` if none is."""
    hashes = attached(repo, rev)
    if not hashes:
        raise InputError("no receipt is attached to %s (git notes %s)" % (rev, NOTES_REF))
    return [verify_receipt(source, h, trust, transparency) for h in hashes]
