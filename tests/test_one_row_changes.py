"""The property: over random single-row changes to a store (the signed bytes and
the index columns alike), no change that the full audit (`verify_chain`) rejects is
accepted by a single-receipt path: proof and walk on the changed ledger, and a bundle
exported from it.

The rows changed are the ones a receipt's claim rests on (format.md §8.1): the receipt's
task, the keyring up to it, the receipt, the Merkle tree and the checkpoints. In the sample
every entry is one of those. A change to another task's rows, or to rows after the
receipt, is the full audit's and the monitor's to find (§8.1); a single-receipt check
need not read them, which is what keeps it flat."""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ADMIN_ID, SIGNERS, build_sample
from ledger import Ledger, LedgerError, export_bundle
from receipts import Digest, ReceiptsError
from verify import BundleSource, CannotVerify, LedgerSource, Transparency, TrustRoot, verify_chain, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
POLICY = Transparency(require_checkpoint=True)
CHANGES = 160

Change = Callable[[sqlite3.Connection, random.Random], str]


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    s = build_sample(tmp_path_factory.mktemp("rows"))
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    return s.root, s.receipt


def _seqs(conn: sqlite3.Connection) -> list[int]:
    return [seq for (seq,) in conn.execute("SELECT seq FROM entries ORDER BY seq")]


def _flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _set_index(conn: sqlite3.Connection, rng: random.Random) -> str:
    """An index column set to another row's value, NULL, or a value no row has."""
    seq = rng.choice(_seqs(conn))
    column = rng.choice(("kind", "task", "hash", "body_hash"))
    values = [v for (v,) in conn.execute("SELECT DISTINCT %s FROM entries WHERE seq != ?" % column, (seq,))]
    (mine,) = conn.execute("SELECT %s FROM entries WHERE seq = ?" % column, (seq,)).fetchone()
    others = [v for v in values if v != mine and (column not in ("hash",) or v is None)]
    if column in ("kind", "task"):
        others += [None, "event", "receipt", "key_revoke", "OTHER-9"]
    else:
        others.append(_flip(mine, rng))
    if column == "kind":
        others = [v for v in others if v is not None]  # NOT NULL
    value = rng.choice([v for v in others if v != mine])
    conn.execute("UPDATE entries SET %s = ? WHERE seq = ?" % column, (value, seq))
    return "entries[%d].%s = %r" % (seq, column, value)


def _flip_signed(conn: sqlite3.Connection, rng: random.Random) -> str:
    seq = rng.choice(_seqs(conn))
    column = rng.choice(("entry", "body"))
    (data,) = conn.execute("SELECT %s FROM entries WHERE seq = ?" % column, (seq,)).fetchone()
    conn.execute("UPDATE entries SET %s = ? WHERE seq = ?" % column, (_flip(data, rng), seq))
    return "entries[%d].%s flipped" % (seq, column)


def _delete_entry(conn: sqlite3.Connection, rng: random.Random) -> str:
    seq = rng.choice(_seqs(conn))
    conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    return "entries[%d] deleted" % seq


def _swap_entries(conn: sqlite3.Connection, rng: random.Random) -> str:
    a, b = rng.sample(_seqs(conn), 2)
    conn.execute("UPDATE entries SET seq = -1 WHERE seq = ?", (a,))
    conn.execute("UPDATE entries SET seq = ? WHERE seq = ?", (a, b))
    conn.execute("UPDATE entries SET seq = ? WHERE seq = -1", (b,))
    return "entries[%d] and entries[%d] swapped" % (a, b)


def _tree_node(conn: sqlite3.Connection, rng: random.Random) -> str:
    level, idx, node = rng.choice(list(conn.execute("SELECT level, idx, hash FROM tree")))
    if rng.random() < 0.5:
        conn.execute("DELETE FROM tree WHERE level = ? AND idx = ?", (level, idx))
        return "tree[%d,%d] deleted" % (level, idx)
    conn.execute("UPDATE tree SET hash = ? WHERE level = ? AND idx = ?", (_flip(node, rng), level, idx))
    return "tree[%d,%d] flipped" % (level, idx)


def _checkpoint(conn: sqlite3.Connection, rng: random.Random) -> str:
    size, note = rng.choice(list(conn.execute("SELECT size, note FROM checkpoints")))
    if rng.random() < 0.3:
        conn.execute("DELETE FROM checkpoints WHERE size = ?", (size,))
        return "checkpoints[%d] deleted" % size
    text = note.encode()
    changed = _flip(text, rng).decode("utf-8", "replace")
    conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (changed, size))
    return "checkpoints[%d] flipped" % size


CHANGE_KINDS: tuple[Change, ...] = (
    _set_index,
    _set_index,
    _flip_signed,
    _delete_entry,
    _swap_entries,
    _tree_node,
    _checkpoint,
)


def _accepted_by(work: Path, receipt: str, tmp: Path) -> list[str]:
    """The single-receipt paths that accept ``receipt`` on the changed ledger. A path that
    refuses to run (an export or a source that cannot open) does not accept."""
    accepted = []
    for method in ("proof", "walk"):
        try:
            with LedgerSource.open(work) as source:
                if verify_receipt(source, receipt, TRUST, POLICY, method=method).ok:
                    accepted.append(method)
        except CannotVerify:
            pass
    bundle = tmp / "bundle.zip"
    bundle.unlink(missing_ok=True)
    try:
        ledger = Ledger.open(work)
        try:
            export_bundle(ledger, Digest.parse(receipt), bundle)
        finally:
            ledger.close()
        with BundleSource(bundle) as source:
            if verify_receipt(source, receipt, TRUST, POLICY).ok:
                accepted.append("bundle")
    except (LedgerError, ReceiptsError, CannotVerify):
        pass
    return accepted


def _rejected_by_chain(work: Path) -> bool:
    try:
        with LedgerSource.open(work) as source:
            return not verify_chain(source, TRUST).ok
    except CannotVerify:
        return True


def test_no_single_row_change_the_full_audit_rejects_is_accepted_for_one_receipt(
    sealed: tuple[Path, str], tmp_path: Path
) -> None:
    root, receipt = sealed
    assert not _rejected_by_chain(root)
    assert _accepted_by(root, receipt, tmp_path) == ["proof", "walk", "bundle"]  # the property can fail
    rng = random.Random(20261204)
    slipped, rejected = [], 0
    for _ in range(CHANGES):
        work = tmp_path / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(root, work)
        conn = sqlite3.connect(work / "ledger.db")
        with conn:
            what = rng.choice(CHANGE_KINDS)(conn, rng)
        conn.close()
        if not _rejected_by_chain(work):
            continue
        rejected += 1
        accepted = _accepted_by(work, receipt, tmp_path)
        if accepted:
            slipped.append("%s: accepted by %s" % (what, ", ".join(accepted)))
    assert not slipped, "\n".join(slipped)
    assert rejected > CHANGES // 2  # the changes were real ones, not no-ops
