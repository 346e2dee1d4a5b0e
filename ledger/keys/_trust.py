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

With none of them a command refuses (`InputError`, exit 2).

The same target branch holds the rest of what a candidate must not choose: the auditing
witnesses that certify completeness (``.ledger/auditing-witnesses``, format.md §8.1a) and,
for CI, the shared store the ladder writes to and the gate audits (``store`` in the
branch's ``.ledger/config.toml``, `branch_store`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

from verify import CannotVerify, Trust, TrustRoot, UnsafeTrustOnFirstUse, WitnessKey

from .._config import CONFIG_NAME, config_value, store_value
from .._errors import InputError
from .._git import git_ok, run_git
from .._layout import TRUST_FILE

__all__ = [
    "REPO_TRUST_PATH",
    "DEFAULT_TRUST_REFS",
    "configured_trust_ref",
    "branch_file",
    "branch_trust",
    "qualified_branch",
    "resolve_trust",
    "AUDITORS_PATH",
    "parse_auditors",
    "resolve_auditors",
    "branch_store",
]

REPO_TRUST_PATH = ".ledger/" + TRUST_FILE
AUDITORS_PATH = ".ledger/auditing-witnesses"
DEFAULT_TRUST_REFS = ("origin/main", "main")


def configured_trust_ref(root: Path) -> str | None:
    """``trust_ref`` from the ledger directory's config.toml, if set."""
    found = config_value(root, "trust_ref")
    if found is not None and not isinstance(found, str):
        raise InputError("%s: trust_ref must be a branch name" % (root / CONFIG_NAME))
    return found


# Names that move with whatever is checked out or fetched: trusting one trusts the candidate.
_MOVING_NAMES = frozenset({"HEAD", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD", "@"})


def qualified_branch(repo: Path, name: str, remotes: Sequence[str] | None = None) -> str:
    """The fully qualified branch ``name`` means as a trust ref: ``refs/heads/...`` or
    ``refs/remotes/...``, so that a tag or a local branch spelled like the target branch
    cannot stand in for it.

    Args:
        repo: the repository whose remotes decide ``R/B`` (remote branch) from ``B`` (local).
        name: ``refs/heads/B``, ``refs/remotes/R/B``, ``R/B`` with ``R`` a remote, or ``B``.
        remotes: the repository's remotes, if the caller has read them (`_remotes`).

    Returns:
        The qualified ref name (not resolved: it may name no commit).

    Raises:
        InputError: ``name`` is a moving name (``HEAD``, ``FETCH_HEAD``, ...), a ref outside
            the branch namespaces (a tag, a note), or not a valid ref name.
    """
    full = _qualified(name, _remotes(repo) if remotes is None and not name.startswith("refs/") else remotes or ())
    if run_git(repo, "check-ref-format", full).returncode != 0:
        raise InputError("trust ref %r is not a valid branch name" % name)
    return full


def _qualified(name: str, remotes: Sequence[str]) -> str:
    """``name`` qualified as `qualified_branch` says, without asking git whether it is valid."""
    if name in _MOVING_NAMES or name.endswith("/HEAD"):
        raise InputError("trust ref %r would trust the candidate itself: name the target branch" % name)
    if name.startswith("refs/"):
        if not name.startswith(("refs/heads/", "refs/remotes/")):
            raise InputError("trust ref %r is not a branch (refs/heads/ or refs/remotes/)" % name)
        return name
    head, _, rest = name.partition("/")
    return ("refs/remotes/" if rest and head in remotes else "refs/heads/") + name


def _remotes(repo: Path) -> list[str]:
    return (git_ok(repo, "remote") or "").split()


def _branch_commits(repo: Path, refs: Sequence[str]) -> dict[str, str]:
    """The commit each of ``refs`` (fully qualified names) points at, by exact name, from
    one git process; a ref that does not exist, or names no commit, is left out.
    """
    listed = git_ok(
        repo,
        "for-each-ref",
        "--format=%(refname) %(objecttype) %(objectname) %(*objecttype) %(*objectname)",
        "--",
        *refs,
    )
    found: dict[str, str] = {}
    for line in (listed or "").splitlines():
        name, kind, obj, *peeled = line.split(" ")
        if name in refs:  # a pattern also matches the refs below it (refs/heads/main/x)
            commit = obj if kind == "commit" else peeled[1] if peeled[:1] == ["commit"] else None
            if commit:
                found[name] = commit
    return found


def _target_branch(repo: Path, ref: str | None) -> tuple[str, str] | None:
    """The target branch's name and commit. An explicit ``ref`` that does not exist is bad
    input; the defaults are tried in order, and the first that exists is the target branch.
    Every name is resolved fully qualified (`qualified_branch`); the defaults, valid names
    all, are qualified and resolved together (a cold `verify` pays for each git process).
    """
    remotes = _remotes(repo)
    if ref:
        full = qualified_branch(repo, ref, remotes)
        commit = _branch_commits(repo, [full]).get(full)
        if commit is None:
            raise InputError("trust ref %r (%s) names no commit in this repository (fetch it first)" % (ref, full))
        return ref, commit
    names = {name: _qualified(name, remotes) for name in DEFAULT_TRUST_REFS}
    commits = _branch_commits(repo, list(names.values()))
    return next(((name, commits[full]) for name, full in names.items() if full in commits), None)


def _branch_text(repo: Path, branch: tuple[str, str], path: str) -> str | None:
    """``path`` as committed on the target branch (None when it has no such file)."""
    shown = run_git(repo, "show", "%s:%s" % (branch[1], path))
    if shown.returncode != 0:
        return None
    try:
        return shown.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("%s:%s is not UTF-8 text" % (branch[0], path)) from None


def branch_file(repo: Path, ref: str | None, path: str) -> tuple[str, bytes | None] | None:
    """``path``'s exact bytes as committed on the target branch (`_target_branch`), with
    where that is (``BRANCH:PATH``); bytes None when the branch has no such file, and
    None when there is no target branch.
    """
    branch = _target_branch(repo, ref)
    if branch is None:
        return None
    shown = run_git(repo, "show", "%s:%s" % (branch[1], path))
    return "%s:%s" % (branch[0], path), shown.stdout if shown.returncode == 0 else None


def branch_trust(repo: Path, ref: str | None) -> tuple[TrustRoot | None, str]:
    """The pin committed on the target branch (`_target_branch`), and what was looked at
    (for messages); the first default branch that exists is the target branch whether or
    not it holds the file.
    """
    branch = _target_branch(repo, ref)
    if branch is None:
        return None, "no %s branch" % " or ".join(DEFAULT_TRUST_REFS)
    where = "%s:%s" % (branch[0], REPO_TRUST_PATH)
    text = _branch_text(repo, branch, REPO_TRUST_PATH)
    if text is None:
        return None, "%s has no %s" % (branch[0], REPO_TRUST_PATH)
    try:
        return TrustRoot.from_allowed_signers(text, "%s at %s" % (where, branch[1][:12])), where
    except CannotVerify as exc:
        raise InputError(str(exc)) from None


def parse_auditors(text: str, where: str) -> tuple[tuple[WitnessKey, ...], int]:
    """The auditing-witness policy file (format.md §8.1a): ``#`` comments and blank lines,
    one ``quorum N`` line, and one ``NAME ssh-ed25519 AAAA...`` line per auditing witness.

    Returns:
        The auditing witnesses and the quorum (at least 1, at most their number).

    Raises:
        InputError: any other line, a key that does not parse, a name twice, or a quorum
            missing, repeated or out of range.
    """
    keys: list[WitnessKey] = []
    quorum = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word == "quorum":
            if quorum is not None or not rest.strip().isdigit():
                raise InputError("%s line %d: one 'quorum N' line, N a number" % (where, number))
            quorum = int(rest)
            continue
        if not rest.strip().startswith("ssh-"):
            raise InputError("%s line %d: an auditing witness is 'NAME ssh-ed25519 AAAA...'" % (where, number))
        try:
            keys.append(WitnessKey.parse(line))
        except CannotVerify as exc:
            raise InputError("%s line %d: %s" % (where, number, exc)) from None
    if len({k.name for k in keys}) != len(keys):
        raise InputError("%s: an auditing witness is named twice" % where)
    if len({k.public_key for k in keys}) != len(keys):
        raise InputError("%s: one key is given for two auditing witnesses (each counts once toward the quorum)" % where)
    if quorum is None or not 1 <= quorum <= len(keys):
        raise InputError("%s: 'quorum N' with N from 1 to the number of auditing witnesses is required" % where)
    return tuple(keys), quorum


def resolve_auditors(
    *, explicit: Sequence[str], quorum: int | None, repo: Path | None, trust_ref: str | None
) -> tuple[tuple[WitnessKey, ...], int]:
    """The auditing witnesses a check relies on for completeness (§8.1a), and their quorum:
    ``--auditing-witness`` keys (quorum default 1), else ``.ledger/auditing-witnesses`` as
    committed on the target branch (never the candidate's tree), else none.

    Raises:
        InputError: a key that does not parse, a quorum above the keys given, or a policy file
            that does not parse.
    """
    if explicit:
        try:
            keys = tuple(WitnessKey.parse(v) for v in explicit)
        except CannotVerify as exc:
            raise InputError(str(exc)) from None
        wanted = 1 if quorum is None else quorum
        if not 1 <= wanted <= len(keys):
            raise InputError(
                "--audited-quorum %d: give from 1 to %d (the --auditing-witness keys)" % (wanted, len(keys))
            )
        return keys, wanted
    if quorum:
        raise InputError("--audited-quorum needs --auditing-witness keys")
    branch = _target_branch(repo, trust_ref) if repo is not None else None
    text = _branch_text(repo, branch, AUDITORS_PATH) if repo is not None and branch is not None else None
    if branch is None or text is None:
        return (), 0
    return parse_auditors(text, "%s:%s" % (branch[0], AUDITORS_PATH))


def branch_store(repo: Path, ref: str | None) -> str | None:
    """The shared store named by ``store`` in ``.ledger/config.toml`` as committed on the
    target branch (None when the branch or the line is absent), never the candidate's file:
    a candidate that named its own store could have CI seal from a copy that leaves out a
    rejection, and have the gate audit that copy.

    Raises:
        InputError: an explicit ref that names no branch, or a file that does not parse.
    """
    branch = _target_branch(repo, ref)
    path = ".ledger/" + CONFIG_NAME
    text = _branch_text(repo, branch, path) if branch is not None else None
    if branch is None or text is None:
        return None
    where = "%s:%s" % (branch[0], path)
    try:
        found = tomllib.loads(text).get("store")
    except tomllib.TOMLDecodeError as exc:
        raise InputError("%s: %s" % (where, exc)) from None
    return store_value(found, where)


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
    its ``allowed_signers`` and its config.toml's ``trust_ref`` are the candidate's own.
    """
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
