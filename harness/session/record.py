"""The record: every measurement bugmatrix has made, as plain text committed in the repository (`record/`).

The SQLite store (`store.py`) is one machine's working copy, with logs, stacks and every rank's output; the record
is what survives it, the product's durable, reviewable output. Layout (every file sorted, one JSON object per line
so that a changed result is a changed line):

    record/results/<case>.jsonl   one row per result of the case (bisect/narrow probes included)
    record/compat.jsonl           the compatibility probes (`compat-*` cells)
    record/runs.jsonl             the runs that rows cite: when, on which machine, the command
    record/machines.jsonl         each machine: CPU model and cores; for CUDA the GPU, driver, CUDA and NCCL
    record/rules.jsonl            what each variant's `expect` rules rest on: when `bugmatrix expect --write` set
                                  them, from which runs and cells (earlier derivations kept as history)
    record/versions.jsonl         each package's releases with their upload dates (and whether yanked), and each
                                  git commit run with its date and first-parent position: readers need no index
                                  and no clone, so the record reads the same offline
    record/manifest.jsonl         every other file that holds rows: one of them missing or emptied is an error

A row holds the case, variant, world size, device, cell and exact pins (`version @ commit` for a git install, the
torch build's local version such as `+cu130` kept), the outcome and repeat tallies, the fingerprint (`job.py`) and
the digest of the script and run settings it measured (`run_digest`), its repeat-free identity (`pool`, when it has
one: `job.pool_of`), the date, duration, run and machine, and a bounded excerpt: the lines that decided the outcome.
A non-verdict (`error`, `timeout`, `infra`) keeps its reason line only. What is expected of a result is not
recorded: readers judge it by today's rules.

Guarantees (`tests/test_record.py`):
- Deterministic: the same store exports byte-identically, and export -> import -> export is byte-identical.
- Folding is idempotent and keeps what is recorded: a row is keyed by (case, variant, world size, device, cell,
  fingerprint); a newer result of a key replaces its row, but a re-measurement with the same outcome and tallies
  leaves the row as it was, so a night that changed nothing is an empty diff.
- History is kept: a result whose digest no committed case gives any more (its script or settings were edited
  since) is *superseded*; it stays in the record, but `RecordStore` and `LayeredStore` never return it as a result.
- A file that does not parse is a `RecordError` naming the file and line; nothing is written. So is a line that is
  not exactly one JSON object, a row citing a run `runs.jsonl` lacks, and a file `manifest.jsonl` lists that is
  missing or empty (a record written before the manifest has none, and is read as it is).
- All or nothing (`journal.py`, `tests/test_record_atomic.py`): `write` replaces every changed file at once through a
  journal inside the record, so a write killed at any moment leaves the record as before or as after: the next
  writer finishes or undoes it, and a reader meanwhile reads what the next writer will leave, writing nothing.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.matrix.chronology import NOW, Chronology
from harness.model.cell import CASE_CELLS, LOCAL_CELL, CellKind, Kinds, kind_of
from harness.model.job import SETTLED
from harness.model.names import UnsafeName, check_key, check_name
from harness.model.nesting import MAX_NESTING, json_too_deep
from harness.model.outcome import Outcome
from harness.model.result import Result, check_optional, optional_of, trusted
from harness.model.version import version_key
from harness.session.basics import default_record
from harness.session.contract import Entry, Run, Store, StoreError, entry_identity, entry_measured, entry_moment, newest
from harness.session.journal import pending, recover, replace_all

if TYPE_CHECKING:
    from harness.model.case import Case

DEFAULT_RECORD = default_record()
MANIFEST = "manifest.jsonl"  # every other file of the record that holds rows: one missing or emptied is an error

EXCERPT_LINE = 300  # characters kept of one deciding line
EXCERPT_LINES = 4
NON_VERDICTS = (Outcome.ERROR, Outcome.TIMEOUT, Outcome.INFRA)
_SETTLED_VALUES = {o.value for o in SETTLED}
_KEY = ("case", "variant", "nproc", "device", "cell", "fingerprint")
_ROW_FIELDS: dict[str, type | tuple[type, ...]] = {
    "case": str,
    "variant": str,
    "nproc": int,
    "device": str,
    "cell": str,
    "outcome": str,
    "reason": str,
    "versions": dict,
    "python": str,
    "fingerprint": str,
    "digest": str,
    "date": str,
    "duration_s": (int, float),
    "run": str,
    "tallies": dict,
}
_OUTCOME_OF = {o.value: o for o in Outcome}
_DECIDING = re.compile(r"\b(REPRODUCED|FIXED|SKIP|COMPAT-PROBE[\w-]*)\b")


class RecordError(StoreError):
    """A record file does not parse (the message names the file and line)."""


Digests = Callable[[str, str], str | None]  # (case, variant) -> the digest the committed case gives now, or None
Row = dict[str, Any]  # one line of a record file, as JSON reads it


@dataclass
class Record:
    """The record in memory: rows, the runs and machines they cite, and the version points' dates."""

    rows: list[Row] = field(default_factory=list)
    runs: dict[str, Row] = field(default_factory=dict)  # run id -> {started, machine, command}
    machines: dict[str, Row] = field(default_factory=dict)  # machine id -> description
    releases: dict[str, dict[str, Row]] = field(default_factory=dict)  # distribution -> version -> {date, yanked}
    commits: dict[str, dict[str, Row]] = field(default_factory=dict)  # package -> sha or release -> {date, position}
    rules: list[Row] = field(default_factory=list)  # provenance of the expect rules: {case, variant, set, ...}

    def set_rules(self, provenance: Row) -> None:
        """Record what a variant's rules rest on; a derivation of the same day replaces that day's."""
        same = (provenance["case"], provenance["variant"], provenance["set"])
        self.rules = [r for r in self.rules if (r["case"], r["variant"], r["set"]) != same] + [provenance]


