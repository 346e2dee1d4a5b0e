"""`ledger site build DIR`: every page of the web view as files for any static host,
byte-identical across two builds of the same ledger (nothing in a page depends on when or
where it was built). Each receipt page carries the verifier's decision at build time.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from receipts import EntryKind
from verify import LedgerSource, Transparency, Trust

from .._errors import InputError
from ._branch import Branch
from ._index import ChainIndex
from ._pages import PAGE_SIZE, STYLE, Page, Pages, page_name, receipt_name

__all__ = ["build_site"]


def _plan(pages: Pages, index: ChainIndex) -> list[tuple[str, Callable[[], Page]]]:
    """Every file of the site, each with what renders it."""
    plan: list[tuple[str, Callable[[], Page]]] = [
        ("index.html", pages.tasks),
        ("keys.html", pages.keys),
        ("commits.html", pages.commits),
        ("checkpoints.html", pages.checkpoints),
        ("checks.html", pages.checks),
        ("feed.atom", pages.feed),
        ("api/tasks.json", lambda: pages.api("tasks")),
        ("api/checkpoints.json", lambda: pages.api("checkpoints")),
    ]
    for n in range(max(1, (index.count() + PAGE_SIZE - 1) // PAGE_SIZE)):
        plan.append(("chain/%d.html" % n, functools.partial(pages.chain, n)))
        plan.append(("api/chain/%d.json" % n, functools.partial(pages.api, "chain", page=n)))
    for task in sorted(t.task for t in index.task_summaries()):
        plan.append(("task/%s.html" % page_name(task), functools.partial(pages.task, task)))
    seen: set[str] = set()
    for row in index.of_kind(EntryKind.RECEIPT):
        name = receipt_name(row.body_hash)
        plan.append(("receipt/%s.html" % name, functools.partial(pages.receipt, row.body_hash)))
        plan.append(("api/receipt/%s.json" % name, functools.partial(pages.api, "receipt", target=row.body_hash)))
        for record in pages.evidence_rows(row):
            for _, digest, _ in record.evidence:
                blob = "evidence/%s.html" % digest.removeprefix("blake3:")
                if blob not in seen:
                    seen.add(blob)
                    plan.append((blob, functools.partial(pages.evidence, digest)))
    return plan


def build_site(
    open_source: Callable[[], LedgerSource],
    trust: Trust,
    folder: Path,
    title: str = "receipt-ledger",
    progress: Callable[[int, int], None] | None = None,
    policy: Transparency | None = None,
    branch: Branch | None = None,
) -> int:
    """Write the site into ``folder`` (replaced whole, never left half-written).

    Args:
        open_source: opens the ledger read-only.
        trust: what the receipts are verified against.
        folder: where the site goes; an existing one is replaced.
        title: the site's name.
        progress: told (pages written, pages in all).
        policy: the witnesses and checkpoint the receipts and checkpoints are checked against.
        branch: the target branch, whose commits the commits page lists with their receipts.

    Returns:
        How many files were written.

    Raises:
        InputError: ``folder`` exists and is not a folder this command wrote.
    """
    if folder.exists() and not (folder / ".receipt-ledger-site").exists():
        if not folder.is_dir() or any(folder.iterdir()):
            raise InputError("%s exists and is not a site this command built: name a new or empty folder" % folder)
    index = ChainIndex()
    with open_source() as source:
        index.update(source)
    plan = _plan(Pages(index, open_source, trust, title, static=True, policy=policy, branch=branch), index)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".site-", dir=folder.parent))
    try:
        (staging / ".receipt-ledger-site").write_bytes(b"")
        (staging / "style.css").write_text(STYLE)
        for done, (name, render) in enumerate(plan, 1):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(render().body)
            if progress is not None:
                progress(done, len(plan))
        for path in staging.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(staging, 0o755)
        old = None
        if folder.exists():
            old = folder.with_name(".%s-old-%d" % (folder.name, os.getpid()))
            folder.rename(old)
        staging.rename(folder)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return len(plan) + 2  # with the style sheet and the mark that says this command wrote the folder
