"""The `ledger` command: a thin click layer over the library in `ledger`.

Each command parses its arguments, makes one library call and renders the result. Data
goes to stdout, status and errors to stderr. Exit codes: 0 done or verified, 1
verification rejected (or a failing verdict where a command says so), 2 bad input or
could not run: one line on stderr, never a traceback.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from receipts import (
    LADDER,
    Digest,
    EventType,
    ReceiptsError,
    Role,
    Signer,
    Tier,
    Verdict,
    armor,
    config_hash,
    decode_entry,
    entry_signed_bytes,
    fingerprint,
    parse_checkpoint,
)
from verify import CannotVerify, Trust, UnsafeTrustOnFirstUse, WitnessKey

from . import _api as lib
from ._escape import terminal_text
from ._hooks import EVENTS as HOOK_EVENTS

F = TypeVar("F", bound=Callable[..., Any])


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


def key_option(help: str, required: bool = True) -> Callable[[F], F]:
    return click.option("--key", "key_name", required=required, help=help + " (a key name or a private key path).")


@dataclass(frozen=True, slots=True)
class _TrustArgs:
    explicit: str | None
    unsafe: bool
    ref: str | None


def trust_option(f: F) -> F:
    """--trust, --trust-ref and --unsafe-trust-on-first-use, handed to the command as one
    `_TrustArgs` named ``trust`` (resolved by `_trust`)."""

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


# -- what commands share -------------------------------------------------------------------------


class _Where:
    """The local ledger directory, and the shared store's URL if one is configured (read
    when a command first asks, so that a bad config.toml fails as that command's input)."""

    def __init__(self, root: Path, explicit_store: str | None, explicit_dir: bool = False) -> None:
        self.root = root
        self._explicit = explicit_store
        self._explicit_dir = explicit_dir

    def named_opener(self, why: str) -> Callable[[], Any]:
        """Opens the store or directory the caller named (--store/LEDGER_STORE, else
        --dir/LEDGER_DIR), read as an auditor reads it; never one found in the checkout or its
        config.toml, which belong to the candidate a gate judges. Bad input if none was named."""
        if self._explicit is None and not self._explicit_dir:
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
    where = _where(ctx)
    return lib.Ledger.open(where.root, store=where.store)


def _reader(ctx: click.Context) -> lib.Ledger:
    """For commands that only read: works on a read-only copy of the ledger."""
    where = _where(ctx)
    return lib.Ledger.open(where.root, read_only=True, store=where.store)


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


def _admin_signer(ledger: lib.Ledger, admin: str | None) -> Signer:
    if admin is not None:
        return _signer(admin)
    for state in ledger.keyring():
        if state.revoked_at is None and Role.ADMIN in state.spec.roles and lib.key_path(state.spec.name).is_file():
            return _signer(state.spec.name)
    raise lib.InputError("no local private key for any admin key of this ledger; pass --admin NAME or a key path")


def _digest(text: str) -> Digest:
    try:
        return Digest.parse(text)
    except ReceiptsError as exc:
        raise lib.InputError(str(exc)) from None


def _candidate(spec: str) -> Digest:
    return lib.resolve_candidate(spec, Path.cwd())


def _repo() -> Path:
    repo = lib.git_root(Path.cwd())
    if repo is None:
        raise lib.InputError("this command runs in a git repository")
    return repo


def _contract(ctx: click.Context, task: str, path: Path | None) -> tuple[str, bytes] | None:
    """The contract file given, or the task's default one under the ledger directory, if there is one."""
    if path is None:
        path = _root(ctx) / "contracts" / (task.replace("/", "_") + ".toml")
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
    """The trust a command verifies against (`ledger._trust` gives the order); none: exit 2."""
    return lib.resolve_trust(
        explicit=args.explicit,
        unsafe_tofu=args.unsafe,
        repo=lib.git_root(Path.cwd()),
        ledger_root=_root(ctx),
        trust_ref=args.ref,
        judges_candidate=judges_candidate,
    )


@dataclass(frozen=True, slots=True)
class _AuditorArgs:
    keys: tuple[str, ...]
    quorum: int | None


def auditor_option(f: F) -> F:
    """--auditing-witness and --audited-quorum, handed to the command as one `_AuditorArgs`
    named ``auditors`` (resolved by `_policy`)."""

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


def _policy(trust: _TrustArgs, auditors: _AuditorArgs, **rest: Any) -> Any:
    """The `verify.Transparency` a command checks against, its auditing witnesses resolved
    (`ledger._trust.resolve_auditors`: the option, else the target branch's file)."""
    from verify import Transparency

    keys, quorum = lib.resolve_auditors(
        explicit=auditors.keys, quorum=auditors.quorum, repo=lib.git_root(Path.cwd()), trust_ref=trust.ref
    )
    try:
        return Transparency(auditors=keys, audited_quorum=quorum, **rest)
    except CannotVerify as exc:
        raise lib.InputError(str(exc)) from None


def _said(trust: Trust) -> None:
    # Beside a result only: a command that fails on bad input still prints one line.
    if isinstance(trust, UnsafeTrustOnFirstUse):
        click.echo(
            "warning: UNSAFE: --unsafe-trust-on-first-use: the admin key is whatever the ledger starts with;"
            " this result proves nothing about who signed it",
            err=True,
        )


def _read_bytes(path: Path, what: str) -> bytes:
    return lib.read_bounded(path, what)


