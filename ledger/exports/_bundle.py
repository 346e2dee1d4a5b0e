"""Evidence bundles: everything needed to verify one receipt offline, with public keys
only, in a zip whose bytes depend only on the receipt (the same receipt exports to the
same bytes). Its size grows with the task's history and the keyring, not the ledger.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import (
    CachedNodes,
    Digest,
    EvidenceRef,
    SignedNote,
    Signer,
    TierRecord,
    allowed_signers_text,
    content_digest,
    decode_entry,
    inclusion_proof,
    is_derivation_input,
    replay_keyring,
    tlog_proof_text,
)
from verify import BundleLayout as Layout
from verify import (
    BundleSource,
    CannotVerify,
    Redaction,
    Result,
    StoredEntry,
    Trust,
    bundle_manifest,
    bundle_renderings,
    final_status,
    keyring_changes,
    listed_records,
    read_blob,
    report_html,
    verify_receipt,
)

from .._errors import InputError
from .._files import fsync_dir
from ..ladder._evidence import copy_blob, evidence_json
from ..store._ledger import Ledger

__all__ = ["export_bundle", "final_status", "manifest_on_ledger", "receipt_page"]

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
    verifier can recompute this member from the bundle alone.
    """
    ring = replay_keyring(keyring_changes(entries.values()), verify_signatures=False)
    times = {seq: decode_entry(e.entry).time for seq, e in entries.items()}
    return allowed_signers_text(ring, times) if ring is not None else ""


def _timestamp_token(ledger: Ledger, note: SignedNote, size: int) -> bytes | None:
    """An RFC 3161 token over this checkpoint's text that the ledger recorded, if any: it
    travels in the bundle as checkpoint.tsr (the authority's signature is what counts).
    """
    digest = content_digest(note.text.encode("utf-8"))
    for _seq, stamp, _signer in ledger.reader.timestamps():
        if stamp.size == size and stamp.checkpoint == digest:
            token = read_blob(ledger.reader, stamp.token, limit=1 << 20)
            if token is not None:
                return token
    return None


def _named(ref: EvidenceRef, redacted: Sequence[Redaction]) -> bool:
    return any(r.check == ref.check_id and r.digest == str(ref.digest) for r in redacted)


def _redaction(rec: TierRecord, ref: EvidenceRef, reason: str | None = None) -> Redaction:
    return Redaction(rec.tier.value, ref.check_id, str(ref.digest), ref.size, reason)


def _pruned(
    ledger: Ledger, records: dict[str, tuple[TierRecord, str]], redacted: Sequence[Redaction]
) -> list[Redaction]:
    """Evidence already removed under the retention policy travels as a redaction, with why."""
    gone: list[Redaction] = []
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
            gone.append(_redaction(rec, ref, why))
    return gone


def _redactions(records: dict[str, tuple[TierRecord, str]], names: Sequence[str]) -> list[Redaction]:
    """The evidence items ``names`` choose, refusing any a verdict is derived from."""
    chosen: list[Redaction] = []
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
            item = _redaction(rec, ref)
            if item not in chosen:
                chosen.append(item)
    return sorted(chosen, key=lambda r: (r.tier, r.check))


def manifest_on_ledger(ledger: Ledger, receipt_digest: Digest, trust: Trust) -> tuple[dict[str, Any], Result, str]:
    """The manifest a bundle of this receipt would carry, read on the ledger, with the
    verifier's result against the caller's ``trust`` and the receipt's hash.
    """
    stored, _ = ledger.receipt(receipt_digest)
    receipt_hash = str(Digest(stored.body_hash))
    result = verify_receipt(ledger.reader, receipt_hash, trust)
    covering = [note for size, note in ledger.checkpoints() if size > stored.seq]
    manifest = bundle_manifest(
        _history(ledger, stored),
        lambda digest, fmt: evidence_json(ledger, digest, fmt),
        receipt_hash,
        result,
        covering[-1].encode() if covering else None,
        (),
    )
    return manifest, result, receipt_hash


def receipt_page(ledger: Ledger, receipt_digest: Digest, trust: Trust) -> str:
    """`ledger report HASH --html`: the page a bundle carries, for one receipt on the
    ledger, verified against the caller's ``trust``; evidence is named, not linked.
    """
    manifest, _, _ = manifest_on_ledger(ledger, receipt_digest, trust)
    return report_html(manifest, links=False)


