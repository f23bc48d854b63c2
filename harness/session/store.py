"""The results store: one SQLite file holding every run and every result.

Contract:
- A *run* is one invocation (`bugmatrix run`, a pytest session, a nightly shard), identified by a `run_id` that is
  unique across machines (time + host + random). `begin_run` records it as `running`; `end_run` marks it
  `complete` or `interrupted`. A run's results are visible to readers as soon as each is saved.
- A *result* is one launch of case x variant x world size x device in one cell. `save` writes it in a single
  transaction: a reader never sees a half-written row, and a crash or Ctrl-C loses at most the result being saved.
  Within a run, the key (case, variant, nproc, device, cell) is unique: saving it again replaces it.
- Many processes may write at once (pytest-xdist workers, parallel runs): WAL journaling plus a busy timeout
  serialise them; no write is lost or duplicated.
- `merge(sources)` copies runs and results from other store files (shards from other machines). It is idempotent:
  merging the same shard twice, or two shards that share rows, adds no duplicates.
- Readers get `Result` objects back exactly as they were saved (outcome, expected, reason, versions, per-rank
  status, duration, log excerpt, stacks, repeat tallies, fingerprint, pool), with the run's metadata alongside.
- `pooled(cell, case, variant, pool)` adds up the launches of one job over every run (contract.py), in SQL.
- `standing(cell, case, variant, fingerprint, outcomes)` finds the newest result of that case and variant with that
  fingerprint (see `harness/model/job.py`) among those outcomes, from any run: what a resumed run reuses instead of
  launching again. The fingerprint holds no case id (two cases with the same script and settings share it), so the
  case and variant are matched as well: a case never takes another case's result.
- `latest()` is the current result of each key, as harness/session/contract.py defines it (`current`: the newest,
  an `infra` result never shadowing a settled one of the same digest -- a resumed run reuses that one without saving
  it again, so without this rule one failed build would turn a standing verdict into "could not say" for good). This
  store answers it in SQL, from a small `latest` table (key -> the run holding that current result), kept in the
  same transaction as every `save` and `merge`, so it costs the number of keys, not the number of results ever
  stored (tests/test_contract.py holds it to `current` on the same rows); `latest(run_id)` and `results(run_id)`
  read one run through its index, and `runs(with_results=True)` asks the same index, so `report` and `compare` stay
  fast as the store grows by a nightly every night.
- Compatibility probes (`bugmatrix compat`) are recorded like every result, in cells named `compat-...`; every
  reader takes the kinds of cell it reads (`CellKind`, filtered in SQL by `kind_sql`, the same table of names).
- A store written by an older bugmatrix is upgraded in place when opened, in one transaction (new columns get their
  empty values; the `latest` table is rebuilt from the results whenever the store was last opened by another schema
  version, so one that an older bugmatrix has written to since is made right again).
- A store that cannot be written for want of space raises `DiskFull` (never a traceback, never "not a bugmatrix
  results store"): SQLite's SQLITE_FULL ("database or disk is full"), or an I/O error while the store's disk has less
  than `LOW_SPACE` free -- on a full disk SQLite cannot even make the shared-memory file that every read and write of
  a WAL store needs, and says "disk I/O error". The free space is measured when the error happens, so an I/O error on
  a disk with room left is not taken for one (opening the store, it is still `StoreError`). A failed `save` writes
  nothing (its transaction is rolled back): the result is not recorded, and a resumed run launches it again.
  `recording` then marks the run `interrupted`; when even that cannot be written the run stays `running`, which
  nothing reads as "still in progress": a later run resumes from its saved results like from any other.
Nothing is ever deleted implicitly (`latest` holds no result of its own: it only points at results).

`NullStore` keeps the same contract for a run that records nothing (`--no-store`): runs get the id "", saving
does nothing, nothing is standing, every reader sees an empty store. Callers never check for a missing store: both
are siblings under `contract.Store`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from harness.launch.logscan import human_size
from harness.model.cell import CASE_CELLS, LOCAL_CELL, Kinds, kind_sql
from harness.model.errors import BugmatrixError
from harness.model.exitcode import ExitCode
from harness.model.job import SETTLED
from harness.model.names import UnsafeName, check_key
from harness.model.outcome import Outcome, RankStatus
from harness.model.result import Result
from harness.session.basics import default_db
from harness.session.contract import Entry, Run, Store, StoreError, pooled_tallies

SCHEMA_VERSION = 7
LOW_SPACE = 1 << 20  # below this much free space, an I/O error of the store is taken for a full disk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,
    machine TEXT NOT NULL,
    command TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    case_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    nproc INTEGER NOT NULL,
    device TEXT NOT NULL,
    cell TEXT NOT NULL,
    outcome TEXT NOT NULL,
    expected TEXT,
    reason TEXT NOT NULL,
    versions TEXT NOT NULL,
    python TEXT NOT NULL,
    ranks TEXT NOT NULL,
    duration_s REAL NOT NULL,
    log_excerpt TEXT NOT NULL,
    stacks TEXT NOT NULL,
    started_at REAL NOT NULL,
    launched INTEGER NOT NULL,
    tallies TEXT NOT NULL DEFAULT '{}',
    fingerprint TEXT NOT NULL DEFAULT '',
    digest TEXT NOT NULL DEFAULT '',
    extra TEXT NOT NULL DEFAULT '{}',
    pool TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, case_id, variant, nproc, device, cell)
);
CREATE INDEX IF NOT EXISTS results_case ON results (case_id, variant, cell);
CREATE TABLE IF NOT EXISTS latest (
    case_id TEXT NOT NULL,
    variant TEXT NOT NULL,
    nproc INTEGER NOT NULL,
    device TEXT NOT NULL,
    cell TEXT NOT NULL,
    run_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    PRIMARY KEY (case_id, variant, nproc, device, cell)
) WITHOUT ROWID;
"""
_ADDED_COLUMNS = {  # schema version 2: column -> definition, added to stores written by version 1
    "tallies": "TEXT NOT NULL DEFAULT '{}'",
    "fingerprint": "TEXT NOT NULL DEFAULT ''",
    "digest": "TEXT NOT NULL DEFAULT ''",  # schema version 4
    "extra": "TEXT NOT NULL DEFAULT '{}'",  # schema version 6: the optional fields a result sets (`OPTIONAL_FIELDS`)
    "pool": "TEXT NOT NULL DEFAULT ''",  # schema version 7: the repeat-free identity (`job.pool_of`), '' before it
}
# schema version 3: the `latest` table, and the index that finds a key's newest result without reading the rows
_NEWEST_INDEX = (
    "CREATE INDEX IF NOT EXISTS results_newest ON results (case_id, variant, nproc, device, cell, started_at, run_id)"
)
_KEY_COLUMNS = ("case_id", "variant", "nproc", "device", "cell")
_SETTLED_SQL = ", ".join(f"'{o.value}'" for o in SETTLED)
# 1 for an `infra` row that a settled row of its key and digest outranks (`latest()`'s rule), else 0: sorted first
_SHADOWED = (
    f"(r.outcome = '{Outcome.INFRA.value}' AND r.digest != '' AND EXISTS (SELECT 1 FROM results AS v WHERE "
    + " AND ".join(f"v.{c} = r.{c}" for c in ("case_id", "variant", "nproc", "device", "cell", "digest"))
    + f" AND v.outcome IN ({_SETTLED_SQL})))"
)
# point one key's `latest` row at its newest result (after that key's results changed)
_REFRESH_LATEST = (
    "INSERT OR REPLACE INTO latest SELECT case_id, variant, nproc, device, cell, run_id, started_at FROM results AS r "
    "WHERE case_id = ? AND variant = ? AND nproc = ? AND device = ? AND cell = ? "
    f"ORDER BY {_SHADOWED}, started_at DESC, run_id DESC LIMIT 1"
)
_RESULT_COLUMNS = (
    "run_id",
    "case_id",
    "variant",
    "nproc",
    "device",
    "cell",
    "outcome",
    "expected",
    "reason",
    "versions",
    "python",
    "ranks",
    "duration_s",
    "log_excerpt",
    "stacks",
    "started_at",
    "launched",
    "tallies",
    "fingerprint",
    "digest",
    "extra",
    "pool",
)


