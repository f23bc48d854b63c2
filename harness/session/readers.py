"""What every reading command reads: the committed record with the local store layered over it.

    store = open_reader(db, explicit, record_root, cases)   # report, compare, narrow, expect, compat, bisect

- With no local store (a fresh clone), the record alone answers; the default store path is never created by a
  reader. An explicit `--db` that does not exist is a `StoreError` (one line, exit 2), never a silent fall-back.
- With `writable`, the local store is opened to write: narrow, bisect and compat record their probes there while
  reusing the record's results as known points (`standing`). The default store is created when missing; an explicit
  `--db` that does not exist is refused as for any reader (a mistyped path would hide the store's intervals and
  leave a stray store behind), unless `creates`: compat's probes fill the fresh store the nightly names.
- Results are judged by today's rules (`expected` from the case's current `expect` list; nothing is expected of an
  `infra`), and superseded results (`record.superseded`) are left out of both layers.
- The record's version points (release listings, upload dates, commit dates and positions) are the reader's
  `chronology` (`chronology_of`), which answers the index and clone questions of the matrix it loads
  (`load_matrix(path, store.chronology)`), so the record reads the same offline; a command that measures
  (`writable`) asks the live index, so that a release uploaded tonight is planned tonight. Opening a reader changes
  nothing for the rest of the process: two readers of two records each answer from their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.launch.interpreter import Environment
from harness.matrix.chronology import NOW, Chronology
from harness.matrix.index import Release
from harness.model.case import PROBES_DIR, Case, discover
from harness.model.expectations import environment_of, expected_outcome, expects_nothing
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import parse_release
from harness.session.basics import default_db
from harness.session.contract import ReadOnly, Store, StoreError
from harness.session.record import DEFAULT_RECORD, LayeredStore, Record, RecordStore, current_digests, load, when
from harness.session.store import ResultStore


def judged(cases: Iterable[Case]) -> Callable[[Result], Result]:
    """A function that sets a result's `expected` by its case's current rules (None for an `infra`; a result of a
    case or variant it does not know keeps what it recorded)."""
    variants = {(c.id, v): spec for c in cases for v, spec in c.spec.variants.items()}
    # the rules' answer for one (case, variant, versions, world size, device)
    known: dict[tuple[Any, ...], Outcome] = {}
    environments: dict[tuple[tuple[str, str], ...], Environment] = {}

    def judge(result: Result) -> Result:
        variant = variants.get((result.case, result.variant))
        if variant is None:  # a case this reader does not know: what was recorded stands
            return result
        if expects_nothing(result):
            expected = None
        else:
            pins = tuple(result.versions.items())
            key = (result.case, result.variant, pins, result.nproc, result.device)
            expected = known.get(key)
            if expected is None:
                env = environments.get(pins)
                if env is None:  # every variant and world size of a cell shares its environment
                    env = environments[pins] = environment_of(result)
                expected = known[key] = expected_outcome(variant, env, result.nproc, result.device)
        return result if expected == result.expected else result.model_copy(update={"expected": expected})

    return judge


def chronology_of(record: Record) -> Chronology:
    """`record`'s snapshot of the index and the clones: release listings with upload dates, commit dates and
    first-parent positions (what its readers answer before asking an index or a clone)."""
    releases = {
        distribution: tuple(
            Release(parse_release(v), _when(p.get("date")), bool(p.get("yanked"))) for v, p in points.items()
        )
        for distribution, points in record.releases.items()
    }
    dates: dict[str, datetime] = {}
    positions: dict[tuple[str, str], int] = {}
    for package, refs in record.commits.items():
        for ref, point in refs.items():
            if point.get("position") is not None:
                positions[(package, ref)] = point["position"]
            if point.get("date"):
                dates[ref] = when(point["date"])
    return Chronology.of(releases, dates, positions)


def _when(text: str | None) -> datetime | None:
    return when(text) if text else None


def record_store(
    record: Record,
    cases: list[Case],
    record_root: Path = DEFAULT_RECORD,
    probes_dir: Path = PROBES_DIR,
    judge: bool = True,
    chronology: Chronology = NOW,
) -> RecordStore:
    """`record` as a read-only store over `cases` and the compatibility probes: what their committed scripts make
    superseded is left out, and (with `judge`) what is returned is judged by their current rules; its readers date
    versions with `chronology` (`chronology_of(record)` for a reader of the record)."""
    everything = [*cases, *discover(probes_dir)[0]]
    judge_by = judged(everything) if judge else None
    return RecordStore(record, current_digests(everything), record_root, judge_by, chronology)


def open_reader(
    db: Path | None,
    explicit: bool,
    cases: list[Case],
    record_root: Path = DEFAULT_RECORD,
    writable: bool = False,
    probes_dir: Path = PROBES_DIR,
    judge: bool = True,
    creates: bool = False,
) -> Store:
    """The store a reading command reads (see the module docstring; `db` None: the record alone); raises
    `StoreError` (a one-line message) for an explicit `--db` that does not exist (unless `creates`, with
    `writable`) or is not a store, or a record file that does not parse, before anything is created.
    `judge=False`: results keep the `expected` they recorded (None for the record's)."""
    if db is not None and explicit and not db.is_file() and not (writable and creates):
        also = f"; leave --db out to record in {default_db()} (created when missing)" if writable else ""
        raise StoreError(f"{db}: no such results store (--db){also}")
    record = load(record_root)
    # a measuring command asks the live index: tonight's release is planned tonight
    chronology = NOW if writable else chronology_of(record)
    layer = record_store(record, cases, record_root, probes_dir, judge, chronology)  # judge=False: no rules looked at
    if db is None:  # the record alone
        return layer
    if writable:
        local: Store = ResultStore(db)
    elif db.is_file():
        local = ReadOnly(ResultStore(db, readonly=True))
    else:
        return layer
    return LayeredStore(local, layer)