def _read_text(path: Path, what: str) -> str:
    try:
        return lib.read_bounded(path, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise lib.InputError("cannot read %s %s: %s" % (what, path, exc)) from None


def _emit(as_json: bool, doc: object, lines: Sequence[str], trust: Trust | None = None) -> None:
    if trust is not None:
        _said(trust)
    click.echo(json.dumps(doc, indent=2) if as_json else terminal_text("\n".join(lines)))


def _done(ok: bool) -> NoReturn:
    sys.exit(0 if ok else 1)


ROLE_CHOICE = click.Choice([r.value for r in Role])
TIER_CHOICE = click.Choice([t.value for t in Tier])


# -- the group -----------------------------------------------------------------------------------


@click.group(cls=_Group)
@click.version_option(lib.VERSION, prog_name="receipt-ledger")
@click.option(
    "--dir",
    "ledger_dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="LEDGER_DIR",
    help="Ledger directory (default: .ledger at the git root).",
)
@store_option
@click.pass_context
def cli(ctx: click.Context, ledger_dir: Path | None, store: str | None) -> None:
    """Signed, replayable receipts of what was actually checked."""
    ctx.obj = _Where(lib.find_ledger_dir(ledger_dir, Path.cwd()), store, ledger_dir is not None)


# -- init and keys -------------------------------------------------------------------------------


def _refuse_inside_repo(path: Path, ledger_root: Path) -> None:
    repo = ledger_root.resolve().parent
    if path.resolve().is_relative_to(repo):
        raise lib.InputError("refusing to write a private key inside the repository (%s); use --out outside it" % repo)


@cli.command()
@click.option("--admin", "admin_name", default="admin", show_default=True, help="Name of the admin key.")
@click.option(
    "--admin-key",
    type=_FILE,
    help="Use this existing OpenSSH Ed25519 private key (e.g. ~/.ssh/id_ed25519) instead of generating one.",
)
@store_option
@click.pass_context
def init(ctx: click.Context, admin_name: str, admin_key: Path | None, store: str | None) -> None:
    """Create the ledger with a genesis entry signed by its admin key (with --store: the
    team's shared ledger, named in .ledger/config.toml for the team to commit)."""
    root = _root(ctx)
    url = lib.shared_store(root, store) if store else _where(ctx).store
    path = lib.key_path(admin_name)
    if admin_key is not None:
        signer = _signer(str(admin_key))
    elif path.is_file():
        signer = _signer(admin_name)
        click.echo("using existing admin key %s" % path, err=True)
    else:
        _refuse_inside_repo(path, root)
        signer = lib.generate_key_file(path, admin_name)
        click.echo("generated admin key %s (keep it secret)" % path, err=True)
    ledger = lib.Ledger.create(root, signer, admin_name, store=url)
    genesis = ledger.reader.by_seq(0)
    click.echo("initialised ledger %s" % lib.describe_store(root, url), err=True)
    if url is not None and lib.write_store_config(root, url):
        click.echo("wrote %s: commit it so that every clone uses the shared ledger" % (root / "config.toml"), err=True)
    click.echo("genesis entry %s" % (Digest(genesis.hash) if genesis else "?"))
    click.echo("admin key %s %s" % (admin_name, fingerprint(signer.public_key_blob)))


@cli.group(cls=_Group)
def keys() -> None:
    """Manage the keyring: who may sign what."""


def _admin_option(f: F) -> F:
    return click.option("--admin", help="Admin key that signs the keyring change.")(f)


def _roles_option(f: F) -> F:
    return click.option(
        "--role", "roles", multiple=True, required=True, type=ROLE_CHOICE, help="Role(s) of the key; repeatable."
    )(f)


@keys.command("generate")
@click.argument("name")
@_roles_option
@click.option("--out", type=_FILE, help="Private key path (default: the key directory).")
@click.option("--passphrase", is_flag=True, help="Encrypt the private key with a passphrase (prompted).")
@_admin_option
@click.pass_context
def keys_generate(
    ctx: click.Context, name: str, roles: Sequence[str], out: Path | None, passphrase: bool, admin: str | None
) -> None:
    """Generate an OpenSSH Ed25519 key pair and add it to the keyring."""
    ledger = _ledger(ctx)
    admin_signer = _admin_signer(ledger, admin)
    path = out or lib.key_path(name)
    _refuse_inside_repo(path, ledger.root)
    secret = (
        click.prompt("Passphrase", hide_input=True, confirmation_prompt=True, err=True).encode() if passphrase else None
    )
    signer, appended = lib.create_key(ledger, admin_signer, name, [Role(r) for r in roles], path, secret)
    click.echo("wrote %s and %s.pub" % (path, path), err=True)
    click.echo("%s %s added at entry %d" % (name, fingerprint(signer.public_key_blob), appended.seq))


@keys.command("add")
@click.argument("name")
@click.argument("pubkey")
@_roles_option
@_admin_option
@click.pass_context
def keys_add(ctx: click.Context, name: str, pubkey: str, roles: Sequence[str], admin: str | None) -> None:
    """Add a teammate's OpenSSH public key (a key line, or a .pub file)."""
    blob = lib.read_public_key(pubkey)
    ledger = _ledger(ctx)
    appended = lib.add_key(ledger, _admin_signer(ledger, admin), name, [Role(r) for r in roles], blob)
    click.echo("%s %s added at entry %d" % (name, fingerprint(blob), appended.seq))


@keys.command("revoke")
@click.argument("name_or_id")
@click.option("--reason", default="", help="Why the key is revoked.")
@_admin_option
@click.pass_context
def keys_revoke(ctx: click.Context, name_or_id: str, reason: str, admin: str | None) -> None:
    """Revoke a key: its signatures after this entry are rejected."""
    ledger = _ledger(ctx)
    appended = lib.revoke_key(ledger, _admin_signer(ledger, admin), name_or_id, reason)
    click.echo("revoked %s at entry %d" % (name_or_id, appended.seq))


@keys.command("list")
@json_option
@click.pass_context
def keys_list(ctx: click.Context, as_json: bool) -> None:
    """List the keyring as it stands now, revoked keys included."""
    rows = lib.keyring_rows(_reader(ctx).keyring())
    _emit(
        as_json,
        rows,
        ["%-16s %-8s %-30s %s" % (r["name"], r["status"], ",".join(r["roles"]), r["key_id"]) for r in rows],
    )


@keys.command("export-allowed-signers")
@click.option("-o", "--output", type=click.File("w"), default="-", help="Output file (default stdout).")
@click.pass_context
def keys_export(ctx: click.Context, output: Any) -> None:
    """The keyring as an OpenSSH allowed_signers file (roles as namespaces)."""
    output.write(lib.allowed_signers(_reader(ctx)))


# -- contracts, records and receipts -------------------------------------------------------------


def _confidence(value: float | None) -> int | None:
    if value is None:
        return None
    if not 0.0 <= value <= 1.0:
        raise lib.InputError("--confidence must be between 0 and 1")
    return round(value * 10000)


@cli.command()
@click.argument("task")
@click.option("--tier", required=True, type=TIER_CHOICE)
@click.option("--verdict", required=True, type=click.Choice([v.value for v in Verdict]))
@key_option("Signing key; its role must be the tier")
@click.option(
    "--evidence", "evidence", multiple=True, type=click.Path(path_type=Path), help="Evidence file; repeatable."
)
@contract_option
@input_option()
@click.option("--confidence", type=float, help="Judge confidence in [0, 1] (stored as basis points).")
@click.option("--parent", "parents", multiple=True, help="Hash of an earlier record this one builds on; repeatable.")
@json_option
@click.pass_context
def record(
    ctx: click.Context,
    task: str,
    tier: str,
    verdict: str,
    key_name: str,
    evidence: Sequence[Path],
    contract_path: Path | None,
    input_spec: str,
    confidence: float | None,
    parents: Sequence[str],
    as_json: bool,
) -> None:
    """Append one tier record by hand (the tier runners call the same API)."""
    source, data = _required_contract(ctx, task, contract_path)
    rec, appended = lib.record_by_hand(
        _ledger(ctx),
        task_id=task,
        tier=Tier(tier),
        verdict=Verdict(verdict),
        signer=_signer(key_name),
        contract=data,
        contract_source=source,
        input_hash=_candidate(input_spec),
        evidence=[lib.Evidence(p.name, p) for p in evidence],
        confidence_bp=_confidence(confidence),
        parents=[_digest(p) for p in parents],
    )
    if as_json:
        _emit(
            True,
            {
                "record": str(appended.body_hash),
                "entry": str(appended.entry_hash),
                "seq": appended.seq,
                "body": lib.jsonable(rec),
            },
            (),
        )
    else:
        click.echo(str(appended.body_hash))
        click.echo("recorded %s %s for %s at entry %d" % (tier, verdict, task, appended.seq), err=True)


def _tiers(value: str) -> tuple[Tier, ...]:
    try:
        chosen = {Tier(t.strip()) for t in value.split(",") if t.strip()}
    except ValueError:
        raise lib.InputError("--require takes tiers from %s" % ",".join(t.value for t in LADDER)) from None
    return tuple(t for t in LADDER if t in chosen)


@cli.command()
@click.argument("task")
@key_option("Seal-role key")
@input_option()
@contract_option
@click.option("--require", "require", default="", help="Tiers to require beyond the contract's (comma-separated).")
@json_option
@click.pass_context
def seal(
    ctx: click.Context,
    task: str,
    key_name: str,
    input_spec: str,
    contract_path: Path | None,
    require: str,
    as_json: bool,
) -> None:
    """Bind the candidate's latest tier records into a signed receipt."""
    found = _contract(ctx, task, contract_path)
    receipt, appended = lib.seal_receipt(
        _ledger(ctx),
        task_id=task,
        signer=_signer(key_name),
        input_hash=_candidate(input_spec),
        extra_required=_tiers(require),
        config_hash=config_hash(found[1]) if found else None,
    )
    if as_json:
        _emit(
            True,
            {
                "receipt": str(appended.body_hash),
                "entry": str(appended.entry_hash),
                "seq": appended.seq,
                "body": lib.jsonable(receipt),
            },
            (),
        )
    else:
        click.echo(str(appended.body_hash))
        click.echo("sealed %s: merge_eligible=%s" % (task, str(receipt.merge_eligible).lower()), err=True)


@cli.command()
@click.argument("task")
@contract_option
@key_option("Deterministic-role key")
@click.option("--base", help="Revision the candidate is compared against (default: merge-base with main, else HEAD~1).")
@click.option("--allow-dirty", is_flag=True, help="Include uncommitted changes in the snapshot instead of refusing.")
@json_option
@click.pass_context
def check(
    ctx: click.Context,
    task: str,
    contract_path: Path | None,
    key_name: str,
    base: str | None,
    allow_dirty: bool,
    as_json: bool,
) -> None:
    """Run the deterministic tier: evaluate the contract's checks on the candidate.

    Exit 0 if the tier passed, 1 if it failed."""
    source, data = _required_contract(ctx, task, contract_path)
    show = sys.stderr.isatty() and not as_json
    run = lib.run_deterministic(
        _ledger(ctx),
        repo=_repo(),
        task_id=task,
        contract_bytes=data,
        source=source,
        signer=_signer(key_name),
        base=base,
        allow_dirty=allow_dirty,
        on_check=(lambda cid: click.echo("running %s ..." % cid, err=True)) if show else None,
    )
    lines = ["  %-20s %-6s %-22s %s" % ("SIGNAL", "RESULT", "EVIDENCE", "REASON")]
    # The table shows a prefix (`ledger blob` takes it); --json gives the whole digest.
    lines += ["  %-20s %-6s %-22s %s" % (cid, status, digest[:19], why[:120]) for cid, status, why, digest in run.rows]
    lines += ["attribution: %s" % run.snapshot.strength] + ["fail: %s" % why for why in run.outcome.reasons]
    lines += ["warning: %s" % w for w in run.outcome.warnings]
    lines += ["deterministic %s: record %s" % (run.outcome.verdict.value.upper(), run.appended.body_hash)]
    _emit(
        as_json,
        {
            "record": str(run.appended.body_hash),
            "verdict": run.outcome.verdict.value,
            "candidate": str(run.record.input_hash),
            "reasons": list(run.outcome.reasons),
            "warnings": list(run.outcome.warnings),
            "checks": [{"id": c, "result": s, "reason": why, "evidence": d} for c, s, why, d in run.rows],
            "attribution": {"strength": run.snapshot.strength, "commits": list(run.snapshot.commits)},
        },
        lines,
    )
    _done(run.outcome.verdict is Verdict.PASS)


@cli.command()
@click.argument("task")
@key_option("Judge-role key")
@contract_option
@input_option()
@click.option(
    "--samples", type=click.IntRange(1, 15), help="Ask N times and require a majority (at least the contract's number)."
)
@json_option
@click.pass_context
def judge(
    ctx: click.Context,
    task: str,
    key_name: str,
    contract_path: Path | None,
    input_spec: str,
    samples: int | None,
    as_json: bool,
) -> None:
    """Run the judge tier: ask the configured independent model about the candidate.

    Exit 0 if the judge passed the candidate, 1 otherwise (review, retry, fail or skip)."""
    _, data = _required_contract(ctx, task, contract_path)
    result = lib.run_judge(
        _ledger(ctx),
        task_id=task,
        contract_bytes=data,
        candidate=_candidate(input_spec),
        signer=_signer(key_name),
        config_toml=_root(ctx) / "config.toml",
        samples=samples,
    )
    _emit(
        as_json,
        {
            "record": str(result.appended.body_hash),
            "verdict": result.outcome.verdict.value,
            "confidence_bp": result.record.confidence_bp,
            "reason": result.outcome.reason,
            "attempts": result.attempts,
        },
        [
            "judge %s after %d attempt(s): %s"
            % (result.outcome.verdict.value.upper(), result.attempts, result.outcome.reason),
            "record %s" % result.appended.body_hash,
        ],
    )
    _done(result.outcome.verdict is Verdict.PASS)


def _decide(
    ctx: click.Context,
    task: str,
    key_name: str,
    contract_path: Path | None,
    input_spec: str,
    yes: bool,
    approve: bool,
    note: str,
) -> None:
    _, data = _required_contract(ctx, task, contract_path)
    what = "approval" if approve else "rejection"

    def confirm(summary: str) -> bool:
        click.echo(terminal_text(summary), err=True)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise lib.InputError("refusing to sign without confirmation: run on a terminal, or pass --yes")
        return click.confirm("Sign this %s?" % what, err=True)

    appended = lib.decide(
        _ledger(ctx),
        task_id=task,
        contract_bytes=data,
        candidate=_candidate(input_spec),
        signer=_signer(key_name),
        approve=approve,
        note=note,
        repo=lib.git_root(Path.cwd()),
        confirm=confirm,
        method="scripted" if yes else "interactive",
    )
    if appended is None:
        click.echo("not signed", err=True)
        _done(False)
    click.echo(str(appended.body_hash))
    click.echo("%s recorded at entry %d" % (what, appended.seq), err=True)


@cli.command()
@click.argument("task")
@key_option("Human-role key")
@click.option("--comment", default="", help="What you checked.")
@contract_option
@input_option()
@yes_option
@click.pass_context
def approve(
    ctx: click.Context, task: str, key_name: str, comment: str, contract_path: Path | None, input_spec: str, yes: bool
) -> None:
    """Sign an approval of this exact candidate under this exact contract."""
    _decide(ctx, task, key_name, contract_path, input_spec, yes, True, comment)


@cli.command()
@click.argument("task")
@key_option("Human-role key")
@click.option("--reason", required=True, help="Why the candidate is rejected.")
@contract_option
@input_option()
@yes_option
@click.pass_context
def reject(
    ctx: click.Context, task: str, key_name: str, reason: str, contract_path: Path | None, input_spec: str, yes: bool
) -> None:
    """Sign a rejection: it blocks until a later approval by the same key withdraws it."""
    _decide(ctx, task, key_name, contract_path, input_spec, yes, False, reason)


def _expiry(text: str) -> int:
    try:
        if len(text) == 10:
            day = datetime.date.fromisoformat(text)
            return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp()) + 86400
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise lib.InputError(
            "--expires takes a date (YYYY-MM-DD, valid through that day, UTC) or an ISO date-time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp())


@cli.command()
@click.argument("task")
@click.argument("check_id", metavar="CHECK")
@key_option("Admin key")
@click.option("--reason", required=True, help="Why this failing check may stop blocking.")
@click.option("--expires", required=True, help="YYYY-MM-DD (through that day, UTC) or an ISO date-time.")
@click.pass_context
def waive(ctx: click.Context, task: str, check_id: str, key_name: str, reason: str, expires: str) -> None:
    """Let a named failing check of the task's current contract stop blocking until it expires."""
    appended = lib.waive_check(_ledger(ctx), _signer(key_name), task, check_id, reason, _expiry(expires))
    click.echo(str(appended.body_hash))
    click.echo("waiver of %s for %s recorded at entry %d" % (check_id, task, appended.seq), err=True)


@cli.group(cls=_Group)
def contract() -> None:
    """Completion contracts: register revisions and read their history."""


@contract.command("set")
@click.argument("task")
@contract_option
@key_option("Deterministic or admin key; only an admin may weaken a contract")
@click.pass_context
def contract_set(ctx: click.Context, task: str, contract_path: Path | None, key_name: str) -> None:
    """Record the contract file as the task's current revision."""
    source, data = _required_contract(ctx, task, contract_path)
    _, appended = lib.register_contract(_ledger(ctx), task, data, _signer(key_name), source)
    if appended is None:
        click.echo("unchanged: %s is already the current contract of %s" % (config_hash(data), task))
    else:
        click.echo("contract %s of %s recorded at entry %d" % (config_hash(data), task, appended.seq))


@contract.command("show")
@click.argument("task")
@json_option
@click.pass_context
def contract_show(ctx: click.Context, task: str, as_json: bool) -> None:
    """The task's contract revisions, oldest first, with their signers and weakenings."""
    rows = lib.contract_history(_reader(ctx), task)
    if not rows and not as_json:
        raise lib.InputError("task %s has no registered contract" % task)
    _emit(
        as_json,
        [r.as_dict() for r in rows],
        [
            "%5d  %s  %s%s"
            % (r.seq, r.config, r.signer, ("  WEAKENS: " + "; ".join(r.weakenings)) if r.weakenings else "")
            for r in rows
        ],
    )


# -- show, blob, log -----------------------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("--signed-bytes", is_flag=True, help="Write the exact bytes the entry's signature covers to stdout.")
@click.option("--signature", is_flag=True, help="Write the entry's signature as an armored SSH signature.")
@json_option
@click.pass_context
def show(ctx: click.Context, hash_text: str, signed_bytes: bool, signature: bool, as_json: bool) -> None:
    """Show an entry, record or receipt (by record/receipt hash or entry hash)."""
    stored = _reader(ctx).find(_digest(hash_text))
    if stored is None:
        raise lib.InputError("no entry with hash %s" % hash_text)
    if signed_bytes:
        sys.stdout.buffer.write(entry_signed_bytes(decode_entry(stored.entry)))
        sys.stdout.buffer.flush()
    elif signature:
        click.echo(armor(decode_entry(stored.entry).signature), nl=False)
    else:
        click.echo(json.dumps(lib.entry_document(stored), indent=2, sort_keys=True))


@cli.command()
@click.argument("digest_text", metavar="DIGEST")
@click.option("--full", is_flag=True, help="Write the whole blob (binary-safe) instead of a truncated view.")
@click.option("--lines", default=200, show_default=True, help="Lines shown when truncating.")
@click.pass_context
def blob(ctx: click.Context, digest_text: str, full: bool, lines: int) -> None:
    """Show stored evidence by its digest: truncated for reading, whole with --full."""
    ledger = _reader(ctx)
    handle = ledger.reader.open_blob(lib.resolve_blob(ledger, digest_text))
    if handle is None:
        raise lib.InputError("no evidence blob %s in the blob store" % digest_text)
    with handle:
        if full:
            while chunk := handle.read(1 << 20):
                sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
            return
        shown = 0
        for n, line in enumerate(handle):
            if n >= lines or shown >= 64 * 1024:
                size = os.fstat(handle.fileno()).st_size
                click.echo("… truncated: %d of %d bytes shown; --full for all" % (shown, size), err=True)
                break
            click.echo(line.decode("utf-8", "replace"), nl=False)
            shown += len(line)


@cli.command()
@click.option("--task", help="Only entries of this task.")
@json_option
@click.pass_context
def log(ctx: click.Context, task: str | None, as_json: bool) -> None:
    """List the chain, oldest first."""
    rows = lib.log_rows(_reader(ctx).entries(task=task))
    _emit(
        as_json,
        rows,
        ["%5d  %-11s %-20s %s  %s" % (r["seq"], r["kind"], r["task"] or "-", r["hash"], r["summary"]) for r in rows],
    )


# -- verify --------------------------------------------------------------------------------------


def _witnesses(values: Sequence[str], quorum: int) -> tuple[WitnessKey, ...]:
    keys = tuple(WitnessKey.parse(v) for v in values)
    if quorum > len(keys):
        raise lib.InputError("--witness-quorum %d needs at least that many --witness keys" % quorum)
    return keys


@cli.command("verify")
@click.argument("hash_text", metavar="[HASH]", required=False)
@click.option("--chain", is_flag=True, help="Audit the whole chain instead of one receipt.")
@click.option("--bundle", type=_FILE, help="Verify an exported evidence bundle, offline.")
@click.option("--commit", "commit_rev", help="Verify the receipts attached to this commit (git notes).")
@trust_option
@click.option("--since", "since", type=_FILE, help="A checkpoint you kept: prove the ledger only grew since.")
@click.option("--require-checkpoint", is_flag=True, help="Reject unless a signed checkpoint covers the receipt.")
@click.option(
    "--witness", "witnesses", multiple=True, help="A trusted witness: 'NAME ssh-ed25519 AAAA...'; repeatable."
)
@click.option(
    "--witness-quorum", default=0, type=click.IntRange(0, 64), help="Cosignatures required from --witness keys."
)
@auditor_option
@click.option("--skip-evidence", is_flag=True, help="With --chain: do not read evidence blobs (the output says so).")
@click.option(
    "--tsa-cert",
    type=_FILE,
    help="PEM certificate(s) of the time-stamping authority you trust: the checkpoint's RFC 3161 time-stamp must verify.",
)
@click.option(
    "--resume",
    "resume_path",
    type=_FILE,
    help="With --chain: the state a clean audit left; walk only the entries after it, then update it.",
)
@click.option(
    "--save-state",
    type=_FILE,
    help="With --chain: after a clean audit, write its state at the newest checkpoint here (for --resume).",
)
@click.option(
    "--method",
    type=click.Choice(["auto", "proof", "walk"]),
    default="auto",
    show_default=True,
    help="A receipt on a ledger: prove its entries into the newest checkpoint (proof), replay the chain (walk),"
    " or prove where a checkpoint covers it and walk otherwise (auto).",
)
@json_option
@click.pass_context
def verify_cmd(
    ctx: click.Context,
    hash_text: str | None,
    chain: bool,
    bundle: Path | None,
    commit_rev: str | None,
    trust: _TrustArgs,
    since: Path | None,
    require_checkpoint: bool,
    witnesses: Sequence[str],
    witness_quorum: int,
    auditors: _AuditorArgs,
    skip_evidence: bool,
    tsa_cert: Path | None,
    resume_path: Path | None,
    save_state: Path | None,
    method: str,
    as_json: bool,
) -> None:
    """Recompute every hash and signature and re-derive merge_eligible.

    Exit 0 verified, 1 rejected, 2 cannot run."""
    from verify import AuditState, BundleSource, LedgerSource, tsa_roots, verify_chain, verify_receipt

    if bundle is not None and chain:
        raise lib.InputError("--chain audits a ledger, not a bundle")
    if (resume_path or save_state) and not chain:
        raise lib.InputError("--resume and --save-state go with --chain")
    resume = AuditState.from_json(_read_text(resume_path, "audit state")) if resume_path else None
    save_state = save_state or resume_path
    if bundle is None and commit_rev is None and chain == (hash_text is not None):
        raise lib.InputError("give either a receipt HASH or --chain")
    policy = _policy(
        trust,
        auditors,
        since=_read_text(since, "checkpoint") if since else None,
        require_checkpoint=require_checkpoint or bundle is not None,
        witnesses=_witnesses(witnesses, witness_quorum),
        quorum=witness_quorum,
        tsa_roots=tsa_roots(_read_bytes(tsa_cert, "TSA certificate")) if tsa_cert else (),
    )
    root = _trust(ctx, trust, judges_candidate=commit_rev is not None)
    if commit_rev is not None:
        if bundle is not None or chain:
            raise lib.InputError("--commit verifies what git holds for a commit: not with --bundle or --chain")
        checks = lib.verify_commit(_repo(), commit_rev, root, policy, open_ledger=_ledger_opener(ctx))
        _emit(as_json, [c.as_dict() for c in checks], lib.commit_lines(checks), root)
        _done(all(c.ok for c in checks))
    source: BundleSource | LedgerSource = BundleSource(bundle) if bundle is not None else _source(ctx)
    try:
        if chain and isinstance(source, LedgerSource):
            todo = source.count() - (resume.size if resume else 0)
            if sys.stderr.isatty() and not as_json:
                with click.progressbar(length=max(todo, 0), label="verifying chain", file=sys.stderr) as bar:
                    cres = verify_chain(
                        source,
                        root,
                        progress=bar.update,
                        transparency=policy,
                        evidence=not skip_evidence,
                        resume=resume,
                    )
            else:
                cres = verify_chain(source, root, transparency=policy, evidence=not skip_evidence, resume=resume)
            if save_state is not None and cres.state is not None:
                lib.write_text_atomic(save_state, cres.state.to_json())
            _emit(as_json, cres.as_dict(), lib.chain_lines(cres, save_state), root)
            _done(cres.ok)
        if hash_text is None and isinstance(source, BundleSource):
            hash_text = source.receipt_hash()
        res = verify_receipt(source, hash_text or "", root, policy, method)
    finally:
        source.close()
    _emit(as_json, res.as_dict(), lib.verify_lines(res), root)
    _done(res.ok)


@cli.command()
@click.option("--from", "from_url", help="The shared ledger's URL (default: the configured store).")
@click.option(
    "--to", "to_dir", type=click.Path(path_type=Path, file_okay=False), help="Mirror directory (default: --dir)."
)
@json_option
@click.pass_context
def pull(ctx: click.Context, from_url: str | None, to_dir: Path | None, as_json: bool) -> None:
    """Copy a shared ledger into a local mirror, proving the shared log only grew.

    Exit 0 pulled, 1 refused (a rewritten history: nothing written), 2 cannot run."""
    where = _where(ctx)
    url = lib.shared_store(where.root, from_url) if from_url else where.store
    if url is None:
        raise lib.InputError("pull needs --from postgresql://HOST/DB (or a configured store)")
    to = to_dir or where.root
    if sys.stderr.isatty() and not as_json:
        with click.progressbar(length=0, label="pulling entries", file=sys.stderr) as bar:
            res = lib.pull(url, to, progress=bar.update)
    else:
        res = lib.pull(url, to)
    _emit(as_json, res.as_dict(), lib.pull_lines(res))
    _done(res.ok)


# -- exports and transparency --------------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("-o", "--output", type=_FILE, required=True, help="Where to write it.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["bundle", "intoto", "vsa", "test-result"]),
    default="bundle",
    show_default=True,
    help="A zip that verifies offline; an in-toto Statement of our predicate; a SLSA verification summary;"
    " or in-toto's test-result predicate of the deterministic record (the last three in a DSSE envelope).",
)
@key_option("Seal key that signs the DSSE envelope (intoto, vsa and test-result)", required=False)
@trust_option
@click.option(
    "--redact",
    multiple=True,
    help="bundle: leave out an evidence item (check:tests:stdout, diff) or a check's raw output (tests),"
    " kept by digest; never what a verdict is derived from. Repeatable.",
)
@click.option("--resource-uri", help="vsa: the resourceUri policy tools match (default: a urn of the candidate).")
@click.pass_context
def export(
    ctx: click.Context,
    hash_text: str,
    output: Path,
    fmt: str,
    key_name: str | None,
    trust: _TrustArgs,
    redact: Sequence[str],
    resource_uri: str | None,
) -> None:
    """Export a receipt: as an evidence bundle, as a signed in-toto attestation, or as a
    signed SLSA verification summary of its verification against the trust root."""
    if redact and fmt != "bundle":
        raise lib.InputError("--redact applies to a bundle")
    if fmt == "bundle":
        manifest = lib.export_bundle(_reader(ctx), _digest(hash_text), output, redact)
        click.echo(
            "wrote %s: %s, %d entries, final status %s%s"
            % (
                output,
                manifest["task"],
                len(manifest["entries"]),
                manifest["final_status"],
                "; redacted: %s" % ", ".join(r["check"] for r in manifest["redacted"]) if manifest["redacted"] else "",
            ),
            err=True,
        )
        return
    if key_name is None:
        raise lib.InputError("--format %s needs --key: the seal key that signs the envelope" % fmt)
    if fmt == "test-result":
        root = _trust(ctx, trust)
        envelope = lib.export_test_result(_ledger(ctx), _digest(hash_text), _signer(key_name), output, root)
        _said(root)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        click.echo("wrote %s (in-toto test result: %s)" % (output, statement["predicate"]["result"]), err=True)
        return
    if fmt == "vsa":
        root = _trust(ctx, trust)
        envelope = lib.export_vsa(_ledger(ctx), _digest(hash_text), _signer(key_name), output, root, resource_uri)
        _said(root)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        click.echo(
            "wrote %s (SLSA verification summary: %s)" % (output, statement["predicate"]["verificationResult"]),
            err=True,
        )
        return
    lib.export_intoto(_ledger(ctx), _digest(hash_text), _signer(key_name), output)
    click.echo("wrote %s (DSSE envelope, payloadType application/vnd.in-toto+json)" % output, err=True)