def _kept(kinds: Kinds, column: str = "cell") -> str:
    """The SQL condition that keeps the cells of `kinds`."""
    return f"{kind_sql(column)} IN ({', '.join(sorted(repr(k.value) for k in kinds)) or 'NULL'})"


class DiskFull(BugmatrixError, RuntimeError):
    """The store could not be written for want of space (see the module docstring): not a `StoreError`, since the
    store itself is sound. `recording` fills in the run it was recording and whether that run could be marked
    `interrupted`; the message is one line naming the store and the free space on its disk."""

    exit_code = ExitCode.DISK_FULL

    def __init__(self, path: Path, error: str, free: int | None) -> None:
        super().__init__(path, error, free)
        self.path, self.error, self.free = path, error, free
        self.run_id = ""  # the run being recorded when the write failed ("" before one was begun)
        self.marked = False  # whether that run could be marked `interrupted`

    def __str__(self) -> str:
        free = "free space unknown" if self.free is None else f"{human_size(self.free)} free"
        line = f"{self.path}: no space left for the results store ({self.error}; {free} on its disk)"
        if not self.run_id:
            return f"{line}; nothing recorded"
        run = (
            f"run {self.run_id} marked interrupted"
            if self.marked
            else f"run {self.run_id} could not even be marked interrupted (it stays `running`)"
        )
        return f"{line}; {run}; the results saved before it are intact, and the same command resumes from them"


