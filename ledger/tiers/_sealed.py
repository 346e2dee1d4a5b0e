"""Sealed check sets, written and opened (docs/format.md §6e; ADR 0038).

`seal_files` packs held-out files (`receipts.pack_sealed_set`), encrypts the plaintext
with age (pyrage: Python bindings to rage, an audited implementation of C2SP age v1) to
the deterministic role's SSH keys or to age X25519 recipients, and writes the ciphertext
in the repository at `.ledger/sealed/HEX.age`, named by the plaintext's digest, which
the contract then names. `open_sealed_set` decrypts one with an identity (an OpenSSH
private key file, as CI holds it) and refuses a plaintext whose digest is not the one
expected. No plaintext is ever written by this module.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    AGE_MEDIA_TYPE,
    SEALED_RESULT_MEDIA_TYPE,
    SEALED_SET_MEDIA_TYPE,
    Digest,
    Ed25519Signer,
    EventType,
    EvidenceRef,
    FormatError,
    Keyring,
    Role,
    Signer,
    TaskEvent,
    TierRecord,
    pack_sealed_set,
    public_key_line,
    sealed_file_name,
    sealed_set_digest,
    unpack_sealed_set,
)

from .. import _clock
from .._errors import InputError
from .._files import write_atomic
from ..ladder._evidence import evidence_bytes
from ..store._ledger import Appended, Store

__all__ = [
    "SealedSet",
    "seal_files",
    "open_sealed_set",
    "open_sealed_plaintext",
    "recipients_for",
    "seal_bytes",
    "exposures",
    "reveal_sealed",
]


@dataclass(frozen=True, slots=True)
class SealedSet:
    """A sealed set written: its digest (what the contract names), where, and to whom."""

    digest: Digest
    path: Path
    files: tuple[str, ...]
    recipients: tuple[str, ...]
    ignored: bool = False  # git ignores the file (a .ledger/.gitignore from before sealed sets)

    def contract_line(self) -> str:
        return 'sealed = "%s"' % self.digest


def recipients_for(keyring: Keyring, names: Sequence[str]) -> list[str]:
    """Each name as an age recipient: a key of the keyring (its SSH public key: it must hold
    the deterministic role, which alone runs sealed checks), or an ``age1…`` recipient.

    Raises:
        InputError: an unknown name, or a key without the deterministic role.
    """
    out = []
    for name in names:
        if name.startswith("age1"):
            out.append(name)
            continue
        state = keyring.by_name(name)
        if state is None or state.revoked_at is not None:
            raise InputError("no active key %r in the keyring to seal to" % name)
        if Role.DETERMINISTIC not in state.spec.roles:
            raise InputError(
                "key %r lacks the deterministic role: only the signed deterministic tier opens sealed sets" % name
            )
        out.append(public_key_line(state.spec.public_key))
    if not out:
        raise InputError("name at least one recipient (--to)")
    return out


def _age_recipients(lines: Sequence[str]) -> list[object]:
    import pyrage

    found: list[object] = []
    for line in lines:
        try:
            found.append(
                pyrage.x25519.Recipient.from_str(line)
                if line.startswith("age1")
                else pyrage.ssh.Recipient.from_str(line)
            )
        except pyrage.RecipientError as exc:
            raise InputError("not an age recipient: %s (%s)" % (line[:40], exc)) from None
    return found


def _tracked(repo: Path, paths: Sequence[str]) -> list[str]:
    """Which of ``paths`` git tracks."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *paths], cwd=repo, capture_output=True, check=False)
    return [p for p in listed.stdout.decode("utf-8", "replace").split("\0") if p]


def _gathered(paths: Sequence[str], under: str) -> dict[str, Path]:
    """Each file named, or found under a folder named, at its place in the set: ``UNDER/NAME``
    for a file, ``UNDER/RELATIVE`` for a folder's files.
    """
    placed: dict[str, Path] = {}
    for given in paths:
        path = Path(given)
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in found:
            name = file.relative_to(path).as_posix() if path.is_dir() else file.name
            where = "%s/%s" % (under.strip("/"), name) if under.strip("/") else name
            if where in placed:
                raise InputError("two files would be %s in the sealed set" % where)
            placed[where] = file
    return placed


