"""The results contract: what every results store keeps, and the one rule for "the current result".

    Store                 the abstract contract: readers and writers take a `Store` and never ask which one it is
      ResultStore         the SQLite working copy of one machine (harness/session/store.py)
      RecordStore         the committed record, read-only (harness/session/record.py)
      NullStore           a run that records nothing (`--no-store`)
      LayeredStore        a wrapper: any store over the record (harness/session/record.py)
      ReadOnly            a wrapper: any store, its writers refused

The contract (`tests/test_contract.py` runs one suite against every implementation):
- A *run* is one invocation, identified by a `run_id` unique across machines; `begin_run` records it as `running`,
  `end_run` marks it `complete` or `interrupted`. A *result* is one launch of case x variant x world size x device
  in one cell; within a run its key (case, variant, nproc, device, cell) is unique: saving it again replaces it.
- `results` and `runs` give back what was saved; `standing` is what a resumed run reuses (the newest result of that
  case and variant with that fingerprint among those outcomes, from any run).
- `pooled` adds up the launches of one job over every run: the tallies of the results of that case and variant in
  that cell with that repeat-free identity (`pool`, harness/model/job.py `pool_of`), one launched once counting its
  outcome once, one that launched nothing counting nothing. Within a run a key holds one result, and a reused result
  is not saved again, so no launch is counted twice.
- Every reader takes the kinds of cell it reads (`harness/model/cell.py` `CellKind`): the cases' results
  (`CASE_CELLS`, the default) or the compatibility probes' (`COMPAT_CELLS`), so report, compare, narrow, expect and
  the nightly's verdict never mix the two.
- `latest()` is the *current result* of each key, defined once here (`current`, over any items by `newest`): the
  newest result of the key over all runs (the greatest `started_at`, a tie going to the greater `run_id`), except
  that an `infra` result (nothing was measured: the environment could not be made) never shadows a settled result
  of its key that measured the same digest (`unshadowed`): that measurement still stands. A store may answer it
  another way (the SQLite store keeps a `latest` table); a test holds it to this definition on the same rows.
- `chronology` is the history its results are read against (harness/matrix/chronology.py): a reader of the record
  carries the record's snapshot of the index and the clones, every other store knows nothing (`NOW`: ask them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness.matrix.chronology import NOW, Chronology
from harness.model.cell import CASE_CELLS, LOCAL_CELL, Kinds, kind_of
from harness.model.errors import BugmatrixError
from harness.model.job import SETTLED
from harness.model.outcome import Outcome
from harness.model.result import Result, launch_tallies

T = TypeVar("T")
Entry = tuple[str, str, Result]  # (run id, cell, result)
_SETTLED_VALUES = {o.value for o in SETTLED}


class StoreError(BugmatrixError, RuntimeError):
    """The store cannot be opened, is not a bugmatrix store, or refuses what was asked of it (one line)."""


@dataclass(frozen=True)
class Run:
    """One recorded invocation."""

    run_id: str
    started_at: float
    finished_at: float | None
    status: str
    machine: str
    command: str


# -------------------------------------------------------------------------------------------- the current result


def unshadowed(
    items: Iterable[T], identity: Callable[[T], tuple[Any, ...]], measured: Callable[[T], tuple[str, str]]
) -> list[T]:
    """`items` less every `infra` item that a settled item of the same identity measured at the same digest
    outranks (nothing was measured, so the measurement stands). `measured` gives an item's (outcome, digest)."""
    items = list(items)
    standing = {
        (identity(item), digest)
        for item in items
        for outcome, digest in [measured(item)]
        if digest and outcome in _SETTLED_VALUES
    }
    return [
        item
        for item in items
        if not (measured(item)[0] == Outcome.INFRA.value and (identity(item), measured(item)[1]) in standing)
    ]


def newest(
    items: Iterable[T],
    identity: Callable[[T], tuple[Any, ...]],
    moment: Callable[[T], tuple[Any, ...]],
    measured: Callable[[T], tuple[str, str]],
) -> list[T]:
    """The current item of each identity (case, variant, nproc, device, cell): the newest by `moment` (when it
    started, then the run id: a tie goes to the greater run id) of those `unshadowed` leaves, in identity order.
    Any items: results, record rows (so that only the current rows become results)."""
    best: dict[tuple[Any, ...], T] = {}
    for item in unshadowed(items, identity, measured):
        k = identity(item)
        if k not in best or moment(item) > moment(best[k]):
            best[k] = item
    return [best[k] for k in sorted(best)]


def entry_identity(e: Entry) -> tuple[str, str, int, str, str]:
    """A `(run, cell, result)` entry's key: (case, variant, world size, device, cell)."""
    return (e[2].case, e[2].variant, e[2].nproc, e[2].device, e[1])


def entry_moment(e: Entry) -> tuple[float, str]:
    """A `(run, cell, result)` entry's moment: (when it started, its run id)."""
    return (e[2].started_at, e[0])