def _full(exc: sqlite3.DatabaseError, path: Path) -> DiskFull | None:
    """`DiskFull` when SQLite's error `exc` on the store at `path` means the disk is full (SQLITE_FULL, or an I/O
    error with less than `LOW_SPACE` free, measured now), else None: the store's own fault."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11; the messages are SQLite's own for these codes
    if sys.version_info >= (3, 11) and code is not None:
        is_full, is_io = code & 0xFF == sqlite3.SQLITE_FULL, code & 0xFF == sqlite3.SQLITE_IOERR
    else:
        is_full, is_io = "database or disk is full" in str(exc), "disk I/O error" in str(exc)
    try:
        free: int | None = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    if is_full or (is_io and free is not None and free < LOW_SPACE):
        return DiskFull(path, str(exc), free)
    return None


@contextmanager
def _space_checked(path: Path) -> Iterator[None]:
    """Turn a SQLite error of the store at `path` that means a full disk into `DiskFull`; others pass unchanged."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        full = _full(exc, path)
        if full is None:
            raise
        raise full from exc


def new_run_id() -> str:
    """A run id that sorts by start time and is unique across machines: YYYYmmddTHHMMSS-host-random."""
    host = socket.gethostname().split(".")[0][:16] or "host"
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{host}-{secrets.token_hex(3)}"


