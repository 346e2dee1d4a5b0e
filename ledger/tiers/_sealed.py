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

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    Digest,
    FormatError,
    Keyring,
    Role,
    TierRecord,
    pack_sealed_set,
    public_key_line,
    sealed_file_name,
    sealed_set_digest,
    unpack_sealed_set,
)

from .._errors import InputError
from .._files import write_atomic

__all__ = ["SealedSet", "seal_files", "open_sealed_set", "recipients_for", "seal_bytes", "exposures"]


@dataclass(frozen=True, slots=True)
class SealedSet:
    """A sealed set written: its digest (what the contract names), where, and to whom."""

    digest: Digest
    path: Path
    files: tuple[str, ...]
    recipients: tuple[str, ...]

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


def seal_files(repo: Path, paths: Sequence[str], recipients: Sequence[str]) -> SealedSet:
    """Pack ``paths`` (absolute, or relative to ``repo``), encrypt them to ``recipients`` (age recipient
    lines: ``ssh-ed25519 …`` or ``age1…``) and write the ciphertext at its place.

    Raises:
        InputError: a path outside the repository, missing, or tracked by git (a sealed
            file in the repository in plain text is no secret); a bad recipient.
    """
    import pyrage

    root = repo.resolve()
    files: dict[str, bytes] = {}
    for given in paths:
        path = (root / given).resolve()  # relative to the repository; the CLI gives them absolute
        if not path.is_relative_to(root) or path == root:
            raise InputError("%s is outside the repository %s" % (given, repo))
        try:
            files[path.relative_to(root).as_posix()] = path.read_bytes()
        except OSError as exc:
            raise InputError("cannot read %s: %s" % (given, exc.strerror)) from None
    tracked = _tracked(repo, sorted(files))
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
    where = repo / sealed_file_name(digest)
    write_atomic(where, ciphertext)
    return SealedSet(digest, where, tuple(sorted(files)), tuple(recipients))


def open_sealed_set(ciphertext: bytes, identity: bytes, expected: Digest) -> dict[str, bytes]:
    """The files of a sealed set: ``ciphertext`` decrypted with ``identity`` (an OpenSSH
    private key file's bytes, or an ``AGE-SECRET-KEY-1…`` line), its plaintext's digest
    checked against ``expected`` (the contract's).

    Raises:
        InputError: the identity cannot be read, does not open it, or the plaintext is not
            the sealed set the contract names.
    """
    import pyrage

    try:
        text = identity.decode("ascii", "replace").strip()
        key = (
            pyrage.x25519.Identity.from_str(text)
            if text.startswith("AGE-SECRET-KEY-")
            else pyrage.ssh.Identity.from_buffer(identity)
        )
    except pyrage.IdentityError as exc:
        raise InputError("cannot read the identity that opens sealed sets: %s" % exc) from None
    try:
        plaintext = pyrage.decrypt(ciphertext, [key])
    except pyrage.DecryptError as exc:
        raise InputError("the sealed set does not open with this key: %s" % exc) from None
    if sealed_set_digest(plaintext) != expected:
        raise InputError(
            "the sealed set opened to %s, not the %s the contract names" % (sealed_set_digest(plaintext), expected)
        )
    try:
        return unpack_sealed_set(plaintext)
    except FormatError as exc:
        raise InputError(str(exc)) from None


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
