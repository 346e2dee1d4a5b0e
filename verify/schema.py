"""Where a ledger directory keeps its bytes (docs/format.md §7): the SQLite schema and
the blob store layout. Public so that the writer (`ledger`) and this reader share one
definition; it holds names and SQL text only."""

from __future__ import annotations

from pathlib import Path

from receipts import Digest

__all__ = ["DB_NAME", "BLOB_DIR", "SCHEMA_VERSION", "SCHEMA", "blob_path"]

DB_NAME = "ledger.db"
BLOB_DIR = "blobs"
SCHEMA_VERSION = 1

# `hash`, `kind`, `body_hash` and `task` are lookup indexes derived from `entry` and `body`;
# a verifier recomputes them and never trusts them.
SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    body_hash BLOB NOT NULL,
    task TEXT,
    entry BLOB NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_body_hash ON entries(body_hash);
CREATE INDEX IF NOT EXISTS entries_task ON entries(task, kind);
CREATE INDEX IF NOT EXISTS entries_task_seq ON entries(task, seq);
CREATE INDEX IF NOT EXISTS entries_kind_seq ON entries(kind, seq);
CREATE TABLE IF NOT EXISTS tree (
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY,
    note TEXT NOT NULL
);
"""


def blob_path(root: Path, digest: Digest) -> Path:
    """An evidence blob's file: ``blobs/<first 2 hex>/<64 hex>`` under the ledger directory."""
    return root / BLOB_DIR / digest.hex[:2] / digest.hex
