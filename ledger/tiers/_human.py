"""The human tier: a person's key signs a verdict on the exact candidate and contract,
after being shown what they sign.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from receipts import (
    HUMAN_DECISION_ID,
    Digest,
    EvidenceRef,
    FormatError,
    HumanDecision,
    Signer,
    Tier,
    Verdict,
    config_hash,
    fingerprint,
    latest_human_decisions,
)

from .._errors import InputError
from .._git import git_ok
from ..ladder._contracts import current_contract
from ..ladder._evidence import snapshot_of
from ..ladder._records import append_tier_record
from ..store._ledger import Appended, Store

__all__ = ["decide", "summary", "decision_caveats"]


def _diffstat(
    store: Store, repo: Path | None, task_id: str, candidate: Digest, config: Digest
) -> tuple[str, dict[str, str]]:
    verdicts: dict[str, str] = {}
    base = commit = None
    rows = [
        row
        for row in store.records_for(task_id)
        if row.record.input_hash == candidate and row.record.config_hash == config
    ]
    for row in rows:
        if row.record.tier is not Tier.HUMAN:
            verdicts[row.record.tier.value] = row.record.verdict.value
        if row.record.tier is Tier.DETERMINISTIC:
            doc = snapshot_of(store, row.record)
            if doc is not None:
                base, commit = doc.get("base"), doc.get("commit")
    human = latest_human_decisions(
        [(row.digest, row.record, row.signer) for row in rows],
        task_id=task_id,
        input_hash=candidate,
        config_hash=config,
    )
    by_digest = {row.digest: row for row in rows}
    for digest in human:
        row = by_digest[digest]
        verdicts["human:" + row.signer] = "approve" if row.record.verdict is Verdict.PASS else "reject"
    stat = ""
    if repo is not None and commit:
        args = ["diff", "--stat", base, commit] if base else ["show", "--stat", "--format=", commit]
        stat = git_ok(repo, *args) or ""
    return stat, verdicts


def summary(task_id: str, candidate: Digest, verdicts: dict[str, str], stat: str, approve: bool) -> str:
    lines = ["%s %s" % ("APPROVE" if approve else "REJECT", task_id), "candidate %s" % candidate]
    for name, verdict in verdicts.items() or [("(no tier has ruled yet)", "")]:
        lines.append("  %-40s %s" % (name, verdict))
    lines.append(stat or "(no diff summary: the deterministic tier has not recorded a snapshot)")
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
    current_contract(store, task_id, config)
    stat, verdicts = _diffstat(store, repo, task_id, candidate, config)
    shown = summary(task_id, candidate, verdicts, stat, approve)
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
