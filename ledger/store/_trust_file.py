"""The ledger directory's trust file: the genesis admin's pin, written when the ledger is
created (`keys._trust` reads it back and resolves every other trust root).
"""

from __future__ import annotations

from pathlib import Path

from receipts import Role, Signer, fingerprint, namespace_for, public_key_line

from .._files import write_atomic
from .._layout import TRUST_FILE

__all__ = ["TRUST_FILE", "trust_file_text", "write_trust_file"]


def trust_file_text(admin: Signer, admin_name: str) -> str:
    """The pin: one allowed_signers line for the genesis admin, in the admin namespace."""
    return (
        "# receipt-ledger trust root: the admin key(s) this repository's ledger must start from.\n"
        "# Commit it; the gate reads it from the target branch, never from a pull request.\n"
        '%s namespaces="%s" %s\n'
        % (
            admin_name,
            namespace_for(Role.ADMIN),
            public_key_line(admin.public_key_blob, fingerprint(admin.public_key_blob)),
        )
    )


def write_trust_file(root: Path, admin: Signer, admin_name: str) -> bool:
    """Write ``root/allowed_signers`` unless the team already has one. True if written."""
    path = root / TRUST_FILE
    if path.exists():
        return False
    write_atomic(path, trust_file_text(admin, admin_name).encode("utf-8"))
    return True
