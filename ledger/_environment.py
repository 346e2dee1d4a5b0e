"""What ran a check: the tool's version and the environment digest a record carries."""

from __future__ import annotations

from receipts import Digest, Domain, canonical_dumps, domain_hash

__all__ = ["VERSION", "environment_digest"]

VERSION = "0.1.0"


def environment_digest() -> Digest:
    """What ran the check: interpreter, platform and tool version (not secrets, not paths)."""
    import platform  # only a check needs it; every command reads VERSION

    facts = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": platform.system(),
        "machine": platform.machine(),
        "receipt-ledger": VERSION,
    }
    return domain_hash(Domain.ENVIRONMENT, canonical_dumps(facts))
