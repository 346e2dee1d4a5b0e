"""Evidence bundles read offline. The zip is hostile until proven otherwise: its names,
sizes, compression ratios and links are checked from the central directory before a
byte is read, nothing is extracted to disk, and every read is capped.
"""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from receipts import (
    Checkpoint,
    Digest,
    EntryKind,
    EvidenceRef,
    Keyring,
    ReceiptsError,
    SignedNote,
    TierRecord,
    TlogProof,
    allowed_signers_text,
    decode_as,
    decode_body,
    decode_entry,
    entry_hash,
    is_derivation_input,
    is_valid_tlog_proof,
    parse_checkpoint,
    parse_note,
    parse_tlog_proof,
)

from ._errors import CannotVerify
from ._evidence import blob_problem
from ._layout import BundleLayout as Layout
from ._manifest import BUNDLE_FORMAT, ManifestClaims, Redaction
from ._policy import Transparency
from ._result import Defect, Finding
from ._source import SparseEntries, StoredEntry
from ._transparency import check_checkpoints

__all__ = ["BundleSource", "LIMITS"]

LIMITS = {
    "members": 100_000,
    "small": 4 << 20,  # an entry, body, proof, checkpoint or manifest
    "blob": 1 << 30,  # one evidence blob
    "total": 8 << 30,  # everything, uncompressed
    "ratio": 200,  # uncompressed / compressed, for members over 1 MiB
}


# Everything a damaged zip can raise while a member is opened or read.
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, ValueError, NotImplementedError)


