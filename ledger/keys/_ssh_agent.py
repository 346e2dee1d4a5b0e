"""Signing with a key held by an SSH agent (`SSH_AUTH_SOCK`): the private key never leaves
the agent, which may keep it on a hardware token or behind a password manager.

The agent protocol (draft-ietf-sshm-ssh-agent) is two requests here: list the identities,
and sign. Every signature the agent returns is checked before it is used.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from receipts import FormatError, fingerprint, is_valid_ed25519, parse_public_key_blob, parse_public_key_line

from .._errors import InputError

__all__ = ["AgentSigner", "agent_identities", "FIDO_KEY_TYPE"]

_REQUEST_IDENTITIES, _IDENTITIES_ANSWER = 11, 12
_SIGN_REQUEST, _SIGN_RESPONSE = 13, 14
_FAILURE = 5
_MAX_MESSAGE = 256 * 1024
FIDO_KEY_TYPE = "sk-ssh-ed25519@openssh.com"
_FIDO_REFUSAL = (
    "FIDO security keys (%s) are not supported: their signatures cover a counter and flags "
    "that receipt-ledger's SSHSIG profile does not carry (ADR 0018); use an ssh-ed25519 key" % FIDO_KEY_TYPE
)


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _read_string(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(data):
        raise InputError("the ssh-agent sent a truncated answer")
    (n,) = struct.unpack(">I", data[pos : pos + 4])
    if pos + 4 + n > len(data):
        raise InputError("the ssh-agent sent a truncated answer")
    return data[pos + 4 : pos + 4 + n], pos + 4 + n


def _socket_path() -> str:
    path = os.environ.get("SSH_AUTH_SOCK")
    if not path:
        raise InputError("no ssh-agent to sign with: SSH_AUTH_SOCK is not set")
    return path


def _call(message: bytes) -> bytes:
    """One request to the agent; the answer's type byte and payload."""
    path = _socket_path()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            conn.sendall(_string(message))
            head = _recv(conn, 4)
            (n,) = struct.unpack(">I", head)
            if not 0 < n <= _MAX_MESSAGE:
                raise InputError("the ssh-agent sent a malformed answer")
            return _recv(conn, n)
    except OSError as exc:
        raise InputError("cannot talk to the ssh-agent at %s: %s" % (path, exc.strerror or exc)) from None


def _recv(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise InputError("the ssh-agent closed the connection mid-answer")
        data += chunk
    return data


def agent_identities() -> list[tuple[bytes, str]]:
    """The agent's keys: (OpenSSH public key blob, comment) each."""
    answer = _call(bytes([_REQUEST_IDENTITIES]))
    if answer[0] != _IDENTITIES_ANSWER or len(answer) < 5:
        raise InputError("the ssh-agent did not list its keys")
    (count,) = struct.unpack(">I", answer[1:5])
    keys, pos = [], 5
    for _ in range(min(count, 1024)):
        blob, pos = _read_string(answer, pos)
        comment, pos = _read_string(answer, pos)
        keys.append((blob, comment.decode("utf-8", "replace")))
    return keys


def _key_type(blob: bytes) -> str:
    kind, _ = _read_string(blob, 0)
    return kind.decode("ascii", "replace")


class AgentSigner:
    """A `receipts.Signer` whose Ed25519 key stays in the SSH agent."""

    __slots__ = ("_blob", "_raw")

    def __init__(self, public_key_blob: bytes) -> None:
        if _key_type(public_key_blob) == FIDO_KEY_TYPE:
            raise InputError(_FIDO_REFUSAL)
        try:
            self._raw = parse_public_key_blob(public_key_blob)
        except FormatError as exc:
            raise InputError("the agent key is not an ssh-ed25519 key: %s" % exc) from None
        self._blob = public_key_blob

    @classmethod
    def find(cls, selector: str) -> AgentSigner:
        """The agent's key whose fingerprint or comment is ``selector`` (or its only
        Ed25519 key when ``selector`` is empty). Raises `InputError`.
        """
        keys = agent_identities()
        matches = [(blob, c) for blob, c in keys if selector in ("", c, fingerprint(blob))]
        ed25519 = [(blob, c) for blob, c in matches if _key_type(blob) == "ssh-ed25519"]
        if not ed25519 and any(_key_type(blob) == FIDO_KEY_TYPE for blob, _ in matches):
            raise InputError(_FIDO_REFUSAL)
        if len(ed25519) != 1:
            held = ", ".join("%s (%s)" % (fingerprint(b), c) for b, c in keys if _key_type(b) == "ssh-ed25519")
            raise InputError(
                "the ssh-agent holds %s ssh-ed25519 key matching %r; it holds: %s"
                % ("no" if not ed25519 else "more than one", selector, held or "none")
            )
        return cls(ed25519[0][0])

    @classmethod
    def from_public_key_file(cls, path: Path) -> AgentSigner:
        """The agent's key whose public half is in ``path`` (an OpenSSH .pub file)."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("cannot read public key %s: %s" % (path, exc)) from None
        if text.split(maxsplit=1)[:1] == [FIDO_KEY_TYPE]:
            raise InputError(_FIDO_REFUSAL)
        try:
            blob, _ = parse_public_key_line(text)
        except FormatError as exc:
            raise InputError("%s: %s" % (path, exc)) from None
        if blob not in [held for held, _ in agent_identities()]:
            raise InputError("the ssh-agent does not hold the key of %s (%s): ssh-add it" % (path, fingerprint(blob)))
        return cls(blob)

    @property
    def public_key_blob(self) -> bytes:
        return self._blob

    def sign_raw(self, data: bytes) -> bytes:
        answer = _call(bytes([_SIGN_REQUEST]) + _string(self._blob) + _string(data) + struct.pack(">I", 0))
        if answer[0] == _FAILURE:
            raise InputError("the ssh-agent refused to sign (is the key still loaded, or was confirmation denied?)")
        if answer[0] != _SIGN_RESPONSE:
            raise InputError("the ssh-agent sent an unexpected answer (%d)" % answer[0])
        signature, _ = _read_string(answer, 1)
        kind, pos = _read_string(signature, 0)
        raw, _ = _read_string(signature, pos)
        # Fail closed: an agent (or whatever listens on the socket) must not slip in a bad signature.
        if kind != b"ssh-ed25519" or len(raw) != 64 or not is_valid_ed25519(self._raw, raw, data):
            raise InputError("the ssh-agent returned a signature that does not verify")
        return raw
