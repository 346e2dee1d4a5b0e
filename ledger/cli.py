"""The `ledger` command: a thin click layer over the library.

Data goes to stdout, status and errors to stderr. Exit codes: 0 done or verified,
1 verification rejected (or a failing verdict where a command says so), 2 bad input
or could not run.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from receipts import (
    LADDER,
    Digest,
    LadderReceipt,
    Role,
    TierRecord,
    Tier,
    Verdict,
    armor,
    config_hash,
    decode_body,
    decode_entry,
    entry_signed_bytes,
    fingerprint,
    namespace_for,
    parse_public_key_blob,
    parse_public_key_line,
    public_key_line,
    ReceiptsError,
)
from verify import CannotVerify, LedgerSource, Transparency, Trust, TrustRoot, UnsafeTrustOnFirstUse, WitnessKey, verify_chain, verify_receipt

from . import _render
from ._errors import InputError, LedgerError
from ._keys import generate_key_file, key_path, load_signer
from ._ops import (
    VERSION,
    Evidence,
    add_key,
    find_ledger_dir,
    record_tier,
    register_contract,
    resolve_candidate,
    revoke_key,
    seal_receipt,
)
from ._git import git_root
from ._store import Ledger

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> None:
    click.echo("ledger: error: %s" % message, err=True)
    sys.exit(2)


class _Group(click.Group):
    """Turns every error we know into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (LedgerError, CannotVerify, ReceiptsError) as exc:
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


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")(f)


@click.group(cls=_Group)
@click.version_option(VERSION, prog_name="receipt-ledger")
@click.option("--dir", "ledger_dir", type=click.Path(path_type=Path, file_okay=False), envvar="LEDGER_DIR",
              help="Ledger directory (default: .ledger at the git root).")
@click.pass_context
def cli(ctx: click.Context, ledger_dir: Path | None) -> None:
    """Signed, replayable receipts of what was actually checked."""
    ctx.obj = find_ledger_dir(ledger_dir, Path.cwd())


def _ledger(ctx: click.Context) -> Ledger:
    return Ledger.open(ctx.find_root().obj)


def _ask_passphrase(path: str) -> bytes:
    if not sys.stdin.isatty():
        raise InputError("private key %s is encrypted: set RECEIPT_LEDGER_PASSPHRASE" % path)
    return str(click.prompt("Passphrase for %s" % path, hide_input=True, err=True)).encode()


def _signer(name: str) -> Any:
    return load_signer(name, ask=_ask_passphrase)


def _admin_signer(ledger: Ledger, admin: str | None) -> Any:
    if admin is not None:
        return _signer(admin)
    for state in ledger.keyring():
        if state.revoked_at is None and Role.ADMIN in state.spec.roles and key_path(state.spec.name).is_file():
            return _signer(state.spec.name)
    raise InputError("no local private key for any admin key of this ledger; pass --admin NAME or a key path")


def _digest_arg(text: str) -> Digest:
    try:
        return Digest.parse(text)
    except ReceiptsError as exc:
        raise InputError(str(exc)) from None


def _contract_file(ctx: click.Context, task: str, path: Path | None) -> tuple[Path, bytes] | None:
    """The contract file given, or the task's default one under the ledger directory."""
    if path is None:
        default = ctx.find_root().obj / "contracts" / (task.replace("/", "_") + ".toml")
        if not default.is_file():
            return None
        path = default
    try:
        return path, path.read_bytes()
    except OSError as exc:
        raise InputError("cannot read contract %s: %s" % (path, exc.strerror)) from None


def _config_hash(ctx: click.Context, task: str, config: Path | None) -> Digest | None:
    found = _contract_file(ctx, task, config)
    return None if found is None else config_hash(found[1])


def _trust(value: str | None) -> Trust:
    """--trust pins the admin key; without it the CLI says out loud that it trusts on first use."""
    return TrustRoot.from_argument(value) if value else UnsafeTrustOnFirstUse()


ROLE_CHOICE = click.Choice([r.value for r in Role])
TIER_CHOICE = click.Choice([t.value for t in Tier])


# -- init and keys ---------------------------------------------------------------------


@cli.command()
@click.option("--admin", "admin_name", default="admin", show_default=True, help="Name of the admin key.")
@click.option("--admin-key", type=click.Path(path_type=Path, dir_okay=False),
              help="Use this existing OpenSSH Ed25519 private key (e.g. ~/.ssh/id_ed25519) instead of generating one.")
@click.pass_context
def init(ctx: click.Context, admin_name: str, admin_key: Path | None) -> None:
    """Create the ledger with a genesis entry signed by its admin key."""
    root: Path = ctx.obj
    if admin_key is not None:
        signer = _signer(str(admin_key))
    elif key_path(admin_name).is_file():
        signer = _signer(admin_name)
        click.echo("using existing admin key %s" % key_path(admin_name), err=True)
    else:
        _refuse_inside_repo(key_path(admin_name), root)
        signer = generate_key_file(key_path(admin_name), admin_name)
        click.echo("generated admin key %s (keep it secret)" % key_path(admin_name), err=True)
    ledger = Ledger.create(root, signer, admin_name)
    genesis = ledger.reader.by_seq(0)
    assert genesis is not None
    click.echo("initialised ledger %s" % root, err=True)
    click.echo("genesis entry %s" % Digest(genesis.hash))
    click.echo("admin key %s %s" % (admin_name, decode_entry(genesis.entry).signer))


@cli.group(cls=_Group)
def keys() -> None:
    """Manage the keyring: who may sign what."""


def _refuse_inside_repo(path: Path, ledger_root: Path) -> None:
    repo = ledger_root.resolve().parent
    if path.resolve().is_relative_to(repo):
        raise InputError("refusing to write a private key inside the repository (%s); use --out outside it" % repo)


@keys.command("generate")
@click.argument("name")
@click.option("--role", "roles", multiple=True, required=True, type=ROLE_CHOICE, help="Role(s) of the key; repeatable.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Private key path (default: the key directory).")
@click.option("--passphrase", is_flag=True, help="Encrypt the private key with a passphrase (prompted).")
@click.option("--admin", help="Admin key that signs the keyring change.")
@click.pass_context
def keys_generate(ctx: click.Context, name: str, roles: Sequence[str], out: Path | None, passphrase: bool, admin: str | None) -> None:
    """Generate an OpenSSH Ed25519 key pair and add it to the keyring."""
    ledger = _ledger(ctx)
    admin_signer = _admin_signer(ledger, admin)
    path = out or key_path(name)
    _refuse_inside_repo(path, ledger.root)
    secret = click.prompt("Passphrase", hide_input=True, confirmation_prompt=True, err=True).encode() if passphrase else None
    signer = generate_key_file(path, name, secret)
    try:
        appended = add_key(ledger, admin_signer, name, [Role(r) for r in roles], signer.public_key_blob)
    except BaseException:
        # A key the keyring refused would only mislead later: leave nothing behind.
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".pub").unlink(missing_ok=True)
        raise
    click.echo("wrote %s and %s.pub" % (path, path), err=True)
    click.echo("%s %s added at entry %d" % (name, fingerprint(signer.public_key_blob), appended.seq))


