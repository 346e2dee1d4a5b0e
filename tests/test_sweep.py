"""Tamper sweep: change stored bytes one at a time; the verifier must detect
every single change, and report nothing on the untouched ledger."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest

from conftest import ADMIN_ID, SIGNERS, build_sample
from ledger import Ledger, export_bundle
from verify import BundleSource, CannotVerify, LedgerSource, Transparency, TrustRoot, verify_chain, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")
# The long version (10,000 flips) runs with RECEIPT_LEDGER_SWEEP=10000; the suite keeps to its time budget.
FLIPS = int(os.environ.get("RECEIPT_LEDGER_SWEEP", "400"))


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    tmp = tmp_path_factory.mktemp("sweep")
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    bundle = tmp / "bundle.zip"
    export_bundle(ledger, __import__("receipts").Digest.parse(s.receipt), bundle)
    ledger.close()
    return s.root, s.receipt, bundle


def _positions(root: Path) -> list[tuple[int, str, int]]:
    conn = sqlite3.connect(root / "ledger.db")
    rows = conn.execute("SELECT seq, length(entry), length(body) FROM entries").fetchall()
    conn.close()
    return [(seq, col, i) for seq, le, lb in rows for col, n in (("entry", le), ("body", lb)) for i in range(n)]


def test_untouched_ledger_and_bundle_verify_clean(sealed: tuple[Path, str, Path]) -> None:
    root, receipt, bundle = sealed
    assert verify_chain(LedgerSource.open(root), TRUST).ok
    assert verify_receipt(LedgerSource.open(root), receipt, TRUST, Transparency(require_checkpoint=True)).ok
    source = BundleSource(bundle)
    assert verify_receipt(source, receipt, TRUST, Transparency(require_checkpoint=True)).ok


def test_every_sampled_byte_flip_in_the_ledger_is_detected(sealed: tuple[Path, str, Path], tmp_path: Path) -> None:
    root, _, _ = sealed
    positions = _positions(root)
    rng = random.Random(20261202)
    sample = positions if len(positions) <= FLIPS else rng.sample(positions, FLIPS)
    work = tmp_path / "ledger"
    shutil.copytree(root, work)
    conn = sqlite3.connect(work / "ledger.db")
    missed = []
    for seq, col, i in sample:
        (original,) = conn.execute("SELECT %s FROM entries WHERE seq = ?" % col, (seq,)).fetchone()
        data = bytearray(original)
        data[i] ^= 1 << rng.randrange(8)
        with conn:
            conn.execute("UPDATE entries SET %s = ? WHERE seq = ?" % col, (bytes(data), seq))
        result = verify_chain(LedgerSource.open(work), TRUST)
        if result.ok:
            missed.append((seq, col, i))
        with conn:
            conn.execute("UPDATE entries SET %s = ? WHERE seq = ?" % col, (original, seq))
    conn.close()
    assert not missed, "undetected flips: %s" % missed[:10]
    assert verify_chain(LedgerSource.open(work), TRUST).ok  # restored: no false alarm


def test_every_sampled_byte_flip_in_a_bundle_is_detected_or_refused(
    sealed: tuple[Path, str, Path], tmp_path: Path
) -> None:
    _, receipt, bundle = sealed
    with zipfile.ZipFile(bundle) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    # every member is checked: the renderings and allowed_signers are re-derived and compared
    checked = members
    positions = [(n, i) for n, d in checked.items() for i in range(len(d))]
    rng = random.Random(7)
    missed = []
    for name, i in rng.sample(positions, min(FLIPS // 2, len(positions))):
        data = bytearray(checked[name])
        data[i] ^= 1 << rng.randrange(8)
        target = tmp_path / "b.zip"
        with zipfile.ZipFile(target, "w") as zout:
            for n, d in members.items():
                zout.writestr(n, bytes(data) if n == name else d)
        try:
            source = BundleSource(target)
            ok = verify_receipt(source, receipt, TRUST, Transparency(require_checkpoint=True)).ok
            source.close()
        except CannotVerify:
            ok = False  # refused outright: also a detection
        if ok:
            missed.append((name, i))
    assert not missed, "undetected flips: %s" % missed[:10]