def _check_members(zf: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > LIMITS["members"]:
        raise CannotVerify("bundle has %d members; at most %d are allowed" % (len(infos), LIMITS["members"]))
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name = info.filename
        if name in members:
            raise CannotVerify("bundle has two members named %r" % name)
        if not Layout.allowed(name):
            raise CannotVerify(
                "bundle member %r is not a name a bundle may hold (absolute, traversing or unknown path)" % name
            )
        kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the archiver recorded no file type
        if kind and kind != stat.S_IFREG:
            raise CannotVerify("bundle member %r is a link or special file" % name)
        if info.flag_bits & 0x1:
            raise CannotVerify("bundle member %r is encrypted" % name)
        cap = LIMITS["blob"] if name.startswith(Layout.BLOB_PREFIX) else LIMITS["small"]
        if info.file_size > cap:
            raise CannotVerify(
                "bundle member %r declares %d bytes; at most %d are allowed" % (name, info.file_size, cap)
            )
        if info.file_size > (1 << 20) and info.file_size > LIMITS["ratio"] * max(info.compress_size, 1):
            raise CannotVerify(
                "bundle member %r is compressed %d:1, beyond the %d:1 allowed (a zip bomb?)"
                % (name, info.file_size // max(info.compress_size, 1), LIMITS["ratio"])
            )
        total += info.file_size
        if total > LIMITS["total"]:
            raise CannotVerify("bundle declares more than %d bytes in all" % LIMITS["total"])
        members[name] = info
    return members


class _Capped(io.RawIOBase):
    """A member stream that refuses to yield more than its declared size."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self._inner, self._left = inner, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            data = self._inner.read(min(len(buf), self._left + 1))
        except _UNREADABLE as exc:
            raise CannotVerify("a bundle member does not decompress: %s" % exc) from None
        if len(data) > self._left:
            raise CannotVerify("a bundle member holds more bytes than it declares")
        self._left -= len(data)
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        super().close()


class BundleSource(SparseEntries):
    """The sparse copy of a ledger inside an evidence bundle."""

    def __init__(self, path: Path | BinaryIO, blobs: Callable[[Digest], BinaryIO | None] | None = None) -> None:
        """Open a bundle.

        Args:
            path: the bundle file (or its bytes, as an open binary file).
            blobs: where evidence blobs absent from the zip are read from. Only an exporter's
                draft passes it (the bundle it is about to write, before its renderings exist,
                with the blobs still in the store); an auditor never does.

        Raises:
            CannotVerify: the file is not a bundle this verifier can read.
        """
        try:
            self._zip = zipfile.ZipFile(path)
        except _UNREADABLE as exc:
            raise CannotVerify("cannot open bundle %s: %s" % (path, exc)) from None
        self._blobs = blobs
        # Off while the renderings' own verification runs (step 9): what it checks must not
        # depend on the renderings it is about to produce.
        self.accounting = True
        self.members = _check_members(self._zip)
        self.entries: dict[int, StoredEntry] = {}
        self.proofs: dict[int, TlogProof] = {}
        self.opened: set[str] = set()
        for name in self.members:
            if (seq := Layout.entry_seq(name)) is not None:
                self.entries[seq] = self._stored(seq, self.read(name), self.read(Layout.body(seq)))
            elif (seq := Layout.proof_seq(name)) is not None:
                try:
                    self.proofs[seq] = parse_tlog_proof(self.read(name).decode("utf-8"))
                except (ReceiptsError, UnicodeDecodeError) as exc:
                    raise CannotVerify("bundle proof %s is malformed: %s" % (name, exc)) from None
        if Layout.CHECKPOINT not in self.members or not self.entries:
            raise CannotVerify("bundle has no checkpoint or no entries")
        self.checkpoint_text = self.read(Layout.CHECKPOINT).decode("utf-8", "replace")

    @staticmethod
    def _stored(seq: int, entry_bytes: bytes, body: bytes) -> StoredEntry:
        # Index columns are recomputed here; a malformed entry keeps empty ones, and the walk names it.
        try:
            entry = decode_entry(entry_bytes)
            kind, body_hash = entry.kind.value, entry.body_hash.value
            task = getattr(decode_body(entry.kind, body), "task_id", None)
        except ReceiptsError:
            kind, body_hash, task = "", b"", None
        return StoredEntry(seq, entry_hash(entry_bytes).value, kind, body_hash, task, entry_bytes, body)

    def read(self, name: str) -> bytes:
        info = self.members.get(name)
        if info is None:
            raise CannotVerify("bundle lacks %s" % name)
        try:
            with self._zip.open(info) as fh:
                data = fh.read(info.file_size + 1)
        except _UNREADABLE as exc:
            raise CannotVerify("cannot read bundle member %s: %s" % (name, exc)) from None
        if len(data) != info.file_size:
            raise CannotVerify("bundle member %s holds %d bytes but declares %d" % (name, len(data), info.file_size))
        return data

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> BundleSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Source interface ---------------------------------------------------------------

    def open_blob(self, digest: Digest) -> BinaryIO | None:
        name = Layout.blob(digest)
        info = self.members.get(name)
        if info is None:
            return self._blobs(digest) if self._blobs is not None else None
        self.opened.add(name)  # step 5d reads (and re-hashes) every blob it opens
        try:
            return io.BufferedReader(_Capped(self._zip.open(info), info.file_size))  # type: ignore[arg-type]
        except _UNREADABLE as exc:
            raise CannotVerify("cannot read bundle member %s: %s" % (name, exc)) from None

    def redactions(self) -> tuple[Redaction, ...]:
        """The redactions manifest.json declares (none when there is no manifest or it does
        not parse, which step 9 reports).
        """
        try:
            return ManifestClaims.redactions_of(self.read(Layout.MANIFEST))
        except CannotVerify:
            return ()

    def redacted(self, digest: Digest) -> bool:
        """Whether manifest.json declares this blob redacted by the exporter. The manifest is
        not signed: verify excuses such a blob only where no verdict is derived from it, and
        says it was not checked.
        """
        return any(item.digest == str(digest) for item in self.redactions())

    def pruned(self, record: TierRecord, ref: EvidenceRef) -> str | None:
        # Evidence pruned before export travels as a redaction that carries the exporter's
        # reason (manifest.json, unsigned): named as retention, in the exporter's words. The
        # words excuse nothing a redaction would not: never a blob a verdict is derived from.
        if is_derivation_input(record.tier, ref):
            return None
        for item in self.redactions():
            if item.digest == str(ref.digest) and item.reason:
                return (
                    "removed before export under the ledger's retention policy, as the exporter says (%s)" % item.reason
                )
        return None

    def checkpoints(self) -> list[tuple[int, str]]:
        try:
            return [(parse_checkpoint(parse_note(self.checkpoint_text).text).size, self.checkpoint_text)]
        except ReceiptsError:
            return []

    def count(self) -> int:
        return max(self.entries) + 1

    def receipt_hash(self) -> str:
        """The receipt this bundle proves: its last entry, since a bundle holds its receipt and
        the entries before it (§10). Never the manifest's word: that file is not signed.
        """
        last = self.entries[max(self.entries)]
        if last.kind != "receipt":
            raise CannotVerify("the bundle's last entry (%d) is not a receipt: give the receipt's HASH" % last.seq)
        return str(Digest(last.body_hash))

    def check_transparency(self, origin: str, ring: Keyring | None, receipt_seq: int, policy: Transparency) -> Finding:
        proven = _bundle_transparency(self, ring, origin, receipt_seq, policy)
        if not self.accounting:
            return proven
        members, said = _account_for_members(self, ring, receipt_seq)
        return Finding(
            (*proven.defects, *members), proven.warnings, proven.checkpoint, proven.certified_by, (*proven.notes, *said)
        )


def _account_for_members(
    source: BundleSource, ring: Keyring | None, receipt_seq: int
) -> tuple[list[Defect], list[str]]:
    """Step 8 for a bundle, beyond the proofs: every member is verified or refused. Blobs must
    be evidence of a record in the bundle (those step 5d did not read are re-hashed here);
    allowed_signers must be the keyring the entries replay to; manifest.json must name this
    receipt, this format and exactly these entries. The renderings are re-rendered and
    compared in step 9.
    """
    defects: list[Defect] = []
    referenced: set[str] = set()
    times: dict[int, int] = {}
    for seq, stored in source.entries.items():
        try:
            times[seq] = decode_entry(stored.entry).time
            if stored.kind == EntryKind.TIER_RECORD.value:
                referenced.update(Layout.blob(ref.digest) for ref in decode_as(TierRecord, stored.body).evidence)
        except ReceiptsError:
            continue  # the walk reports an entry that does not decode
    blobs = sorted(name for name in source.members if name.startswith(Layout.BLOB_PREFIX))
    for name in blobs:
        if name not in referenced:
            defects.append(Defect("bundle-member-unverified", "%s is evidence of no record in the bundle" % name))
        elif name not in source.opened and blob_problem(source, Digest.parse("blake3:" + name[6:])) is not None:
            defects.append(Defect("evidence-altered", "%s no longer hashes to its name" % name))
    expected = allowed_signers_text(ring, times) if ring is not None else None
    if (
        Layout.ALLOWED_SIGNERS in source.members
        and source.read(Layout.ALLOWED_SIGNERS).decode("utf-8", "replace") != expected
    ):
        defects.append(
            Defect("bundle-member-altered", "allowed_signers is not the keyring the bundle's entries replay to")
        )
    receipt = source.entries.get(receipt_seq)
    claims = ManifestClaims.parse(source.read(Layout.MANIFEST)) if Layout.MANIFEST in source.members else None
    if claims is None:
        defects.append(Defect("bundle-member-altered", "manifest.json is missing or is not a JSON object"))
    elif (claims.format, claims.receipt, list(claims.entries)) != (
        BUNDLE_FORMAT,
        str(Digest(receipt.body_hash)) if receipt else None,
        sorted(source.entries),
    ):
        defects.append(
            Defect("bundle-member-altered", "manifest.json does not name this receipt, format and entry list")
        )
    said = [
        "bundle: %d entries proven into the checkpoint, %d evidence blob(s) re-hashed%s"
        % (
            len(source.entries),
            len([b for b in blobs if b in referenced]),
            ", allowed_signers checked against the keyring" if Layout.ALLOWED_SIGNERS in source.members else "",
        ),
        "bundle: manifest.json, report.md and report.html re-rendered from the verified content and compared",
    ]
    return defects, said


def _bundle_transparency(
    source: BundleSource, ring: Keyring | None, origin: str, receipt_seq: int, policy: Transparency
) -> Finding:
    """Step 8 offline: every entry in the bundle is proven into its signed checkpoint."""
    if policy.since is not None:
        raise CannotVerify("--since needs the ledger itself: a bundle holds no consistency proof")
    # A bundle files its checkpoint under the size it signs; one that does not parse, step 8a reports.
    filed = next(iter(source.checkpoints()), (0, source.checkpoint_text))
    return check_checkpoints(_BundleProof(source, ring), filed, origin, receipt_seq, policy)


class _BundleProof:
    """How a bundle proves its entries: a tlog-proof per entry against its one checkpoint."""

    def __init__(self, source: BundleSource, ring: Keyring | None) -> None:
        self.source = source
        self.ring = ring  # replayed by the walk from the bundle's own (proven) keyring entries

    def ring_at(self, size: int) -> Keyring | None:
        return self.ring

    def prove(self, checkpoint: Checkpoint, receipt_seq: int) -> list[Defect]:
        defects = []
        if checkpoint.size <= receipt_seq:
            message = "the checkpoint (size %d) does not cover the receipt (entry %d)"
            defects.append(Defect("checkpoint-root", message % (checkpoint.size, receipt_seq)))
        for seq, stored in sorted(self.source.entries.items()):
            proof = self.source.proofs.get(seq)
            # A tlog-proof carries its checkpoint: it must be the very one the bundle is verified against.
            if (
                proof is None
                or proof.index != seq
                or proof.checkpoint_note != self.source.checkpoint_text
                or not is_valid_tlog_proof(proof, stored.entry, checkpoint)
            ):
                message = "entry %d is not proven into the checkpoint at size %d"
                defects.append(Defect("inclusion", message % (seq, checkpoint.size)))
        return defects

    def extends(self, kept: Checkpoint, covering: Checkpoint | None) -> bool:
        raise CannotVerify("--since needs the ledger itself: a bundle holds no consistency proof")

    def held(self) -> int:
        return len(self.source.entries)

    def tokens(self, note: SignedNote, checkpoint: Checkpoint) -> tuple[list[tuple[str, bytes]], str]:
        # A time-stamp travels as checkpoint.tsr: the authority's signature is what counts.
        if Layout.CHECKPOINT_TOKEN not in self.source.members:
            return [], "the bundle carries none"
        return [("checkpoint.tsr in the bundle", self.source.read(Layout.CHECKPOINT_TOKEN))], ""
