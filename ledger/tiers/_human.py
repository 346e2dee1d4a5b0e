"""The human tier: a person's key signs a verdict on the exact candidate and contract,
after being shown what they sign.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    CHECK_RESULT_FORMAT,
    HUMAN_DECISION_ID,
    Contract,
    Digest,
    EvidenceRef,
    FormatError,
    HumanDecision,
    Signer,
    Tier,
    TierRecord,
    Verdict,
    check_evidence_id,
    config_hash,
    derive_attempts,
    fingerprint,
    latest_human_decisions,
    requires_report,
    result_key,
)

from .._errors import InputError
from .._git import git_ok
from ..ladder._contracts import current_contract
from ..ladder._evidence import record_evidence, snapshot_of
from ..ladder._records import append_tier_record
from ..store._ledger import Appended, Store

__all__ = ["decide", "summary", "decision_caveats"]


@dataclass(frozen=True, slots=True)
class _Scene:
    """What the person is shown before signing: the tiers' verdicts on this candidate, its
    checks as recorded, who has approved it, whether it edits a contract, the diff.
    """

    verdicts: dict[str, str]
    checks: tuple[tuple[str, str], ...]  # check id, "pass" or "fail: why"
    approvers: tuple[str, ...]  # names whose newest decision on it approves
    edits_contract: bool
    stat: str


def _scene(
    store: Store, repo: Path | None, task_id: str, candidate: Digest, config: Digest, contract: Contract
) -> _Scene:
    rows = [
        row
        for row in store.records_for(task_id)
        if row.record.input_hash == candidate and row.record.config_hash == config
    ]
    verdicts: dict[str, str] = {}
    checks: tuple[tuple[str, str], ...] = ()
    base = commit = None
    for row in rows:
        if row.record.tier is Tier.DETERMINISTIC:
            verdicts["deterministic"] = row.record.verdict.value
            checks = _check_rows(store, row.record, contract)
            doc = snapshot_of(store, row.record)
            if doc is not None:
                base, commit = doc.get("base"), doc.get("commit")
        elif row.record.tier is Tier.JUDGE:
            verdicts["judge"] = row.record.verdict.value
    human = latest_human_decisions(
        [(row.digest, row.record, row.signer) for row in rows],
        task_id=task_id,
        input_hash=candidate,
        config_hash=config,
    )
    names = {state.key_id: state.spec.name for state in store.keyring()}
    by_digest = {row.digest: row for row in rows}
    approvers = tuple(
        names.get(by_digest[d].signer, by_digest[d].signer)
        for d in human
        if by_digest[d].record.verdict is Verdict.PASS
    )
    stat, edits = "", False
    if repo is not None and commit:
        args = ["diff", "--stat", base, commit] if base else ["show", "--stat", "--format=", commit]
        stat = git_ok(repo, *args) or ""
        changed = git_ok(repo, "diff", "--name-only", base, commit) if base else ""
        edits = any(line.startswith(".ledger/contracts/") for line in (changed or "").splitlines())
    return _Scene(verdicts, checks, approvers, edits, stat)


def _check_rows(store: Store, record: TierRecord, contract: Contract) -> tuple[tuple[str, str], ...]:
    rows = []
    for check in contract.checks:
        keys = [result_key(check, n) for n in range(1, check.runs + 1)]
        found = {k: record_evidence(store, record, check_evidence_id(k), CHECK_RESULT_FORMAT) for k in keys}
        recorded = {k: doc for k, doc in found.items() if doc is not None}
        passed, why, _ = derive_attempts(check, recorded, requires_report(contract, check))  # as the verifier judges
        rows.append((check.id, "pass" if passed else "fail: %s" % why))
    return tuple(rows)


def summary(
    task_id: str, candidate: Digest, contract: Contract, scene: _Scene, approve: bool, caveats: Sequence[str] = ()
) -> str:
    """The screen a person reads before signing: the decision and the task's goal first,
    then the checks and tiers as recorded on this candidate, the approvals the contract
    requires and who gave them, a change to a contract, what will not count, and the diff.
    This exact text is stored in the signed decision.
    """
    lines = ["%s %s: %s" % ("APPROVE" if approve else "REJECT", task_id, contract.goal), "candidate %s" % candidate]
    if scene.checks:
        lines.append("checks, as the deterministic tier recorded them on this candidate:")
        lines += ["  %-24s %s" % row for row in scene.checks]
    lines.append("tiers:")
    for name, verdict in scene.verdicts.items() or [("(no tier has ruled yet)", "")]:
        lines.append("  %-24s %s" % (name, verdict))
    given = ", ".join(scene.approvers) or "nobody yet"
    lines.append("approvals: %d required; given by %s" % (contract.human_approvals, given))
    if scene.edits_contract:
        lines.append(
            "THIS CHANGE EDITS A CONTRACT under .ledger/contracts/: the one in force is the target branch's,"
            " not the candidate's; read that part of the diff"
        )
    lines += ["WILL NOT COUNT: %s" % caveat for caveat in caveats]
    lines.append(scene.stat or "(no diff summary: the deterministic tier has not recorded a snapshot)")
    return "\n".join(lines)


def decide(
    store: Store,
    *,
    task_id: str,
    contract_bytes: bytes,
    candidate: Digest,
    signer: Signer,
    approve: bool,
    note: str,
    repo: Path | None,
    confirm: Callable[[str], bool],
    method: str = "scripted",
) -> Appended | None:
    """Show the decision, and sign it only if ``confirm`` agrees. None when declined.
    ``method`` records how it was given: ``interactive`` (a person answered a prompt at a
    terminal) or ``scripted`` (confirmed by a program, such as `--yes`).
    """
    try:
        # Checked before anything is shown: a bad decision is refused, not signed.
        HumanDecision(approve, fingerprint(signer.public_key_blob), note, "", method)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    config = config_hash(contract_bytes)
    contract = current_contract(store, task_id, config)
    scene = _scene(store, repo, task_id, candidate, config, contract)
    caveats = decision_caveats(store, task_id, contract_bytes, candidate, signer) if approve else []
    shown = summary(task_id, candidate, contract, scene, approve, caveats)
    if not confirm(shown):
        return None
    # Whose decision it is belongs in the record: two keys' identical decisions must not
    # collapse into one record hash.
    data = HumanDecision(approve, fingerprint(signer.public_key_blob), note, shown, method).encode()
    digest, size = store.put_blob_stream(io.BytesIO(data))
    return append_tier_record(
        store,
        signer,
        task_id=task_id,
        tier=Tier.HUMAN,
        config_hash=config,
        input_hash=candidate,
        evidence=(EvidenceRef(HUMAN_DECISION_ID, digest, size, "application/json"),),
        verdict=Verdict.PASS if approve else Verdict.FAIL,
        verifier="receipt-ledger human decision",
    )[1]


def decision_caveats(store: Store, task_id: str, contract_bytes: bytes, candidate: Digest, signer: Signer) -> list[str]:
    """Why an approval by ``signer`` of ``candidate`` will not count, said when it is given
    rather than discovered at the seal: the contract requires approvers independent of the
    author and this key signed the change's claim or trace; or a newer candidate of the task
    has been checked since (a receipt for it will not include this approval).
    """
    from receipts import author_keys

    from ..ladder._events import task_events

    caveats = []
    contract = current_contract(store, task_id, config_hash(contract_bytes))
    key = fingerprint(signer.public_key_blob)
    if contract.independent_approvers:
        authors = author_keys([(seq, event.type.value, who) for seq, event, who in task_events(store, task_id)])
        if key in authors:
            caveats.append(
                "this approval will not count: key %s %s, and the contract requires approvers independent"
                " of the author" % (key, authors[key])
            )
    checked = [row.record.input_hash for row in store.records_for(task_id) if row.record.tier is Tier.DETERMINISTIC]
    if checked and checked[-1] != candidate:
        caveats.append(
            "this approval is for candidate %s, but the task's newest checked candidate is %s: a receipt"
            " for that one will not count it (approve it instead)" % (candidate.short(), checked[-1].short())
        )
    return caveats
