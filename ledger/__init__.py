"""ledger: everything that writes: the SQLite store, the blob store, the keyring, the
tier operations and the `ledger` CLI."""

from ._clock import frozen_clock
from ._errors import InputError, LedgerError, StoreError
from ._keys import generate_key_file, key_dir, key_path, load_signer
from ._ops import (
    VERSION,
    Evidence,
    add_key,
    environment_digest,
    find_ledger_dir,
    current_contract,
    record_tier,
    register_contract,
    resolve_candidate,
    revoke_key,
    seal_receipt,
)
from ._store import LEDGER_DIRNAME, Appended, Ledger, Store

__all__ = [
    "LEDGER_DIRNAME", "VERSION", "frozen_clock", "Appended", "Evidence", "InputError", "Ledger", "LedgerError",
    "Store", "StoreError", "add_key", "environment_digest", "find_ledger_dir", "generate_key_file", "key_dir",
    "key_path", "load_signer", "record_tier", "register_contract", "current_contract", "resolve_candidate", "revoke_key", "seal_receipt",
]