# ---------------------------------------------------------------------------------------------------------- rows


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector held off while a reader makes tens of thousands of acyclic rows and results (it
    would traverse them again and again: half the time of reading a large record); as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def iso(timestamp: float) -> str:
    """A POSIX time as the record writes it: UTC, to the second."""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def when(text: str) -> datetime:
    """A record date (`2026-11-25T02:38:12Z`) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@lru_cache(maxsize=8192)  # a record holds few distinct dates (a run's results share its seconds)
def timestamp(text: str) -> float:
    """The POSIX time of a record date."""
    return when(text).timestamp()


def deciding_lines(result: Result, signature: str | None = None) -> str:
    """The bounded excerpt a row keeps: the log lines that decided the outcome (the one matching the failure
    signature, the script's REPRODUCED/FIXED/SKIP line, a compat probe's verdict line), at most `EXCERPT_LINES`
    lines of at most `EXCERPT_LINE` characters; empty for a non-verdict, whose reason says it."""
    if result.outcome in NON_VERDICTS:
        return ""
    pattern = None
    if signature and result.outcome in (Outcome.REPRODUCED, Outcome.FLAKY):
        try:
            pattern = re.compile(signature)
        except re.error:
            pattern = None
    picked: list[str] = []
    for line in result.log_excerpt.splitlines():
        line = line.strip()
        if line and (_DECIDING.search(line) or (pattern is not None and pattern.search(line))):
            cut = line[:EXCERPT_LINE]
            if cut not in picked:
                picked.append(cut)
    return "\n".join(picked[-EXCERPT_LINES:])


def to_row(run_id: str, cell: str, result: Result, machine: str, signature: str | None = None) -> Row:
    """A result as a record row (see the module docstring for what it keeps)."""
    row = {
        "case": result.case,
        "variant": result.variant,
        "nproc": result.nproc,
        "device": result.device,
        "cell": cell,
        "outcome": result.outcome.value,
        "tallies": dict(sorted(result.tallies.items())),
        "reason": result.reason.splitlines()[0][: EXCERPT_LINE * 2] if result.reason else "",
        "versions": dict(sorted(result.versions.items())),
        "python": result.python,
        "fingerprint": result.fingerprint,
        "digest": result.digest,
        "date": iso(result.started_at),
        "duration_s": round(result.duration_s, 1),
        "run": run_id,
        "machine": machine,
    }
    row.update(result.extra)  # the optional fields that are set (`OPTIONAL_FIELDS`): none, the row as before
    if result.pool:  # the repeat-free identity (`job.pool_of`): a row of a result without one is as it was
        row["pool"] = result.pool
    if not result.launched:
        row["launched"] = False
    excerpt = deciding_lines(result, signature)
    if excerpt:
        row["excerpt"] = excerpt
    return row


def from_row(row: Row) -> tuple[str, str, Result]:
    """(run id, cell, result) of a record row; `expected` is left None for the reader to judge by today's rules."""
    result = trusted(
        {  # `load` checked every field: no second validation per row
            "case": row["case"],
            "variant": row["variant"],
            "nproc": row["nproc"],
            "device": row["device"],
            "outcome": _OUTCOME_OF[row["outcome"]],
            "expected": None,
            "reason": row["reason"],
            "versions": row["versions"],
            "python": row["python"],
            "ranks": [],
            "duration_s": float(row["duration_s"]),
            "log_excerpt": row.get("excerpt", ""),
            "stacks": "",
            "started_at": timestamp(row["date"]),
            "launched": row.get("launched", True),
            "tallies": row["tallies"],
            "fingerprint": row["fingerprint"],
            "digest": row["digest"],
            "extra": optional_of(row),
            "pool": row.get("pool", ""),
        }
    )
    return row["run"], row["cell"], result


