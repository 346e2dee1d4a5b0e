"""What the command modules share: the one-line failure, the context's ledger, signer and
trust, and output (the options themselves are `_options.py`).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from receipts import (
    Digest,
    ReceiptsError,
    Signer,
)
from verify import CannotVerify, Trust, WitnessKey

from .. import _api as lib
from .._escape import terminal_text
from .._layout import NOT_A_HASH
from ._options import _AuditorArgs, _CheckpointArgs, _TrustArgs

# -- one error mapping ---------------------------------------------------------------------------


def _fail(message: str) -> NoReturn:
    click.echo("ledger: error: %s" % terminal_text(message), err=True)
    sys.exit(2)


class _Group(click.Group):
    """Turns every error we know into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (lib.LedgerError, CannotVerify, ReceiptsError) as exc:
            _fail(str(exc))
        except sqlite3.Error as exc:
            _fail("ledger database error: %s" % exc)
        except OSError as exc:
            _fail("%s: %s" % (exc.strerror or type(exc).__name__, exc.filename or exc))
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if os.environ.get("LEDGER_DEBUG"):
                raise
            _fail("internal error (%s): %s; set LEDGER_DEBUG=1 for a traceback" % (type(exc).__name__, exc))


# -- what commands share -------------------------------------------------------------------------


class _Where:
    """The local ledger directory, the git work tree the command runs in, and the shared
    store's URL if one is configured (each found when a command first asks, so that a bad
    config.toml fails as that command's input and a command asks git for its root once).
    """

    def __init__(self, explicit_dir: Path | None, explicit_store: str | None) -> None:
        self._dir = explicit_dir
        self._explicit = explicit_store

    @functools.cached_property
    def repo(self) -> Path | None:
        """The top of the git work tree holding the current directory, or None outside one."""
        return lib.git_root(Path.cwd())

    @functools.cached_property
    def root(self) -> Path:
        return lib.find_ledger_dir(self._dir, None if self._dir else self.repo, Path.cwd())

    def named_opener(self, why: str) -> Callable[[], Any]:
        """Opens the store or directory the caller named (--store/LEDGER_STORE, else
        --dir/LEDGER_DIR), read as an auditor reads it; never one found in the checkout or its
        config.toml, which belong to the candidate a gate judges. Bad input if none was named.
        """
        if self._explicit is None and self._dir is None:
            raise lib.InputError(
                "%s the store you name (--store, LEDGER_STORE, --dir or LEDGER_DIR): a ledger found in the"
                " checkout is the candidate's own" % why
            )
        store = lib.shared_store(self.root, self._explicit) if self._explicit else None
        return lambda: lib.open_source(self.root, store)

    @functools.cached_property
    def store(self) -> str | None:
        return lib.shared_store(self.root, self._explicit)


def _where(ctx: click.Context) -> _Where:
    where: _Where = ctx.find_root().obj
    return where


def _root(ctx: click.Context) -> Path:
    return _where(ctx).root


def _ledger(ctx: click.Context) -> lib.Ledger:
    """The ledger to write to, closed when the command's context closes (as it exits)."""
    where = _where(ctx)
    ledger = lib.Ledger.open(where.root, store=where.store)
    ctx.call_on_close(ledger.close)
    return ledger


def _reader(ctx: click.Context) -> lib.Ledger:
    """For commands that only read: works on a read-only copy of the ledger, closed as
    `_ledger` is.
    """
    where = _where(ctx)
    ledger = lib.Ledger.open(where.root, read_only=True, store=where.store)
    ctx.call_on_close(ledger.close)
    return ledger


def _source(ctx: click.Context) -> Any:
    """The ledger as the auditor reads it (`verify.LedgerSource` or `verify.PostgresSource`)."""
    where = _where(ctx)
    return lib.open_source(where.root, where.store)


def _ask_passphrase(path: str) -> bytes:
    if not sys.stdin.isatty():
        raise lib.InputError("private key %s is encrypted: set RECEIPT_LEDGER_PASSPHRASE" % path)
    return str(click.prompt("Passphrase for %s" % path, hide_input=True, err=True)).encode()


def _signer(name: str) -> Signer:
    return lib.load_signer(name, ask=_ask_passphrase)


def _is_prefix(text: str) -> bool:
    """Whether ``text`` is a hash's prefix as a table prints it (not a whole hash)."""
    prefix = lib.hash_prefix(text)
    return prefix is not None and len(prefix) < 64


def _resolved(ctx: click.Context, text: str, ledger: lib.Ledger | None = None) -> Digest:
    """A hash argument: whole (taken as it is, without opening the ledger), or the unique
    prefix a table printed (`Ledger.resolve`); anything else is refused naming both forms.
    """
    if _is_prefix(text):
        return (ledger or _reader(ctx)).resolve(text)
    return _digest(text, or_prefix=True)


def _receipt_arg(ctx: click.Context, text: str | None, bundle: Path | None) -> str | None:
    """`verify`'s HASH, whole or by a prefix resolved on the ledger; a bundle names its own receipt."""
    return text if text is None or bundle is not None else str(_resolved(ctx, text))


