"""The options every command group shares, as decorators (one spelling, one help text each)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from receipts import Role, Tier

F = TypeVar("F", bound=Callable[..., Any])

ROLE_CHOICE = click.Choice([r.value for r in Role])
TIER_CHOICE = click.Choice([t.value for t in Tier])


# -- shared options ------------------------------------------------------------------------------

_FILE = click.Path(path_type=Path, dir_okay=False)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")(f)


def contract_option(f: F) -> F:
    """--contract FILE (``--config`` is the older spelling of the same option)."""
    return click.option(
        "--contract",
        "--config",
        "contract_path",
        type=_FILE,
        help="Contract file (default .ledger/contracts/TASK.toml).",
    )(f)


def input_option(help: str = "Candidate: a git revision or blake3:<hex>.") -> Callable[[F], F]:
    return click.option("--input", "input_spec", default="HEAD", show_default=True, help=help)


def client_timeout_option(flag: str, help: str) -> Callable[[F], F]:
    """How long a server lets one client hold a connection idle (10 s unless given)."""
    return click.option(flag, default=10.0, show_default=True, type=click.FloatRange(0.1, 300), help=help)


def key_option(help: str, required: bool = True) -> Callable[[F], F]:
    return click.option("--key", "key_name", required=required, help=help + " (a key name or a private key path).")


@dataclass(frozen=True, slots=True)
class _TrustArgs:
    explicit: str | None
    unsafe: bool
    ref: str | None


def trust_option(f: F) -> F:
    """--trust, --trust-ref and --unsafe-trust-on-first-use, handed to the command as one
    `_TrustArgs` named ``trust`` (resolved by `_trust`).
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["trust"] = _TrustArgs(kwargs.pop("trust"), kwargs.pop("unsafe_tofu"), kwargs.pop("trust_ref"))
        return f(*args, **kwargs)

    options = (
        click.option(
            "--trust",
            help="Pin the admin key: a SHA256 fingerprint or an allowed_signers file (default: the committed"
            " .ledger/allowed_signers of the target branch).",
        ),
        click.option(
            "--trust-ref",
            envvar="LEDGER_TRUST_REF",
            help="The target branch whose .ledger/allowed_signers is trusted (default: trust_ref in"
            " config.toml except when judging a candidate, else origin/main, else main). A branch, resolved"
            " fully qualified; never a tag, HEAD or the candidate's own tree.",
        ),
        click.option(
            "--unsafe-trust-on-first-use",
            "unsafe_tofu",
            is_flag=True,
            help="UNSAFE: believe whatever admin key the ledger or bundle starts with. To inspect, never to decide.",
        ),
    )
    for option in options:
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def store_option(f: F) -> F:
    return click.option(
        "--store",
        envvar="LEDGER_STORE",
        help="A shared ledger: postgresql://HOST/DB (default: the store line of .ledger/config.toml,"
        " else the local ledger). Passwords come from PGPASSWORD or ~/.pgpass, never the URL in a file.",
    )(f)


def yes_option(f: F) -> F:
    return click.option("--yes", is_flag=True, help="Sign without asking (for scripts).")(f)


@dataclass(frozen=True, slots=True)
class _AuditorArgs:
    keys: tuple[str, ...]
    quorum: int | None


def auditor_option(f: F) -> F:
    """--auditing-witness and --audited-quorum, handed to the command as one `_AuditorArgs`
    named ``auditors`` (resolved by `_policy`).
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["auditors"] = _AuditorArgs(tuple(kwargs.pop("auditing_witnesses")), kwargs.pop("audited_quorum"))
        return f(*args, **kwargs)

    options = (
        click.option(
            "--auditing-witness",
            "auditing_witnesses",
            multiple=True,
            help="An auditing witness whose cosignature certifies the task complete: 'NAME ssh-ed25519 AAAA...';"
            " repeatable (default: .ledger/auditing-witnesses on the target branch).",
        ),
        click.option(
            "--audited-quorum",
            type=click.IntRange(1, 64),
            help="Cosignatures required from --auditing-witness keys (default 1).",
        ),
    )
    for option in options:
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class _CheckpointArgs:
    since: Path | None
    require: bool
    witnesses: tuple[str, ...]
    quorum: int
    tsa_cert: Path | None
    policy: Path | None


def checkpoint_options(f: F) -> F:
    """--since, --require-checkpoint, --witness, --witness-quorum, --policy and --tsa-cert, handed to
    the command as one `_CheckpointArgs` named ``checkpoints`` (resolved by `_policy`).
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["checkpoints"] = _CheckpointArgs(
            kwargs.pop("since"),
            kwargs.pop("require_checkpoint"),
            tuple(kwargs.pop("witnesses")),
            kwargs.pop("witness_quorum"),
            kwargs.pop("tsa_cert"),
            kwargs.pop("policy_file"),
        )
        return f(*args, **kwargs)

    options = (
        click.option("--since", "since", type=_FILE, help="A checkpoint you kept: prove the ledger only grew since."),
        click.option(
            "--require-checkpoint", is_flag=True, help="Reject unless a signed checkpoint covers the receipt."
        ),
        click.option(
            "--witness", "witnesses", multiple=True, help="A trusted witness: 'NAME ssh-ed25519 AAAA...'; repeatable."
        ),
        click.option(
            "--witness-quorum", default=0, type=click.IntRange(0, 64), help="Cosignatures required from --witness keys."
        ),
        click.option(
            "--policy",
            "policy_file",
            type=_FILE,
            help="A C2SP tlog-policy: the checkpoint's witness cosignatures must meet its quorum.",
        ),
        click.option(
            "--tsa-cert",
            type=_FILE,
            help="PEM certificate(s) of the time-stamping authority you trust: the checkpoint's RFC 3161 time-stamp"
            " must verify.",
        ),
    )
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]