def key(row: Row) -> tuple[Any, ...]:
    """The identity of a row: (case, variant, world size, device, cell, fingerprint); a result that recorded no
    fingerprint (never launched, or from a store that had none) is identified by its pins instead."""
    return tuple(row[k] for k in _KEY[:-1]) + (row["fingerprint"] or _dumps(row["versions"]),)


def _order(row: Row) -> tuple[Any, ...]:
    return (row["case"], row["variant"], row["device"], row["nproc"], row["cell"], row["date"], row["fingerprint"])


# ------------------------------------------------------------------------------------------------- read, write


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


_DECODE = json.JSONDecoder().raw_decode


def _lines(path: Path) -> list[tuple[int, Row]]:
    """Each non-blank line of `path` with its number: exactly one JSON object a line, or a `RecordError` naming the
    line. Each line is checked alone (one parse of the joined lines let a line holding `{...},{...` and a line
    holding the rest pass as two rows, one of them spliced from two broken lines); the rows are then made by one
    parse of the whole file, whose objects a large record's readers go through faster (audit at 43k rows: 0.06 s)
    than the lines' own."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: cannot be read ({exc})") from None
    numbered = [(number, line) for number, raw in enumerate(text.splitlines(), 1) if (line := raw.strip())]
    for number, line in numbered:
        try:
            value, end = _DECODE(line)
        except RecursionError:  # measured only then: a scan of every line would cost the readers' fast path
            deep = f"more than {MAX_NESTING} levels" if json_too_deep(line) else "too"
            raise RecordError(f"{path}:{number}: nested {deep} deep") from None
        except json.JSONDecodeError as exc:
            raise RecordError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
        if end != len(line):
            raise RecordError(f"{path}:{number}: not a JSON object (Extra data)")
        if type(value) is not dict:
            raise RecordError(f"{path}:{number}: not a JSON object")
    values = json.loads("[" + ",".join(line for _, line in numbered) + "]")  # each line one object: it parses
    return list(zip((number for number, _ in numbered), values, strict=True))


_FIELD_NAMES = tuple(_ROW_FIELDS)
# the exact types `json` gives a well-formed row: the fast check; anything else is checked field by field
_FIELD_TYPES = {tuple(kind if isinstance(kind, type) else t for kind in _ROW_FIELDS.values()) for t in (int, float)}


def _check_row(path: Path, number: int, row: Row) -> Row:
    if type(row.get("pool", "")) is not str:
        raise RecordError(f"{path}:{number}: pool: {row['pool']!r} is not a str")
    for name, value in optional_of(row).items():
        try:
            check_optional(name, value)
        except ValueError as exc:
            raise RecordError(f"{path}:{number}: {exc}") from None
    if tuple(map(type, map(row.get, _FIELD_NAMES))) in _FIELD_TYPES and row["outcome"] in _OUTCOME_OF:
        try:
            timestamp(row["date"])
            check_key(row["case"], row["variant"], row["cell"])
            return row
        except ValueError:
            pass  # said below
    for name, kind in _ROW_FIELDS.items():
        if name not in row:
            raise RecordError(f"{path}:{number}: {name}: missing")
        if not isinstance(row[name], kind) or (kind is int and isinstance(row[name], bool)):
            raise RecordError(f"{path}:{number}: {name}: {row[name]!r} is not a {getattr(kind, '__name__', 'number')}")
    try:
        Outcome(row["outcome"])
        timestamp(row["date"])
        check_key(row["case"], row["variant"], row["cell"])
    except ValueError as exc:
        raise RecordError(f"{path}:{number}: {exc}") from None
    return row


def load(root: Path = DEFAULT_RECORD) -> Record:
    """The record under `root` (an empty record when there is none), as the next writer leaves it when a write was
    interrupted (`journal.pending`; nothing is written). `RecordError` names the file and line of anything that does
    not parse, a row citing a run `runs.jsonl` lacks, and a file the manifest lists that is missing or empty."""
    record = Record()
    if not root.is_dir():
        return record
    with gc_paused():
        _load(root, record)
    return record


def _load(root: Path, record: Record) -> None:
    overlay = pending(root)  # a killed write that had committed: its files, not yet in place, are the record
    held: dict[str, int] = {}  # name -> rows read from it

    def lines(name: str) -> tuple[Path, list[tuple[int, Row]]]:
        path = overlay.get(name, root / name)
        if not path.is_file() and name in overlay:  # put in place since `pending` looked: where it is now
            path = root / name
        numbered = _lines(path) if path.is_file() else []
        held[name] = len(numbered)
        return path, numbered

    for name, target in (("runs.jsonl", record.runs), ("machines.jsonl", record.machines)):
        path, numbered = lines(name)
        for number, row in numbered:
            if not isinstance(row.get("id"), str):
                raise RecordError(f"{path}:{number}: id: missing")
            target[row["id"]] = {k: v for k, v in row.items() if k != "id"}
    results = {f"results/{p.name}" for p in (root / "results").glob("*.jsonl")}
    for name in [*sorted(results | {n for n in overlay if n.startswith("results/")}), "compat.jsonl"]:
        path, numbered = lines(name)
        rows = [_check_row(path, number, row) for number, row in numbered]
        if not {row["run"] for row in rows} <= record.runs.keys():  # the line is looked for only when one is missing
            number, row = next((n, r) for n, r in numbered if r["run"] not in record.runs)
            raise RecordError(f"{path}:{number}: run {row['run']!r}: not in runs.jsonl")
        record.rows += rows
    path, numbered = lines("rules.jsonl")
    for number, row in numbered:
        if not all(isinstance(row.get(k), str) for k in ("case", "variant", "set")):
            raise RecordError(f"{path}:{number}: case, variant and set: missing")
        record.rules.append(row)
    path, numbered = lines("versions.jsonl")
    for number, row in numbered:
        package, version = row.get("package"), row.get("version")
        if not isinstance(package, str) or not isinstance(version, str):
            raise RecordError(f"{path}:{number}: package and version: missing")
        point = {k: v for k, v in row.items() if k not in ("package", "version", "kind")}
        if row.get("kind") == "git":
            record.commits.setdefault(package, {})[version] = point
        elif row.get("kind") == "release":
            record.releases.setdefault(package, {})[version] = point
        else:
            raise RecordError(f"{path}:{number}: kind: {row.get('kind')!r} is neither 'release' nor 'git'")
    listing, numbered = lines(MANIFEST)
    for number, entry in numbered:  # a record written before the manifest existed has none: nothing to hold it to
        listed = entry.get("file")
        if not isinstance(listed, str):
            raise RecordError(f"{listing}:{number}: file: missing")
        if not held.get(listed):
            path = overlay.get(listed, root / listed)
            state = "missing" if not path.is_file() else "empty" if listed in held else "not a file of the record"
            raise RecordError(
                f"{path}: {state}, but {listing}:{number} lists it as holding rows (a fold never "
                "empties a file: restore it, e.g. with `git checkout`)"
            )


def render(record: Record) -> dict[str, str]:
    """Every file of the record as text, by path relative to the record's root (deterministic)."""
    files: dict[str, list[Row]] = {}
    for row in sorted(record.rows, key=_order):
        name = "compat.jsonl" if kind_of(row["cell"]) is CellKind.COMPAT else results_file(row["case"])
        files.setdefault(name, []).append(row)
    cited_runs = {row["run"] for row in record.rows}
    cited_machines = {record.runs[r]["machine"] for r in cited_runs if r in record.runs} | {
        row["machine"] for row in record.rows
    }
    files["runs.jsonl"] = [{"id": r, **record.runs[r]} for r in sorted(cited_runs) if r in record.runs]
    files["machines.jsonl"] = [{"id": m, **record.machines[m]} for m in sorted(cited_machines) if m in record.machines]
    versions = [
        {"kind": "release", "package": p, "version": v, **point}
        for p in sorted(record.releases)
        for v, point in _by_version(record.releases[p])
    ]
    versions += [
        {"kind": "git", "package": p, "version": v, **point}
        for p in sorted(record.commits)
        for v, point in sorted(record.commits[p].items())
    ]
    files["versions.jsonl"] = versions
    files["rules.jsonl"] = sorted(record.rules, key=lambda r: (r["case"], r["variant"], r["set"], _dumps(r)))
    files[MANIFEST] = [{"file": name} for name, rows in sorted(files.items()) if rows]
    return {name: "".join(_dumps(row) + "\n" for row in rows) for name, rows in sorted(files.items())}