@cli.command()
@key_option("Seal or admin key that signs the tree head", required=False)
@click.option("--show", is_flag=True, help="Print the latest checkpoint instead of making one.")
@click.option(
    "--tsa",
    "tsa_url",
    help="Also obtain an RFC 3161 time-stamp over it from this authority (the key must be a seal key).",
)
@click.pass_context
def checkpoint(ctx: click.Context, key_name: str | None, show: bool, tsa_url: str | None) -> None:
    """Sign the current tree head as a C2SP checkpoint (a signed note)."""
    ledger = _reader(ctx) if show else _ledger(ctx)
    if show:
        stored = ledger.checkpoints()
        if not stored:
            raise lib.InputError("this ledger has no checkpoint yet: run `ledger checkpoint --key NAME`")
        click.echo(stored[-1][1].encode(), nl=False)
        return
    if key_name is None:
        raise lib.InputError("give --key NAME (a seal or admin key), or --show")
    signer = _signer(key_name)
    note = ledger.checkpoint(signer)
    if tsa_url is not None:
        size = parse_checkpoint(note.text).size
        stamped = lib.timestamp_checkpoint(ledger, signer, tsa_url, note, size)
        click.echo("time-stamp over the checkpoint at size %d recorded at entry %d" % (size, stamped.seq), err=True)
    click.echo(note.encode(), nl=False)


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.pass_context
def prove(ctx: click.Context, hash_text: str) -> None:
    """An inclusion proof for an entry against the latest checkpoint, as a C2SP tlog-proof."""
    click.echo(lib.prove_inclusion(_reader(ctx), _digest(hash_text)), nl=False)