class ResultStore(Store):
    """A SQLite results store (see the module docstring; the contract is harness/session/contract.py's)."""

    def __init__(self, path: Path | str | None = None, readonly: bool = False) -> None:
        self.path = Path(path) if path is not None else default_db()
        self.readonly = readonly
        if readonly:  # a reading command: never creates, fills or rewrites a file
            if not self.path.is_file():
                raise StoreError(f"{self.path}: no such results store")
            if self._current():
                return
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            try:
                _refuse_foreign(db, self.path)
                db.execute("PRAGMA busy_timeout=60000")
                db.execute("PRAGMA journal_mode=WAL")  # persistent: readers and writers stop blocking each other
                db.executescript(_SCHEMA)  # idempotent, each statement atomic
                _upgrade(db)
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            raise _full(exc, self.path) or StoreError(f"{self.path}: not a bugmatrix results store ({exc})") from None

    def _current(self) -> bool:
        """Whether the file is a store of this schema version (nothing to upgrade); raises `StoreError` for a file
        that is not a bugmatrix store, an empty one included. Reads only."""
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
            try:
                tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not {"meta", "runs", "results", "latest"} <= tables:
                    _refuse_foreign(db, self.path)
                    if not tables:
                        raise StoreError(f"{self.path}: not a bugmatrix results store (an empty file)")
                    return False  # an older bugmatrix's store: upgraded when opened
                version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                return version is not None and version[0] == str(SCHEMA_VERSION)
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            raise _full(exc, self.path) or StoreError(f"{self.path}: not a bugmatrix results store ({exc})") from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection inside one transaction (IMMEDIATE unless the store was opened to read): committed on
        success, rolled back on any exception; `DiskFull` when the disk is full."""
        with _space_checked(self.path):
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            try:
                db.execute("PRAGMA busy_timeout=60000")
                db.execute("BEGIN" if self.readonly else "BEGIN IMMEDIATE")
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    with suppress(sqlite3.Error):  # closing the connection rolls back too; keep the first error
                        db.execute("ROLLBACK")
                raise
            finally:
                db.close()

    def begin_run(self, command: str, machine: str, run_id: str | None = None) -> str:
        """Record a new run as `running` (or reuse `run_id` if it exists, for xdist workers); return its id."""
        run_id = run_id or new_run_id()
        with self._connect() as db:
            db.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, NULL, 'running', ?, ?)",
                (run_id, time.time(), machine, command),
            )
        return run_id

    def end_run(self, run_id: str, status: str = "complete") -> None:
        """Mark a run `complete` or `interrupted`."""
        with self._connect() as db:
            db.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ?", (status, time.time(), run_id))

    def save(self, run_id: str, result: Result, cell: str = LOCAL_CELL) -> None:
        """Write one result atomically (replacing the same key within the same run)."""
        row = (
            run_id,
            result.case,
            result.variant,
            result.nproc,
            result.device,
            cell,
            result.outcome.value,
            result.expected.value if result.expected else None,
            result.reason,
            json.dumps(result.versions),
            result.python,
            json.dumps([r.model_dump(mode="json") for r in result.ranks]),
            result.duration_s,
            result.log_excerpt,
            result.stacks,
            result.started_at,
            int(result.launched),
            json.dumps(result.tallies, sort_keys=True),
            result.fingerprint,
            result.digest,
            json.dumps(result.extra, sort_keys=True),
            result.pool,
        )
        with self._connect() as db:
            db.execute(
                f"INSERT OR REPLACE INTO results ({', '.join(_RESULT_COLUMNS)}) VALUES ({', '.join('?' * len(row))})",
                row,
            )
            db.execute(_REFRESH_LATEST, row[1:6])  # the key, in the same transaction

    def runs(self, with_results: bool = False, kinds: Kinds = CASE_CELLS) -> list[Run]:
        """Every run, oldest first (only those that recorded at least one result in a cell of `kinds`, with
        `with_results`)."""
        where = (
            " WHERE EXISTS (SELECT 1 FROM results WHERE results.run_id = runs.run_id "
            f"AND {_kept(kinds, 'results.cell')})"
            if with_results
            else ""
        )
        with self._connect() as db:
            rows = db.execute(f"SELECT * FROM runs{where} ORDER BY started_at, run_id").fetchall()
        return [Run(*row) for row in rows]

    def results(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        """`(run_id, cell, result)` for every result in a cell of `kinds` (of one run when `run_id` is given), in a
        stable order."""
        query = f"SELECT {', '.join(_RESULT_COLUMNS)} FROM results WHERE {_kept(kinds)}"
        params: tuple[str, ...] = ()
        if run_id is not None:
            query += " AND run_id = ?"
            params = (run_id,)
        query += " ORDER BY run_id, case_id, variant, cell, device, nproc"
        with self._connect() as db:
            rows = db.execute(query, params).fetchall()
        return [(row[0], row[5], _to_result(row)) for row in rows]

    def latest(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[tuple[str, Result]]:
        """`(cell, result)`: the current result of each key in a cell of `kinds` (`contract.current`), over all runs
        or one, in key order: read from the `latest` table, which `_REFRESH_LATEST` keeps."""
        columns = ", ".join(f"r.{c}" for c in _RESULT_COLUMNS)
        order = ", ".join(_KEY_COLUMNS)
        with self._connect() as db:
            if run_id is not None:  # within a run each key is unique: the run's results are its newest
                rows = db.execute(
                    f"SELECT {columns} FROM results AS r WHERE run_id = ? "
                    f"AND {_kept(kinds, 'r.cell')} ORDER BY {order}",
                    (run_id,),
                ).fetchall()
            else:  # CROSS JOIN: walk the small table in key order, fetch each result by its primary key
                rows = db.execute(
                    f"SELECT {columns} FROM latest AS l CROSS JOIN results AS r ON r.run_id = l.run_id "
                    + "".join(f"AND r.{c} = l.{c} " for c in _KEY_COLUMNS)
                    + f"WHERE {_kept(kinds, 'l.cell')} ORDER BY "
                    + ", ".join(f"l.{c}" for c in _KEY_COLUMNS)
                ).fetchall()
        return [(row[5], _to_result(row)) for row in rows]

    def standing(
        self, cell: str, case: str, variant: str, fingerprint: str, outcomes: tuple[Outcome, ...]
    ) -> Result | None:
        """The newest result of `case`'s `variant` in `cell` with `fingerprint` whose outcome is one of `outcomes`,
        from any run."""
        if not fingerprint:
            return None
        marks = ", ".join("?" * len(outcomes))
        with self._connect() as db:
            row = db.execute(
                f"SELECT {', '.join(_RESULT_COLUMNS)} FROM results WHERE cell = ? AND fingerprint = ? "
                f"AND case_id = ? AND variant = ? AND outcome IN ({marks}) ORDER BY started_at DESC LIMIT 1",
                (cell, fingerprint, case, variant, *(o.value for o in outcomes)),
            ).fetchone()
        return _to_result(row) if row else None

    def pooled(self, cell: str, case: str, variant: str, pool: str) -> dict[str, int]:
        """The launches of `case`'s `variant` in `cell` with this repeat-free identity over every run
        (`contract.pooled_tallies`), read through the `results_pool` index."""
        if not pool:
            return {}
        with self._connect() as db:
            rows = db.execute(
                f"SELECT {', '.join(_RESULT_COLUMNS)} FROM results WHERE pool = ? AND cell = ? AND case_id = ? "
                "AND variant = ?",
                (pool, cell, case, variant),
            ).fetchall()
        return pooled_tallies(_to_result(row) for row in rows)

    def merge(self, sources: list[Path], kinds: Kinds | None = None) -> int:
        """Copy runs and results from other store files; return how many results were new (idempotent). With
        `kinds`, only the results in cells of those kinds (and the runs that hold them): the compat probes' are what
        a compat walk resumes from."""
        added = 0
        for source in sources:
            if not Path(source).is_file():
                raise StoreError(f"{source}: no such store file")
            other = ResultStore(source)
            with self._connect() as db:
                for run in other.runs(with_results=kinds is not None, kinds=kinds or CASE_CELLS):
                    db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?)", tuple(run.__dict__.values()))
                with other._connect() as src:
                    rows = src.execute(
                        f"SELECT {', '.join(_RESULT_COLUMNS)} FROM results"
                        + (f" WHERE {_kept(kinds)}" if kinds is not None else "")
                    ).fetchall()
                for row in rows:  # a shard from another machine names what it likes: check before it is ours
                    try:
                        check_key(row[1], row[2], row[5])
                    except UnsafeName as exc:
                        raise StoreError(f"{source}: run {row[0]}: {exc}") from None
                added += db.executemany(  # rowcount: the rows inserted (an ignored duplicate counts 0)
                    f"INSERT OR IGNORE INTO results ({', '.join(_RESULT_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(_RESULT_COLUMNS))})",
                    rows,
                ).rowcount
                db.executemany(_REFRESH_LATEST, sorted({row[1:6] for row in rows}))  # same transaction
        return added


class NullStore(Store):
    """A store that records nothing and holds nothing (see the module docstring): a sibling of `ResultStore`, both
    keeping the `Store` contract."""

    def __init__(self) -> None:  # no file
        self.path = Path(os.devnull)
        self.readonly = False

    def begin_run(self, command: str, machine: str, run_id: str | None = None) -> str:
        return ""

    def end_run(self, run_id: str, status: str = "complete") -> None:
        return None

    def save(self, run_id: str, result: Result, cell: str = LOCAL_CELL) -> None:
        return None

    def runs(self, with_results: bool = False, kinds: Kinds = CASE_CELLS) -> list[Run]:
        return []

    def results(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        return []

    def standing(
        self, cell: str, case: str, variant: str, fingerprint: str, outcomes: tuple[Outcome, ...]
    ) -> Result | None:
        return None

    def merge(self, sources: list[Path], kinds: Kinds | None = None) -> int:
        raise StoreError("cannot merge into a store that records nothing")


@contextmanager
def recording(store: Store, command: str, machine: str) -> Iterator[str]:
    """A run for the duration of the block: begun on entry (yields its id), marked `complete` when the block ends
    normally and `interrupted` when anything (Ctrl-C included) escapes it. A `DiskFull` leaving the block, or raised
    by marking the run, names the run and whether it could be marked (it outranks a Ctrl-C it interrupted)."""
    run_id = store.begin_run(command, machine)
    try:
        yield run_id
    except BaseException as exc:
        try:
            store.end_run(run_id, "interrupted")
        except DiskFull as full:
            raise _named(exc if isinstance(exc, DiskFull) else full, run_id, marked=False) from None
        if isinstance(exc, DiskFull):
            _named(exc, run_id, marked=True)
        raise
    try:
        store.end_run(run_id)
    except DiskFull as full:
        raise _named(full, run_id, marked=False) from None


def _named(full: DiskFull, run_id: str, marked: bool) -> DiskFull:
    """`full`, saying which run it stopped and whether that run could be marked `interrupted`."""
    full.run_id, full.marked = run_id, marked
    return full


def _refuse_foreign(db: sqlite3.Connection, path: Path) -> None:
    """Raise `StoreError` for a SQLite file that holds tables but not a bugmatrix store's (left untouched)."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and not {"meta", "runs", "results"} <= tables:
        shown = ", ".join(sorted(tables)[:5])
        raise StoreError(f"{path}: not a bugmatrix results store (it holds other tables: {shown}); left untouched")


