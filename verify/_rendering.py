"""The bundle's renderings (format.md §10): ``manifest.json``, ``report.md`` and
``report.html``, as functions of the bundle's verified content alone, so that the
verifier re-renders them and compares them byte for byte (step 9) instead of leaving an
auditor to trust pages nobody checked. The exporter writes these same functions' output.

The inputs are the bundle's entries, its evidence, its checkpoint, the redactions its
manifest declares, and the verifier's result on the bundle under the bundle's own genesis
pin (`rendering_trust`) with the default policy; nothing the exporter's machine holds
(its keyring after the receipt, its version, its own verification) enters them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from receipts import (
    CHECK_RESULT_FORMAT,
    HUMAN_DECISION_FORMAT,
    HUMAN_DECISION_ID,
    SNAPSHOT_FORMAT,
    Checkpoint,
    Contract,
    ContractRevision,
    Digest,
    EntryKind,
    EvidenceRef,
    Genesis,
    KeyAdd,
    KeyRevoke,
    Keyring,
    KeyState,
    LadderReceipt,
    ReceiptsError,
    TaskEvent,
    TierRecord,
    Verdict,
    Waiver,
    decision_method,
    decode_as,
    decode_body,
    decode_entry,
    derive_attempts,
    derive_check,
    parse_checkpoint,
    replay_keyring,
    requires_report,
    utc_text,
)

from ._errors import CannotVerify
from ._escape import markdown_text
from ._exceptions import exceptions, headline
from ._layout import BundleLayout
from ._manifest import ManifestClaims, Redaction
from ._report_page import report_html
from ._result import Result
from ._source import StoredEntry, keyring_changes
from ._trust import TrustRoot

__all__ = [
    "RENDERINGS",
    "bundle_manifest",
    "final_status",
    "render",
    "rendering_trust",
    "report_markdown",
    "report_html",
]

# The bundle members that are renderings, in the order they are compared.
RENDERINGS = (BundleLayout.MANIFEST, BundleLayout.REPORT_MD, BundleLayout.REPORT_HTML)


def rendering_trust(entries: dict[int, StoredEntry]) -> TrustRoot:
    """The pin the renderings' verification runs under: the bundle's own genesis admin.
    An auditor verifies under a pin of their own; where the two differ, the auditor's
    verification fails before the renderings matter.

    Raises:
        CannotVerify: the bundle has no readable genesis entry.
    """
    genesis = entries.get(0)
    try:
        signer = decode_entry(genesis.entry).signer if genesis is not None else None
    except ReceiptsError:
        signer = None
    if signer is None:
        raise CannotVerify("the bundle has no readable genesis entry to render under")
    return TrustRoot(frozenset({signer}), "the bundle's own genesis admin %s" % signer)


def render(manifest: dict[str, Any], links: bool = True) -> dict[str, bytes]:
    """The three rendering members' bytes, from the manifest document (``links``: the page
    links the bundle's evidence members, as it does inside a bundle).
    """
    return {
        BundleLayout.MANIFEST: (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode(),
        BundleLayout.REPORT_MD: report_markdown(manifest).encode(),
        BundleLayout.REPORT_HTML: report_html(manifest, links=links).encode(),
    }


def _keyring(entries: dict[int, StoredEntry]) -> Keyring:
    """The keyring the bundle's keyring entries replay to (the receipt's, at its entry)."""
    ring = replay_keyring(keyring_changes(entries.values()), verify_signatures=True)
    if ring is None:
        raise CannotVerify("the bundle's keyring entries replay to no keyring")
    return ring


def _declared(redacted: Sequence[Redaction], records: dict[str, tuple[TierRecord, str]]) -> list[Redaction]:
    """The declared redactions that name an evidence item of a listed record, in the shape
    the exporter writes (``tier``, ``check``, ``digest``, ``size``, and a textual ``reason``
    for evidence pruned before export, which is the exporter's word). Anything else is left
    out, so a manifest that carries it is not its own rendering.
    """
    items = {
        (rec.tier.value, ref.check_id, str(ref.digest), ref.size) for rec, _ in records.values() for ref in rec.evidence
    }
    return [item for item in redacted if (item.tier, item.check, item.digest, item.size) in items]


def listed_records(entries: dict[int, StoredEntry], receipt: LadderReceipt) -> dict[str, tuple[TierRecord, str]]:
    """The tier records among ``entries`` that the receipt lists, with their signers' key
    ids, by record hash (what a bundle's renderings and its exporter both describe).
    """
    records: dict[str, tuple[TierRecord, str]] = {}
    for e in entries.values():
        if e.kind == EntryKind.TIER_RECORD.value and any(
            Digest(e.body_hash) in slot.records for slot in receipt.entries
        ):
            records[str(Digest(e.body_hash))] = (decode_as(TierRecord, e.body), decode_entry(e.entry).signer)
    return records


def final_status(result: Result) -> str:
    """One word for a verification result: verified, or the first tier that blocked it."""
    if result.derived_eligible:
        return "verified"
    statuses = {t.tier.value: t.status for t in result.tiers}
    if statuses.get("deterministic") == "fail":
        return "failed"
    if "fail" in statuses.values():
        return "blocked"
    return "partial"


def bundle_manifest(
    entries: dict[int, StoredEntry],
    read_json: Callable[[Digest, str], dict[str, Any] | None],
    receipt_hash: str,
    result: Result,
    checkpoint_text: str | None,
    redacted: Sequence[Redaction],
) -> dict[str, Any]:
    """The bundle's ``manifest.json`` as a document: a function of the bundle's entries,
    its evidence (``read_json``), its checkpoint, the redactions it declares and the
    verifier's ``result`` on it (`bundle_renderings`), and of nothing else. (`ledger report
    --html` renders a receipt on a ledger from the same inputs read there.)

    Raises:
        CannotVerify: ``receipt_hash`` is not a receipt among ``entries``.
    """
    receipt = _receipt_in(entries, receipt_hash)
    records = listed_records(entries, receipt)
    declared = _declared(redacted, records)
    ring = _keyring(entries)
    cp = parse_checkpoint(checkpoint_text.split("\n\n")[0] + "\n") if checkpoint_text is not None else None
    contract_seq, contract = _contract_of(entries, receipt)
    names = {s.key_id: (s.spec.name, tuple(r.value for r in s.spec.roles)) for s in ring}
    evidence = _evidence_parts(records, read_json, contract, names)
    return {
        # What the bundle's reader acts on: written by the class that parses it.
        **ManifestClaims(receipt_hash, tuple(sorted(entries)), tuple(declared)).as_dict(),
        "task": receipt.task_id,
        "final_status": final_status(result),
        "merge_eligible": receipt.merge_eligible,
        "contract": _contract_part(receipt, contract_seq, contract),
        "sealed_at": receipt.created,
        "input_snapshot": {
            "candidate": str(receipt.input_hash),
            **{k: evidence.snapshot.get(k) for k in ("commit", "tree", "base", "base_source", "diff", "dirty")},
        },
        "decisions": evidence.decisions,
        "timeline": [_event(seq, e, names) for seq, e in sorted(entries.items())],
        "verification": _verification_part(result),
        **_decision_part(result),
        "change_set": {"diff": evidence.snapshot.get("diff"), "attribution": evidence.snapshot.get("attribution")},
        "artifacts": evidence.artifacts,
        "checks": evidence.checks,
        "tiers": [t.as_dict() for t in result.tiers],
        "provenance": {
            "log": cp.origin if cp is not None else None,
            "keyring": [_key_row(s) for s in ring],
            "signers": sorted({signer for _, signer in records.values()}),
        },
        "policy_decisions": {
            "approvals": evidence.approvals,
            "rejections": evidence.rejections,
            "waivers": list(result.waivers),
            "contract_weakenings": list(result.weakenings),
        },
        "unresolved": _unresolved_part(result, evidence.checks),
        "checkpoint": _checkpoint_part(cp),
        "how_to_verify": "ledger verify --bundle BUNDLE.zip --trust ALLOWED_SIGNERS",
    }


_Names = dict[str, tuple[str, tuple[str, ...]]]


def _decision_part(result: Result) -> dict[str, Any]:
    # The decision first, then every exception it rests on (one wording for every page).
    notes = exceptions(result)
    return {"headline": headline(result, notes), "exceptions": [n.as_dict() for n in notes]}


def _receipt_in(entries: dict[int, StoredEntry], receipt_hash: str) -> LadderReceipt:
    for e in entries.values():
        if e.kind == EntryKind.RECEIPT.value and str(Digest(e.body_hash)) == receipt_hash:
            return decode_as(LadderReceipt, e.body)
    raise CannotVerify("the bundle holds no receipt %s to render" % receipt_hash)


def _contract_of(entries: dict[int, StoredEntry], receipt: LadderReceipt) -> tuple[int | None, Contract | None]:
    """The first contract entry under the receipt's config: its position and the contract."""
    for seq, e in sorted(entries.items()):
        if e.kind == EntryKind.CONTRACT.value:
            revision = decode_as(ContractRevision, e.body)
            if revision.config_hash == receipt.config_hash:
                return seq, revision.parse()
    return None, None


def _contract_part(receipt: LadderReceipt, seq: int | None, contract: Contract | None) -> dict[str, Any]:
    policy = (
        {
            "required_tiers": [t.value for t in contract.required_tiers],
            "human_approvals": contract.human_approvals,
            "independent_approvers": contract.independent_approvers,
            "judge_threshold": contract.judge_threshold_bp / 10000,
        }
        if contract
        else {}
    )
    return {
        "config": str(receipt.config_hash),
        "revision_entry": seq,
        "goal": contract.goal if contract else None,
        "policy": policy,
    }


def _unresolved_part(result: Result, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """What the receipt leaves open: skipped tiers, stale approvals, flaky checks (run more
    than once, and failed at least once), waivers, assumptions.
    """
    return {
        "skipped_tiers": [t.tier.value for t in result.tiers if t.status in ("skip", "missing")],
        "stale_approvals": list(result.stale),
        "flaky_checks": [c["id"] for c in checks if any(a["status"] != "pass" for a in c.get("attempts") or ())],
        "waivers": list(result.waivers),
        "unverified_assumptions": list(result.warnings),
        "not_eligible_because": list(result.eligibility_reasons),
    }


def _checkpoint_part(cp: Checkpoint | None) -> dict[str, Any] | None:
    if cp is None:
        return None
    return {"origin": cp.origin, "size": cp.size, "root": base64.b64encode(cp.root).decode("ascii")}


def _verification_part(result: Result) -> dict[str, Any]:
    return {
        "verified": result.ok,
        "merge_eligible_derived": result.derived_eligible,
        "not_eligible_because": list(result.eligibility_reasons),
        "defects": [{"code": d.code, "message": d.message} for d in result.defects],
        "warnings": list(result.warnings),
        "notes": list(result.notes),
        "trust": result.trust,
        "method": "by proof into the checkpoint" if result.method == "proof" else "by walking the chain",
        "checkpoint": result.checkpoint,
    }


def _key_row(signer: KeyState) -> dict[str, Any]:
    return {
        "name": signer.spec.name,
        "key_id": signer.key_id,
        "roles": [r.value for r in signer.spec.roles],
        "status": "revoked" if signer.revoked_at is not None else "active",
    }


@dataclass(slots=True)
class _EvidenceParts:
    """The manifest's parts read from the listed records' evidence, in record order."""

    snapshot: dict[str, Any] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)


def _evidence_parts(
    records: dict[str, tuple[TierRecord, str]],
    read_json: Callable[[Digest, str], dict[str, Any] | None],
    contract: Contract | None,
    names: _Names,
) -> _EvidenceParts:
    parts = _EvidenceParts()
    for digest, (rec, signer) in sorted(records.items()):
        attempts: dict[str, list[EvidenceRef]] = {}
        for ref in rec.evidence:
            parts.artifacts.append(
                {
                    "tier": rec.tier.value,
                    "check": ref.check_id,
                    "digest": str(ref.digest),
                    "size": ref.size,
                    "media_type": ref.media_type,
                }
            )
            if ref.check_id == "snapshot":
                parts.snapshot = read_json(ref.digest, SNAPSHOT_FORMAT) or {}
            if ref.check_id.startswith("check:") and ref.check_id.count(":") == 1:
                if "#" in ref.check_id:  # one attempt of a check run several times: one row for all
                    attempts.setdefault(ref.check_id[6:].split("#", 1)[0], []).append(ref)
                else:
                    parts.checks.append(_check_row(rec, ref, read_json, contract))
        parts.checks += [_attempts_row(rec, base, refs, read_json, contract) for base, refs in attempts.items()]
        if rec.tier.value == "human":
            (parts.approvals if rec.verdict is Verdict.PASS else parts.rejections).append(
                {"record": digest, "signer": signer, "created": rec.created}
            )
            parts.decisions.append(_decision_row(rec, signer, read_json, names))
    return parts


def _check_row(
    rec: TierRecord,
    ref: EvidenceRef,
    read_json: Callable[[Digest, str], dict[str, Any] | None],
    contract: Contract | None,
) -> dict[str, Any]:
    """One check's row: its recorded result, and the status the contract's rule derives from it."""
    doc = read_json(ref.digest, CHECK_RESULT_FORMAT) or {}
    facts = doc.get("facts") or {}
    declared = contract.check(ref.check_id[6:]) if contract is not None else None
    passed, why = (
        derive_check(declared, doc, requires_report(contract, declared))
        if contract is not None and declared is not None
        else (False, "not in the contract")
    )
    own = [ref] + [e for e in rec.evidence if e.check_id.startswith(ref.check_id + ":")]
    return {
        "id": ref.check_id[6:],
        "type": doc.get("type"),
        "verifier": rec.verifier,
        "verifier_version": rec.verifier_version,
        "environment": str(rec.environment),
        "started": doc.get("started"),
        "exit_status": facts.get("exit_code"),
        "status": "pass" if passed else "fail",
        "reason": why,
        "duration_ms": doc.get("duration_ms"),
        "evidence": [str(e.digest) for e in own],
        "files": [{"name": e.check_id, "digest": str(e.digest)} for e in own],
    }


def _attempts_row(
    rec: TierRecord,
    base: str,
    refs: list[EvidenceRef],
    read_json: Callable[[Digest, str], dict[str, Any] | None],
    contract: Contract | None,
) -> dict[str, Any]:
    """A check run ``runs`` times, as one row: the contract's rule over all its attempts
    (`derive_attempts`), and each attempt's status.
    """
    docs = {ref.check_id[6:]: read_json(ref.digest, CHECK_RESULT_FORMAT) or {} for ref in refs}
    declared = contract.check(base) if contract is not None else None
    if contract is not None and declared is not None:
        report = requires_report(contract, declared)
        passed, why, _ = derive_attempts(declared, docs, report)
        each = [(key, derive_check(declared, doc, report)) for key, doc in sorted(docs.items())]
    else:
        passed, why, each = False, "not in the contract", [(key, (False, "not in the contract")) for key in docs]
    own = [
        e
        for ref in refs
        for e in rec.evidence
        if e.check_id == ref.check_id or e.check_id.startswith(ref.check_id + ":")
    ]
    first = docs[min(docs)] if docs else {}
    return {
        "id": base,
        "type": first.get("type"),
        "verifier": rec.verifier,
        "verifier_version": rec.verifier_version,
        "environment": str(rec.environment),
        "started": first.get("started"),
        "exit_status": (first.get("facts") or {}).get("exit_code"),
        "status": "pass" if passed else "fail",
        "reason": why or "passed %d of %d runs" % (len(docs), len(docs)),
        "duration_ms": sum(int(d.get("duration_ms") or 0) for d in docs.values()),
        "attempts": [
            {"attempt": key, "status": "pass" if ok else "fail", "reason": reason} for key, (ok, reason) in each
        ],
        "evidence": [str(e.digest) for e in own],
        "files": [{"name": e.check_id, "digest": str(e.digest)} for e in own],
    }


def _decision_row(
    rec: TierRecord, signer: str, read_json: Callable[[Digest, str], dict[str, Any] | None], names: _Names
) -> dict[str, Any]:
    """One human decision as its signed document states it, named by the keyring."""
    refs = [e for e in rec.evidence if e.check_id == HUMAN_DECISION_ID]
    doc = (read_json(refs[0].digest, HUMAN_DECISION_FORMAT) if refs else None) or {}
    return {
        "decision": doc.get("decision", "unreadable"),
        "name": names.get(signer, ("?", ()))[0],
        "key": signer,
        "roles": list(names.get(signer, ("?", ()))[1]),
        "time": rec.created,
        "method": decision_method(doc),
        "note": doc.get("note"),
        "shown_sha256": doc.get("shown_sha256"),
    }


def _event(seq: int, stored: StoredEntry, names: dict[str, tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    """One line of the report's timeline: what the entry did, when, signed by whom."""
    entry = decode_entry(stored.entry)
    body = decode_body(entry.kind, stored.body)
    if isinstance(body, TierRecord):
        what = "%s record: %s" % (body.tier.value, body.verdict.value)
    elif isinstance(body, LadderReceipt):
        what = "receipt sealed: merge_eligible=%s" % str(body.merge_eligible).lower()
    elif isinstance(body, ContractRevision):
        what = "contract revision %s" % body.config_hash.short()
    elif isinstance(body, Waiver):
        what = "waiver of %s until %s: %s" % (body.check_id, utc_text(body.expires), body.reason)
    elif isinstance(body, TaskEvent):
        detail = ", ".join("%s=%s" % kv for kv in body.fields)
        what = "%s%s" % (body.type.value, " (%s)" % detail if detail else "")
    elif isinstance(body, Genesis):
        what = "ledger created"
    elif isinstance(body, KeyAdd):
        what = "key %s added: %s" % (body.key.name, ", ".join(r.value for r in body.key.roles))
    elif isinstance(body, KeyRevoke):
        what = "key %s revoked: %s" % (names.get(body.key_id, (body.key_id,))[0], body.reason)
    else:
        what = entry.kind.value
    return {
        "seq": seq,
        "time": entry.time,
        "kind": entry.kind.value,
        "what": what,
        "signer": "%s (%s)" % (names.get(entry.signer, ("?",))[0], entry.signer),
    }


def report_markdown(m: dict[str, Any]) -> str:
    """The bundle's ``report.md``: the manifest for people, every ledger text escaped."""
    # Every text the ledger supplied goes through markdown_text: the file is rendered by
    # Markdown viewers that also render HTML.
    md = markdown_text
    lines = [
        "# Evidence bundle: %s" % md(m["task"]),
        "",
        "Status: **%s** (merge_eligible=%s)" % (md(m["final_status"]), str(m["merge_eligible"]).lower()),
        "",
        "**%s**" % md(m.get("headline") or ""),
        "",
        "Receipt `%s`, candidate `%s`" % (m["receipt"], m["input_snapshot"]["candidate"]),
        "",
        "| tier | required | status | signer / detail |",
        "|---|---|---|---|",
    ]
    for t in m["tiers"]:
        lines.append(
            "| %s | %s | %s | %s |"
            % (t["tier"], "yes" if t["required"] else "no", md(t["status"]), md(t["signer"] or t["detail"]))
        )
    if m.get("exceptions"):
        lines += ["", "## Exceptions", ""] + ["- **%s**: %s" % (md(n["kind"]), md(n["text"])) for n in m["exceptions"]]
    lines += ["", "## Evidence", "", "| tier | check | digest | size | type |", "|---|---|---|---|---|"]
    lines += [
        "| %s | %s | `%s` | %d | %s |" % (a["tier"], md(a["check"]), a["digest"], a["size"], md(a["media_type"]))
        for a in m["artifacts"]
    ]
    lines += ["", "## Signers", ""] + ["- %s" % md(s) for s in m["provenance"]["signers"]]
    lines += [
        "",
        "## Checkpoint",
        "",
        "`%s` at size %d, root `%s`" % (m["checkpoint"]["origin"], m["checkpoint"]["size"], m["checkpoint"]["root"]),
    ]
    unresolved = [(k, v) for k, v in m["unresolved"].items() if v]
    if unresolved:
        lines += ["", "## Unresolved", ""] + [
            "- %s: %s" % (k.replace("_", " "), md("; ".join(map(str, v)))) for k, v in unresolved
        ]
    lines += ["", "Verify offline: `%s`" % m["how_to_verify"], ""]
    return "\n".join(lines)