def results_file(case: str) -> str:
    """The record file of `case`'s results, relative to the record's root: `results/<id>.jsonl`; `RecordError`
    for an id that is not a valid case id (it could name a path outside `results/`)."""
    try:
        return f"results/{check_name('case id', case)}.jsonl"
    except UnsafeName as exc:
        raise RecordError(f"record: {exc}") from None


def _by_version(points: dict[str, Row]) -> list[tuple[str, Row]]:
    return sorted(points.items(), key=lambda item: version_key(item[0]))


def write(root: Path, record: Record) -> list[str]:
    """Write the record under `root`: every file that changed, all at once (`journal.replace_all`: a kill at any
    moment leaves the record as before or as after, and a reader never sees half a file); return the names written.
    An interrupted earlier write is finished or rolled back first (`journal.recover`). Files of the record that no
    longer have rows are left alone (nothing is deleted)."""
    recover(root)
    changed = {}
    for name, text in render(record).items():
        path = root / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        if not text and not path.exists():
            continue
        changed[name] = text
    replace_all(root, changed)
    return list(changed)


# --------------------------------------------------------------------------------------------------------- fold


def fold(record: Record, rows: Iterable[Row], runs: dict[str, Row], machines: dict[str, Row]) -> tuple[int, int]:
    """Fold new rows (with the runs and machines they cite) into `record`, in place; return (added, replaced).
    Idempotent: a row whose key is recorded with the same outcome and tallies (and no version it lacks) is left
    exactly as it was (unless a row of another fingerprint of its world size and cell has been recorded since: then
    the confirmation makes it current again, with its date and run); a newer result of a recorded key replaces it
    (one that recorded a version more, e.g. of a package a rule names, too); an older one is ignored; an `infra` row
    (nothing measured) never replaces a settled one, as it never shadows one in `latest()` (`contract.current`)."""
    index = {key(row): i for i, row in enumerate(record.rows)}
    # (case, variant, world size, device, cell) -> the newest (date, run) recorded
    newest: dict[tuple[Any, ...], tuple[str, str]] = {}
    for row in record.rows:
        newest[key(row)[:-1]] = max(newest.get(key(row)[:-1], ("", "")), (row["date"], row["run"]))
    added = replaced = 0
    for row in rows:
        try:  # what a store or a payload names is checked before it can become a record file's name
            check_key(row["case"], row["variant"], row["cell"])
        except UnsafeName as exc:
            raise RecordError(f"cannot fold a result: {exc}") from None
        at = index.get(key(row))
        k = key(row)[:-1]
        was = newest.get(k, ("", ""))
        newest[k] = max(was, (row["date"], row["run"]))
        if at is None:
            index[key(row)] = len(record.rows)
            record.rows.append(row)
            added += 1
        else:
            old = record.rows[at]
            if (old["outcome"], old["tallies"]) == (row["outcome"], row["tallies"]) and old["versions"].items() >= row[
                "versions"
            ].items():  # a re-measurement that recorded more (a version a rule names) is news
                if (old["date"], old["run"]) < was < (row["date"], row["run"]):
                    # confirmed after a row of another fingerprint of its key (fewer repeats, other pins): it is
                    # the key's current result again, so it takes the confirming measurement's date and run
                    record.rows[at] = row
                    replaced += 1
                continue  # confirmed: the row keeps its first measurement
            if row["outcome"] == Outcome.INFRA.value and old["outcome"] in _SETTLED_VALUES:
                continue
            if (row["date"], row["run"]) > (old["date"], old["run"]):
                record.rows[at] = row
                replaced += 1
    for run_id, run in runs.items():
        record.runs.setdefault(run_id, run)
    for machine_id, machine in machines.items():
        record.machines.setdefault(machine_id, machine)
    return added, replaced