@keys.command("add")
@click.argument("name")
@click.argument("pubkey")
@click.option("--role", "roles", multiple=True, required=True, type=ROLE_CHOICE, help="Role(s) of the key; repeatable.")
@click.option("--admin", help="Admin key that signs the keyring change.")
@click.pass_context
def keys_add(ctx: click.Context, name: str, pubkey: str, roles: Sequence[str], admin: str | None) -> None:
    """Add a teammate's OpenSSH public key (a key line, or a .pub file)."""
    text = pubkey
    if not pubkey.startswith("ssh-"):
        try:
            text = Path(pubkey).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("%r is neither an OpenSSH public key line nor a readable file: %s" % (pubkey, exc)) from None
    blob, _ = parse_public_key_line(text)
    ledger = _ledger(ctx)
    appended = add_key(ledger, _admin_signer(ledger, admin), name, [Role(r) for r in roles], blob)
    click.echo("%s %s added at entry %d" % (name, fingerprint(blob), appended.seq))


@keys.command("revoke")
@click.argument("name_or_id")
@click.option("--reason", default="", help="Why the key is revoked.")
@click.option("--admin", help="Admin key that signs the keyring change.")
@click.pass_context
def keys_revoke(ctx: click.Context, name_or_id: str, reason: str, admin: str | None) -> None:
    """Revoke a key: its signatures after this entry are rejected."""
    ledger = _ledger(ctx)
    appended = revoke_key(ledger, _admin_signer(ledger, admin), name_or_id, reason)
    click.echo("revoked %s at entry %d" % (name_or_id, appended.seq))


def _entry_time(ledger: Ledger, seq: int) -> int:
    stored = ledger.reader.by_seq(seq)
    assert stored is not None
    return decode_entry(stored.entry).time


