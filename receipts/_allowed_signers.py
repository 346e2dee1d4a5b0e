"""OpenSSH allowed_signers files (ssh-keygen(1), ALLOWED SIGNERS), writer beside parser.
Roles are namespaces; a revoked key's line ends at its revocation (valid-before), so that
stock `ssh-keygen -Y verify` judges our signatures as the keyring does.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ._b64 import b64decode_canonical
from ._errors import FormatError
from ._keyring import Keyring
from ._sshsig import fingerprint, namespace_for, parse_public_key_blob, public_key_line

__all__ = ["AllowedSigner", "allowed_signers_text", "parse_allowed_signers"]


@dataclass(frozen=True, slots=True)
class AllowedSigner:
    """One ssh-ed25519 line: who, in which namespaces (None: any), and the key's id."""

    principals: str
    namespaces: tuple[str, ...] | None
    key_id: str


def _ssh_time(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y%m%d%H%M%SZ")


def allowed_signers_text(ring: Keyring, revoked_at_time: Mapping[int, int]) -> str:
    """Every key of the keyring as an allowed_signers line. ``revoked_at_time`` maps a
    revocation entry's seq to that entry's time.
    """
    lines = []
    for s in ring:
        opts = ['namespaces="%s"' % ",".join(namespace_for(r.value) for r in s.spec.roles)]
        if s.spec.valid_after is not None:
            opts.append('valid-after="%s"' % _ssh_time(s.spec.valid_after))
        before = s.spec.valid_before
        if s.revoked_at is not None:
            revoked = revoked_at_time[s.revoked_at]
            before = revoked if before is None else min(before, revoked)
        if before is not None:
            opts.append('valid-before="%s"' % _ssh_time(before))
        lines.append("%s %s %s\n" % (s.spec.name, ",".join(opts), public_key_line(s.spec.public_key, s.key_id)))
    return "".join(lines)


def _tokens(line: str) -> list[str]:
    # Fields are space-separated; quotes may hold spaces and commas.
    out, cur, quoted = [], "", False
    for ch in line:
        if ch == '"':
            quoted = not quoted
            cur += ch
        elif ch.isspace() and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if quoted:
        raise FormatError("unbalanced quote in allowed_signers line: %r" % line)
    if cur:
        out.append(cur)
    return out


def parse_allowed_signers(text: str) -> tuple[AllowedSigner, ...]:
    """The file's ssh-ed25519 lines (other key types are not ours and are skipped). Raises
    `FormatError` on an unbalanced quote or a malformed ssh-ed25519 key.
    """
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = _tokens(line)
        if len(fields) < 3:
            continue
        options = fields[1] if fields[1] != "ssh-ed25519" else ""
        rest = fields[2:] if options else fields[1:]
        if len(rest) < 2 or rest[0] != "ssh-ed25519":
            continue
        namespaces = None
        for opt in re.findall(r'(?:[^,"]|"[^"]*")+', options):
            name, _, value = opt.partition("=")
            if name.lower() == "namespaces":
                namespaces = tuple(n.strip() for n in value.strip('"').split(","))
        try:
            blob = b64decode_canonical(rest[1], "the key")
            parse_public_key_blob(blob)
        except FormatError:
            raise FormatError("allowed_signers holds a malformed ssh-ed25519 key: %r" % rest[1][:40]) from None
        found.append(AllowedSigner(fields[0], namespaces, fingerprint(blob)))
    return tuple(found)