def _digest(text: str, or_prefix: bool = False) -> Digest:
    try:
        return Digest.parse(text)
    except ReceiptsError as exc:
        if or_prefix:  # the command takes a table's prefix too: the message names both forms
            raise lib.InputError(NOT_A_HASH % (text[:80],)) from None
        raise lib.InputError(str(exc)) from None


def _candidate(spec: str) -> Digest:
    return lib.resolve_candidate(spec, Path.cwd())


def _here() -> Path | None:
    """The git work tree the running command was started in (`_Where.repo`)."""
    return _where(click.get_current_context()).repo


def _repo() -> Path:
    repo = _here()
    if repo is None:
        raise lib.InputError("this command runs in a git repository")
    return repo


def _contract(ctx: click.Context, task: str, path: Path | None) -> tuple[str, bytes] | None:
    """The contract file given, or the task's default one under the ledger directory, if there is one."""
    if path is None:
        path = lib.contract_path(_root(ctx), task)
        if not path.is_file():
            return None
    try:
        return str(path), path.read_bytes()
    except OSError as exc:
        raise lib.InputError("cannot read contract %s: %s" % (path, exc.strerror)) from None


def _required_contract(ctx: click.Context, task: str, path: Path | None) -> tuple[str, bytes]:
    found = _contract(ctx, task, path)
    if found is None:
        raise lib.InputError(
            "no contract for task %s: pass --contract FILE or add .ledger/contracts/%s.toml" % (task, task)
        )
    return found


def _trust(ctx: click.Context, args: _TrustArgs, judges_candidate: bool = False) -> Trust:
    """The trust a command verifies against (`ledger.keys._trust` gives the order); none: exit 2."""
    return lib.resolve_trust(
        explicit=args.explicit,
        unsafe_tofu=args.unsafe,
        repo=None if args.explicit or args.unsafe else _where(ctx).repo,  # given trust reads no branch
        ledger_root=_root(ctx),
        trust_ref=args.ref,
        judges_candidate=judges_candidate,
    )


def _tsa_roots(path: Path | None) -> Any:
    """The time-stamping authority's certificates in ``path`` (none without it; the RFC 3161
    reader loads only where a TSA is named).
    """
    if path is None:
        return ()
    from verify import tsa_roots

    return tsa_roots(lib.read_bounded(path, "TSA certificate"))


def _policy(
    trust: _TrustArgs,
    auditors: _AuditorArgs,
    checkpoints: _CheckpointArgs | None = None,
    policy_file: Path | None = None,
    **rest: Any,
) -> Any:
    """The `verify.Transparency` a command checks against, its auditing witnesses resolved
    (`ledger.keys._trust.resolve_auditors`: the option, else the target branch's file) and the
    checkpoint options' files read.
    """
    from verify import Transparency

    keys, quorum = lib.resolve_auditors(
        explicit=auditors.keys, quorum=auditors.quorum, repo=_here(), trust_ref=trust.ref
    )
    policy_file = checkpoints.policy if checkpoints is not None else policy_file
    if policy_file is not None:
        rest["tlog_policy"] = _tlog_policy(policy_file)
    if checkpoints is not None:
        rest.update(
            since=_read_text(checkpoints.since, "checkpoint") if checkpoints.since else None,
            require_checkpoint=checkpoints.require or bool(rest.get("require_checkpoint")),
            witnesses=_witnesses(checkpoints.witnesses, checkpoints.quorum),
            quorum=checkpoints.quorum,
            tsa_roots=_tsa_roots(checkpoints.tsa_cert),
        )
    try:
        return Transparency(auditors=keys, audited_quorum=quorum, **rest)
    except CannotVerify as exc:
        raise lib.InputError(str(exc)) from None


def _tlog_policy(path: Path) -> Any:
    """A C2SP tlog-policy file, parsed; a bad one is bad input naming its line."""
    return lib.read_tlog_policy(_read_text(path, "policy"), str(path))


def _read_text(path: Path, what: str) -> str:
    try:
        return lib.read_bounded(path, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise lib.InputError("cannot read %s %s: %s" % (what, path, exc)) from None


# -- what two command modules share -----------------------------------------------------------


def _ledger_opener(ctx: click.Context) -> Callable[[], Any]:
    """The ledger a receipt without a bundle in git is read from, opened only then: the one
    the caller names (--store, --dir or their variables), never one found in the checkout or
    named by its config.toml, which are the candidate's (a committed private copy would be
    walked, and so proven complete).
    """
    return lambda: _where(ctx).named_opener("a receipt without a bundle in git is read only from")()


def _readers(ctx: click.Context) -> dict[str, Any]:
    """What a verification may read, each opened only when it is needed: the ledger (the
    command's --dir or --store), the git repository here, and the named ledger for a
    commit's receipt without a bundle in git (`_ledger_opener`).
    """
    return {"open_source": lambda: _source(ctx), "repo": _repo, "open_ledger": _ledger_opener(ctx)}


def _witnesses(values: Sequence[str], quorum: int) -> tuple[WitnessKey, ...]:
    keys = tuple(WitnessKey.parse(v) for v in values)
    if quorum > len(keys):
        raise lib.InputError("--witness-quorum %d needs at least that many --witness keys" % quorum)
    return keys
