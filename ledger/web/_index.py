"""A search index built from the chain as read by the verifier's source, kept current by
reading only the entries appended since it last looked. It finds receipts by commit,
tree, task, check, signer, approver, verdict and date; it never decides anything (the
pages verify a receipt on each request).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from receipts import (
    SNAPSHOT_FORMAT,
    Contract,
    ContractRevision,
    Digest,
    EntryKind,
    Genesis,
    KeyAdd,
    KeyRevoke,
    LadderReceipt,
    ReceiptsError,
    StatementRegistration,
    TaskEvent,
    Tier,
    TierRecord,
    decode_body,
    decode_entry,
    fingerprint,
    parse_contract,
    statement_subject,
    tally_check_runs,
    weakenings,
)
from verify import LedgerSource, evidence_reader, read_evidence

__all__ = ["ChainIndex", "IndexRow", "TaskSummary", "web_index", "INDEX_FILE"]

INDEX_FILE = Path("cache", "web-index.sqlite")  # under the ledger's directory; git ignores it


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One entry as the index knows it: what a list or a search shows of it."""

    seq: int
    kind: str
    task: str | None
    body_hash: str
    time: int
    signer: str  # the key's fingerprint
    signer_name: str
    summary: str
    verdict: str | None = None  # a tier record's verdict; a receipt's claim ("eligible" / "not eligible")
    tier: str | None = None
    candidate: str | None = None
    checks: tuple[str, ...] = ()
    evidence: tuple[tuple[str, str, int], ...] = ()  # a tier record's (check id, digest, size)
    text: str = ""  # a contract revision's text
    weakened: tuple[str, ...] = ()  # how a contract revision lowers the bar of the one before
    provenance: str = ""  # a contract revision's reason and the criteria's source, in words

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "task": self.task,
            "hash": self.body_hash,
            "time": self.time,
            "signer": self.signer,
            "signer_name": self.signer_name,
            "summary": self.summary,
            "verdict": self.verdict,
            "tier": self.tier,
            "candidate": self.candidate,
            "checks": list(self.checks),
            "evidence": [{"check_id": c, "digest": d, "size": n} for c, d, n in self.evidence],
            "weakened": list(self.weakened),
            "provenance": self.provenance,
        }