def export_bundle(ledger: Ledger, receipt_digest: Digest, out: Path, redact: Sequence[str] = ()) -> dict[str, Any]:
    """Write the evidence bundle of a receipt to ``out`` (atomically): the receipt, its
    task's history and the keyring entries with inclusion proofs against the newest
    checkpoint covering it, every evidence blob, and the renderings (manifest and reports)
    that `verify.bundle_renderings` derives from those. Refuses (`InputError`) a receipt
    that does not verify against the ledger's own genesis admin, or one no checkpoint
    covers yet. Returns the manifest.

    ``redact`` names evidence items to leave out, kept only by their digest: an item
    (``check:tests:stdout``, ``diff``) or a check's id (all its raw output). Only items no
    verdict is derived from can be redacted; naming another is refused.
    """
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
    records = listed_records(entries, receipt)
    redacted = _redactions(records, redact)
    redacted += _pruned(ledger, records, redacted)
    members: dict[str, bytes | Digest] = {
        Layout.CHECKPOINT: checkpoint_text.encode(),
        Layout.ALLOWED_SIGNERS: _bundle_allowed_signers(entries).encode(),
    }
    token = _timestamp_token(ledger, note, size)
    if token is not None:
        members[Layout.CHECKPOINT_TOKEN] = token
    nodes = CachedNodes(ledger)
    for seq, e in entries.items():
        members[Layout.entry(seq)] = e.entry
        members[Layout.body(seq)] = e.body
        members[Layout.proof(seq)] = tlog_proof_text(seq, inclusion_proof(nodes, seq, size), checkpoint_text).encode()
    members.update(_kept_blobs(ledger, records, redacted))
    members.update(_renderings(ledger, members, receipt_hash, redacted))
    _write_zip(ledger, members, out)
    parsed: dict[str, Any] = json.loads(members[Layout.MANIFEST])  # type: ignore[arg-type]
    return parsed


def _kept_blobs(
    ledger: Ledger, records: dict[str, tuple[TierRecord, str]], redacted: Sequence[Redaction]
) -> dict[str, bytes | Digest]:
    """The blob members, by digest (streamed when written): every evidence blob but those
    left out. A blob is left out only when every item naming it is redacted (identical
    outputs share one).
    """
    kept = {str(ref.digest) for rec, _ in records.values() for ref in rec.evidence if not _named(ref, redacted)}
    members: dict[str, bytes | Digest] = {}
    for rec, _ in records.values():
        for ref in rec.evidence:
            if str(ref.digest) not in kept:
                continue
            handle = ledger.reader.open_blob(ref.digest)
            if handle is None:
                raise InputError("evidence blob %s is missing from the blob store" % ref.digest)
            handle.close()
            members[Layout.blob(ref.digest)] = ref.digest
    return members