def seal_files(repo: Path, paths: Sequence[str], recipients: Sequence[str], under: str = "held_out") -> SealedSet:
    """Pack the files ``paths`` name (files, or folders of them; kept outside the
    repository, or untracked in it) at ``UNDER/NAME`` (where the run finds them), encrypt
    them to ``recipients`` (age recipient lines: ``ssh-ed25519 …`` or ``age1…``) and write
    the ciphertext at its place in ``repo``.

    Raises:
        InputError: a path missing or tracked by git (a sealed file in the repository in
            plain text is no secret); two files at one place; a bad recipient or set.
    """
    import pyrage

    root = repo.resolve()
    files: dict[str, bytes] = {}
    inside: list[str] = []
    for where, path in _gathered([str((root / p).resolve()) for p in paths], under).items():
        try:
            files[where] = path.read_bytes()
        except OSError as exc:
            raise InputError("cannot read %s: %s" % (path, exc.strerror)) from None
        if path.resolve().is_relative_to(root):
            inside.append(path.resolve().relative_to(root).as_posix())
    tracked = _tracked(repo, inside) if inside else []
    if tracked:
        raise InputError(
            "%s is tracked by git: a sealed file must never be in the repository in plain text" % tracked[0]
        )
    try:
        plaintext = pack_sealed_set(files)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    ciphertext = pyrage.encrypt(plaintext, _age_recipients(recipients))
    digest = sealed_set_digest(plaintext)
    target = repo / sealed_file_name(digest)
    write_atomic(target, ciphertext)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(target)], cwd=repo, check=False).returncode == 0
    return SealedSet(digest, target, tuple(sorted(files)), tuple(recipients), ignored)


def _identity(identity: bytes) -> object:
    import pyrage

    try:
        text = identity.decode("ascii", "replace").strip()
        if text.startswith("AGE-SECRET-KEY-"):
            return pyrage.x25519.Identity.from_str(text)
        return pyrage.ssh.Identity.from_buffer(identity)
    except pyrage.IdentityError as exc:
        raise InputError("cannot read the identity that opens sealed sets: %s" % exc) from None


def _decrypted(ciphertext: bytes, identity: bytes, what: str = "the sealed set") -> bytes:
    import pyrage

    try:
        return bytes(pyrage.decrypt(ciphertext, [_identity(identity)]))
    except pyrage.DecryptError as exc:
        raise InputError("%s does not open with this key: %s" % (what, exc)) from None


def open_sealed_plaintext(ciphertext: bytes, identity: bytes, expected: Digest) -> bytes:
    """A sealed set's plaintext: ``ciphertext`` decrypted with ``identity`` (an OpenSSH
    private key file's bytes, or an ``AGE-SECRET-KEY-1…`` line), its digest checked against
    ``expected`` (the contract's) and its form read.

    Raises:
        InputError: the identity cannot be read, does not open it, or the plaintext is not
            the sealed set the contract names.
    """
    plaintext = _decrypted(ciphertext, identity)
    if sealed_set_digest(plaintext) != expected:
        raise InputError(
            "the sealed set opened to %s, not the %s the contract names" % (sealed_set_digest(plaintext), expected)
        )
    try:
        unpack_sealed_set(plaintext)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return plaintext


def open_sealed_set(ciphertext: bytes, identity: bytes, expected: Digest) -> dict[str, bytes]:
    """The files of a sealed set (`open_sealed_plaintext`)."""
    return unpack_sealed_set(open_sealed_plaintext(ciphertext, identity, expected))


def seal_bytes(data: bytes, recipients: Sequence[str]) -> bytes:
    """``data`` as age ciphertext to ``recipients``: what a sealed check's output and full
    result are stored as until they are revealed.
    """
    import pyrage

    return bytes(pyrage.encrypt(data, _age_recipients(recipients)))


