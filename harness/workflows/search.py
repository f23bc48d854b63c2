"""The search behind `bugmatrix bisect`: find where an outcome changes in an ordered list of candidates.

Like `git bisect` with terms: the oldest candidate shows the *old* outcome, the newest the *new* one, and the search
finds the first candidate showing the new outcome (and the last showing the old). Either direction works: old
`reproduced` / new `fixed` finds the fix; old `fixed` / new `reproduced` finds the regression.

- Both endpoints are probed first; the search refuses when they do not show two different outcomes, one of them
  decisive (`reproduced`/`fixed`) and the other decisive or `skip`. A `skip` endpoint (exit 125: the script cannot
  test that version, e.g. the API it drives does not exist yet) makes the search find where the case becomes
  testable: what `bugmatrix expect` needs to write a `skip` rule with an exact bound.
- An endpoint that cannot be installed or imported here (`infra`: e.g. an old release that resolves a torch which
  does not import on this Python) is stepped over: the search bisects inward for the nearest candidate that can be
  (assuming those that cannot come first, or last), starts there, and lists the ones stepped over as `untestable`.
- A probe whose outcome is neither side (error, infra, timeout, flaky; skip unless an endpoint is skip; the third
  verdict when one side is skip) is *skipped*, like exit 125 in `git bisect run`: the nearest untested candidate to
  the midpoint is tried instead. When every candidate in the remaining range is skipped, the answer is the range
  itself (`ambiguous`).
- With `parallel` > 1, the next levels of the bisection tree are probed at once (speculation) and then walked
  exactly as a sequential bisection would walk them, so parallelism never changes the answer, only the wall time.
  Sequentially, N candidates take at most 2 + ceil(log2(N - 1)) probes when nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from harness.model.outcome import Outcome

T = TypeVar("T")
DECISIVE = (Outcome.REPRODUCED, Outcome.FIXED)
Prober = Callable[[list[T]], list[Outcome]]  # probes several candidates (possibly at once), outcomes in order


class BisectRefused(Exception):
    """The endpoints do not show two different outcomes that can bound a search; the message says what they
    showed."""


@dataclass
class SearchResult(Generic[T]):
    """The boundary: `last_old` shows the old outcome, `first_new` the new one (adjacent unless ambiguous)."""

    old: Outcome
    new: Outcome
    last_old: T
    first_new: T
    probes: list[tuple[T, Outcome]] = field(default_factory=list)
    skipped: list[T] = field(default_factory=list)
    ambiguous: list[T] = field(default_factory=list)  # untestable candidates between last_old and first_new
    untestable: list[T] = field(default_factory=list)  # endpoints stepped over: they cannot be installed here (infra)


def search(
    candidates: Sequence[T], probe: Prober[T], parallel: int = 1, known: dict[int, Outcome] | None = None
) -> SearchResult[T]:
    """Bisect `candidates` (oldest first) for the first one showing the newest candidate's outcome. `known` gives
    outcomes already measured (by index; e.g. both endpoints, when narrowing between two matrix cells): those are
    not probed again, and not listed among the probes."""
    if len(candidates) < 2:
        raise BisectRefused(f"need at least two candidates, got {len(candidates)}")
    seen: dict[int, Outcome] = dict(known or {})
    order: list[int] = []

    def run(indices: list[int]) -> None:
        todo = [i for i in dict.fromkeys(indices) if i not in seen]
        if todo:
            for i, outcome in zip(todo, probe([candidates[i] for i in todo]), strict=True):
                seen[i] = outcome
                order.append(i)

    lo, hi = 0, len(candidates) - 1
    run([lo, hi])
    if seen[lo] is Outcome.INFRA and seen[hi] is not Outcome.INFRA:
        lo = _installable(lo, hi, seen, run)
    elif seen[hi] is Outcome.INFRA and seen[lo] is not Outcome.INFRA:
        hi = _installable(hi, lo, seen, run)
    untestable = [*candidates[:lo], *candidates[hi + 1 :]]
    old, new = seen[lo], seen[hi]
    sides = (old, new)
    bounding = any(o in DECISIVE for o in sides) and all(o in SIDES for o in sides)
    if old == new or not bounding:
        stepped = f" ({_span(untestable)} cannot be installed or imported here: infra)" if untestable else ""
        raise BisectRefused(
            f"the endpoints do not differ: {candidates[lo]} is {old.value}, {candidates[hi]} is {new.value}"
            + stepped
            + ("" if bounding else " (an endpoint must be reproduced or fixed, the other reproduced, fixed or skip)")
        )
    levels = max(1, (max(1, parallel) + 1).bit_length() - 1)  # 2**levels - 1 probes per round
    while _next_probe(lo, hi, seen, sides) is not None:
        run(_speculate(lo, hi, seen, sides, levels))
        lo, hi = _walk(lo, hi, seen, sides)
    ambiguous = [candidates[i] for i in range(lo + 1, hi)]
    return SearchResult(
        old=old,
        new=new,
        last_old=candidates[lo],
        first_new=candidates[hi],
        probes=[(candidates[i], seen[i]) for i in order],
        skipped=[candidates[i] for i in order if seen[i] not in sides],
        ambiguous=ambiguous,
        untestable=untestable,
    )


def _installable(bad: int, good: int, seen: dict[int, Outcome], run: Callable[[list[int]], None]) -> int:
    """The candidate nearest `bad` (an endpoint that is `infra`) that is not `infra`, bisecting towards `good` (one
    that is not): the releases that cannot be installed here are taken to lie together at that end."""
    while abs(good - bad) > 1:
        mid = (bad + good) // 2
        run([mid])
        if seen[mid] is Outcome.INFRA:
            bad = mid
        else:
            good = mid
    return good


def _span(items: Sequence[object]) -> str:
    return str(items[0]) if len(items) == 1 else f"{items[0]} … {items[-1]} ({len(items)})"


SIDES = (*DECISIVE, Outcome.SKIP)  # what an endpoint may show; at least one of the two is decisive


def _next_probe(lo: int, hi: int, seen: dict[int, Outcome], sides: tuple[Outcome, Outcome]) -> int | None:
    """The candidate a sequential bisection probes next in (lo, hi): the midpoint, or the nearest to it that was not
    skipped (probed, and showing neither side); None when the range is exhausted."""
    if hi - lo <= 1:
        return None
    mid = (lo + hi) // 2
    for offset in range(hi - lo):
        for i in (mid - offset, mid + offset + 1):  # mid, mid+1, mid-1, mid+2, ...: every candidate in the range
            if lo < i < hi and (i not in seen or seen[i] in sides):
                return i
    return None


def _walk(lo: int, hi: int, seen: dict[int, Outcome], sides: tuple[Outcome, Outcome]) -> tuple[int, int]:
    """Narrow (lo, hi) exactly as a sequential bisection would, as far as the probed candidates allow."""
    while (pick := _next_probe(lo, hi, seen, sides)) is not None and pick in seen:
        lo, hi = (pick, hi) if seen[pick] == sides[0] else (lo, pick)
    return lo, hi


def _speculate(lo: int, hi: int, seen: dict[int, Outcome], sides: tuple[Outcome, Outcome], levels: int) -> list[int]:
    """The unprobed candidates of the next `levels` levels of the bisection tree from (lo, hi)."""
    frontier, picks = [(lo, hi)], []
    for _ in range(levels):
        nxt = []
        for a, b in frontier:
            a, b = _walk(a, b, seen, sides)
            pick = _next_probe(a, b, seen, sides)
            if pick is None:
                continue
            picks.append(pick)
            nxt += [(a, pick), (pick, b)]
        frontier = nxt
    return picks