def machine_id(description: Row) -> str:
    """A stable short id for a machine description."""
    import hashlib

    return "m-" + hashlib.sha256(_dumps(description).encode()).hexdigest()[:10]


def machine_description(text: str, here: Row | None = None, host: str | None = None) -> Row:
    """A run's `machine` text as a description: the JSON a current bugmatrix records, or an older bugmatrix's
    `host (OS arch)`, completed with this machine's description `here` when `host` says it ran here."""
    try:
        value = json.loads(text)
        if isinstance(value, dict):
            return value
    except json.JSONDecodeError:
        pass
    match = re.match(r"(\S+) \((\S+) (\S+)\)", text)
    if match and here is not None and match.group(1) == host:
        return here
    return {"description": re.sub(r"^\S+ ", "", text) if match else text}


# ------------------------------------------------------------------------------------------------------ readers


def current_digests(cases: Iterable[Case]) -> Digests:
    """A `Digests` over `cases` (Case objects, probes included): what each variant's results must have measured."""
    from harness.model.job import run_digest

    known: dict[tuple[str, str], str] = {}
    for case in cases:
        for variant in case.spec.variants:
            known[(case.id, variant)] = run_digest(case, variant)
    return lambda case_id, variant: known.get((case_id, variant))


def superseded(case: str, variant: str, digest: str, digests: Digests) -> bool:
    """Whether a result of `case`'s `variant` that measured `digest` measured a script or settings the committed
    case no longer has. A result that recorded no digest (an older bugmatrix's), or of a case or variant the
    reader does not know, is taken as current."""
    if not digest:
        return False
    now = digests(case, variant)
    return now is not None and now != digest