def _write_zip(ledger: Ledger, members: dict[str, bytes | Digest], out: Path) -> None:
    """Write the members to ``out`` in name order, atomically (a partial file, then a rename)."""
    tmp = out.with_name(out.name + ".partial")
    try:
        with zipfile.ZipFile(tmp, "w", compresslevel=6) as zf:
            for name in sorted(members):
                content = members[name]
                with zf.open(_member(name), "w", force_zip64=isinstance(content, Digest)) as dst:
                    if isinstance(content, Digest):
                        copy_blob(ledger, content, dst)  # streamed: never whole in memory
                    else:
                        dst.write(content)
        with tmp.open("rb") as written:
            os.fsync(written.fileno())  # the bundle's bytes are on disk before its name is
        tmp.replace(out)
        fsync_dir(out.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError("cannot write bundle %s: %s" % (out, exc)) from None


def _renderings(
    ledger: Ledger, members: dict[str, bytes | Digest], receipt_hash: str, redacted: Sequence[Redaction]
) -> dict[str, bytes]:
    """The rendering members, derived as the verifier derives them (`bundle_renderings`)
    from a draft of this bundle: its small members in memory, with only the redactions in
    its manifest, and its blobs read from the store.
    """
    draft = io.BytesIO()
    with zipfile.ZipFile(draft, "w") as zf:
        zf.writestr(Layout.MANIFEST, json.dumps({"redacted": [r.as_dict() for r in redacted]}))
        for name, content in members.items():
            if isinstance(content, bytes):
                zf.writestr(name, content)
    kept = {content.hex for content in members.values() if isinstance(content, Digest)}
    try:
        with BundleSource(draft, blobs=lambda d: ledger.reader.open_blob(d) if d.hex in kept else None) as source:
            return bundle_renderings(source, receipt_hash)
    except CannotVerify as exc:
        raise InputError("cannot render the bundle: %s" % exc) from None


EXPORT_FORMATS = ("bundle", "intoto", "vsa", "svr", "scitt", "test-result")


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """One export of a receipt: its ``fmt`` (`EXPORT_FORMATS`), where it goes, what a bundle
    redacts, and the VSA's resource URI. ``signed`` says a seal key was named: every format
    but the bundle is a DSSE envelope that needs one.

    Raises:
        InputError: an unknown format, --redact on an envelope, or an envelope without a key.
    """

    fmt: str
    out: Path
    redact: tuple[str, ...] = ()
    resource_uri: str | None = None
    signed: bool = False

    def __post_init__(self) -> None:
        if self.fmt not in EXPORT_FORMATS:
            raise InputError("the export format is one of %s" % ", ".join(EXPORT_FORMATS))
        if self.redact and self.fmt != "bundle":
            raise InputError("--redact applies to a bundle")
        if self.fmt != "bundle" and not self.signed:
            raise InputError("--format %s needs --key: the seal key that signs the envelope" % self.fmt)

    @property
    def verifies_here(self) -> bool:
        """Whether the statement reports a verification against a trust root (vsa, test-result)."""
        return self.fmt in ("vsa", "svr", "scitt", "test-result")


def export_receipt(
    ledger: Ledger, receipt_digest: Digest, request: ExportRequest, signer: Signer | None, trust: Trust | None
) -> str:
    """Write the export ``request`` names; what was written, in one line for people.

    Args:
        ledger: the ledger holding the receipt.
        receipt_digest: the receipt's hash.
        request: the format and destination.
        signer: the seal key for an envelope (None for a bundle).
        trust: the trust root a vsa or test-result statement is verified against.

    Raises:
        InputError: the receipt does not verify, or cannot be exported as asked.
    """
    from ._intoto import (
        export_intoto,
        export_scitt,
        svr_statement,
        test_result_statement,
        vsa_statement,
        write_envelope,
    )

    if request.fmt == "bundle":
        manifest = export_bundle(ledger, receipt_digest, request.out, request.redact)
        redacted = ", ".join(r["check"] for r in manifest["redacted"])
        return "wrote %s: %s, %d entries, final status %s%s" % (
            request.out,
            manifest["task"],
            len(manifest["entries"]),
            manifest["final_status"],
            "; redacted: %s" % redacted if redacted else "",
        )
    if signer is None:
        raise InputError("--format %s needs --key: the seal key that signs the envelope" % request.fmt)
    if request.fmt == "intoto":
        export_intoto(ledger, receipt_digest, signer, request.out)
        return "wrote %s (DSSE envelope, payloadType application/vnd.in-toto+json)" % request.out
    if trust is None:
        raise InputError("--format %s verifies the receipt: it needs a trust root" % request.fmt)
    if request.fmt == "vsa":
        statement = vsa_statement(ledger, receipt_digest, trust, request.resource_uri)
        write_envelope(ledger, statement, signer, request.out)
        return "wrote %s (SLSA verification summary: %s)" % (request.out, statement["predicate"]["verificationResult"])
    if request.fmt == "scitt":
        export_scitt(ledger, receipt_digest, signer, request.out, trust)
        return "wrote %s (SCITT signed statement: COSE_Sign1, a SHA-256 hash envelope of the receipt)" % request.out
    if request.fmt == "svr":
        statement = svr_statement(ledger, receipt_digest, trust)
        write_envelope(ledger, statement, signer, request.out)
        properties = statement["predicate"]["properties"]
        return "wrote %s (in-toto simple verification result: %s)" % (
            request.out,
            ", ".join(properties) or "no property holds",
        )
    statement = test_result_statement(ledger, receipt_digest, trust)
    write_envelope(ledger, statement, signer, request.out)
    return "wrote %s (in-toto test result: %s)" % (request.out, statement["predicate"]["result"])
