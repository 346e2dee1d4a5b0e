"""What `ledger verify` does, as a library call any front end can make: one request that
says what to verify (a receipt on the ledger, a bundle, a commit's receipts, or the whole
chain), checked for sense when it is made, and one function that runs it and returns the
document, the lines for people and the verdict.

The verifying itself is `verify`'s; this module only chooses which of its entry points a
request names, opens the source it reads (and closes it), and keeps the audit state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verify import (
    LedgerSource,
    Result,
    Transparency,
    Trust,
    exceptions,
    headline,
    verify_chain,
    verify_receipt,
)

from .._errors import InputError
from ..views._render import chain_lines, pr_comment, verify_lines

if TYPE_CHECKING:  # `ledger verify HASH` loads neither the gate, git notes nor the exporter
    from receipts import Digest, ScittVerdict
    from verify import TileAudit

    from ..store._ledger import Ledger

__all__ = ["VerifyRequest", "Verified", "Progress", "receipt_comment", "run_verify", "run_tile_audit", "check_scitt"]


class Progress(Protocol):
    """Progress on a long audit: told the amount of work once, then each step done."""

    def start(self, total: int) -> None:
        """Begin: ``total`` steps to go."""

    def update(self, done: int) -> None:
        """``done`` more steps are finished."""


@dataclass(frozen=True, slots=True)
class VerifyRequest:
    """What to verify, exactly one of: a receipt ``receipt`` on the ledger; a ``bundle``
    (its receipt unless ``receipt`` names one); the receipts attached to ``commit``; the
    whole ``chain`` (resumed from the audit state file ``resume``; a clean audit's state
    written to ``save_state``, else back to ``resume``).

    Raises:
        InputError: the combination makes no sense (the message says which options clash).
    """

    receipt: str | None = None
    chain: bool = False
    bundle: Path | None = None
    commit: str | None = None
    method: str = "auto"
    evidence: bool = True
    resume: Path | None = None
    save_state: Path | None = None

    def __post_init__(self) -> None:
        if self.bundle is not None and self.chain:
            raise InputError("--chain audits a ledger, not a bundle")
        if (self.resume is not None or self.save_state is not None) and not self.chain:
            raise InputError("--resume and --save-state go with --chain")
        if self.commit is not None and (self.bundle is not None or self.chain):
            raise InputError("--commit verifies what git holds for a commit: not with --bundle or --chain")
        if self.bundle is None and self.commit is None and self.chain == (self.receipt is not None):
            raise InputError("give either a receipt HASH or --chain")


@dataclass(frozen=True, slots=True)
class Verified:
    """A verification's outcome: ``ok`` (else exit 1), the document (``--json``) and the
    lines for people. ``eligible`` is whether a verified receipt is merge-eligible (None for
    a chain audit): verified but not eligible is a distinct exit code (3), never silence.
    """

    ok: bool
    document: Any
    lines: tuple[str, ...]
    eligible: bool | None = None

    @property
    def exit_code(self) -> int:
        """0 verified (and eligible), 1 rejected, 3 verified but not merge-eligible."""
        if not self.ok:
            return 1
        return 3 if self.eligible is False else 0


def run_verify(
    request: VerifyRequest,
    trust: Trust,
    policy: Transparency,
    *,
    open_source: Callable[[], LedgerSource],
    repo: Callable[[], Path],
    open_ledger: Callable[[], LedgerSource] | None = None,
    progress: Progress | None = None,
) -> Verified:
    """Verify what ``request`` names against ``trust`` under ``policy``.

    Args:
        request: what to verify.
        trust: the pinned trust root.
        policy: checkpoints, witnesses, time-stamps and completeness to require.
        open_source: opens the ledger (the CLI's --dir or --store), only when the request reads it.
        repo: the git repository, only asked for with ``commit``.
        open_ledger: where a commit's receipt without a bundle in git is read from.
        progress: told the chain audit's work, entry by entry.

    Returns:
        The outcome; a rejection is ``ok=False`` with its defects in the lines, not an error.

    Raises:
        InputError: the ledger, bundle or state cannot be read as given.
        verify.CannotVerify: the source cannot be read.
    """
    if request.commit is not None:
        return _commit(repo(), request.commit, trust, policy, open_ledger)
    if request.bundle is not None:
        from verify import BundleSource

        with BundleSource(request.bundle) as bundle:
            result = verify_receipt(bundle, request.receipt or bundle.receipt_hash(), trust, policy, request.method)
        return Verified(result.ok, _document(result), tuple(verify_lines(result)), bool(result.derived_eligible))
    with open_source() as source:
        if request.chain:
            return _audit(source, request, trust, policy, progress)
        result = verify_receipt(source, request.receipt or "", trust, policy, request.method)
    return Verified(result.ok, _document(result), tuple(verify_lines(result)), bool(result.derived_eligible))


def _commit(
    repo: Path, commit: str, trust: Trust, policy: Transparency, open_ledger: Callable[[], LedgerSource] | None
) -> Verified:
    from ..ci._gate import deciding_receipt, verify_commit
    from ..ci._lines import commit_lines

    checks = verify_commit(repo, commit, trust, policy, open_ledger=open_ledger)
    decides = deciding_receipt(checks)  # as the gate picks it, so that both say the same
    return Verified(
        all(c.ok for c in checks),
        [{**c.as_dict(), "decides": c is decides} for c in checks],
        tuple(commit_lines(checks, decides)),
        decides is not None and decides.lets_through,
    )


def _document(result: Result) -> dict[str, object]:
    # The JSON carries the sentence and exceptions every page shows (`verify.exceptions`).
    notes = exceptions(result)
    return {**result.as_dict(), "headline": headline(result, notes), "exceptions": [n.as_dict() for n in notes]}


def _audit(
    source: LedgerSource, request: VerifyRequest, trust: Trust, policy: Transparency, progress: Progress | None
) -> Verified:
    """The whole chain, resumed from the request's state when it has one; a clean audit's
    state kept where the request says (its resume file by default).
    """
    from verify import AuditState

    from .._files import read_bounded, write_text_atomic  # a receipt's check keeps no state

    resume = AuditState.from_json(read_bounded(request.resume, "audit state").decode()) if request.resume else None
    state_file = request.save_state or request.resume
    if progress is not None:
        progress.start(max(source.count() - (resume.size if resume else 0), 0))
    result = verify_chain(
        source,
        trust,
        progress=progress.update if progress is not None else None,
        transparency=policy,
        evidence=request.evidence,
        resume=resume,
    )
    if state_file is not None and result.state is not None:
        write_text_atomic(state_file, result.state.to_json())
    return Verified(result.ok, result.as_dict(), tuple(chain_lines(result, state_file)))


def receipt_comment(ledger: Ledger, receipt_digest: Digest, trust: Trust) -> str:
    """`ledger pr-comment HASH`: the comment the action writes (the decision and why, the
    goal, each check, the tiers, who approved), for one receipt on the ledger. The checks
    and the goal are shown only when the receipt verifies, as the action shows them only
    from a verified bundle.
    """
    from ..exports._bundle import manifest_on_ledger

    manifest, result, receipt_hash = manifest_on_ledger(ledger, receipt_digest, trust)
    return pr_comment(result, receipt_hash, manifest if result.ok else None)


def run_tile_audit(where: str, log_vkey: str, policy: Transparency) -> TileAudit:
    """`ledger verify --tiles WHERE --log-vkey VKEY`: the published tile log audited from
    its files alone, read from a folder or an http(s) prefix, and held to what ``policy``
    says the auditor kept (`--since`) and asks (witnesses, a tlog-policy):
    `verify.audit_tiles_under`.

    Raises:
        CannotVerify: the vkey is not a log's, the files cannot be read, or the kept
            checkpoint is no checkpoint.
    """
    from verify import audit_tiles_under, tile_reader

    return audit_tiles_under(tile_reader(where), log_vkey, policy)


def check_scitt(
    statement: bytes, receipt: bytes, issuer_key: bytes, log_key: bytes, registered_in: LedgerSource | None = None
) -> ScittVerdict:
    """`ledger verify --scitt`: a SCITT signed statement and its RFC 9942 receipt checked
    offline from the issuer's and the log's public keys (`receipts.verify_scitt`), and
    with ``registered_in`` also against that ledger's statement log (`verify.verify_registered`).

    Raises:
        CannotVerify: the ledger holds fewer statements than the receipt's tree.
    """
    from receipts import verify_scitt
    from verify import verify_registered

    if registered_in is not None:
        return verify_registered(registered_in, statement, receipt, issuer_key, log_key)
    return verify_scitt(statement, receipt, issuer_key, log_key)