@cli.command()
@click.argument("old_size", type=click.IntRange(1))
@click.pass_context
def consistency(ctx: click.Context, old_size: int) -> None:
    """A consistency proof from an earlier tree size to the latest checkpoint."""
    click.echo(lib.prove_consistency(_reader(ctx), old_size), nl=False)


@cli.command("repair-head")
@click.option("--apply", is_flag=True, help="Move the junk rows (without it: only say what would move, exit 1).")
@trust_option
@json_option
@click.pass_context
def repair_head(ctx: click.Context, apply: bool, trust: _TrustArgs, as_json: bool) -> None:
    """Quarantine a shared store's junk head (the database owner's job): the rows from the
    first entry the audit rejects to the head, and the checkpoints over them, move to
    quarantined_entries and quarantined_checkpoints; what remains verifies. --apply also
    (re)installs the store's guards (a store older than one of them gets it)."""
    url = _where(ctx).store
    if url is None:
        raise lib.InputError("repair-head repairs a shared store: name it with --store URL (as its owner)")
    done = lib.repair_head(url, _trust(ctx, trust), apply=apply)
    if done.first_bad is None:
        said = "NOTHING TO REPAIR: the chain verifies" + ("; the store's guards are installed" if done.applied else "")
        _emit(as_json, {"repaired": False, "guards_installed": done.applied, "rows": []}, [said])
        return
    doc = {
        "repaired": done.applied,
        "first_bad": done.first_bad,
        "rows": [{"seq": seq, "hash": h} for seq, h in done.rows],
        "checkpoints": list(done.checkpoints),
        "reasons": list(done.reasons),
    }
    lines = [
        "%s %d row(s) from entry %d%s:"
        % (
            "QUARANTINED" if done.applied else "WOULD QUARANTINE",
            len(done.rows),
            done.first_bad,
            "" if done.applied else " (run again with --apply)",
        )
    ]
    lines += ["  entry %d  %s" % (seq, h) for seq, h in done.rows]
    lines += ["  checkpoint at size %d" % size for size in done.checkpoints]
    lines += ["  because: %s" % why for why in done.reasons]
    _emit(as_json, doc, lines)
    if not done.applied:
        sys.exit(1)