_SCHEMA = 3  # bump when a table or a row's meaning changes: an older index is rebuilt
_TABLES = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(
    seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, task TEXT, hash TEXT NOT NULL, time INTEGER NOT NULL,
    signer TEXT NOT NULL, signer_name TEXT NOT NULL, summary TEXT NOT NULL, verdict TEXT, tier TEXT,
    candidate TEXT, checks TEXT NOT NULL, evidence TEXT NOT NULL, text TEXT NOT NULL, weakened TEXT NOT NULL,
    provenance TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS rows_hash ON rows(hash);
CREATE INDEX IF NOT EXISTS rows_task ON rows(task, seq);
CREATE INDEX IF NOT EXISTS rows_kind ON rows(kind, seq);
CREATE INDEX IF NOT EXISTS rows_candidate ON rows(candidate, kind, seq);
CREATE TABLE IF NOT EXISTS held(digest TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS held_digest ON held(digest, seq);
CREATE TABLE IF NOT EXISTS names(fingerprint TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits(candidate TEXT PRIMARY KEY, commit_id TEXT NOT NULL, tree TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS commits_commit ON commits(commit_id);
CREATE INDEX IF NOT EXISTS commits_tree ON commits(tree);
CREATE TABLE IF NOT EXISTS contracts(task TEXT PRIMARY KEY, contract BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS configs(config TEXT PRIMARY KEY, contract BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS check_runs(
    family TEXT NOT NULL, check_id TEXT NOT NULL, runs INTEGER NOT NULL, passes INTEGER NOT NULL,
    PRIMARY KEY(family, check_id));
CREATE TABLE IF NOT EXISTS tasks(
    task TEXT PRIMARY KEY, entries INTEGER NOT NULL, last_seq INTEGER NOT NULL, last_time INTEGER NOT NULL,
    receipt_seq INTEGER, eligible_seq INTEGER);
"""
_COLUMNS = (
    "seq, kind, task, hash, time, signer, signer_name, summary, verdict, tier, candidate, checks, evidence, text,"
    " weakened, provenance"
)
_WIDTH = _COLUMNS.count(",") + 1
_DATA_TABLES = ("rows", "held", "names", "commits", "contracts", "configs", "check_runs", "tasks")
_BATCH = 5000  # entries per transaction: a crash or a restart keeps every batch done


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """One task as the task list shows it, kept current as entries are indexed."""

    task: str
    entries: int
    last_time: int
    receipt: IndexRow | None  # its newest receipt, if one was sealed
    eligible: IndexRow | None  # its newest receipt that claims merge eligibility


class ChainIndex:
    """Rows of every entry, the key names, and each candidate's commit and tree (from its
    deterministic snapshot), updated incrementally and kept in a SQLite file beside the
    ledger (or in memory): after a restart it reads only the entries appended since it last
    looked. Safe to share between request threads.

    The index is a cache of what the chain says, never a source of decisions: a receipt's
    page verifies the receipt by proof against the ledger itself. An index file that no
    longer matches the ledger (another ledger, a rewritten one, an older schema) is rebuilt.

    Args:
        path: the index file (created if missing); None keeps the index in memory.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False, timeout=60)
        self._lock = threading.RLock()
        self._configs: dict[str, Contract | None] = {}
        with self._lock:
            self._db.execute("PRAGMA journal_mode = WAL" if path is not None else "PRAGMA journal_mode = MEMORY")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            if self._meta("schema") not in (None, str(_SCHEMA)):  # an older layout: built again
                for table in _DATA_TABLES:
                    self._db.execute("DROP TABLE IF EXISTS %s" % table)
            self._db.executescript(_TABLES)
            self._set_meta("schema", str(_SCHEMA))
            self._db.commit()
            self.names = dict(self._db.execute("SELECT fingerprint, name FROM names").fetchall())

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- keeping it current ------------------------------------------------------------------

    def update(self, source: LedgerSource) -> int:
        """Read the entries appended since the last update; how many there were."""
        stop = source.count()
        read = 0
        while True:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")  # one writer at a time, even across processes
                try:
                    start = self._start(source, stop)
                    done = self._index_batch(source, start, min(stop, start + _BATCH))
                    self._db.commit()
                except BaseException:
                    self._db.rollback()
                    raise
            read += done
            if start + done >= stop or not done:
                return read

    def _start(self, source: LedgerSource, stop: int) -> int:
        """Where to go on from: the indexed count, or 0 after dropping an index that no
        longer matches the ledger (its newest indexed entry is not the ledger's).
        """
        have = self.count()
        if have == 0:
            return 0
        stored = next(iter(source.entries_between(have - 1, have)), None) if have <= stop else None
        if stored is not None and self._meta("last_entry") == stored.hash.hex():
            return have
        self._reset()
        return 0

    def _reset(self) -> None:
        for table in _DATA_TABLES:
            self._db.execute("DELETE FROM %s" % table)
        self.names = {}
        self._configs.clear()

    def _index_batch(self, source: LedgerSource, start: int, stop: int) -> int:
        tally: dict[str, dict[str, list[int]]] = {}
        done = 0
        last = None
        for stored in source.entries_between(start, stop):
            last = stored.hash.hex()
            row = self._row(source, stored.seq, stored.kind, stored.task, stored.entry, stored.body, tally)
            self._db.execute("INSERT INTO rows VALUES (%s)" % ",".join("?" * _WIDTH), _values(row))
            self._db.executemany("INSERT INTO held VALUES (?, ?)", {(d, row.seq) for _, d, _ in row.evidence})
            if row.task:
                receipt = row.seq if row.kind == EntryKind.RECEIPT else None
                self._db.execute(
                    "INSERT INTO tasks VALUES (?, 1, ?, ?, ?, ?) ON CONFLICT(task) DO UPDATE SET entries = entries + 1,"
                    " last_seq = excluded.last_seq, last_time = excluded.last_time,"
                    " receipt_seq = coalesce(excluded.receipt_seq, receipt_seq),"
                    " eligible_seq = coalesce(excluded.eligible_seq, eligible_seq)",
                    (row.task, row.seq, row.time, receipt, receipt if row.verdict == "eligible" else None),
                )
            done += 1
        for family, checks in tally.items():
            self._db.executemany(
                "INSERT INTO check_runs VALUES (?, ?, ?, ?) ON CONFLICT(family, check_id) DO UPDATE SET"
                " runs = runs + excluded.runs, passes = passes + excluded.passes",
                [(family, check, runs, passes) for check, (runs, passes) in checks.items()],
            )
        if last is not None:
            self._set_meta("last_entry", last)
        return done

    def _row(
        self,
        source: LedgerSource,
        seq: int,
        kind: str,
        task: str | None,
        entry: bytes,
        body: bytes,
        tally: dict[str, dict[str, list[int]]],
    ) -> IndexRow:
        try:
            head = decode_entry(entry)
            decoded = decode_body(EntryKind(kind), body)
        except (ReceiptsError, ValueError):
            return IndexRow(seq, kind, task, "", 0, "", "", "an entry that does not decode")
        signer = sys.intern(head.signer)
        # Keys by name: the genesis's (the first admin) and each added one.
        for key in (
            decoded.keys if isinstance(decoded, Genesis) else (decoded.key,) if isinstance(decoded, KeyAdd) else ()
        ):
            self.names[fingerprint(key.public_key)] = key.name
            self._db.execute("INSERT OR REPLACE INTO names VALUES (?, ?)", (fingerprint(key.public_key), key.name))
        base = IndexRow(seq, kind, task, str(head.body_hash), head.time, signer, self.names.get(signer, ""), kind)
        return _described(base, decoded, source, self, tally)

    # -- what the chain holds ----------------------------------------------------------------

    def _query(self, sql: str, args: Iterable[object] = ()) -> list[IndexRow]:
        with self._lock:
            return [_from_values(v) for v in self._db.execute(sql, tuple(args)).fetchall()]

    def count(self) -> int:
        """How many entries are indexed."""
        with self._lock:
            # seq runs 0..n-1 without gaps: the newest seq, found by the key, is the count.
            (n,) = self._db.execute("SELECT max(seq) FROM rows").fetchone()
            return 0 if n is None else int(n) + 1

    def rows_between(self, start: int, stop: int) -> list[IndexRow]:
        """The rows with start <= seq < stop, in chain order."""
        return self._query("SELECT %s FROM rows WHERE seq >= ? AND seq < ? ORDER BY seq" % _COLUMNS, (start, stop))

    def row(self, body_hash: str) -> IndexRow | None:
        """The first entry whose body has this hash."""
        found = self._query("SELECT %s FROM rows WHERE hash = ? ORDER BY seq LIMIT 1" % _COLUMNS, (body_hash,))
        return found[0] if found else None

    def task_rows(self, task: str, newest: int | None = None, kind: str | None = None) -> list[IndexRow]:
        """The task's rows (of this kind, if given) in chain order; only its newest
        ``newest`` if given.
        """
        sql = "SELECT %s FROM rows WHERE task = ?%s ORDER BY seq DESC LIMIT ?" % (
            _COLUMNS,
            " AND kind = ?" if kind is not None else "",
        )
        args: list[object] = [task]
        args += [str(kind)] if kind is not None else []
        return self._query(sql, args + [-1 if newest is None else newest])[::-1]

    def records_before(self, receipt: IndexRow) -> list[IndexRow]:
        """The tier records of the receipt's task on its candidate, appended before it."""
        sql = "SELECT %s FROM rows WHERE candidate = ? AND kind = ? AND seq < ? AND task = ? ORDER BY seq" % _COLUMNS
        return self._query(sql, (receipt.candidate or "", EntryKind.TIER_RECORD.value, receipt.seq, receipt.task))

    def task_summaries(self, task: str | None = None) -> list[TaskSummary]:
        """Every task (or this one), the one with the newest entry first."""
        rows = ", ".join("%s." + c.strip() for c in _COLUMNS.split(","))
        with self._lock:
            listed = self._db.execute(
                "SELECT t.task, t.entries, t.last_time, %s, %s FROM tasks t LEFT JOIN rows r ON r.seq = t.receipt_seq"
                " LEFT JOIN rows e ON e.seq = t.eligible_seq%s ORDER BY t.last_seq DESC"
                % (rows % (("r",) * _WIDTH), rows % (("e",) * _WIDTH), " WHERE t.task = ?" if task is not None else ""),
                () if task is None else (task,),
            ).fetchall()
        return [
            TaskSummary(t[0], t[1], t[2], _maybe_row(t[3 : 3 + _WIDTH]), _maybe_row(t[3 + _WIDTH :])) for t in listed
        ]

    def summary_of(self, task: str) -> TaskSummary | None:
        """The task as `task_summaries` gives it, if any entry names it."""
        found = self.task_summaries(task)
        return found[0] if found else None

    def receipt_times(self) -> list[tuple[int, str]]:
        """Each receipt's (time, claim), in chain order."""
        with self._lock:
            sql = "SELECT time, verdict FROM rows WHERE kind = ? ORDER BY seq"
            return [(int(t), str(v)) for t, v in self._db.execute(sql, (EntryKind.RECEIPT.value,))]

    def receipt_of(self, candidate: str | None) -> IndexRow | None:
        """The newest receipt sealed on this candidate."""
        sql = "SELECT %s FROM rows WHERE candidate = ? AND kind = ? ORDER BY seq DESC LIMIT 1" % _COLUMNS
        found = self._query(sql, (candidate or "", EntryKind.RECEIPT.value))
        return found[0] if found else None

    def commit_of(self, candidate: str | None) -> tuple[str, str] | None:
        """The candidate's (commit, tree), as its deterministic snapshot recorded them."""
        with self._lock:
            got = self._db.execute("SELECT commit_id, tree FROM commits WHERE candidate = ?", (candidate or "",))
            found = got.fetchone()
        return (str(found[0]), str(found[1])) if found else None

    def receipts_on_trees(self, trees: Iterable[str]) -> dict[str, IndexRow]:
        """Tree -> the newest receipt sealed on a candidate with that tree."""
        found: dict[str, IndexRow] = {}
        for tree in set(trees):
            rows = self._query(
                "SELECT %s FROM rows WHERE kind = ? AND candidate IN (SELECT candidate FROM commits WHERE tree = ?)"
                " ORDER BY seq DESC LIMIT 1" % _COLUMNS,
                (EntryKind.RECEIPT.value, tree),
            )
            if rows:
                found[tree] = rows[0]
        return found

    def holder_of(self, digest: str) -> IndexRow | None:
        """The newest tier record that lists this evidence."""
        sql = "SELECT %s FROM rows WHERE seq = (SELECT max(seq) FROM held WHERE digest = ?)" % _COLUMNS
        found = self._query(sql, (digest,))
        return found[0] if found else None

    def of_kind(self, *kinds: str, newest: int | None = None, verdict: str | None = None) -> list[IndexRow]:
        """The rows of these kinds (and this verdict, if given) in chain order; only the
        newest ``newest`` if given.
        """
        where = "kind IN (%s)" % ",".join("?" * len(kinds)) + (" AND verdict = ?" if verdict is not None else "")
        args: list[object] = [str(k) for k in kinds]
        args += [verdict] if verdict is not None else []
        sql = "SELECT %s FROM rows WHERE %s ORDER BY seq DESC LIMIT ?" % (_COLUMNS, where)
        return self._query(sql, args + [-1 if newest is None else newest])[::-1]

    def check_runs(self) -> dict[str, dict[str, tuple[int, int]]]:
        """Family -> check id -> (runs, passes), each run judged by `receipts.derive_check`
        under the contract its record names.
        """
        runs: dict[str, dict[str, tuple[int, int]]] = {}
        with self._lock:
            for family, check, n, passes in self._db.execute("SELECT * FROM check_runs ORDER BY family, check_id"):
                runs.setdefault(family, {})[check] = (n, passes)
        return runs

    def search(
        self,
        text: str = "",
        verdict: str = "",
        since: int | None = None,
        until: int | None = None,
        kinds: Iterable[str] = (),
        trees: Iterable[str] = (),
        offset: int = 0,
        limit: int = 100,
    ) -> list[IndexRow]:
        """Rows matching every given criterion, newest first, ``limit`` of them from
        ``offset``. ``text`` matches a commit or tree (a prefix of 7 or more hex digits), a
        task, a check id, a signer's name or fingerprint, or an entry's hash (or a prefix of
        it); ``trees`` (the trees of branch commits the text names) match the candidates
        with those trees.
        """
        where, args = _search_terms(text.strip().lower(), tuple(trees))
        wanted = [str(k) for k in kinds]
        for clause, value in (
            ("kind IN (%s)" % ",".join("?" * len(wanted)), wanted),
            ("verdict = ?", [verdict] if verdict else []),
            ("time >= ?", [since] if since is not None else []),
            ("time < ?", [until] if until is not None else []),
        ):
            if value:
                where.append(clause)
                args.extend(value)
        sql = "SELECT %s FROM rows%s ORDER BY seq DESC LIMIT ? OFFSET ?" % (
            _COLUMNS,
            " WHERE " + " AND ".join(where) if where else "",
        )
        return self._query(sql, args + [limit, offset])

    # -- what indexing needs to remember -----------------------------------------------------

    def _meta(self, key: str) -> str | None:
        found = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def contract_of_task(self, task: str) -> Contract | None:
        found = self._db.execute("SELECT contract FROM contracts WHERE task = ?", (task,)).fetchone()
        return _parsed(found[0]) if found else None

    def remember_contract(self, task: str, config: str, contract: bytes) -> None:
        self._db.execute("INSERT OR REPLACE INTO contracts VALUES (?, ?)", (task, contract))
        self._db.execute("INSERT OR REPLACE INTO configs VALUES (?, ?)", (config, contract))
        self._configs.pop(config, None)

    def contract_of_config(self, config: str) -> Contract | None:
        if config not in self._configs:
            found = self._db.execute("SELECT contract FROM configs WHERE config = ?", (config,)).fetchone()
            self._configs[config] = _parsed(found[0]) if found else None
        return self._configs[config]

    def remember_commit(self, candidate: str, commit: str, tree: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO commits VALUES (?, ?, ?)", (candidate, commit, tree))

    def knows_commit(self, candidate: str) -> bool:
        return self._db.execute("SELECT 1 FROM commits WHERE candidate = ?", (candidate,)).fetchone() is not None


def web_index(root: Path) -> tuple[ChainIndex, str | None]:
    """The web view's index for the ledger in ``root``: its file under the ledger's
    directory (`INDEX_FILE`), or one in memory when that cannot be written, with why.
    """
    path = root / INDEX_FILE
    try:
        path.parent.mkdir(exist_ok=True)
        return ChainIndex(path), None
    except (OSError, sqlite3.Error) as exc:
        return ChainIndex(), "the index is kept in memory (cannot write %s: %s)" % (path, exc)


def _search_terms(needle: str, trees: tuple[str, ...]) -> tuple[list[str], list[object]]:
    """The SQL that matches ``needle`` as `ChainIndex.search` says, and its arguments."""
    if not needle:
        return [], []
    like = "%%%s%%" % needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    terms = [
        "lower(coalesce(task, '')) LIKE ? ESCAPE '\\'",
        "lower(signer_name) LIKE ? ESCAPE '\\'",
        "lower(signer) = ?",
    ]
    args: list[object] = [like, like, needle, "\n%s\n" % needle]
    terms.append("instr(lower(checks), ?) > 0")
    hexish = needle.removeprefix("blake3:")
    if len(hexish) >= 7 and all(c in "0123456789abcdef" for c in hexish):
        terms.append("substr(hash, 8, ?) = ?")
        args += [len(hexish), hexish]
        terms.append(
            "candidate IN (SELECT candidate FROM commits WHERE substr(commit_id, 1, ?) = ? OR substr(tree, 1, ?) = ?)"
        )
        args += [len(hexish), hexish, len(hexish), hexish]
    if trees:
        terms.append("candidate IN (SELECT candidate FROM commits WHERE tree IN (%s))" % ",".join("?" * len(trees)))
        args += list(trees)
    return ["(" + " OR ".join(terms) + ")"], args


def _values(row: IndexRow) -> tuple[object, ...]:
    return (
        row.seq,
        row.kind,
        row.task,
        row.body_hash,
        row.time,
        row.signer,
        row.signer_name,
        row.summary,
        row.verdict,
        row.tier,
        row.candidate,
        "\n%s\n" % "\n".join(row.checks) if row.checks else "",
        json.dumps([list(e) for e in row.evidence]),
        row.text,
        json.dumps(list(row.weakened)),
        row.provenance,
    )


def _from_values(v: Sequence[Any]) -> IndexRow:
    evidence = tuple((str(c), str(d), int(n)) for c, d, n in json.loads(v[12]))
    checks = tuple(c for c in str(v[11]).split("\n") if c)
    return IndexRow(
        v[0],
        v[1],
        v[2],
        v[3],
        v[4],
        v[5],
        v[6],
        v[7],
        v[8],
        v[9],
        v[10],
        checks,
        evidence,
        v[13],
        tuple(json.loads(v[14])),
        v[15],
    )


def _maybe_row(v: Sequence[Any]) -> IndexRow | None:
    return None if v[0] is None else _from_values(v)


def _parsed(contract: bytes) -> Contract | None:
    try:
        return parse_contract(contract)
    except ReceiptsError:
        return None


def _described(
    base: IndexRow, body: object, source: LedgerSource, index: ChainIndex, tally: dict[str, dict[str, list[int]]]
) -> IndexRow:
    if isinstance(body, TierRecord):
        checks = tuple(
            sorted(
                {
                    ref.check_id[6:].partition("#")[0].partition(":")[0]
                    for ref in body.evidence
                    if ref.check_id.startswith("check:")
                }
            )
        )
        if body.tier is Tier.DETERMINISTIC:
            _remember_commit(body, source, index)
            _count_check_runs(body, source, index, tally)
        summary = "%s %s" % (body.tier.value, body.verdict.value)
        return dataclasses.replace(
            base,
            summary=summary,
            verdict=body.verdict.value,
            tier=body.tier.value,
            candidate=str(body.input_hash),
            checks=checks,
            evidence=tuple((ref.check_id, str(ref.digest), ref.size) for ref in body.evidence),
        )
    if isinstance(body, LadderReceipt):
        claim = "eligible" if body.merge_eligible else "not eligible"
        return dataclasses.replace(base, summary="receipt: %s" % claim, verdict=claim, candidate=str(body.input_hash))
    if isinstance(body, TaskEvent):
        # What the agent or person said (a claim's summary, a reason) is shown as they said it,
        # cut short: it is a statement recorded, not a fact checked.
        said = body.field("summary") or body.field("reason")
        summary = "event %s" % body.type.value + (": %s" % said[:200] if said else "")
        return dataclasses.replace(base, summary=summary, candidate=_text(body.candidate))
    if isinstance(body, ContractRevision):
        return _revision(base, body, index)
    if isinstance(body, KeyAdd):
        roles = ", ".join(role.value for role in body.key.roles)
        return dataclasses.replace(base, summary="key added: %s (%s)" % (body.key.name, roles))
    if isinstance(body, KeyRevoke):
        name = index.names.get(body.key_id, "")
        said = "%s (%s)" % (name, body.key_id) if name else body.key_id
        return dataclasses.replace(base, summary="key revoked: %s: %s" % (said, body.reason[:200]))
    if isinstance(body, StatementRegistration):
        # The subject is the issuer's words, shown as such (the pages escape it).
        subject = statement_subject(body.statement) or "(no subject)"
        return dataclasses.replace(base, summary="SCITT statement registered: %s" % subject[:200])
    return base


def _revision(base: IndexRow, body: ContractRevision, index: ChainIndex) -> IndexRow:
    """A contract revision, with the weakenings the verifier's rule finds against the last."""
    text = body.contract.decode("utf-8", "replace")
    try:
        new = body.parse()
    except ReceiptsError as exc:
        return dataclasses.replace(base, summary="contract revision that does not parse: %s" % exc, text=text)
    old = index.contract_of_task(body.task_id)
    index.remember_contract(body.task_id, str(body.config_hash), body.contract)
    lowered = weakenings(old, new) if old is not None else ()
    summary = "contract revision" + (": WEAKENED (%s)" % body.provenance() if lowered else "")
    return dataclasses.replace(base, summary=summary, text=text, weakened=lowered, provenance=body.provenance())


def _text(digest: Digest | None) -> str | None:
    return None if digest is None else str(digest)


def _count_check_runs(
    record: TierRecord, source: LedgerSource, index: ChainIndex, tally: dict[str, dict[str, list[int]]]
) -> None:
    contract = index.contract_of_config(str(record.config_hash))
    if contract is not None:
        family = tally.setdefault(record.task_id.rsplit("@", 1)[0], {})
        tally_check_runs(record, contract, evidence_reader(source), family)


def _remember_commit(record: TierRecord, source: LedgerSource, index: ChainIndex) -> None:
    if index.knows_commit(str(record.input_hash)):
        return
    for ref in record.evidence:
        if ref.check_id == "snapshot":
            doc = read_evidence(source, ref.digest, SNAPSHOT_FORMAT)
            if doc and isinstance(doc.get("commit"), str) and isinstance(doc.get("tree"), str):
                index.remember_commit(str(record.input_hash), doc["commit"], doc["tree"])
            return
