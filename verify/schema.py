"""Where a ledger directory keeps its bytes (docs/format.md §7): the SQLite schema and
the blob store layout. Public so that the writer (`ledger`) and this reader share one
definition; it holds names and SQL text only.
"""

from __future__ import annotations

from pathlib import Path

from receipts import Digest

__all__ = ["DB_NAME", "BLOB_DIR", "SCHEMA_VERSION", "SCHEMA", "PG_SCHEMA_VERSION", "PG_SCHEMA", "blob_path"]

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


# The shared store (docs/format.md §7a): the same three tables on PostgreSQL, plus
# `prev` as a UNIQUE column (two entries can never extend one predecessor), the blobs in
# chunks, a schema version, and triggers that make every table append-only. The one
# change a trigger lets through is a checkpoint gaining signature lines (cosignatures).
PG_SCHEMA_VERSION = 1
PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    seq BIGINT PRIMARY KEY CHECK (seq >= 0),
    hash BYTEA NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    body_hash BYTEA NOT NULL,
    task TEXT,
    entry BYTEA NOT NULL,
    body BYTEA NOT NULL,
    prev BYTEA UNIQUE
);
CREATE INDEX IF NOT EXISTS entries_body_hash ON entries(body_hash);
CREATE INDEX IF NOT EXISTS entries_task_seq ON entries(task, seq);
CREATE INDEX IF NOT EXISTS entries_kind_seq ON entries(kind, seq);
CREATE TABLE IF NOT EXISTS tree (
    level INTEGER NOT NULL,
    idx BIGINT NOT NULL,
    hash BYTEA NOT NULL,
    PRIMARY KEY (level, idx)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    size BIGINT PRIMARY KEY,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS blob_chunks (
    digest BYTEA NOT NULL,
    idx INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (digest, idx)
);
CREATE TABLE IF NOT EXISTS blobs (
    digest BYTEA PRIMARY KEY,
    size BIGINT NOT NULL,
    chunks INTEGER NOT NULL
);
CREATE OR REPLACE FUNCTION receipt_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'checkpoints' THEN
        -- Only whole signature lines may be added (a name without spaces or '+', canonical
        -- base64 of at least 6 bytes), as §9's parser reads them: anything else jams readers.
        IF NEW.size = OLD.size AND starts_with(NEW.note, OLD.note)
            AND substr(NEW.note, length(OLD.note) + 1) ~ '^(\u2014 [^\\s+]+ ([A-Za-z0-9+/]{4}){2,}([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?\\n)*$' THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'receipt-ledger: % on % refused: the ledger is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$fn$;
CREATE OR REPLACE TRIGGER entries_append_only BEFORE UPDATE OR DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE TRIGGER tree_append_only BEFORE UPDATE OR DELETE ON tree
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE TRIGGER checkpoints_append_only BEFORE UPDATE OR DELETE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE TRIGGER blobs_append_only BEFORE UPDATE OR DELETE ON blobs
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE TRIGGER blob_chunks_append_only BEFORE UPDATE OR DELETE ON blob_chunks
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE FUNCTION receipt_ledger_extends_head() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    head_seq BIGINT;
    head_hash BYTEA;
BEGIN
    SELECT seq, hash INTO head_seq, head_hash FROM entries ORDER BY seq DESC LIMIT 1;
    IF (head_seq IS NULL AND NEW.seq = 0 AND NEW.prev IS NULL)
        OR (NEW.seq = head_seq + 1 AND NEW.prev = head_hash) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'receipt-ledger: entry % refused: it does not extend the head (seq %, prev)', NEW.seq,
        coalesce(head_seq + 1, 0) USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;
CREATE OR REPLACE FUNCTION receipt_ledger_derived_node() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    expected BYTEA;
BEGIN
    IF NEW.level = 0 THEN
        SELECT sha256('\\x00'::bytea || entry) INTO expected FROM entries WHERE seq = NEW.idx;
    ELSE
        SELECT sha256('\\x01'::bytea || l.hash || r.hash) INTO expected
            FROM tree l, tree r
            WHERE l.level = NEW.level - 1 AND l.idx = 2 * NEW.idx AND r.level = NEW.level - 1 AND r.idx = 2 * NEW.idx + 1;
    END IF;
    IF expected IS NOT NULL AND expected = NEW.hash THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'receipt-ledger: tree node (%, %) refused: it is not derived from the entries', NEW.level, NEW.idx
        USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;
CREATE OR REPLACE FUNCTION receipt_ledger_new_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.size > coalesce((SELECT max(size) FROM checkpoints), 0)
        AND EXISTS (SELECT 1 FROM entries WHERE seq = NEW.size - 1) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'receipt-ledger: checkpoint at size % refused: it does not extend the newest over stored entries',
        NEW.size USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;
CREATE OR REPLACE TRIGGER entries_extend_head BEFORE INSERT ON entries
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_extends_head();
CREATE OR REPLACE TRIGGER tree_derived BEFORE INSERT ON tree
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_derived_node();
CREATE OR REPLACE TRIGGER checkpoints_extend BEFORE INSERT ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION receipt_ledger_new_checkpoint();
CREATE OR REPLACE TRIGGER entries_no_truncate BEFORE TRUNCATE ON entries
    FOR EACH STATEMENT EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE TRIGGER tree_no_truncate BEFORE TRUNCATE ON tree
    FOR EACH STATEMENT EXECUTE FUNCTION receipt_ledger_append_only();
CREATE OR REPLACE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION receipt_ledger_append_only();
"""