@cli.group(cls=_Group)
def witness() -> None:
    """Witness a ledger: cosign checkpoints only after checking they extend what you saw."""


@witness.command("cosign")
@click.argument("checkpoint_file", type=_FILE)
@key_option("The witness's own Ed25519 key")
@click.option("--name", "witness_name", required=True, help="The witness's key name, e.g. witness.example/w1.")
@click.option("--log-key", required=True, help="The log's checkpoint key: 'ssh-ed25519 AAAA...' or a .pub file.")
@click.option(
    "--state", type=_FILE, help="The witness's state file (default ~/.config/receipt-ledger/witness-state.json)."
)
@click.option("-o", "--output", type=_FILE, help="Write the cosigned checkpoint here (default: stdout).")
@click.option(
    "--audit",
    "audit_state",
    type=_FILE,
    help="Be an auditing witness: cosign only after a chain audit (resumed from this state file, kept there) passes.",
)
@trust_option
@click.pass_context
def witness_cosign(
    ctx: click.Context,
    checkpoint_file: Path,
    key_name: str,
    witness_name: str,
    log_key: str,
    state: Path | None,
    output: Path | None,
    audit_state: Path | None,
    trust: _TrustArgs,
) -> None:
    """Add a tlog-cosignature to a checkpoint after proving it consistent with the last one seen."""
    from receipts import parse_public_key_blob

    with _source(ctx) as source:
        text = lib.cosign(
            source=source,
            checkpoint=_read_text(checkpoint_file, "checkpoint"),
            signer=_signer(key_name),
            name=witness_name,
            log_key=parse_public_key_blob(lib.read_public_key(log_key)),
            state_path=state,
            audit=(_trust(ctx, trust), audit_state) if audit_state is not None else None,
        )
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo("cosigned checkpoint written to %s" % output, err=True)


