"""Which store a command uses: ``--store URL`` or ``LEDGER_STORE``, else the ``store``
line of the repository's committed ``.ledger/config.toml``, else the local SQLite ledger.

A URL kept in a file never carries a password: libpq's own means (``PGPASSWORD``,
``~/.pgpass``, a service file, ``sslmode``/``sslrootcert`` in the URL) supply the rest.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from verify import CannotVerify, LedgerSource, NoLedger

from ._errors import InputError, StoreError

__all__ = [
    "CONFIG_NAME",
    "config_value",
    "shared_store",
    "store_value",
    "open_source",
    "write_store_config",
    "without_password",
    "describe_store",
]

CONFIG_NAME = "config.toml"


def _checked(url: str, where: str) -> str:
    from verify.postgres import is_postgres_url  # the shared store's reader, only where one is named

    if not is_postgres_url(url):
        raise InputError("%s: a shared store is a postgresql://HOST/DB URL, not %r" % (where, url[:80]))
    return url


def config_value(root: Path, key: str) -> object:
    """One top-level value of ``root/config.toml`` (None if the file or the key is absent);
    a file that does not parse is bad input.
    """
    path = root / CONFIG_NAME
    if not path.is_file():
        return None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError("%s: %s" % (path, exc)) from None


def shared_store(root: Path, explicit: str | None) -> str | None:
    """The shared store's URL for the ledger directory ``root``, or None for the local one."""
    if explicit:
        return _checked(explicit, "--store/LEDGER_STORE")
    return store_value(config_value(root, "store"), str(root / CONFIG_NAME))


def store_value(found: object, where: str) -> str | None:
    """A config file's ``store`` value checked (None when absent); ``where`` names the file."""
    if found is None:
        return None
    if not isinstance(found, str):
        raise InputError("%s: store must be a string URL" % where)
    if urlsplit(found).password is not None:
        raise InputError(
            "%s: the store URL holds a password; keep it out of the repository (PGPASSWORD, ~/.pgpass"
            " or a service file)" % where
        )
    return _checked(found, where)


def without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return parts._replace(netloc=user + "@" + netloc[1]).geturl()


def without_user(url: str) -> str:
    """``url`` naming no role (nor password): each clone then connects as its own PGUSER."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()


def write_store_config(root: Path, url: str) -> bool:
    """Name the shared store in ``root/config.toml`` for the team to commit, unless a
    config already exists there (it is the team's file then). True if written.
    """
    path = root / CONFIG_NAME
    if path.exists():
        return False
    root.mkdir(parents=True, exist_ok=True)
    text = (
        "# The shared ledger this repository's commands use (docs/team.md); no password here.\n"
        'store = "%s"\n' % without_password(url).replace("\\", "\\\\").replace('"', '\\"')
    )
    from ._files import write_atomic  # only `init` writes config.toml

    write_atomic(path, text.encode("utf-8"))
    return True


def open_source(root: Path, store: str | None) -> LedgerSource:
    """The ledger as an auditor reads it: the shared store read-only, or the local directory."""
    try:
        if store is None:
            return LedgerSource.open(root)
        from verify.postgres import PostgresSource  # the shared store's reader, only where one is named

        return PostgresSource.open_url(store)
    except NoLedger as exc:
        raise InputError(str(exc)) from None
    except CannotVerify as exc:
        raise (StoreError if store is not None else InputError)(str(exc)) from None


def describe_store(root: Path, store: str | None) -> str:
    """Where a ledger is, for messages: the store's URL without its password, or the directory."""
    from verify.postgres import redact_url

    return redact_url(store) if store is not None else str(root)


# What a command reads from a file it is given, at most, unless it says otherwise.
