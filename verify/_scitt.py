"""A SCITT statement and its RFC 9942 receipt checked against a ledger's statement log
(docs/format.md §15a): besides what `receipts.verify_scitt` checks offline, the tree the
log signed must be the one this ledger's registered statements give. A log that showed
this receipt's holder another tree than the chain holds has shown a split view.
"""

from __future__ import annotations

from receipts import ScittVerdict, statement_leaf, statement_log_root, verify_scitt

from ._errors import CannotVerify
from ._source import LedgerSource

__all__ = ["verify_registered"]


def verify_registered(
    source: LedgerSource, statement: bytes, receipt: bytes, issuer_key: bytes, log_key: bytes
) -> ScittVerdict:
    """Check ``statement`` and ``receipt`` offline, then against ``source``'s statement log.

    Steps:
      1. the offline checks (`receipts.verify_scitt`): a failure there is the answer;
      2. the ledger holds at least as many registered statements as the receipt's tree
         (else we cannot check: a mirror behind the log);
      3. the root of the ledger's first ``size`` statements is the root the log signed;
         else SPLIT_VIEW (the statement at that position, or one before it, differs).

    Raises:
        CannotVerify: the ledger holds fewer statements than the receipt's tree.
    """
    # 1. Offline.
    verdict = verify_scitt(statement, receipt, issuer_key, log_key)
    if not verdict.ok or verdict.tree_size is None or verdict.leaf_index is None:
        return verdict
    # 2. Held.
    leaves = [statement_leaf(body.statement) for _, body in source.statements()]
    size = verdict.tree_size
    if size > len(leaves):
        raise CannotVerify(
            "the receipt is over %d registered statements and this ledger holds %d: pull, then check again"
            % (size, len(leaves))
        )
    # 3. The same tree.
    if statement_log_root(leaves[:size]) != verdict.root:
        return ScittVerdict(
            "SPLIT_VIEW",
            "the log signed a statement tree of size %d that this ledger's first %d statements do not give"
            % (size, size),
            size,
            verdict.leaf_index,
        )
    return ScittVerdict(
        None,
        "statement and receipt verify; registered at index %d of this ledger's statement log" % verdict.leaf_index,
        size,
        verdict.leaf_index,
        verdict.root,
    )