@witness.command("add")
@click.argument("checkpoint_file", type=_FILE)
@click.option(
    "--witness",
    "witnesses",
    multiple=True,
    required=True,
    help="The witness whose cosignature to store: 'NAME ssh-ed25519 AAAA...' (or 'NAME PATH.pub'); repeatable.",
)
@click.pass_context
def witness_add(ctx: click.Context, checkpoint_file: Path, witnesses: Sequence[str]) -> None:
    """Store witnesses' cosignatures on the ledger's own checkpoint, each after it verifies."""
    added = lib.add_cosignatures(_ledger(ctx), _read_text(checkpoint_file, "checkpoint"), _witnesses(witnesses, 0))
    click.echo("stored cosignatures of %s" % ", ".join(added) if added else "already stored: nothing to add")


# -- receipts on pull requests -------------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("--commit", "rev", help="The candidate commit (default: the one the deterministic tier snapshotted).")
@key_option("Seal key that signs a checkpoint if none covers the receipt yet", required=False)
@click.pass_context
def attach(ctx: click.Context, hash_text: str, rev: str | None, key_name: str | None) -> None:
    """Store a receipt in git: its evidence bundle under refs/receipts/, and a note on its
    candidate commit and on that commit's tree (refs/notes/receipts)."""
    signer = _signer(key_name) if key_name else None
    click.echo(lib.attach(_ledger(ctx), _repo(), _digest(hash_text), rev, checkpoint_signer=signer))
    click.echo("attached; share it with: ledger receipts push", err=True)


@cli.group(cls=_Group)
def receipts() -> None:
    """Share receipts through a git remote: notes merged without loss, pushes never forced."""


def _remote_option(f: F) -> F:
    return click.option("--remote", default="origin", show_default=True, help="The git remote.")(f)


@receipts.command("fetch")
@_remote_option
@json_option
def receipts_fetch(remote: str, as_json: bool) -> None:
    """Fetch the remote's receipt notes and bundles; merge its notes into ours (cat_sort_uniq)."""
    res = lib.fetch_receipts(_repo(), remote)
    _emit(
        as_json, res.as_dict(), ["fetched receipts from %s%s" % (remote, "; notes merged" if res.notes_merged else "")]
    )


@receipts.command("push")
@_remote_option
@json_option
def receipts_push(remote: str, as_json: bool) -> None:
    """Push receipt bundles and notes, merging the remote's first; retried on a race, never forced."""
    res = lib.push_receipts(_repo(), remote)
    _emit(as_json, res.as_dict(), ["pushed receipts to %s (attempt %d)" % (remote, res.attempts)])


@cli.group(cls=_Group)
def hook() -> None:
    """The completion gate inside an agent's loop (Claude Code, Codex): `ledger hook EVENT`
    reads the agent's JSON payload on stdin; `install` writes the agent's configuration."""


def _hook_event(event: str) -> None:
    @hook.command(event, help="The %s hook: the agent's JSON payload on stdin." % HOOK_EVENTS[event])
    @click.pass_context
    def run(ctx: click.Context) -> None:
        from ._hooks import main as hook_main

        # `ledger --dir D hook EVENT` (the plain form skips click: see ledger._entry).
        chosen = ctx.find_root().params.get("ledger_dir")
        sys.exit(hook_main(event, {**os.environ, "LEDGER_DIR": str(chosen)} if chosen else None))


for _event in HOOK_EVENTS:
    _hook_event(_event)


def _agent_options(f: F) -> F:
    f = click.option(
        "--scope",
        type=click.Choice(["project", "user"]),
        default="project",
        show_default=True,
        help="project: the repository's settings (commit them for the team); user: your home directory's.",
    )(f)
    return click.option("--agent", required=True, type=click.Choice(["claude-code", "codex"]))(f)


@hook.command("install")
@_agent_options
@json_option
@click.pass_context
def hook_install(ctx: click.Context, agent: str, scope: str, as_json: bool) -> None:
    """Write the agent's hook configuration (merged, idempotent), and warn about signing
    keys the agent could read."""
    path = lib.settings_path(agent, scope, lib.git_root(Path.cwd()))
    warnings = lib.key_custody_warnings(_root(ctx))
    res = lib.install_hooks(path, agent, warnings)
    for line in res.warnings:
        click.echo("warning: %s" % line, err=True)
    _emit(
        as_json,
        res.as_dict(),
        ["%s: %s" % (path, ("added " + ", ".join(res.added)) if res.added else "already installed, nothing changed")],
    )


@hook.command("uninstall")
@_agent_options
@json_option
def hook_uninstall(agent: str, scope: str, as_json: bool) -> None:
    """Remove the handlers `hook install` added, and nothing else."""
    path = lib.settings_path(agent, scope, lib.git_root(Path.cwd()))
    res = lib.uninstall_hooks(path)
    _emit(
        as_json,
        res.as_dict(),
        ["%s: %s" % (path, ("removed " + ", ".join(res.removed)) if res.removed else "none of ours, nothing changed")],
    )


@cli.group(cls=_Group)
def task() -> None:
    """Which task this working copy is on (the agent hooks read it)."""


@task.command("start")
@click.argument("task_id", metavar="TASK")
@click.pass_context
def task_start(ctx: click.Context, task_id: str) -> None:
    """Select TASK for this working copy (.ledger/current-task, not committed)."""
    lib.start_task(_root(ctx), task_id)
    click.echo("current task: %s" % task_id)


@task.command("stop")
@click.pass_context
def task_stop(ctx: click.Context) -> None:
    """Clear the selected task."""
    lib.start_task(_root(ctx), None)
    click.echo("no current task")


@cli.group(cls=_Group)
def ci() -> None:
    """Entry points for CI systems (the GitHub Action calls `ledger ci github`)."""


