"""The search behind `bugmatrix bisect`: find where an outcome changes in an ordered list of candidates.

Like `git bisect` with terms: the oldest candidate shows the *old* outcome, the newest the *new* one, and the search
finds the first candidate showing the new outcome (and the last showing the old). Either direction works: old
`reproduced` / new `fixed` finds the fix; old `fixed` / new `reproduced` finds the regression.

- Both endpoints are probed first; the search refuses when they do not show two different outcomes, one of them
  decisive (`reproduced`/`fixed`) and the other decisive or `skip`. A `skip` endpoint (exit 125: the script cannot
  test that version, e.g. the API it drives does not exist yet) makes the search find where the case becomes
  testable: what `bugmatrix expect` needs to write a `skip` rule with an exact bound.
- An endpoint that cannot be installed or imported here (`infra`: e.g. an old release that resolves a torch which
  does not import on this Python), or that the caller's `unusable` says cannot run here (bisect: torchrun failed
  before any rank started), is stepped over: the search steps inward from it, 1, 2, 4, ... candidates and then
  bisects that last step, for the nearest candidate that can (assuming those that cannot come first, or last),
  starts there, and lists the ones stepped over as `untestable`. When both endpoints cannot, the middle candidate
  and then the quarter points are tried first for one that can. A decisive outcome met while stepping is a bound:
  the bisection starts from the nearest candidates showing each side, not from the whole range.
- A probe whose outcome is neither side (error, infra, timeout, flaky; skip unless an endpoint is skip; the third
  verdict when one side is skip) is *skipped*, like exit 125 in `git bisect run`: the nearest untested candidate to
  the midpoint is tried instead. When every candidate in the remaining range is skipped, the answer is the range
  itself (`ambiguous`).
- A flaky case (`adaptive`: `bisect --repeat auto`, `narrow --repeat auto`) is not bisected on outcomes: one run
  per version says nothing of a rate. `harness/analysis/flaky.py` `locate` chooses which version to launch and how
  many more times (10, doubling to the cap), counting what the store already pools for each version (`known`), until
  the boundary holds at the policy's confidence (0.95) or every version it needs is at the cap: then the answer is
  *could not decide*, never a boundary and never "fixed" (`SearchResult.decided`, `verdict_line`). Untestable
  endpoints are not stepped over in this mode: their launches count among the others, up to the cap.
- With `parallel` > 1, the next levels of the bisection tree are probed at once (speculation) and then walked
  exactly as a sequential bisection would walk them, so parallelism never changes the answer, only the wall time.
  Sequentially, N candidates take at most 2 + ceil(log2(N - 1)) probes when nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from harness.analysis.flaky import FIXED, REGRESSED, Policy, Tally, Verdict, locate
from harness.model.outcome import Outcome, combine_repeats

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
    verdict: Verdict | None = None  # a flaky search's (`adaptive`): the boundary's verdict with its confidence
    tallies: dict[str, Tally] = field(default_factory=dict)  # a flaky search's: each measured candidate's tally
    launches: int = 0  # a flaky search's: launches counted in all, `reused` of them pooled from earlier runs
    reused: int = 0

    @property
    def decided(self) -> bool:
        """Whether this is a boundary: always for an outcome bisection; for a flaky one, when its verdict holds at
        the stated confidence (else it is "could not decide", never a boundary)."""
        return self.verdict is None or self.verdict.decided


@dataclass(frozen=True)
class Adaptive(Generic[T]):
    """How a flaky case is searched (the module docstring): `measure(candidate, n)` launches n more repeats and
    gives their tally; `known(candidate)` is the tally the store already pools for it (earlier runs'); `policy` the
    confidence, the first batch and the cap."""

    measure: Callable[[T, int], Tally]
    known: Callable[[T], Tally]
    policy: Policy = field(default_factory=Policy)


def search_flaky(candidates: Sequence[T], adaptive: Adaptive[T]) -> SearchResult[T]:
    """Locate where the reproduction rate changes along `candidates` (oldest first) with adaptive repeats
    (`flaky.locate`), the pooled tallies of earlier runs counting as measured."""
    if len(candidates) < 2:
        raise BisectRefused(f"need at least two candidates, got {len(candidates)}")
    known = {i: t for i, c in enumerate(candidates) if (t := adaptive.known(c)).launches}
    located = locate(len(candidates), lambda i, n: adaptive.measure(candidates[i], n), adaptive.policy, known)
    verdict = located.verdict
    old, new = {REGRESSED: DECISIVE[::-1], FIXED: DECISIVE}.get(verdict.kind, (Outcome.FLAKY, Outcome.FLAKY))
    measured = [(c, t) for c, t in zip(candidates, located.tallies, strict=True) if t.launches]
    return SearchResult(
        old=old,
        new=new,
        last_old=candidates[located.last_old],
        first_new=candidates[located.first_new],
        probes=[(c, tally_outcome(t)) for c, t in measured],
        verdict=verdict,
        tallies={str(c): t for c, t in measured},
        launches=located.launches,
        reused=sum(t.launches for t in known.values()),
    )


def tally_outcome(tally: Tally) -> Outcome:
    """One outcome for a candidate's pooled tally, by the repeats' rule (`combine_repeats`)."""
    runs = [Outcome.REPRODUCED] * tally.reproduced + [Outcome.FIXED] * tally.fixed + [Outcome.ERROR] * tally.other
    return combine_repeats(runs) if runs else Outcome.INFRA


def verdict_line(found: SearchResult[T]) -> str:
    """A flaky search's answer for the user: the verdict with both sides' tallies and its confidence, and the
    launches ("24 launches, 10 reused"); undecided: "could not decide at confidence 0.95 after N launches (cap ...)"
    with what was measured, never a boundary."""
    verdict = found.verdict
    assert verdict is not None, "a flaky search has a verdict"
    spent = f"{found.launches} launches, {found.reused} reused from earlier runs"
    if verdict.decided:
        return f"{verdict.text(str(found.last_old), str(found.first_new))}; {spent}"
    cap = verdict.policy.cap
    measured = "; ".join(f"{c}: {t.text()}" for c, t in found.tallies.items())
    return (
        f"could not decide at confidence {verdict.policy.confidence:g} after {found.launches} launches (cap of {cap} "
        f"launches a version{', reached' if verdict.capped else ''}; {found.reused} reused from earlier runs): not "
        f"measured, not fixed ({measured})"
    )


def search(
    candidates: Sequence[T],
    probe: Prober[T],
    parallel: int = 1,
    known: dict[int, Outcome] | None = None,
    unusable: Callable[[T, Outcome], bool] | None = None,
    adaptive: Adaptive[T] | None = None,
) -> SearchResult[T]:
    """Bisect `candidates` (oldest first) for the first one showing the newest candidate's outcome. `known` gives
    outcomes already measured (by index; e.g. both endpoints, when narrowing between two matrix cells): those are
    not probed again, and not listed among the probes. `unusable(candidate, outcome)` says which probes besides
    `infra` ones show the candidate cannot be tested here at all (stepped over at an endpoint, skipped inside).
    With `adaptive` (a flaky case), the rate's change point is located instead (`search_flaky`)."""
    if adaptive is not None:
        return search_flaky(candidates, adaptive)
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

    def usable(i: int) -> bool:
        return seen[i] is not Outcome.INFRA and not (unusable and unusable(candidates[i], seen[i]))

    lo, hi = 0, len(candidates) - 1
    run([lo, hi])
    lo, hi = _usable_ends(lo, hi, usable, run)
    untestable = [*candidates[:lo], *candidates[hi + 1 :]]
    old, new = seen[lo], seen[hi]
    sides = (old, new)
    bounding = any(o in DECISIVE for o in sides) and all(o in SIDES for o in sides)
    if old == new or not bounding:
        stepped = f" ({_span(untestable)} cannot be installed or run here: stepped over)" if untestable else ""
        raise BisectRefused(
            f"the endpoints do not differ: {candidates[lo]} is {old.value}, {candidates[hi]} is {new.value}"
            + stepped
            + ("" if bounding else " (an endpoint must be reproduced or fixed, the other reproduced, fixed or skip)")
        )
    lo, hi = _bounds(lo, hi, seen, sides)
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


def _usable_ends(lo: int, hi: int, usable: Callable[[int], bool], run: Callable[[list[int]], None]) -> tuple[int, int]:
    """(lo, hi) stepped inward past the endpoints that cannot be used here (see the module docstring); as they were
    when both are usable, or when neither is and no middle candidate is."""
    if not usable(lo) and not usable(hi):
        for inside in _middles(lo, hi):
            run([inside])
            if usable(inside):
                return _installable(lo, inside, usable, run), _installable(hi, inside, usable, run)
    elif not usable(lo):
        lo = _installable(lo, hi, usable, run)
    elif not usable(hi):
        hi = _installable(hi, lo, usable, run)
    return lo, hi


def _installable(bad: int, good: int, usable: Callable[[int], bool], run: Callable[[list[int]], None]) -> int:
    """The candidate nearest `bad` (an endpoint that cannot be used here) that can, towards `good` (one that can):
    steps of 1, 2, 4, ... from `bad`, then a bisection of the last step (those that cannot are taken to lie together
    at that end, usually a few: stepping from the far end would probe the middle of the range for nothing)."""
    toward, step = (1 if good > bad else -1), 1
    while abs(good - bad) > step:  # the next step lands short of `good`
        i = bad + toward * step
        run([i])
        if usable(i):
            good = i
            break
        bad, step = i, step * 2
    while abs(good - bad) > 1:
        mid = (bad + good) // 2
        run([mid])
        bad, good = (bad, mid) if usable(mid) else (mid, good)
    return good


def _middles(lo: int, hi: int) -> list[int]:
    """Where to look for a usable candidate when neither endpoint is: the middle, then the quarter points."""
    mid = (lo + hi) // 2
    return [i for i in dict.fromkeys((mid, (lo + mid) // 2, (mid + hi) // 2)) if lo < i < hi]


def _bounds(lo: int, hi: int, seen: dict[int, Outcome], sides: tuple[Outcome, Outcome]) -> tuple[int, int]:
    """(lo, hi) narrowed to the candidates already probed (while stepping over endpoints, or `known`) that show the
    new side first and the old side last before it: what was measured is a bound, not probed around."""
    hi = min((i for i in seen if lo < i < hi and seen[i] == sides[1]), default=hi)
    lo = max((i for i in seen if lo < i < hi and seen[i] == sides[0]), default=lo)
    return lo, hi


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
