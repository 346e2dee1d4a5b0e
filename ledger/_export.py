"""Evidence bundles: everything needed to verify one receipt offline, with public keys
only, in a zip whose bytes depend only on the receipt (the same receipt exports to the
same bytes). Its size grows with the task's history and the keyring, not the ledger."""

from __future__ import annotations

import base64
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from receipts import (
    CHECK_RESULT_FORMAT,
    HUMAN_DECISION_FORMAT,
    HUMAN_DECISION_ID,
    KEYRING_KINDS,
    SNAPSHOT_FORMAT,
    CachedNodes,
    ContractRevision,
    Digest,
    EntryKind,
    EvidenceRef,
    Genesis,
    KeyAdd,
    KeyRevoke,
    LadderReceipt,
    SignedNote,
    TaskEvent,
    TierRecord,
    Verdict,
    Waiver,
    allowed_signers_text,
    content_digest,
    decision_method,
    decode_as,
    decode_body,
    decode_entry,
    derive_check,
    inclusion_proof,
    is_derivation_input,
    parse_checkpoint,
    replay_keyring,
    tlog_proof_text,
)
from verify import BUNDLE_FORMAT, Result, StoredEntry, Trust, read_blob, verify_receipt

from ._environment import VERSION
from ._errors import InputError
from ._escape import markdown_text
from ._evidence import evidence_json
from ._report import report_html
from ._store import Ledger

__all__ = ["export_bundle", "final_status", "receipt_page"]

_EPOCH = (1980, 1, 1, 0, 0, 0)


