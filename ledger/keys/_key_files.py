"""Private key files: OpenSSH Ed25519 keys, kept outside the repository."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from receipts import Ed25519Signer, Signer, public_key_line

from .._errors import InputError

__all__ = [
    "key_dir",
    "key_path",
    "generate_key_file",
    "load_signer",
    "read_public_key",
    "refuse_inside_repo",
    "PASSPHRASE_ENV",
]

PASSPHRASE_ENV = "RECEIPT_LEDGER_PASSPHRASE"
KEYS_ENV = "RECEIPT_LEDGER_KEYS"


def key_dir() -> Path:
    """Where key files live: $RECEIPT_LEDGER_KEYS, else ~/.config/receipt-ledger/keys."""
    if os.environ.get(KEYS_ENV):
        return Path(os.environ[KEYS_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "receipt-ledger" / "keys"


def key_path(name_or_path: str) -> Path:
    """A key name resolves in the key directory; anything with a slash or ~ is a path."""
    if "/" in name_or_path or name_or_path.startswith("~"):
        return Path(name_or_path).expanduser()
    return key_dir() / name_or_path


def generate_key_file(path: Path, comment: str, passphrase: bytes | None = None) -> Ed25519Signer:
    """Write a new OpenSSH Ed25519 key pair (private file mode 0600); never overwrite."""
    from cryptography.hazmat.primitives import serialization  # loaded only by commands that touch key files

    if path.exists() or path.with_name(path.name + ".pub").exists():
        raise InputError("refusing to overwrite existing key file %s" % path)
    key = Ed25519PrivateKey.generate()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    )
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption)
    signer = Ed25519Signer(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(private)
        path.with_name(path.name + ".pub").write_text(public_key_line(signer.public_key_blob, comment) + "\n")
    except OSError as exc:
        raise InputError("cannot write key file %s: %s" % (path, exc)) from None
    return signer


def load_signer(name_or_path: str, ask: Callable[[str], bytes] | None = None) -> Signer:
    """The signer a ``--key`` names: a key name in the key directory or a private key path
    (an encrypted one takes its passphrase from the environment or ``ask``); or a key held
    by the SSH agent, as ``agent:FINGERPRINT``, ``agent:COMMENT``, ``agent:`` (its only
    Ed25519 key) or the path of its ``.pub`` file, as ``ssh-keygen -Y sign`` takes it.
    """
    from ._ssh_agent import AgentSigner

    if name_or_path.startswith("agent:"):
        return AgentSigner.find(name_or_path[6:])
    if name_or_path.endswith(".pub"):
        return AgentSigner.from_public_key_file(key_path(name_or_path))
    return _load_key_file(name_or_path, ask)


def _load_key_file(name_or_path: str, ask: Callable[[str], bytes] | None) -> Ed25519Signer:
    from cryptography.hazmat.primitives import serialization

    path = key_path(name_or_path)
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            # As OpenSSH refuses: a secret others can read is no longer a secret.
            raise InputError(
                "private key %s is accessible by others (mode %o): run chmod 600 %s" % (path, mode & 0o777, path)
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no private key %r (looked for %s)" % (name_or_path, path)) from None
    except OSError as exc:
        raise InputError("cannot read private key %s: %s" % (path, exc)) from None
    passphrase = os.environ[PASSPHRASE_ENV].encode() if os.environ.get(PASSPHRASE_ENV) else None
    try:
        try:
            key = serialization.load_ssh_private_key(data, password=passphrase)
        except TypeError:
            if ask is None:
                raise InputError("private key %s is encrypted: set %s" % (path, PASSPHRASE_ENV)) from None
            passphrase = ask(str(path))
            key = serialization.load_ssh_private_key(data, password=passphrase)
    except (ValueError, TypeError) as exc:
        if passphrase is not None and "checksum" in str(exc):
            # What the library says ("Corrupt data: broken checksum") reads as a damaged file.
            raise InputError("wrong passphrase for key %s (%s)" % (name_or_path, path)) from None
        raise InputError("cannot load private key %s: %s" % (path, exc)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError("private key %s is not an Ed25519 key" % path)
    return Ed25519Signer(key)


def read_public_key(line_or_path: str) -> bytes:
    """An OpenSSH public key blob from a key line (``ssh-ed25519 AAAA...``) or a .pub file."""
    from receipts import ReceiptsError, parse_public_key_line

    text = line_or_path
    if not line_or_path.startswith("ssh-"):
        try:
            text = Path(line_or_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                "%r is neither an OpenSSH public key line nor a readable file: %s" % (line_or_path, exc)
            ) from None
    try:
        return parse_public_key_line(text)[0]
    except ReceiptsError as exc:
        raise InputError("%s: %s" % (line_or_path[:60], exc)) from None


def refuse_inside_repo(path: Path, ledger_root: Path) -> None:
    """Key custody: a private key is never written into the repository the ledger serves
    (one `git add -A` would publish it).

    Raises:
        InputError: ``path`` lies inside that repository.
    """
    repo = ledger_root.resolve().parent
    if path.resolve().is_relative_to(repo):
        raise InputError("refusing to write a private key inside the repository (%s); use --out outside it" % repo)