def _upgrade(db: sqlite3.Connection) -> None:
    """Add the columns and indexes a store from an older bugmatrix lacks, and rebuild `latest` when another schema
    version (or none: a new store) wrote the store last; on a current store, only the version is written."""
    db.execute("BEGIN IMMEDIATE")  # two processes opening an old store at once: one upgrades, the other sees it
    try:
        have = {row[1] for row in db.execute("PRAGMA table_info(results)")}
        for column, definition in _ADDED_COLUMNS.items():
            if column not in have:
                db.execute(f"ALTER TABLE results ADD COLUMN {column} {definition}")
        db.execute("DROP INDEX IF EXISTS results_fingerprint")  # (fingerprint, cell): before the case was matched
        db.execute("CREATE INDEX IF NOT EXISTS results_standing ON results (fingerprint, cell, case_id, variant)")
        db.execute(_NEWEST_INDEX)
        db.execute("CREATE INDEX IF NOT EXISTS results_pool ON results (pool, cell, case_id, variant)")
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or version[0] != str(SCHEMA_VERSION):
            _rebuild_latest(db)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite rolls back by itself after some errors (a full disk): keep the first error
            db.execute("ROLLBACK")
        raise


def _rebuild_latest(db: sqlite3.Connection) -> None:
    """Fill `latest` from every result (inside the caller's transaction): each key's newest, as `latest()` defines
    it. Reads the `results_newest` index, and the rows of `infra` results only."""
    keys = ", ".join(_KEY_COLUMNS)
    db.execute("DELETE FROM latest")
    db.execute(
        f"INSERT INTO latest SELECT {keys}, run_id, started_at FROM ("
        f"SELECT {keys}, run_id, started_at, ROW_NUMBER() OVER "
        f"(PARTITION BY {keys} ORDER BY {_SHADOWED}, started_at DESC, run_id DESC) AS n "
        "FROM results AS r INDEXED BY results_newest"
        ") WHERE n = 1"
    )


def _to_result(row: tuple[Any, ...]) -> Result:
    values = dict(zip(_RESULT_COLUMNS, row, strict=True))
    return Result(
        case=values["case_id"],
        variant=values["variant"],
        nproc=values["nproc"],
        device=values["device"],
        outcome=Outcome(values["outcome"]),
        expected=Outcome(values["expected"]) if values["expected"] else None,
        reason=values["reason"],
        versions=json.loads(values["versions"]),
        python=values["python"],
        ranks=[RankStatus.model_validate(r) for r in json.loads(values["ranks"])],
        duration_s=values["duration_s"],
        log_excerpt=values["log_excerpt"],
        stacks=values["stacks"],
        started_at=values["started_at"],
        launched=bool(values["launched"]),
        tallies=json.loads(values["tallies"]),
        fingerprint=values["fingerprint"],
        digest=values["digest"],
        extra=json.loads(values["extra"]),
        pool=values["pool"],
    )