@ci.command("github")
def ci_github() -> None:
    """Run the receipt-ledger GitHub Action in the checked-out workspace, from the runner's
    environment (GITHUB_*) and the action's inputs (LEDGER_*). Exit 0 when the gate passes
    (or, without the gate, every tier passed), 1 otherwise, 2 on bad input."""
    report = lib.run_action(os.environ, _repo())
    for line in report.notes:
        click.echo("note: %s" % line, err=True)
    if report.gated is not None:
        click.echo("\n".join(lib.gate_lines(report.gated)))
    _done(report.ok)


def _ledger_opener(ctx: click.Context) -> Callable[[], Any]:
    """The ledger a receipt without a bundle in git is read from, opened only then: the one
    the caller names (--store, --dir or their variables), never one found in the checkout or
    named by its config.toml, which are the candidate's (a committed private copy would be
    walked, and so proven complete)."""
    return lambda: _where(ctx).named_opener("a receipt without a bundle in git is read only from")()


@cli.command()
@click.argument("rev", default="HEAD")
@trust_option
@click.option("--require-checkpoint", is_flag=True, help="Also require a signed checkpoint covering the receipt.")
@click.option(
    "--mode",
    type=click.Choice(["enforce", "advisory"]),
    default="enforce",
    show_default=True,
    help="advisory records and prints the would-be decision but never blocks.",
)
@key_option("Seal key that records the decision in the ledger (required for advisory)", required=False)
@click.option(
    "--task", help="Task the decision is recorded for (default: the receipt's, or the only task with a receipt)."
)
@auditor_option
@click.option(
    "--audit-state",
    type=_FILE,
    help="In CI that can reach the store: audit its chain (resumed from this file, kept there) to prove the"
    " receipt's task complete.",
)
@json_option
@click.pass_context
def gate(
    ctx: click.Context,
    rev: str,
    trust: _TrustArgs,
    require_checkpoint: bool,
    mode: str,
    key_name: str | None,
    task: str | None,
    auditors: _AuditorArgs,
    audit_state: Path | None,
    as_json: bool,
) -> None:
    """Exit 0 only if REV, or another commit with REV's exact tree, has a verified,
    merge-eligible receipt whose task is proven complete up to it: by a quorum of auditing
    witnesses, or by the gate's own audit of the store (--audit-state). Trust comes from
    the target branch, never from REV.

    The command a CI job runs before merge; a commit without one fails closed."""
    root = _trust(ctx, trust, judges_candidate=True)
    result = lib.gate(
        _repo(),
        rev,
        root,
        transparency=_policy(trust, auditors, require_checkpoint=require_checkpoint),
        mode=mode,
        open_ledger=_where(ctx).named_opener("--audit-state audits")
        if audit_state is not None
        else _ledger_opener(ctx),
        audit_state=audit_state,
        recorder=(_ledger(ctx), _signer(key_name)) if key_name else None,
        task=task,
    )
    _emit(as_json, result.as_dict(), lib.gate_lines(result), root)
    _done(not result.blocks)


@cli.command("pr-comment")
@click.argument("hash_text", metavar="HASH")
@trust_option
@click.pass_context
def pr_comment_cmd(ctx: click.Context, hash_text: str, trust: _TrustArgs) -> None:
    """Markdown for a pull-request comment: the ladder, the verdict, how to verify."""
    from verify import verify_receipt

    source = _source(ctx)
    try:
        res = verify_receipt(source, hash_text, root := _trust(ctx, trust))
    finally:
        source.close()
    _said(root)
    click.echo(lib.pr_comment(res, hash_text), nl=False)


# -- the completion gate: claims, traces, effects, status ----------------------------------------


@cli.command()
@click.argument("task")
@key_option("The agent's key (role agent)")
@click.option("--summary", type=_FILE, help="The agent's own summary (stored, never believed).")
@input_option("The candidate claimed as done.")
@click.pass_context
def claim(ctx: click.Context, task: str, key_name: str, summary: Path | None, input_spec: str) -> None:
    """Record the agent's claim that the task is done (answer_proposed)."""
    appended = lib.record_event(
        _ledger(ctx), _signer(key_name), task, EventType.ANSWER_PROPOSED, _candidate(input_spec), attachment=summary
    )
    click.echo("claim recorded at entry %d: it proves nothing until the ladder runs" % appended.seq)


@cli.command()
@click.argument("task")
@key_option("The agent's key (role agent)")
@click.option("--reason", default="", help="Why the model stopped (end of turn, budget, error).")
@click.pass_context
def stopped(ctx: click.Context, task: str, key_name: str, reason: str) -> None:
    """Record that the model stopped (which is not a claim of success)."""
    appended = lib.record_event(
        _ledger(ctx), _signer(key_name), task, EventType.MODEL_STOPPED, None, {"reason": reason}
    )
    click.echo("model_stopped recorded at entry %d" % appended.seq)


@cli.command()
@click.argument("task")
@click.argument("trace_file", type=_FILE)
@key_option("The deterministic runner's key: it decides each call")
@contract_option
@input_option()
@json_option
@click.pass_context
def trace(
    ctx: click.Context,
    task: str,
    trace_file: Path,
    key_name: str,
    contract_path: Path | None,
    input_spec: str,
    as_json: bool,
) -> None:
    """Ingest an agent's tool-call log (JSON Lines) and decide each call against the contract's tool policy.

    Exit 0 if every call was approved, 1 otherwise."""
    from receipts import ContractRevision

    _, data = _required_contract(ctx, task, contract_path)
    _, decisions = lib.ingest_trace(
        _ledger(ctx),
        _signer(key_name),
        task,
        ContractRevision(task, data, None).parse(),
        trace_file,
        _candidate(input_spec),
        lib.git_root(Path.cwd()),
    )
    _emit(
        as_json,
        [d.as_dict() for d in decisions],
        ["%4d  %-16s %-15s %s" % (d.step, d.tool or "-", d.decision, d.reason) for d in decisions],
    )
    _done(all(d.decision == "approved" for d in decisions))


@cli.group(cls=_Group)
def effect() -> None:
    """Side effects (merge, deploy, message): begun once per idempotency key, then resolved."""


@effect.command("begin")
@click.argument("task")
@click.option("--kind", required=True, help="merge, deploy, message, ...")
@click.option(
    "--idempotency-key", "key", required=True, help="A key that names this effect; a second begin is refused."
)
@click.option("--target", default="", help="What the effect acts on.")
@key_option("Seal key")
@input_option("The candidate the effect is for.")
@trust_option
@click.pass_context
def effect_begin(
    ctx: click.Context,
    task: str,
    kind: str,
    key: str,
    target: str,
    key_name: str,
    input_spec: str,
    trust: _TrustArgs,
) -> None:
    """Record an effect about to happen; refused without a receipt for this exact candidate
    that verifies against the trust root."""
    root = _trust(ctx, trust, judges_candidate=True)
    appended = lib.begin_effect(
        _ledger(ctx), _signer(key_name), task, kind, key, target, _candidate(input_spec), trust=root
    )
    click.echo("effect %s begun at entry %d" % (key, appended.seq))


def _end(outcome: str) -> click.Command:
    @click.argument("idempotency_key")
    @key_option("Seal key")
    @click.option("--note", default="", help="How the outcome was read back.")
    @click.pass_context
    def command(ctx: click.Context, idempotency_key: str, key_name: str, note: str) -> None:
        appended = lib.end_effect(_ledger(ctx), _signer(key_name), idempotency_key, outcome, note)
        click.echo("effect %s %s at entry %d" % (idempotency_key, outcome, appended.seq))

    command.__doc__ = "Record that the effect's outcome is %s." % outcome
    return click.command()(command)


effect.add_command(_end("confirmed"), "confirm")
effect.add_command(_end("failed"), "fail")
effect.add_command(_end("unknown"), "unknown")