@keys.command("list")
@json_option
@click.pass_context
def keys_list(ctx: click.Context, as_json: bool) -> None:
    """List the keyring as it stands now, revoked keys included."""
    ledger = _ledger(ctx)
    rows = []
    for s in ledger.keyring():
        rows.append({"name": s.spec.name, "key_id": s.key_id, "roles": [r.value for r in s.spec.roles],
                     "status": "revoked" if s.revoked_at is not None else "active",
                     "revoked_at_entry": s.revoked_at, "public_key": public_key_line(s.spec.public_key)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo("%-16s %-8s %-30s %s" % (r["name"], r["status"], ",".join(r["roles"]), r["key_id"]))  # type: ignore[arg-type]


def _ssh_time(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y%m%d%H%M%SZ")


@keys.command("export-allowed-signers")
@click.option("-o", "--output", type=click.File("w"), default="-", help="Output file (default stdout).")
@click.pass_context
def keys_export(ctx: click.Context, output: Any) -> None:
    """The keyring as an OpenSSH allowed_signers file (roles as namespaces)."""
    ledger = _ledger(ctx)
    for s in ledger.keyring():
        opts = ['namespaces="%s"' % ",".join(namespace_for(r.value) for r in s.spec.roles)]
        if s.spec.valid_after is not None:
            opts.append('valid-after="%s"' % _ssh_time(s.spec.valid_after))
        before = s.spec.valid_before
        if s.revoked_at is not None:
            revoked = _entry_time(ledger, s.revoked_at)
            before = revoked if before is None else min(before, revoked)
        if before is not None:
            opts.append('valid-before="%s"' % _ssh_time(before))
        output.write("%s %s %s\n" % (s.spec.name, ",".join(opts), public_key_line(s.spec.public_key, s.key_id)))


# -- record and seal ---------------------------------------------------------------------


def _confidence(value: float | None) -> int | None:
    if value is None:
        return None
    if not 0.0 <= value <= 1.0:
        raise InputError("--confidence must be between 0 and 1")
    return round(value * 10000)


@cli.command()
@click.argument("task")
@click.option("--tier", required=True, type=TIER_CHOICE)
@click.option("--verdict", required=True, type=click.Choice([v.value for v in Verdict]))
@click.option("--key", "key_name", required=True, help="Signing key name or path (its role must be the tier).")
@click.option("--evidence", "evidence", multiple=True, type=click.Path(path_type=Path), help="Evidence file; repeatable.")
@click.option("--config", type=click.Path(path_type=Path, dir_okay=False), help="Contract/policy file (default .ledger/contracts/TASK.toml).")
@click.option("--input", "input_spec", default="HEAD", show_default=True, help="Candidate: a git revision or blake3:<hex>.")
@click.option("--confidence", type=float, help="Judge confidence in [0, 1] (stored as basis points).")
@click.option("--parent", "parents", multiple=True, help="Hash of an earlier record this one builds on; repeatable.")
@json_option
@click.pass_context
def record(ctx: click.Context, task: str, tier: str, verdict: str, key_name: str, evidence: Sequence[Path],
           config: Path | None, input_spec: str, confidence: float | None, parents: Sequence[str], as_json: bool) -> None:
    """Append one tier record by hand (the tier runners call the same API)."""
    if tier == Tier.DETERMINISTIC.value and verdict == Verdict.PASS.value:
        raise InputError("a deterministic pass cannot be recorded by hand (verify would reject it): run `ledger check`")
    if tier == Tier.JUDGE.value and verdict == Verdict.PASS.value:
        raise InputError("a judge pass cannot be recorded by hand (verify would reject it): run `ledger judge`")
    ledger = _ledger(ctx)
    found = _contract_file(ctx, task, config)
    if found is None:
        raise InputError("no contract for task %s: pass --config FILE or add .ledger/contracts/%s.toml" % (task, task))
    chash = config_hash(found[1])
    signer = _signer(key_name)
    if not any(rev.config_hash == chash for _, rev in ledger.contract_revisions(task)):
        register_contract(ledger, task, found[1], signer, str(found[0]))
    rec, appended = record_tier(
        ledger, task_id=task, tier=Tier(tier), verdict=Verdict(verdict), signer=signer,
        config_hash=chash, input_hash=resolve_candidate(input_spec, Path.cwd()),
        evidence=[Evidence(p.name, p) for p in evidence], confidence_bp=_confidence(confidence),
        parents=[_digest_arg(p) for p in parents],
    )
    if as_json:
        click.echo(json.dumps({"record": str(appended.body_hash), "entry": str(appended.entry_hash), "seq": appended.seq,
                               "body": _render.jsonable(rec)}, indent=2))
    else:
        click.echo(str(appended.body_hash))
        click.echo("recorded %s %s for %s at entry %d" % (tier, verdict, task, appended.seq), err=True)


def _tiers(value: str) -> tuple[Tier, ...]:
    try:
        chosen = {Tier(t.strip()) for t in value.split(",") if t.strip()}
    except ValueError:
        raise InputError("--require takes tiers from %s" % ",".join(t.value for t in LADDER)) from None
    return tuple(t for t in LADDER if t in chosen)


@cli.command()
@click.argument("task")
@click.option("--key", "key_name", required=True, help="Seal-role key name or path.")
@click.option("--input", "input_spec", default="HEAD", show_default=True, help="Candidate: a git revision or blake3:<hex>.")
@click.option("--config", type=click.Path(path_type=Path, dir_okay=False), help="Contract/policy file the records must be under.")
@click.option("--require", "require", default="", help="Tiers to require beyond the contract's (comma-separated).")
@json_option
@click.pass_context
def seal(ctx: click.Context, task: str, key_name: str, input_spec: str, config: Path | None, require: str, as_json: bool) -> None:
    """Bind the candidate's latest tier records into a signed receipt."""
    ledger = _ledger(ctx)
    receipt, appended = seal_receipt(
        ledger, task_id=task, signer=_signer(key_name), input_hash=resolve_candidate(input_spec, Path.cwd()),
        extra_required=_tiers(require), config_hash=_config_hash(ctx, task, config),
    )
    if as_json:
        click.echo(json.dumps({"receipt": str(appended.body_hash), "entry": str(appended.entry_hash), "seq": appended.seq,
                               "body": _render.jsonable(receipt)}, indent=2))
    else:
        click.echo(str(appended.body_hash))
        click.echo("sealed %s: merge_eligible=%s" % (task, str(receipt.merge_eligible).lower()), err=True)


@cli.command()
@click.argument("task")
@click.option("--contract", "contract_path", type=click.Path(path_type=Path, dir_okay=False), help="Contract file (default .ledger/contracts/TASK.toml).")
@click.option("--key", "key_name", required=True, help="Deterministic-role key name or path.")
@click.option("--base", help="Revision the candidate is compared against (default: merge-base with main, else HEAD~1).")
@click.option("--allow-dirty", is_flag=True, help="Include uncommitted changes in the snapshot instead of refusing.")
@json_option
@click.pass_context
def check(ctx: click.Context, task: str, contract_path: Path | None, key_name: str, base: str | None, allow_dirty: bool, as_json: bool) -> None:
    """Run the deterministic tier: evaluate the contract's checks on the candidate.

    Exit 0 if the tier passed, 1 if it failed."""
    from ._runner import run_deterministic

    found = _contract_file(ctx, task, contract_path)
    if found is None:
        raise InputError("no contract for task %s: pass --contract FILE or add .ledger/contracts/%s.toml" % (task, task))
    ledger = _ledger(ctx)
    repo = git_root(Path.cwd())
    if repo is None:
        raise InputError("`ledger check` runs in a git repository")
    show = sys.stderr.isatty() and not as_json
    run = run_deterministic(ledger, repo=repo, task_id=task, contract_bytes=found[1], source=str(found[0]), signer=_signer(key_name),
                            base=base, allow_dirty=allow_dirty,
                            on_check=(lambda cid: click.echo("running %s ..." % cid, err=True)) if show else None)
    if as_json:
        click.echo(json.dumps({
            "record": str(run.appended.body_hash), "verdict": run.outcome.verdict.value, "candidate": str(run.record.input_hash),
            "reasons": list(run.outcome.reasons), "warnings": list(run.outcome.warnings),
            "checks": [{"id": c, "result": s, "reason": why, "evidence": d} for c, s, why, d in run.rows],
            "attribution": {"strength": run.snapshot.strength, "commits": list(run.snapshot.commits)},
        }, indent=2))
    else:
        click.echo("  %-20s %-6s %-22s %s" % ("SIGNAL", "RESULT", "EVIDENCE", "REASON"))
        for cid, status, why, digest in run.rows:
            click.echo("  %-20s %-6s %-22s %s" % (cid, status, digest, why[:120]))
        click.echo("attribution: %s" % run.snapshot.strength)
        for why in run.outcome.reasons:
            click.echo("fail: %s" % why)
        for w in run.outcome.warnings:
            click.echo("warning: %s" % w)
        click.echo("deterministic %s: record %s" % (run.outcome.verdict.value.upper(), run.appended.body_hash))
    sys.exit(0 if run.outcome.verdict is Verdict.PASS else 1)


@cli.command()
@click.argument("task")
@click.option("--key", "key_name", required=True, help="Judge-role key name or path.")
@click.option("--contract", "contract_path", type=click.Path(path_type=Path, dir_okay=False), help="Contract file (default .ledger/contracts/TASK.toml).")
@click.option("--input", "input_spec", default="HEAD", show_default=True, help="Candidate: a git revision or blake3:<hex>.")
@click.option("--samples", type=click.IntRange(1, 15), help="Ask N times and require a majority (at least the contract's number).")
@json_option
@click.pass_context
def judge(ctx: click.Context, task: str, key_name: str, contract_path: Path | None, input_spec: str, samples: int | None, as_json: bool) -> None:
    """Run the judge tier: ask the configured independent model about the candidate.

    Exit 0 if the judge passed the candidate, 1 otherwise (review, retry, fail or skip)."""
    from ._judge import run_judge

    found = _contract_file(ctx, task, contract_path)
    if found is None:
        raise InputError("no contract for task %s: pass --contract FILE or add .ledger/contracts/%s.toml" % (task, task))
    ledger = _ledger(ctx)
    result = run_judge(ledger, task_id=task, contract_bytes=found[1], candidate=resolve_candidate(input_spec, Path.cwd()),
                       signer=_signer(key_name), config_toml=ctx.find_root().obj / "config.toml", samples=samples)
    doc = {"record": str(result.appended.body_hash), "verdict": result.outcome.verdict.value,
           "confidence_bp": result.record.confidence_bp, "reason": result.outcome.reason, "attempts": result.attempts}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo("judge %s after %d attempt(s): %s" % (result.outcome.verdict.value.upper(), result.attempts, result.outcome.reason))
        click.echo("record %s" % result.appended.body_hash)
    sys.exit(0 if result.outcome.verdict is Verdict.PASS else 1)


def _decide(ctx: click.Context, task: str, key_name: str, contract_path: Path | None, input_spec: str, yes: bool,
            approve: bool, note: str) -> None:
    from ._human import decide

    found = _contract_file(ctx, task, contract_path)
    if found is None:
        raise InputError("no contract for task %s: pass --contract FILE or add .ledger/contracts/%s.toml" % (task, task))
    ledger = _ledger(ctx)
    repo = git_root(Path.cwd())
    candidate = resolve_candidate(input_spec, Path.cwd())

    def confirm(summary: str) -> bool:
        click.echo(summary, err=True)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise InputError("refusing to sign without confirmation: run on a terminal, or pass --yes")
        return click.confirm("Sign this %s?" % ("approval" if approve else "rejection"), err=True)

    appended = decide(ledger, task_id=task, contract_bytes=found[1], candidate=candidate, signer=_signer(key_name),
                      approve=approve, note=note, repo=repo, confirm=confirm)
    if appended is None:
        click.echo("not signed", err=True)
        sys.exit(1)
    click.echo(str(appended.body_hash))
    click.echo("%s recorded at entry %d" % ("approval" if approve else "rejection", appended.seq), err=True)


@cli.command()
@click.argument("task")
@click.option("--key", "key_name", required=True, help="Human-role key name or path.")
@click.option("--comment", default="", help="What you checked.")
@click.option("--contract", "contract_path", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--input", "input_spec", default="HEAD", show_default=True)
@click.option("--yes", is_flag=True, help="Sign without asking (for scripts).")
@click.pass_context
def approve(ctx: click.Context, task: str, key_name: str, comment: str, contract_path: Path | None, input_spec: str, yes: bool) -> None:
    """Sign an approval of this exact candidate under this exact contract."""
    _decide(ctx, task, key_name, contract_path, input_spec, yes, True, comment)


@cli.command()
@click.argument("task")
@click.option("--key", "key_name", required=True, help="Human-role key name or path.")
@click.option("--reason", required=True, help="Why the candidate is rejected.")
@click.option("--contract", "contract_path", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--input", "input_spec", default="HEAD", show_default=True)
@click.option("--yes", is_flag=True, help="Sign without asking (for scripts).")
@click.pass_context
def reject(ctx: click.Context, task: str, key_name: str, reason: str, contract_path: Path | None, input_spec: str, yes: bool) -> None:
    """Sign a rejection: it blocks until a later approval by the same key withdraws it."""
    _decide(ctx, task, key_name, contract_path, input_spec, yes, False, reason)


def _expiry(text: str) -> int:
    try:
        if len(text) == 10:
            day = datetime.date.fromisoformat(text)
            return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc).timestamp()) + 86400
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise InputError("--expires takes a date (YYYY-MM-DD, valid through that day, UTC) or an ISO date-time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp())


@cli.command()
@click.argument("task")
@click.argument("check_id", metavar="CHECK")
@click.option("--key", "key_name", required=True, help="Admin key name or path.")
@click.option("--reason", required=True, help="Why this failing check may stop blocking.")
@click.option("--expires", required=True, help="YYYY-MM-DD (through that day, UTC) or an ISO date-time.")
@click.pass_context
def waive(ctx: click.Context, task: str, check_id: str, key_name: str, reason: str, expires: str) -> None:
    """Let a named failing check of the task's current contract stop blocking until it expires."""
    from ._ops import waive_check

    appended = waive_check(_ledger(ctx), _signer(key_name), task, check_id, reason, _expiry(expires))
    click.echo(str(appended.body_hash))
    click.echo("waiver of %s for %s recorded at entry %d" % (check_id, task, appended.seq), err=True)


@cli.group(cls=_Group)
def contract() -> None:
    """Completion contracts: register revisions and read their history."""


@contract.command("set")
@click.argument("task")
@click.option("--contract", "contract_path", type=click.Path(path_type=Path, dir_okay=False), help="Contract file (default .ledger/contracts/TASK.toml).")
@click.option("--key", "key_name", required=True, help="Deterministic or admin key; only an admin may weaken a contract.")
@click.pass_context
def contract_set(ctx: click.Context, task: str, contract_path: Path | None, key_name: str) -> None:
    """Record the contract file as the task's current revision."""
    found = _contract_file(ctx, task, contract_path)
    if found is None:
        raise InputError("no contract for task %s: pass --contract FILE" % task)
    _, appended = register_contract(_ledger(ctx), task, found[1], _signer(key_name), str(found[0]))
    if appended is None:
        click.echo("unchanged: %s is already the current contract of %s" % (config_hash(found[1]), task))
    else:
        click.echo("contract %s of %s recorded at entry %d" % (config_hash(found[1]), task, appended.seq))


@contract.command("show")
@click.argument("task")
@json_option
@click.pass_context
def contract_show(ctx: click.Context, task: str, as_json: bool) -> None:
    """The task's contract revisions, oldest first, with their signers and weakenings."""
    from receipts import weakenings as lowered_by

    ledger = _ledger(ctx)
    rows, prev = [], None
    for seq, revision in ledger.contract_revisions(task):
        stored = ledger.reader.by_seq(seq)
        assert stored is not None
        current = revision.parse()
        rows.append({"seq": seq, "config": str(revision.config_hash), "signer": decode_entry(stored.entry).signer,
                     "weakenings": list(lowered_by(prev, current)) if prev else []})
        prev = current
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        raise InputError("task %s has no registered contract" % task)
    for r in rows:
        click.echo("%5d  %s  %s%s" % (r["seq"], r["config"], r["signer"], ("  WEAKENS: " + "; ".join(r["weakenings"])) if r["weakenings"] else ""))  # type: ignore[str-format,arg-type]


# -- show, log, verify ------------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("--signed-bytes", is_flag=True, help="Write the exact bytes the entry's signature covers to stdout.")
@click.option("--signature", is_flag=True, help="Write the entry's signature as an armored SSH signature.")
@json_option
@click.pass_context
def show(ctx: click.Context, hash_text: str, signed_bytes: bool, signature: bool, as_json: bool) -> None:
    """Show an entry, record or receipt (by record/receipt hash or entry hash)."""
    ledger = _ledger(ctx)
    stored = ledger.find(_digest_arg(hash_text))
    if stored is None:
        raise InputError("no entry with hash %s" % hash_text)
    entry = decode_entry(stored.entry)
    if signed_bytes:
        out = sys.stdout.buffer
        out.write(entry_signed_bytes(entry))
        out.flush()
        return
    if signature:
        click.echo(armor(entry.signature), nl=False)
        return
    body = decode_body(entry.kind, stored.body)
    doc = {"entry": {"seq": entry.seq, "hash": str(Digest(stored.hash)), "prev": str(entry.prev) if entry.prev else None,
                     "kind": entry.kind.value, "body_hash": str(entry.body_hash), "time": entry.time, "signer": entry.signer},
           "body": _render.jsonable(body)}
    click.echo(json.dumps(doc, indent=2, sort_keys=True))


@cli.command()
@click.argument("digest_text", metavar="DIGEST")
@click.option("--full", is_flag=True, help="Write the whole blob (binary-safe) instead of a truncated view.")
@click.option("--lines", default=200, show_default=True, help="Lines shown when truncating.")
@click.pass_context
def blob(ctx: click.Context, digest_text: str, full: bool, lines: int) -> None:
    """Show stored evidence by its digest: truncated for reading, whole with --full."""
    ledger = _ledger(ctx)
    path = ledger.blob_path(_digest_arg(digest_text))
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError("no evidence blob %s in the blob store" % digest_text) from None
    with handle:
        if full:
            out = sys.stdout.buffer
            while chunk := handle.read(1 << 20):
                out.write(chunk)
            out.flush()
            return
        size = path.stat().st_size
        shown = 0
        for n, line in enumerate(handle):
            if n >= lines or shown >= 64 * 1024:
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
    ledger = _ledger(ctx)
    rows = []
    for stored in ledger.entries(task=task):
        entry = decode_entry(stored.entry)
        body = decode_body(entry.kind, stored.body)
        summary = ""
        if isinstance(body, TierRecord):
            summary = "%s %s" % (body.tier.value, body.verdict.value)
        elif isinstance(body, LadderReceipt):
            summary = "merge_eligible=%s" % str(body.merge_eligible).lower()
        rows.append({"seq": entry.seq, "time": entry.time, "kind": entry.kind.value, "task": stored.task,
                     "hash": str(entry.body_hash), "signer": entry.signer, "summary": summary})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo("%5d  %-11s %-20s %s  %s" % (r["seq"], r["kind"], r["task"] or "-", r["hash"], r["summary"]))  # type: ignore[str-format]


def _repo() -> Path:
    repo = git_root(Path.cwd())
    if repo is None:
        raise InputError("this command runs in a git repository")
    return repo


def _verify_commit(ctx: click.Context, rev: str, trust: str | None, require_checkpoint: bool, as_json: bool) -> None:
    from ._notes import attached

    hashes = attached(_repo(), rev)
    if not hashes:
        raise InputError("no receipt is attached to %s (git notes %s)" % (rev, "refs/notes/receipts"))
    root = _trust(trust)
    source = LedgerSource.open(ctx.find_root().obj)
    try:
        results = [verify_receipt(source, h, root, Transparency(require_checkpoint=require_checkpoint)) for h in hashes]
    finally:
        source.close()
    if as_json:
        click.echo(json.dumps([res.as_dict() for res in results], indent=2))
    else:
        click.echo("\n\n".join("\n".join(_render.verify_lines(res)) for res in results))
    sys.exit(0 if all(res.ok for res in results) else 1)


def _verify_bundle(path: Path, hash_text: str | None, trust: str | None, witnesses: Sequence[str], quorum: int, as_json: bool) -> None:
    from verify import BundleSource

    root = _trust(trust)
    keys = _witness_keys(witnesses)
    source = BundleSource(path)
    try:
        if hash_text is None:
            try:
                hash_text = str(json.loads(source.read("manifest.json"))["receipt"])
            except (ValueError, KeyError, TypeError):
                raise InputError("the bundle's manifest names no receipt: give its HASH") from None
        res = verify_receipt(source, hash_text, root, Transparency(require_checkpoint=True, witnesses=keys, quorum=quorum))
    finally:
        source.close()
    if isinstance(root, UnsafeTrustOnFirstUse):
        click.echo("warning: no --trust given; the admin key is trusted on first use", err=True)
    click.echo(json.dumps(res.as_dict(), indent=2) if as_json else "\n".join(_render.verify_lines(res)))
    sys.exit(0 if res.ok else 1)


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), required=True, help="Where to write it.")
@click.option("--format", "fmt", type=click.Choice(["bundle", "intoto"]), default="bundle", show_default=True,
              help="A zip that verifies offline, or an in-toto Statement in a DSSE envelope.")
@click.option("--key", "key_name", help="Seal key that signs the DSSE envelope (intoto only).")
@click.pass_context
def export(ctx: click.Context, hash_text: str, output: Path, fmt: str, key_name: str | None) -> None:
    """Export a receipt: as an evidence bundle, or as a signed in-toto attestation."""
    ledger = _ledger(ctx)
    if fmt == "bundle":
        from ._export import export_bundle

        manifest = export_bundle(ledger, _digest_arg(hash_text), output)
        click.echo("wrote %s: %s, %d entries, final status %s" % (output, manifest["task"], len(manifest["entries"]), manifest["final_status"]), err=True)
        return
    from ._intoto import export_intoto

    if key_name is None:
        raise InputError("--format intoto needs --key: the seal key that signs the envelope")
    export_intoto(ledger, _digest_arg(hash_text), _signer(key_name), output)
    click.echo("wrote %s (DSSE envelope, payloadType application/vnd.in-toto+json)" % output, err=True)


def _witness_keys(values: Sequence[str]) -> tuple[WitnessKey, ...]:
    keys = []
    for value in values:
        name, _, line = value.strip().partition(" ")
        if not name or not line:
            raise InputError("--witness takes 'NAME ssh-ed25519 AAAA...' (or 'NAME PATH.pub')")
        if not line.startswith("ssh-"):
            try:
                line = Path(line).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError("cannot read witness key %s: %s" % (line, exc)) from None
        blob, _ = parse_public_key_line(line)
        keys.append(WitnessKey(name, parse_public_key_blob(blob)))
    return tuple(keys)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError("cannot read %s %s: %s" % (what, path, exc)) from None


@cli.command("verify")
@click.argument("hash_text", metavar="[HASH]", required=False)
@click.option("--chain", is_flag=True, help="Audit the whole chain instead of one receipt.")
@click.option("--bundle", type=click.Path(path_type=Path, dir_okay=False), help="Verify an exported evidence bundle, offline.")
@click.option("--commit", "commit_rev", help="Verify the receipts attached to this commit (git notes).")
@click.option("--trust", help="Pin the admin key: a SHA256 fingerprint or an allowed_signers file.")
@click.option("--since", "since", type=click.Path(path_type=Path, dir_okay=False), help="A checkpoint you kept: prove the ledger only grew since.")
@click.option("--require-checkpoint", is_flag=True, help="Reject unless a signed checkpoint covers the receipt.")
@click.option("--witness", "witnesses", multiple=True, help="A trusted witness: 'NAME ssh-ed25519 AAAA...'; repeatable.")
@click.option("--witness-quorum", default=0, type=click.IntRange(0, 64), help="Cosignatures required from --witness keys.")
@json_option
@click.pass_context
def verify_cmd(ctx: click.Context, hash_text: str | None, chain: bool, bundle: Path | None, commit_rev: str | None, trust: str | None,
               since: Path | None, require_checkpoint: bool, witnesses: Sequence[str], witness_quorum: int, as_json: bool) -> None:
    """Recompute every hash and signature and re-derive merge_eligible.

    Exit 0 verified, 1 rejected, 2 cannot run."""
    if bundle is not None:
        if chain:
            raise InputError("--chain audits a ledger, not a bundle")
        _verify_bundle(bundle, hash_text, trust, witnesses, witness_quorum, as_json)
        return
    if commit_rev is not None:
        _verify_commit(ctx, commit_rev, trust, require_checkpoint, as_json)
        return
    if chain == (hash_text is not None):
        raise InputError("give either a receipt HASH or --chain")
    root = _trust(trust)
    keys = _witness_keys(witnesses)
    if witness_quorum > len(keys):
        raise InputError("--witness-quorum %d needs at least that many --witness keys" % witness_quorum)
    policy = Transparency(since=_read_text(since, "checkpoint") if since else None, require_checkpoint=require_checkpoint,
                          witnesses=keys, quorum=witness_quorum)
    source = LedgerSource.open(ctx.find_root().obj)
    try:
        if chain:
            if sys.stderr.isatty() and not as_json:
                with click.progressbar(length=source.count(), label="verifying chain", file=sys.stderr) as bar:
                    cres = verify_chain(source, root, progress=bar.update, transparency=policy)
            else:
                cres = verify_chain(source, root, transparency=policy)
            ok, doc, lines = cres.ok, cres.as_dict(), _render.chain_lines(cres)
        else:
            assert hash_text is not None
            res = verify_receipt(source, hash_text, root, policy)
            ok, doc, lines = res.ok, res.as_dict(), _render.verify_lines(res)
    finally:
        source.close()
    if isinstance(root, UnsafeTrustOnFirstUse):
        click.echo("warning: no --trust given; the admin key is trusted on first use", err=True)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo("\n".join(lines))
    sys.exit(0 if ok else 1)


# -- transparency -------------------------------------------------------------------------


@cli.command()
@click.option("--key", "key_name", help="Seal or admin key that signs the tree head.")
@click.option("--show", is_flag=True, help="Print the latest checkpoint instead of making one.")
@click.pass_context
def checkpoint(ctx: click.Context, key_name: str | None, show: bool) -> None:
    """Sign the current tree head as a C2SP checkpoint (a signed note)."""
    ledger = _ledger(ctx)
    if show:
        stored = ledger.checkpoints()
        if not stored:
            raise InputError("this ledger has no checkpoint yet: run `ledger checkpoint --key NAME`")
        click.echo(stored[-1][1].encode(), nl=False)
        return
    if key_name is None:
        raise InputError("give --key NAME (a seal or admin key), or --show")
    note = ledger.checkpoint(_signer(key_name))
    click.echo(note.encode(), nl=False)


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.pass_context
def prove(ctx: click.Context, hash_text: str) -> None:
    """An inclusion proof for an entry against the latest checkpoint, as a C2SP tlog-proof."""
    from receipts import inclusion_proof

    ledger = _ledger(ctx)
    stored = ledger.find(_digest_arg(hash_text))
    if stored is None:
        raise InputError("no entry with hash %s" % hash_text)
    checkpoints = ledger.checkpoints()
    if not checkpoints or checkpoints[-1][0] <= stored.seq:
        raise InputError("entry %d is not yet covered by a checkpoint: run `ledger checkpoint --key NAME`" % stored.seq)
    size, note = checkpoints[-1]
    from receipts import tlog_proof_text

    click.echo(tlog_proof_text(stored.seq, inclusion_proof(ledger, stored.seq, size), note.encode()), nl=False)


@cli.command()
@click.argument("old_size", type=click.IntRange(1))
@click.pass_context
def consistency(ctx: click.Context, old_size: int) -> None:
    """A consistency proof from an earlier tree size to the latest checkpoint."""
    from receipts import consistency_proof

    ledger = _ledger(ctx)
    checkpoints = ledger.checkpoints()
    if not checkpoints or checkpoints[-1][0] < old_size:
        raise InputError("no checkpoint at or beyond size %d" % old_size)
    size, note = checkpoints[-1]
    lines = ["receipt-ledger/consistency-proof@v1", "old %d" % old_size, "new %d" % size]
    lines += [base64.b64encode(h).decode("ascii") for h in consistency_proof(ledger, old_size, size)]
    click.echo("\n".join(lines) + "\n\n" + note.encode(), nl=False)


@cli.group(cls=_Group)
def witness() -> None:
    """Witness a ledger: cosign checkpoints only after checking they extend what you saw."""


@witness.command("cosign")
@click.argument("checkpoint_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--key", "key_name", required=True, help="The witness's own Ed25519 key (name or path).")
@click.option("--name", "witness_name", required=True, help="The witness's key name, e.g. witness.example/w1.")
@click.option("--log-key", required=True, help="The log's checkpoint key: 'ssh-ed25519 AAAA...' or a .pub file.")
@click.option("--state", type=click.Path(path_type=Path, dir_okay=False), help="The witness's state file (default ~/.config/receipt-ledger/witness-state.json).")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="Write the cosigned checkpoint here (default: stdout).")
@click.pass_context
def witness_cosign(ctx: click.Context, checkpoint_file: Path, key_name: str, witness_name: str, log_key: str,
                   state: Path | None, output: Path | None) -> None:
    """Add a tlog-cosignature to a checkpoint after proving it consistent with the last one seen."""
    from ._witness import cosign

    text = cosign(ledger_dir=ctx.find_root().obj, checkpoint=_read_text(checkpoint_file, "checkpoint"),
                  signer=_signer(key_name), name=witness_name, log_key=_witness_keys(["log " + log_key])[0].public_key,
                  state_path=state)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo("cosigned checkpoint written to %s" % output, err=True)


# -- receipts on pull requests --------------------------------------------------------------


@cli.command()
@click.argument("hash_text", metavar="HASH")
@click.option("--commit", "rev", help="The candidate commit (default: the one the deterministic tier snapshotted).")
@click.pass_context
def attach(ctx: click.Context, hash_text: str, rev: str | None) -> None:
    """Attach a receipt to its candidate commit as a git note (refs/notes/receipts)."""
    from ._notes import attach as attach_note

    commit = attach_note(_ledger(ctx), _repo(), _digest_arg(hash_text), rev)
    click.echo(commit)
    click.echo("attached; share it with: git push origin refs/notes/receipts", err=True)


@cli.command()
@click.argument("rev", default="HEAD")
@click.option("--trust", help="Pin the admin key: a SHA256 fingerprint or an allowed_signers file.")
@click.option("--require-checkpoint", is_flag=True, help="Also require a signed checkpoint covering the receipt.")
@click.option("--mode", type=click.Choice(["enforce", "advisory"]), default="enforce", show_default=True,
              help="advisory records and prints the would-be decision but never blocks.")
@click.option("--key", "key_name", help="Seal key that records the decision in the ledger (required for advisory).")
@click.option("--task", help="Task the decision is recorded for (default: the receipt's, or the only task with a receipt).")
@json_option
@click.pass_context
def gate(ctx: click.Context, rev: str, trust: str | None, require_checkpoint: bool, mode: str, key_name: str | None,
         task: str | None, as_json: bool) -> None:
    """Exit 0 only if REV has a verified, merge-eligible receipt for its exact tree.

    The command a CI job runs before merge; a commit without one fails closed."""
    from ._notes import attached, gate_check

    repo = _repo()
    root = _trust(trust)
    passed, reasons, candidate, fields = gate_check(_ledger(ctx), repo, rev, root, require_checkpoint)
    hashes = attached(repo, rev)
    decision = "pass" if passed else ("block" if mode == "enforce" else "would-block")
    if mode == "advisory" and key_name is None:
        raise InputError("advisory mode records its decision: pass --key (a seal key)")
    if key_name is not None:
        from receipts import EventType

        from ._process import record_event

        ledger = _ledger(ctx)
        task_id = task or _gate_task(ledger, passed, hashes)
        signer = _signer(key_name)
        record_event(ledger, signer, task_id, EventType.GATE_DECISION, candidate,
                     {"mode": mode, "decision": decision, "commit": fields["commit"], "receipt": passed or ""})
        if passed and mode == "enforce":
            record_event(ledger, signer, task_id, EventType.SUCCESS_VERIFIED, candidate, {"receipt": passed, "commit": fields["commit"]})
    if as_json:
        click.echo(json.dumps({"commit": fields["commit"], "tree": fields["tree"], "candidate": str(candidate), "mode": mode,
                               "decision": decision, "pass": passed is not None, "receipt": passed, "reasons": reasons}, indent=2))
    elif passed:
        click.echo("GATE PASS: %s has verified, merge-eligible receipt %s" % (fields["commit"][:12], passed))
    else:
        click.echo("GATE %s: %s%s" % ("FAIL" if mode == "enforce" else "WOULD BLOCK (advisory)", fields["commit"][:12],
                                      "" if mode == "enforce" else "; recorded, not blocking"))
        for reason in reasons:
            click.echo("  %s" % reason)
    sys.exit(0 if passed or mode == "advisory" else 1)


def _gate_task(ledger: Ledger, passed: str | None, hashes: Sequence[str]) -> str:
    for h in ([passed] if passed else []) + list(hashes):
        stored = ledger.find(_digest_arg(h))
        if stored is not None and stored.task:
            return stored.task
    raise InputError("cannot tell which task this decision is for: pass --task")


@cli.command("pr-comment")
@click.argument("hash_text", metavar="HASH")
@click.option("--trust", help="Pin the admin key: a SHA256 fingerprint or an allowed_signers file.")
@click.pass_context
def pr_comment_cmd(ctx: click.Context, hash_text: str, trust: str | None) -> None:
    """Markdown for a pull-request comment: the ladder, the verdict, how to verify."""
    from ._notes import pr_comment

    source = LedgerSource.open(ctx.find_root().obj)
    try:
        res = verify_receipt(source, hash_text, _trust(trust))
    finally:
        source.close()
    click.echo(pr_comment(res, hash_text), nl=False)


# -- the completion gate: claims, traces, effects, status ---------------------------------------


@cli.command()
@click.argument("task")
@click.option("--key", "key_name", required=True, help="The agent's key (role agent).")
@click.option("--summary", type=click.Path(path_type=Path, dir_okay=False), help="The agent's own summary (stored, never believed).")
@click.option("--input", "input_spec", default="HEAD", show_default=True, help="The candidate claimed as done.")
@click.pass_context
def claim(ctx: click.Context, task: str, key_name: str, summary: Path | None, input_spec: str) -> None:
    """Record the agent's claim that the task is done (answer_proposed)."""
    from receipts import EventType

    from ._process import record_event

    appended = record_event(_ledger(ctx), _signer(key_name), task, EventType.ANSWER_PROPOSED,
                            resolve_candidate(input_spec, Path.cwd()), attachment=summary)
    click.echo("claim recorded at entry %d: it proves nothing until the ladder runs" % appended.seq)


@cli.command()
@click.argument("task")
@click.option("--key", "key_name", required=True, help="The agent's key (role agent).")
@click.option("--reason", default="", help="Why the model stopped (end of turn, budget, error).")
@click.pass_context
def stopped(ctx: click.Context, task: str, key_name: str, reason: str) -> None:
    """Record that the model stopped (which is not a claim of success)."""
    from receipts import EventType

    from ._process import record_event

    appended = record_event(_ledger(ctx), _signer(key_name), task, EventType.MODEL_STOPPED, None, {"reason": reason})
    click.echo("model_stopped recorded at entry %d" % appended.seq)


@cli.command()
@click.argument("task")
@click.argument("trace_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--key", "key_name", required=True, help="The deterministic runner's key: it decides each call.")
@click.option("--contract", "contract_path", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--input", "input_spec", default="HEAD", show_default=True)
@json_option
@click.pass_context
def trace(ctx: click.Context, task: str, trace_file: Path, key_name: str, contract_path: Path | None, input_spec: str, as_json: bool) -> None:
    """Ingest an agent's tool-call log (JSON Lines) and decide each call against the contract's tool policy.

    Exit 0 if every call was approved, 1 otherwise."""
    from receipts import ContractRevision

    from ._process import ingest_trace

    found = _contract_file(ctx, task, contract_path)
    if found is None:
        raise InputError("no contract for task %s: pass --contract FILE" % task)
    contract = ContractRevision(task, found[1], None).parse()
    _, decisions = ingest_trace(_ledger(ctx), _signer(key_name), task, contract, trace_file, resolve_candidate(input_spec, Path.cwd()))
    if as_json:
        click.echo(json.dumps(decisions, indent=2))
    else:
        for d in decisions:
            click.echo("%4d  %-16s %-15s %s" % (d["step"], d["tool"] or "-", d["decision"], d["reason"]))
    sys.exit(0 if all(d["decision"] == "approved" for d in decisions) else 1)


@cli.group(cls=_Group)
def effect() -> None:
    """Side effects (merge, deploy, message): begun once per idempotency key, then resolved."""


@effect.command("begin")
@click.argument("task")
@click.option("--kind", required=True, help="merge, deploy, message, ...")
@click.option("--idempotency-key", "key", required=True, help="A key that names this effect; a second begin is refused.")
@click.option("--target", default="", help="What the effect acts on.")
@click.option("--key", "key_name", required=True, help="Seal key.")
@click.option("--input", "input_spec", default="HEAD", show_default=True, help="The candidate the effect is for.")
@click.pass_context
def effect_begin(ctx: click.Context, task: str, kind: str, key: str, target: str, key_name: str, input_spec: str) -> None:
    """Record an effect about to happen; refused without a verified receipt for this exact candidate."""
    from ._process import begin_effect

    appended = begin_effect(_ledger(ctx), _signer(key_name), task, kind, key, target, resolve_candidate(input_spec, Path.cwd()))
    click.echo("effect %s begun at entry %d" % (key, appended.seq))


def _end(outcome: str) -> Any:
    @click.argument("idempotency_key")
    @click.option("--key", "key_name", required=True, help="Seal key.")
    @click.option("--note", default="", help="How the outcome was read back.")
    @click.pass_context
    def command(ctx: click.Context, idempotency_key: str, key_name: str, note: str) -> None:
        from ._process import end_effect

        appended = end_effect(_ledger(ctx), _signer(key_name), idempotency_key, outcome, note)
        click.echo("effect %s %s at entry %d" % (idempotency_key, outcome, appended.seq))

    command.__doc__ = "Record that the effect's outcome is %s." % outcome
    return command


effect.command("confirm")(_end("confirmed"))
effect.command("fail")(_end("failed"))
effect.command("unknown")(_end("unknown"))


@cli.command()
@click.argument("task", required=False)
@click.option("--window", default=50, show_default=True, help="Claims the verification nudge looks back over.")
@click.option("--threshold", default=0.3, show_default=True, help="Alert when more than this share of claims went unverified.")
@json_option
@click.pass_context
def status(ctx: click.Context, task: str | None, window: int, threshold: float, as_json: bool) -> None:
    """Each task's state, derived from the chain alone, and the verification nudge."""
    from ._process import nudge, task_state

    ledger = _ledger(ctx)
    tasks = [task] if task else sorted({e.task for e in ledger.entries() if e.task})
    if task and not any(True for _ in ledger.entries(task=task)):
        raise InputError("task %s has no entries in this ledger" % task)
    states = {t: task_state(ledger, t) for t in tasks}
    n = nudge(ledger, window, threshold)
    if as_json:
        click.echo(json.dumps({"tasks": {t: {"state": s.state.value, "reason": s.reason, "candidate": s.candidate, "failed_attempts": s.attempts}
                                         for t, s in states.items()},
                               "nudge": {"window": n.window, "claims": n.claims, "unverified": n.unverified, "share": round(n.share, 4),
                                         "threshold": n.threshold, "alert": n.alert, "recent_unverified": list(n.recent_unverified)}}, indent=2))
        return
    for t, s in states.items():
        click.echo("%-24s %-25s %s" % (t, s.state.value, s.reason))
    click.echo("claims without verification: %d of the last %d (%.0f%%)" % (n.unverified, n.claims, 100 * n.share))
    if n.alert:
        click.echo("ALERT: more than %.0f%% of claims were not followed by verification; most recent: %s"
                   % (100 * n.threshold, ", ".join(n.recent_unverified)))


@cli.command()
@click.option("--task-prefix", default="", help="Only families whose tasks start with this.")
@click.option("--k", "ks", default="1,5", show_default=True, help="The k of pass@k and pass^k, comma-separated.")
@json_option
@click.pass_context
def stats(ctx: click.Context, task_prefix: str, ks: str, as_json: bool) -> None:
    """pass@k and pass^k over repeated trials of a task family (tasks named FAMILY@N)."""
    from ._process import stats as family_stats

    try:
        k_values = [int(k) for k in ks.split(",") if k.strip()]
    except ValueError:
        raise InputError("--k takes whole numbers, comma-separated") from None
    rows = family_stats(_ledger(ctx), task_prefix, k_values)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    def shown(value: object, unit: str = "") -> str:
        return "not recorded" if value is None else "%s%s" % (value, unit)

    for row in rows:
        costs = "  mean time per run: deterministic %s, judge %s; judge tokens per run: %s" % (
            shown(row["time_ms"]["deterministic"], " ms"), shown(row["time_ms"]["judge"], " ms"),
            shown(row["cost"]["judge_tokens_per_run"]))
        if "note" in row:
            click.echo("%-24s n=%d successes=%d: %s\n%s" % (row["family"], row["trials"], row["successes"], row["note"], costs))
            continue
        figures = "  ".join("%s=%.3f" % (k, v) for k, v in row.items() if k.startswith("pass"))
        click.echo("%-24s n=%d successes=%d rate=%.3f (95%% CI %.3f-%.3f)  %s\n%s" % (
            row["family"], row["trials"], row["successes"], row["success_rate"], *row["success_rate_95ci"], figures, costs))


@cli.command()
@click.option("--keep", type=click.Path(path_type=Path, file_okay=False), help="Build the demo here and keep it.")
def demo(keep: Path | None) -> None:
    """Run the whole job end to end in a throwaway workspace."""
    from ._demo import run_demo

    sys.exit(run_demo(keep))


def main() -> None:
    cli(prog_name="ledger")