def exposures(records: Sequence[TierRecord], check_id: str, candidate: Digest) -> int:
    """How many candidates of the task have been run against a sealed check's set, this
    one included: the distinct candidates of the task's records that carry its sealed result.
    """
    seen = {candidate}
    for record in records:
        if any(_is_sealed_result(ref.check_id, check_id) for ref in record.evidence):
            seen.add(record.input_hash)
    return len(seen)


def _is_sealed_result(evidence_id: str, check_id: str) -> bool:
    name = evidence_id.removeprefix("check:")
    return name.endswith(":sealed") and name[: -len(":sealed")].partition("#")[0] == check_id


def reveal_sealed(store: Store, repo: Path, task_id: str, signer: Signer, rev: str = "HEAD") -> list[Appended]:
    """Make the task's sealed sets public (§6e): for each sealed check of its latest
    contract, append a ``sealed_revealed`` event whose evidence is the set's plaintext (read
    from ``rev`` and opened with ``identity``) and, for every run of it the ledger holds,
    the decrypted full result and output. Signed, and opened, by ``signer``: the
    deterministic role's key, as a key file (an agent-held key cannot decrypt).

    Raises:
        InputError: no contract or no sealed check; the set is not at ``rev`` or does not
            open with ``identity``; a run's encrypted evidence is missing or does not open.
    """
    if not isinstance(signer, Ed25519Signer):
        raise InputError("revealing needs the deterministic key as a key file: an agent-held key cannot decrypt")
    identity = signer.openssh_private_bytes()
    latest = store.latest_contract(task_id)
    contract = latest.parse() if latest is not None else None
    sealed = [c for c in (contract.checks if contract else ()) if c.param("sealed") is not None]
    if not sealed:
        raise InputError("task %s has no sealed check to reveal" % task_id)
    records = [row.record for row in store.records_for(task_id)]
    appended = []
    for check in sealed:
        digest = Digest.parse(str(check.param("sealed")))
        where = sealed_file_name(digest)
        shown = subprocess.run(["git", "show", "%s:%s" % (rev, where)], cwd=repo, capture_output=True, check=False)
        if shown.returncode != 0:
            raise InputError("%s holds no %s" % (rev, where))
        plaintext = open_sealed_plaintext(shown.stdout, identity, digest)
        set_digest, set_size = store.put_blob_stream(io.BytesIO(plaintext))
        refs = [EvidenceRef("sealed-set", set_digest, set_size, SEALED_SET_MEDIA_TYPE)]
        for record in records:
            for ref in record.evidence:
                if ref.media_type in (SEALED_RESULT_MEDIA_TYPE, AGE_MEDIA_TYPE) and _is_of(ref.check_id, check.id):
                    plain = _decrypted(_blob(store, ref.digest), identity, "sealed evidence %s" % ref.check_id)
                    plain_digest, size = store.put_blob_stream(io.BytesIO(plain))
                    media = "application/json" if ref.media_type == SEALED_RESULT_MEDIA_TYPE else "text/plain"
                    refs.append(EvidenceRef("revealed:%s" % ref.digest.hex, plain_digest, size, media))
        event = TaskEvent(
            task_id,
            EventType.SEALED_REVEALED,
            None,
            (("check", check.id), ("sealed", str(digest))),
            tuple(refs),
            _clock.now(),
        )
        appended.append(store.append(event, signer))
    return appended


def _is_of(evidence_id: str, check_id: str) -> bool:
    """Whether ``evidence_id`` is a sealed run's encrypted evidence of ``check_id`` (any attempt)."""
    name = evidence_id.removeprefix("check:")
    owner, _, part = name.rpartition(":")
    return part in ("sealed", "stdout", "stderr") and owner.partition("#")[0] == check_id


def _blob(store: Store, digest: Digest) -> bytes:
    data = evidence_bytes(store, digest, None)
    if data is None:
        raise InputError("the sealed evidence %s is missing from the ledger" % digest.short())
    return data
