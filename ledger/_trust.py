"""Where a command's trust comes from, in this order, and nowhere else:

1. ``--trust`` (a fingerprint or an allowed_signers file), the caller's explicit pin;
2. ``--unsafe-trust-on-first-use``, named for what it is and said in every output;
3. the repository's committed pin, ``.ledger/allowed_signers``, read **from the target
   branch** (``--trust-ref``, ``LEDGER_TRUST_REF``, ``trust_ref`` in config.toml, else
   ``origin/main``, else ``main``), never from the candidate's own tree: a pull request
   that adds its author's key to the file must not pass its own gate. A command that
   judges a candidate (the gate, ``verify --commit``) does not read config.toml's
   ``trust_ref`` at all, since that file is the candidate's too. A trust ref names a
   branch, resolved fully qualified (``refs/remotes/R/B`` when ``R`` is a remote, else
   ``refs/heads/B``): never a tag, a commit id or ``HEAD``, which a candidate could
   point at itself;
4. for commands that judge no candidate commit (``verify HASH``, ``verify --bundle``,
   ``--chain``): the ledger directory's own ``allowed_signers``, which ``ledger init``
   wrote on this machine.

With none of them a command refuses (`InputError`, exit 2)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from receipts import Role, Signer, fingerprint, namespace_for, public_key_line
from verify import CannotVerify, Trust, TrustRoot, UnsafeTrustOnFirstUse

from ._config import CONFIG_NAME, config_value
from ._errors import InputError
from ._git import git_ok, run_git

__all__ = [
    "TRUST_FILE",
    "REPO_TRUST_PATH",
    "DEFAULT_TRUST_REFS",
    "trust_file_text",
    "write_trust_file",
    "configured_trust_ref",
    "branch_trust",
    "qualified_branch",
    "resolve_trust",
]

TRUST_FILE = "allowed_signers"
REPO_TRUST_PATH = ".ledger/" + TRUST_FILE
DEFAULT_TRUST_REFS = ("origin/main", "main")


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
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".trust-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(trust_file_text(admin, admin_name))
    os.replace(tmp, path)
    return True


def configured_trust_ref(root: Path) -> str | None:
    """``trust_ref`` from the ledger directory's config.toml, if set."""
    found = config_value(root, "trust_ref")
    if found is not None and not isinstance(found, str):
        raise InputError("%s: trust_ref must be a branch name" % (root / CONFIG_NAME))
    return found


# Names that move with whatever is checked out or fetched: trusting one trusts the candidate.
_MOVING_NAMES = frozenset({"HEAD", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD", "@"})


def qualified_branch(repo: Path, name: str) -> str:
    """The fully qualified branch ``name`` means as a trust ref: ``refs/heads/...`` or
    ``refs/remotes/...``, so that a tag or a local branch spelled like the target branch
    cannot stand in for it.

    Args:
        repo: the repository whose remotes decide ``R/B`` (remote branch) from ``B`` (local).
        name: ``refs/heads/B``, ``refs/remotes/R/B``, ``R/B`` with ``R`` a remote, or ``B``.

    Returns:
        The qualified ref name (not resolved: it may name no commit).

    Raises:
        InputError: ``name`` is a moving name (``HEAD``, ``FETCH_HEAD``, ...), a ref outside
            the branch namespaces (a tag, a note), or not a valid ref name.
    """
    if name in _MOVING_NAMES or name.endswith("/HEAD"):
        raise InputError("trust ref %r would trust the candidate itself: name the target branch" % name)
    if name.startswith("refs/"):
        if not name.startswith(("refs/heads/", "refs/remotes/")):
            raise InputError("trust ref %r is not a branch (refs/heads/ or refs/remotes/)" % name)
        full = name
    else:
        remotes = (git_ok(repo, "remote") or "").split()
        head, _, rest = name.partition("/")
        full = ("refs/remotes/" if rest and head in remotes else "refs/heads/") + name
    if run_git(repo, "check-ref-format", full).returncode != 0:
        raise InputError("trust ref %r is not a valid branch name" % name)
    return full


def branch_trust(repo: Path, ref: str | None) -> tuple[TrustRoot | None, str]:
    """The pin committed on the target branch, and what was looked at (for messages).
    An explicit ``ref`` that does not exist is bad input; the defaults are tried in order,
    and the first that exists is the target branch whether or not it holds the file.
    Every name is resolved fully qualified (`qualified_branch`)."""
    for candidate in (ref,) if ref else DEFAULT_TRUST_REFS:
        full = qualified_branch(repo, candidate)
        commit = git_ok(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", full + "^{commit}")
        if commit is None:
            if ref:
                raise InputError("trust ref %r (%s) names no commit in this repository (fetch it first)" % (ref, full))
            continue
        where = "%s:%s" % (candidate, REPO_TRUST_PATH)
        shown = run_git(repo, "show", "%s:%s" % (commit, REPO_TRUST_PATH))
        if shown.returncode != 0:
            return None, "%s has no %s" % (candidate, REPO_TRUST_PATH)
        try:
            text = shown.stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("%s is not UTF-8 text" % where) from None
        try:
            return TrustRoot.from_allowed_signers(text, "%s at %s" % (where, commit[:12])), where
        except CannotVerify as exc:
            raise InputError(str(exc)) from None
    return None, "no %s branch" % " or ".join(DEFAULT_TRUST_REFS)


def resolve_trust(
    *,
    explicit: str | None,
    unsafe_tofu: bool,
    repo: Path | None,
    ledger_root: Path | None,
    trust_ref: str | None = None,
    judges_candidate: bool = False,
) -> Trust:
    """The trust a command verifies against, by the order in this module's docstring.
    ``judges_candidate`` (the gate, ``verify --commit``) leaves out the working tree's files:
    its ``allowed_signers`` and its config.toml's ``trust_ref`` are the candidate's own."""
    if explicit and unsafe_tofu:
        raise InputError("--trust and --unsafe-trust-on-first-use contradict each other: give one")
    if explicit:
        try:
            return TrustRoot.from_argument(explicit)
        except CannotVerify as exc:
            raise InputError(str(exc)) from None
    if unsafe_tofu:
        return UnsafeTrustOnFirstUse()
    looked = []
    if repo is not None:
        ref = trust_ref or (
            configured_trust_ref(ledger_root) if ledger_root is not None and not judges_candidate else None
        )
        found, where = branch_trust(repo, ref)
        if found is not None:
            return found
        looked.append(where)
    if not judges_candidate and ledger_root is not None and (ledger_root / TRUST_FILE).is_file():
        try:
            text = (ledger_root / TRUST_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("cannot read %s: %s" % (ledger_root / TRUST_FILE, exc)) from None
        try:
            return TrustRoot.from_allowed_signers(text, "%s (written by ledger init)" % (ledger_root / TRUST_FILE))
        except CannotVerify as exc:
            raise InputError(str(exc)) from None
    looked.append("not a git repository" if repo is None else "")
    raise InputError(
        "no trust root (%s): commit %s (ledger init writes it) to the target branch, or pass --trust FILE|FINGERPRINT"
        % ("; ".join(w for w in looked if w) or "nothing pinned", REPO_TRUST_PATH)
    )