def entry_measured(e: Entry) -> tuple[str, str]:
    """A `(run, cell, result)` entry's (outcome, digest), for `unshadowed`."""
    return (e[2].outcome.value, e[2].digest)


def current(entries: Iterable[Entry]) -> list[Entry]:
    """The current result of each key among `entries` (see the module docstring), in key order."""
    return newest(entries, entry_identity, entry_moment, entry_measured)


def pooled_tallies(results: Iterable[Result]) -> dict[str, int]:
    """The launches of `results` added up, outcome -> count (`launch_tallies` of each), in outcome order."""
    total: dict[str, int] = {}
    for result in results:
        for outcome, count in launch_tallies(result).items():
            total[outcome] = total.get(outcome, 0) + count
    return dict(sorted(total.items()))


# ------------------------------------------------------------------------------------------------- the contract


class Store(ABC):
    """The contract every results store keeps (the module docstring). Callers take a `Store` and never check which
    one they hold."""

    path: Path
    readonly: bool
    chronology: Chronology = NOW  # what its readers date and list versions with (the module docstring)

    @abstractmethod
    def begin_run(self, command: str, machine: str, run_id: str | None = None) -> str:
        """Record a new run as `running` (or reuse `run_id` if it exists, for xdist workers); return its id."""

    @abstractmethod
    def end_run(self, run_id: str, status: str = "complete") -> None:
        """Mark the run `complete` or `interrupted`."""

    @abstractmethod
    def save(self, run_id: str, result: Result, cell: str = LOCAL_CELL) -> None:
        """Save one result of the run, in one transaction (replacing the same key within the same run)."""

    @abstractmethod
    def runs(self, with_results: bool = False, kinds: Kinds = CASE_CELLS) -> list[Run]:
        """The runs, oldest first (with `with_results`, only those that recorded a result in a cell of `kinds`)."""

    @abstractmethod
    def results(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        """`(run id, cell, result)` of one run or of all, in cells of `kinds`, in a stable order (run, case,
        variant, cell, device, world size)."""

    def latest(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[tuple[str, Result]]:
        """`(cell, result)`: the current result of each key (`current`), over all runs or one, in key order."""
        return [(cell, result) for _, cell, result in current(self.results(run_id, kinds))]

    @abstractmethod
    def standing(
        self, cell: str, case: str, variant: str, fingerprint: str, outcomes: tuple[Outcome, ...]
    ) -> Result | None:
        """The newest result of `case`'s `variant` in `cell` with this fingerprint among these outcomes, from any run
        (what a resumed run reuses); None without a fingerprint."""

    @abstractmethod
    def merge(self, sources: list[Path], kinds: Kinds | None = None) -> int:
        """Copy runs and results (of cells of `kinds`, when given, and the runs that hold them) from other store
        files; how many results were new (idempotent)."""

    def pooled(self, cell: str, case: str, variant: str, pool: str) -> dict[str, int]:
        """The launches of `case`'s `variant` in `cell` with this repeat-free identity, added up over every run
        (`pooled_tallies`); {} without a pool."""
        if not pool:
            return {}
        return pooled_tallies(
            r
            for _, at, r in self.results(kinds=frozenset({kind_of(cell)}))
            if at == cell and r.case == case and r.variant == variant and r.pool == pool
        )


class ReadOnly(Store):
    """Any store with its writers refused (`StoreError` naming the store): what a reading command opens, so that
    nothing it does can write."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.path, self.readonly, self.chronology = inner.path, True, inner.chronology

    def _refused(self) -> StoreError:
        return StoreError(f"{self.path}: opened to read; nothing is written to it")

    def begin_run(self, command: str, machine: str, run_id: str | None = None) -> str:
        raise self._refused()

    def end_run(self, run_id: str, status: str = "complete") -> None:
        raise self._refused()

    def save(self, run_id: str, result: Result, cell: str = LOCAL_CELL) -> None:
        raise self._refused()

    def merge(self, sources: list[Path], kinds: Kinds | None = None) -> int:
        raise self._refused()

    def runs(self, with_results: bool = False, kinds: Kinds = CASE_CELLS) -> list[Run]:
        return self.inner.runs(with_results, kinds)

    def results(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[Entry]:
        return self.inner.results(run_id, kinds)

    def latest(self, run_id: str | None = None, kinds: Kinds = CASE_CELLS) -> list[tuple[str, Result]]:
        return self.inner.latest(run_id, kinds)

    def standing(
        self, cell: str, case: str, variant: str, fingerprint: str, outcomes: tuple[Outcome, ...]
    ) -> Result | None:
        return self.inner.standing(cell, case, variant, fingerprint, outcomes)

    def pooled(self, cell: str, case: str, variant: str, pool: str) -> dict[str, int]:
        return self.inner.pooled(cell, case, variant, pool)