@cli.command()
@click.argument("task", required=False)
@click.option("--window", default=50, show_default=True, help="Claims the verification nudge looks back over.")
@click.option(
    "--threshold", default=0.3, show_default=True, help="Alert when more than this share of claims went unverified."
)
@json_option
@click.pass_context
def status(ctx: click.Context, task: str | None, window: int, threshold: float, as_json: bool) -> None:
    """Each task's state, derived from the chain alone, and the verification nudge."""
    report = lib.status_report(_reader(ctx), task, window, threshold)
    _emit(as_json, report.as_dict(), lib.status_lines(report))


def _shown(value: object, unit: str = "") -> str:
    return "not recorded" if value is None else "%s%s" % (value, unit)


@cli.command()
@click.option("--task-prefix", default="", help="Only families whose tasks start with this.")
@click.option("--k", "ks", default="1,5", show_default=True, help="The k of pass@k and pass^k, comma-separated.")
@json_option
@click.pass_context
def stats(ctx: click.Context, task_prefix: str, ks: str, as_json: bool) -> None:
    """pass@k and pass^k over repeated trials of a task family (tasks named FAMILY@N)."""
    try:
        k_values = [int(k) for k in ks.split(",") if k.strip()]
    except ValueError:
        raise lib.InputError("--k takes whole numbers, comma-separated") from None
    rows = lib.stats(_reader(ctx), task_prefix, k_values)
    lines = []
    for row in rows:
        costs = "  mean time per run: deterministic %s, judge %s; judge tokens per run: %s" % (
            _shown(row.time_ms.get("deterministic"), " ms"),
            _shown(row.time_ms.get("judge"), " ms"),
            _shown(row.judge_tokens_per_run),
        )
        if row.note is not None:
            lines.append("%-24s n=%d successes=%d: %s\n%s" % (row.family, row.trials, row.successes, row.note, costs))
            continue
        figures = "  ".join(
            "pass@%d=%.3f  pass^%d=%.3f" % (*at, *every) for at, every in zip(row.pass_at, row.pass_all, strict=True)
        )
        low, high = row.success_rate_95ci or (0.0, 1.0)
        lines.append(
            "%-24s n=%d successes=%d rate=%.3f (95%% CI %.3f-%.3f)  %s\n%s"
            % (row.family, row.trials, row.successes, row.success_rate or 0.0, low, high, figures, costs)
        )
    _emit(as_json, [row.as_dict() for row in rows], lines)


@cli.group()
def retention() -> None:
    """The retention policy: how long evidence no verdict is derived from is kept."""


@retention.command("set")
@click.option("--max-age-days", type=click.IntRange(1, 36500), required=True, help="Evidence older than this may go.")
@click.option("--hold", "holds", multiple=True, help="A task under a legal hold: nothing of it goes. Repeatable.")
@key_option("Admin key that signs the policy")
@click.pass_context
def retention_set(ctx: click.Context, max_age_days: int, holds: Sequence[str], key_name: str) -> None:
    """Sign a retention policy into the chain (the newest one is in force)."""
    appended = lib.set_retention(_ledger(ctx), _signer(key_name), max_age_days * 86400, holds)
    click.echo(str(appended.body_hash))
    click.echo("retention policy recorded at entry %d" % appended.seq, err=True)


@cli.command("prune")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@json_option
@click.pass_context
def prune_cmd(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Delete the evidence blobs the retention policy lets go; entries, tree and
    checkpoints stay, and verify reports each removed item as removed under the policy."""
    report = lib.prune(_ledger(ctx), dry_run=dry_run)
    lines = ["%s %s %s (%d bytes)" % ("would remove" if dry_run else "removed", t, d, n) for t, d, n in report.removed]
    lines.append(
        "%s %d blob(s), %d bytes, under the retention policy of entry %d; %d kept under a legal hold"
        % (
            "would remove" if dry_run else "removed",
            len(report.removed),
            report.bytes,
            report.policy_entry,
            report.held,
        )
    )
    _emit(as_json, report.as_dict(), lines)


def _when(text: str, option: str, end: bool) -> int:
    """A UTC date (the whole day: its start, or with ``end`` the next day's start) or an
    ISO 8601 time, as Unix seconds."""
    try:
        if len(text) == 10:
            day = datetime.date.fromisoformat(text)
            moment = datetime.datetime.combine(day, datetime.time(), datetime.UTC)
            return int(moment.timestamp()) + (86400 if end else 0)
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise lib.InputError("%s takes a date (2026-01-31) or an ISO 8601 time" % option) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp())


@cli.command()
@click.argument("hash_text", metavar="[HASH]", required=False)
@click.option("--from", "from_text", help="First day (UTC date, or an ISO 8601 time).")
@click.option("--to", "to_text", help="Last day, included (UTC date, or an ISO 8601 time, excluded).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header line, for a spreadsheet.")
@click.option("--html", "as_html", is_flag=True, help="With HASH: the auditor's page for that receipt.")
@click.option("-o", "--output", type=_FILE, help="With --html: write the page here instead of stdout.")
@trust_option
@json_option
@click.pass_context
def report(
    ctx: click.Context,
    hash_text: str | None,
    from_text: str | None,
    to_text: str | None,
    as_csv: bool,
    as_html: bool,
    output: Path | None,
    trust: _TrustArgs,
    as_json: bool,
) -> None:
    """The population of changes in a period (--from, --to): one row per sealed receipt,
    each verified; or, with HASH --html, the auditor's page for one receipt.

    An auditor samples from the population: commit, tree, task, contract, author model,
    each tier, approvers and how they approved, waivers, eligibility and the gate's decision."""
    if hash_text is not None:
        if not as_html or from_text or to_text or as_csv or as_json:
            raise lib.InputError("a receipt's report is `ledger report HASH --html`")
        page = lib.receipt_page(_reader(ctx), _digest(hash_text), _trust(ctx, trust))
        if output is None:
            click.echo(page, nl=False)
        else:
            lib.write_text_atomic(output, page)
        return
    if from_text is None or to_text is None or as_html:
        raise lib.InputError("the population of changes needs --from and --to (and HASH --html is one receipt's page)")
    if as_csv and as_json:
        raise lib.InputError("choose --csv or --json")
    start, end = _when(from_text, "--from", False), _when(to_text, "--to", True)
    if end <= start:
        raise lib.InputError("--to is before --from")
    root = _trust(ctx, trust)
    rows = lib.population(_reader(ctx), root, start, end)
    if as_csv:
        _said(root)
        click.echo(lib.population_csv(rows), nl=False)
        return
    lines = [
        "%s  %s  %-16s %-12s eligible=%s verified=%s  %s"
        % (
            datetime.datetime.fromtimestamp(row.sealed_at, datetime.UTC).strftime("%Y-%m-%d %H:%M"),
            row.receipt[:19] + "…",
            row.task,
            (row.commit or "-")[:12],
            "yes" if row.merge_eligible else "no",
            "yes" if row.verified else "NO",
            ", ".join("%s (%s)" % (a["name"], a["method"]) for a in row.approvers) or "no approvers",
        )
        for row in rows
    ]
    lines.append("%d sealed receipt(s) from %s to %s" % (len(rows), from_text, to_text))
    _emit(as_json, [row.as_dict() for row in rows], lines, root)


@cli.command()
@click.option("--keep", type=click.Path(path_type=Path, file_okay=False), help="Build the demo here and keep it.")
def demo(keep: Path | None) -> None:
    """Run the whole job end to end in a throwaway workspace."""
    sys.exit(lib.run_demo(keep))


def main() -> None:
    # Click's own handling of a bad option or argument prints usage over three lines; a
    # usage error is bad input like any other: one line on stderr, exit 2.
    try:
        code = cli.main(prog_name="ledger", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.format_message())  # no arguments at all: the help, as click gives it
        sys.exit(2)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ledger"
        _fail("%s (see `%s --help`)" % (exc.format_message(), where))
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