def _member(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3
    info.external_attr = 0o100644 << 16
    return info


def _history(ledger: Ledger, receipt_entry: StoredEntry) -> dict[int, StoredEntry]:
    """The receipt, the task's entries before it (via tprev) and the keyring (via ring)."""
    chosen = {receipt_entry.seq: receipt_entry}
    entry = decode_entry(receipt_entry.entry)
    for pointer_name in ("task_prev", "ring"):
        pointer = getattr(entry, pointer_name)
        while pointer is not None:
            stored = ledger.reader.by_hash(pointer)
            if stored is None:
                raise InputError(
                    "the ledger lacks entry %s that entry %d points to" % (pointer.short(), receipt_entry.seq)
                )
            chosen[stored.seq] = stored
            pointer = getattr(decode_entry(stored.entry), pointer_name)
    # Keyring changes between genesis and the receipt are all on the ring chain already.
    return chosen


def _bundle_allowed_signers(entries: dict[int, StoredEntry]) -> str:
    """The keyring the bundle's own entries replay to (not the ledger's newest), so that a
    verifier can recompute this member from the bundle alone."""
    kinds = {k.value for k in KEYRING_KINDS}
    changes = [
        (decode_entry(e.entry), decode_body(EntryKind(e.kind), e.body))
        for _, e in sorted(entries.items())
        if e.kind in kinds
    ]
    ring = replay_keyring(changes, verify_signatures=False)
    times = {seq: decode_entry(e.entry).time for seq, e in entries.items()}
    return allowed_signers_text(ring, times) if ring is not None else ""


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


def _json(store: Ledger, digest: Digest, fmt: str) -> dict[str, Any] | None:
    return evidence_json(store, digest, fmt)


def _manifest(
    ledger: Ledger,
    receipt: LadderReceipt,
    receipt_hash: str,
    result: Result,
    entries: dict[int, StoredEntry],
    records: dict[str, tuple[TierRecord, str]],
    checkpoint_text: str | None,
) -> dict[str, Any]:
    cp = parse_checkpoint(checkpoint_text.split("\n\n")[0] + "\n") if checkpoint_text is not None else None
    revision = next(
        (
            decode_as(ContractRevision, e.body)
            for _, e in sorted(entries.items())
            if e.kind == EntryKind.CONTRACT.value
            and decode_as(ContractRevision, e.body).config_hash == receipt.config_hash
        ),
        None,
    )
    contract = revision.parse() if revision is not None else None
    names = {s.key_id: (s.spec.name, tuple(r.value for r in s.spec.roles)) for s in ledger.keyring()}
    decisions: list[dict[str, Any]] = []
    snapshot: dict[str, Any] = {}
    artifacts: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    approvals: list[dict[str, Any]] = []
    rejections: list[dict[str, Any]] = []
    for digest, (rec, signer) in sorted(records.items()):
        for ref in rec.evidence:
            artifacts.append(
                {
                    "tier": rec.tier.value,
                    "check": ref.check_id,
                    "digest": str(ref.digest),
                    "size": ref.size,
                    "media_type": ref.media_type,
                }
            )
            if ref.check_id == "snapshot":
                snapshot = _json(ledger, ref.digest, SNAPSHOT_FORMAT) or {}
            if ref.check_id.startswith("check:") and ref.check_id.count(":") == 1:
                doc = _json(ledger, ref.digest, CHECK_RESULT_FORMAT) or {}
                facts = doc.get("facts") or {}
                declared = contract.check(ref.check_id[6:]) if contract is not None else None
                passed, why = derive_check(declared, doc) if declared is not None else (False, "not in the contract")
                own = [ref] + [e for e in rec.evidence if e.check_id.startswith(ref.check_id + ":")]
                checks.append(
                    {
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
                )
        if rec.tier.value == "human":
            (approvals if rec.verdict is Verdict.PASS else rejections).append(
                {"record": digest, "signer": signer, "created": rec.created}
            )
            refs = [e for e in rec.evidence if e.check_id == HUMAN_DECISION_ID]
            doc = (_json(ledger, refs[0].digest, HUMAN_DECISION_FORMAT) if refs else None) or {}
            decisions.append(
                {
                    "decision": doc.get("decision", "unreadable"),
                    "name": names.get(signer, ("?", ()))[0],
                    "key": signer,
                    "roles": list(names.get(signer, ("?", ()))[1]),
                    "time": rec.created,
                    "method": decision_method(doc),
                    "note": doc.get("note"),
                    "shown_sha256": doc.get("shown_sha256"),
                }
            )
    contract_seq = next(
        (
            seq
            for seq, e in sorted(entries.items())
            if e.kind == EntryKind.CONTRACT.value
            and decode_as(ContractRevision, e.body).config_hash == receipt.config_hash
        ),
        None,
    )
    keyring = [
        {
            "name": s.spec.name,
            "key_id": s.key_id,
            "roles": [r.value for r in s.spec.roles],
            "status": "revoked" if s.revoked_at is not None else "active",
        }
        for s in ledger.keyring()
        if s.available_from <= max(entries)
    ]
    return {
        "format": BUNDLE_FORMAT,
        "receipt": receipt_hash,
        "task": receipt.task_id,
        "final_status": final_status(result),
        "merge_eligible": receipt.merge_eligible,
        "contract": {
            "config": str(receipt.config_hash),
            "revision_entry": contract_seq,
            "goal": contract.goal if contract else None,
            "policy": {
                "required_tiers": [t.value for t in contract.required_tiers],
                "human_approvals": contract.human_approvals,
                "independent_approvers": contract.independent_approvers,
                "judge_threshold": contract.judge_threshold_bp / 10000,
            }
            if contract
            else {},
        },
        "sealed_at": receipt.created,
        "input_snapshot": {
            "candidate": str(receipt.input_hash),
            **{k: snapshot.get(k) for k in ("commit", "tree", "base", "base_source", "diff", "dirty")},
        },
        "decisions": decisions,
        "timeline": [_event(seq, e, names) for seq, e in sorted(entries.items())],
        "verification": {
            "verified": result.ok,
            "merge_eligible_derived": result.derived_eligible,
            "not_eligible_because": list(result.eligibility_reasons),
            "defects": [{"code": d.code, "message": d.message} for d in result.defects],
            "warnings": list(result.warnings),
            "trust": result.trust,
            "method": "by proof into the checkpoint" if result.method == "proof" else "by walking the chain",
            "checkpoint": result.checkpoint,
            "by": "receipt-ledger %s" % VERSION,
        },
        "change_set": {"diff": snapshot.get("diff"), "attribution": snapshot.get("attribution")},
        "artifacts": artifacts,
        "checks": checks,
        "tiers": [t.as_dict() for t in result.tiers],
        "provenance": {
            "log": cp.origin if cp is not None else None,
            "keyring": keyring,
            "signers": sorted({signer for _, signer in records.values()}),
        },
        "policy_decisions": {
            "approvals": approvals,
            "rejections": rejections,
            "waivers": list(result.waivers),
            "contract_weakenings": list(result.weakenings),
        },
        "unresolved": {
            "skipped_tiers": [t.tier.value for t in result.tiers if t.status in ("skip", "missing")],
            "stale_approvals": list(result.stale),
            "flaky_checks": list(result.waivers),
            "unverified_assumptions": list(result.warnings),
            "not_eligible_because": list(result.eligibility_reasons),
        },
        "checkpoint": {"origin": cp.origin, "size": cp.size, "root": base64.b64encode(cp.root).decode("ascii")}
        if cp is not None
        else None,
        "entries": sorted(entries),
        "how_to_verify": "ledger verify --bundle BUNDLE.zip --trust ALLOWED_SIGNERS",
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
        what = "waiver of %s until %d: %s" % (body.check_id, body.expires, body.reason)
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


def _report_md(m: dict[str, Any]) -> str:
    # Every text the ledger supplied goes through markdown_text: the file is rendered by
    # Markdown viewers that also render HTML.
    md = markdown_text
    lines = [
        "# Evidence bundle: %s" % md(m["task"]),
        "",
        "Status: **%s** (merge_eligible=%s)" % (md(m["final_status"]), str(m["merge_eligible"]).lower()),
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


def _timestamp_token(ledger: Ledger, note: SignedNote, size: int) -> bytes | None:
    """An RFC 3161 token over this checkpoint's text that the ledger recorded, if any: it
    travels in the bundle as checkpoint.tsr (the authority's signature is what counts)."""
    digest = content_digest(note.text.encode("utf-8"))
    for _seq, stamp, _signer in ledger.reader.timestamps():
        if stamp.size == size and stamp.checkpoint == digest:
            token = read_blob(ledger.reader, stamp.token, limit=1 << 20)
            if token is not None:
                return token
    return None


def _listed_records(entries: dict[int, StoredEntry], receipt: LadderReceipt) -> dict[str, tuple[TierRecord, str]]:
    """The tier records the receipt lists, with their signers, by record hash."""
    records: dict[str, tuple[TierRecord, str]] = {}
    for e in entries.values():
        if e.kind == EntryKind.TIER_RECORD.value and any(
            Digest(e.body_hash) in slot.records for slot in receipt.entries
        ):
            records[str(Digest(e.body_hash))] = (decode_as(TierRecord, e.body), decode_entry(e.entry).signer)
    return records


def _named(ref: EvidenceRef, redacted: list[dict[str, Any]]) -> bool:
    return any(r["check"] == ref.check_id and r["digest"] == str(ref.digest) for r in redacted)


def _pruned(
    ledger: Ledger, records: dict[str, tuple[TierRecord, str]], redacted: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Evidence already removed under the retention policy travels as a redaction, with why."""
    gone: list[dict[str, Any]] = []
    for rec, _ in records.values():
        for ref in rec.evidence:
            if _named(ref, redacted):
                continue
            handle = ledger.reader.open_blob(ref.digest)
            if handle is not None:
                handle.close()
                continue
            why = ledger.reader.pruned(rec, ref)
            if why is None:
                raise InputError("evidence blob %s is missing from the blob store" % ref.digest)
            item = {"tier": rec.tier.value, "check": ref.check_id, "digest": str(ref.digest), "size": ref.size}
            gone.append({**item, "reason": why})
    return gone


def _redactions(records: dict[str, tuple[TierRecord, str]], names: Sequence[str]) -> list[dict[str, Any]]:
    """The evidence items ``names`` choose, refusing any a verdict is derived from."""
    chosen: list[dict[str, Any]] = []
    for name in names:
        hits = [
            (rec, ref)
            for rec, _ in records.values()
            for ref in rec.evidence
            if ref.check_id == name or ref.check_id.startswith("check:%s:" % name)
        ]
        if not hits:
            raise InputError("--redact %s: the receipt's records hold no such evidence item or check" % name)
        for rec, ref in hits:
            if is_derivation_input(rec.tier, ref):
                raise InputError(
                    "--redact %s: %s is what the %s verdict is derived from, so it cannot be redacted"
                    % (name, ref.check_id, rec.tier)
                )
            item = {"tier": rec.tier.value, "check": ref.check_id, "digest": str(ref.digest), "size": ref.size}
            if item not in chosen:
                chosen.append(item)
    return sorted(chosen, key=lambda r: (r["tier"], r["check"]))


def receipt_page(ledger: Ledger, receipt_digest: Digest, trust: Trust) -> str:
    """`ledger report HASH --html`: the page a bundle carries, for one receipt on the
    ledger, verified against the caller's ``trust``; evidence is named, not linked."""
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, trust)
    covering = [note for size, note in ledger.checkpoints() if size > stored.seq]
    entries = _history(ledger, stored)
    manifest = _manifest(
        ledger,
        receipt,
        receipt_hash,
        result,
        entries,
        _listed_records(entries, receipt),
        covering[-1].encode() if covering else None,
    )
    return report_html(manifest, links=False)


def export_bundle(ledger: Ledger, receipt_digest: Digest, out: Path, redact: Sequence[str] = ()) -> dict[str, Any]:
    """Write the evidence bundle of a receipt to ``out`` (atomically): the receipt, its
    task's history and the keyring entries with inclusion proofs against the newest
    checkpoint covering it, every evidence blob, a manifest and the reports. Refuses
    (`InputError`) a receipt that does not verify against the ledger's own genesis admin,
    or one no checkpoint covers yet. Returns the manifest.

    ``redact`` names evidence items to leave out, kept only by their digest: an item
    (``check:tests:stdout``, ``diff``) or a check's id (all its raw output). Only items no
    verdict is derived from can be redacted; naming another is refused."""
    stored, receipt = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, ledger.genesis_trust())
    if not result.ok:
        raise InputError("refusing to export a receipt that does not verify: %s" % result.defects[0].message)
    covering = [(size, note) for size, note in ledger.checkpoints() if size > stored.seq]
    if not covering:
        raise InputError("no checkpoint covers this receipt yet: run `ledger checkpoint --key NAME` first")
    size, note = covering[-1]
    checkpoint_text = note.encode()
    entries = _history(ledger, stored)
    records = _listed_records(entries, receipt)
    redacted = _redactions(records, redact)
    redacted += _pruned(ledger, records, redacted)
    manifest = _manifest(ledger, receipt, receipt_hash, result, entries, records, checkpoint_text)
    manifest["redacted"] = redacted
    members: dict[str, bytes | Digest] = {
        "manifest.json": (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode(),
        "checkpoint": checkpoint_text.encode(),
        "report.md": _report_md(manifest).encode(),
        "report.html": report_html(manifest).encode(),
        "allowed_signers": _bundle_allowed_signers(entries).encode(),
    }
    token = _timestamp_token(ledger, note, size)
    if token is not None:
        members["checkpoint.tsr"] = token
    nodes = CachedNodes(ledger)
    for seq, e in entries.items():
        members["entries/%d.entry" % seq] = e.entry
        members["entries/%d.body" % seq] = e.body
        members["proofs/%d.tlog-proof" % seq] = tlog_proof_text(
            seq, inclusion_proof(nodes, seq, size), checkpoint_text
        ).encode()
    # A blob is left out only when every item naming it is redacted (identical outputs share one).
    kept = {str(ref.digest) for rec, _ in records.values() for ref in rec.evidence if not _named(ref, redacted)}
    for rec, _ in records.values():
        for ref in rec.evidence:
            if str(ref.digest) not in kept:
                continue
            handle = ledger.reader.open_blob(ref.digest)
            if handle is None:
                raise InputError("evidence blob %s is missing from the blob store" % ref.digest)
            handle.close()
            members["blobs/" + ref.digest.hex] = ref.digest
    tmp = out.with_name(out.name + ".partial")
    try:
        with zipfile.ZipFile(tmp, "w", compresslevel=6) as zf:
            for name in sorted(members):
                content = members[name]
                with zf.open(_member(name), "w", force_zip64=isinstance(content, Digest)) as dst:
                    if isinstance(content, Digest):
                        # Streamed from whichever store holds it: never whole in memory.
                        src = ledger.reader.open_blob(content)
                        if src is None:
                            raise InputError("evidence blob %s vanished from the blob store" % content)
                        with src:
                            while chunk := src.read(1 << 20):
                                dst.write(chunk)
                    else:
                        dst.write(content)
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError("cannot write bundle %s: %s" % (out, exc)) from None
    return manifest