@lru_cache(maxsize=4096)  # a record holds few distinct cells
def _kept(cell: str, kinds: Kinds) -> bool:
    return kind_of(cell) in kinds


class RecordStore(Store):
    """The record as a read-only store (a sibling of `ResultStore` and `NullStore` under `contract.Store`): every
    reader gets the record's results that are not superseded, judged by today's rules; writing is refused. Rows
    become `Result`s only when a reader returns them (a record ten times today's is read in well under a second)."""

    def __init__(
        self,
        record: Record,
        digests: Digests,
        root: Path = DEFAULT_RECORD,
        judge: Callable[[Result], Result] | None = None,
        chronology: Chronology = NOW,
    ) -> None:
        self.path = root
        self.readonly = True
        self.record, self.digests, self.chronology = record, digests, chronology
        self.judge = judge or (lambda r: r)
        self._rows = [row for row in record.rows if not superseded(row["case"], row["variant"], row["digest"], digests)]

    def _result(self, row: Row) -> Result:
        return self.judge(from_row(row)[2])

    def entries(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        """`(run_id, cell, result)` of every row that is not superseded, not judged (`results` judges them)."""
        with gc_paused():
            return [from_row(row) for row in self._chosen(run_id, kinds)]

    def begin_run(self, command: str, machine: str, run_id: str | None = None) -> str:
        raise StoreError(f"{self.path}: the record is written by `bugmatrix record fold`, not by a run")

    def end_run(self, run_id: str, status: str = "complete") -> None:
        raise StoreError(f"{self.path}: the record is written by `bugmatrix record fold`, not by a run")

    def save(self, run_id: str, result: Result, cell: str = LOCAL_CELL) -> None:
        raise StoreError(f"{self.path}: the record is written by `bugmatrix record fold`, not by a run")

    def merge(self, sources: list[Path], kinds: Kinds | None = None) -> int:
        raise StoreError(f"{self.path}: the record is written by `bugmatrix record fold`")

    def _chosen(self, run_id: str | None, kinds: Kinds) -> list[Row]:
        return [row for row in self._rows if _kept(row["cell"], kinds) and (run_id is None or row["run"] == run_id)]

    def runs(self, with_results: bool = False, kinds: Kinds = CASE_CELLS) -> list[Run]:
        cited = {row["run"] for row in self._rows if not with_results or _kept(row["cell"], kinds)}
        out = []
        for run_id in cited:
            run = self.record.runs.get(run_id, {})
            started = timestamp(run["started"]) if "started" in run else 0.0
            machine = run.get("machine", "")
            out.append(
                Run(
                    run_id,
                    started,
                    None,
                    "complete",
                    _dumps(self.record.machines.get(machine, {})),
                    run.get("command", ""),
                )
            )
        return sorted(out, key=lambda r: (r.started_at, r.run_id))

    def results(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        rows = sorted(
            self._chosen(run_id, kinds),
            key=lambda row: (row["run"], row["case"], row["variant"], row["cell"], row["device"], row["nproc"]),
        )
        return [(row["run"], row["cell"], self._result(row)) for row in rows]

    def latest(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[tuple[str, Result]]:
        current = newest(  # `contract.current` over rows, so that only the current rows become Results
            self._chosen(run_id, kinds),
            lambda row: (row["case"], row["variant"], row["nproc"], row["device"], row["cell"]),
            lambda row: (row["date"], row["run"]),
            lambda row: (row["outcome"], row["digest"]),
        )
        with gc_paused():
            return [(row["cell"], self._result(row)) for row in current]

    def standing(
        self, cell: str, case: str, variant: str, fingerprint: str, outcomes: tuple[Outcome, ...]
    ) -> Result | None:
        if not fingerprint:
            return None
        wanted = {o.value for o in outcomes}
        found = [
            row
            for row in self._rows
            if row["cell"] == cell
            and row["fingerprint"] == fingerprint
            and row["case"] == case
            and row["variant"] == variant
            and row["outcome"] in wanted
        ]
        return self._result(max(found, key=lambda row: (row["date"], row["run"]))) if found else None


class LayeredStore(Store):
    """A wrapper: any store (`local`) over the record: readers see both (the current result of a key wins, as
    `contract.current` defines it; the local store's copy of a row it shares with the record wins), writers write to
    the local store only. Results that are superseded (see `superseded`) are left out of every reader, in either
    layer."""

    def __init__(self, local: Store, record: RecordStore) -> None:
        self.path = local.path
        self.readonly = local.readonly
        self.local, self.record = local, record
        self.digests, self.judge = record.digests, record.judge  # one judgement for both layers
        self.chronology = record.chronology  # and one history

    def begin_run(self, command: str, machine: str, run_id: str | None = None) -> str:
        return self.local.begin_run(command, machine, run_id)

    def end_run(self, run_id: str, status: str = "complete") -> None:
        self.local.end_run(run_id, status)

    def save(self, run_id: str, result: Result, cell: str = LOCAL_CELL) -> None:
        self.local.save(run_id, result, cell)

    def merge(self, sources: list[Path], kinds: Kinds | None = None) -> int:
        return self.local.merge(sources, kinds)

    def _entries(self, run_id: str | None, kinds: Kinds) -> list[Entry]:
        """Both layers' results that are not superseded, not judged: the local store's copy of a (run, key) wins."""
        mine = [
            e
            for e in self.local.results(run_id, kinds)
            if not superseded(e[2].case, e[2].variant, e[2].digest, self.digests)
        ]
        seen = {(run_id_, cell, r.case, r.variant, r.nproc, r.device) for run_id_, cell, r in mine}
        return mine + [
            e
            for e in self.record.entries(run_id, kinds)
            if (e[0], e[1], e[2].case, e[2].variant, e[2].nproc, e[2].device) not in seen
        ]

    def runs(self, with_results: bool = False, kinds: Kinds = CASE_CELLS) -> list[Run]:
        mine = {r.run_id: r for r in self.local.runs(with_results, kinds)}
        merged = {**{r.run_id: r for r in self.record.runs(with_results, kinds)}, **mine}
        return sorted(merged.values(), key=lambda r: (r.started_at, r.run_id))

    def results(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        judged = [(r_id, cell, self.judge(r)) for r_id, cell, r in self._entries(run_id, kinds)]
        return sorted(judged, key=lambda e: (e[0], e[2].case, e[2].variant, e[1], e[2].device, e[2].nproc))

    def latest(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[tuple[str, Result]]:
        current = newest(self._entries(run_id, kinds), entry_identity, entry_moment, entry_measured)
        return [(cell, self.judge(r)) for _, cell, r in current]  # only what is returned is judged

    def standing(
        self, cell: str, case: str, variant: str, fingerprint: str, outcomes: tuple[Outcome, ...]
    ) -> Result | None:
        mine = self.local.standing(cell, case, variant, fingerprint, outcomes)
        found = [
            r
            for r in (mine and self.judge(mine), self.record.standing(cell, case, variant, fingerprint, outcomes))
            if r is not None
        ]
        return max(found, key=lambda r: r.started_at) if found else None
