"""Flaky boundaries with a stated confidence: where does a bug's reproduction *rate* change along a list of
versions, and how sure is that?

    verdict = decide(Tally(0, 24), Tally(9, 15))               # two adjacent versions: regressed, 0.99
    verdict.text("2.6.0", "2.7.0")   # "regressed in 2.7.0 (2.6.0: 0/24 reproduced; 2.7.0: 9/24; confidence 0.99)"
    answer = locate(16, measure, Policy())                     # a flaky bisect over 16 versions, with adaptive
                                                               # repeats (`measure(i, n)` launches, or simulates,
                                                               # n more repeats of version i and gives their tally)

The test: a Bayesian change-point posterior over Beta-Binomial sides (what git bayesect does for commits). Each side
of a boundary has one reproduction rate with a uniform prior, Beta(1, 1); the boundary is "none" (the rate is the
same everywhere) with prior 1/2, or lies before any one version with the rest of the prior shared equally. The
evidence of a boundary before version j is the product of the two sides' marginal likelihoods, each side's tallies
pooled: B(1 + K, 1 + F) for K reproduced and F fixed runs on that side (B the Beta function), so every version
measured on a side speaks for that side's rate, not only the two next to the boundary. The confidence stated is the
posterior of that one boundary, P(boundary before j | every tally); an answer needs it >= `Policy.confidence` (0.95,
as git bayesect stops). For two versions this is the Bayes factor of "two rates" against "one rate".
Why this and not a Pinpoint-style sequential test (10 repeats doubling to 160 at alpha = 0.01):
- the posterior *is* the number a user is told ("confidence 0.97"), where a p-value is a false-alarm rate under a
  null, which users read as a confidence anyway; and it answers "which version" directly, not "do these two differ";
- it takes any tallies: repeats pooled across runs (the record's `pool`), sides with different numbers of runs,
  versions an earlier run measured, with no fixed sample size or alpha spending to honour;
- looking again after every doubling does not inflate it much: under "no boundary" the posterior odds are a Bayes
  factor, a nonnegative martingale for a known common rate, so by Ville's inequality the chance that it *ever*
  reaches 0.95 is at most about 1/19 however often it is looked at.
Its assumptions -- one rate per side, independent runs -- are what the calibration breaks on purpose (a rate that
drifts across versions, runs that fail in bursts): tools/flaky_calibration.py measures how often the stated answer
is right, and docs/flaky.md holds the table. The policy takes repeats adaptively (after Pinpoint): a version starts
with `start` launches (10) and doubles (20, 40, 80, 160) while the answer is open, up to `cap` launches; at the cap
the answer is "could not decide" -- never "fixed", never "not affected": a rate too small to tell was not measured.

What counts: only `reproduced` and `fixed` runs are the bug's own outcomes ("clean" runs). An `error`, `timeout`,
`infra` or `skip` among the repeats says nothing of the rate: it is kept apart (`Tally.other`), counts toward the
launches and the cap, and never as reproduced or fixed. A version is never called fixed (the side of the boundary
without the bug) with fewer clean runs than the confidence needs (`needed_clean`): enough that a bug reproducing at
the other side's rate would have shown at least once with probability `confidence`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from harness.model.outcome import Outcome

REGRESSED, FIXED, SAME, UNDECIDED = "regressed", "fixed", "same", "undecided"
NO_CHANGE_PRIOR = 0.5  # the prior of "the rate is the same on every version"


@dataclass(frozen=True)
class Tally:
    """One version's repeats: how many reproduced, how many were fixed (the clean runs), and how many said nothing
    of the bug (error, timeout, infra, skip: kept apart, never counted as either)."""

    reproduced: int = 0
    fixed: int = 0
    other: int = 0

    @classmethod
    def of(cls, tallies: Mapping[str, int], outcome: Outcome | None = None) -> Tally:
        """The tally of a result's `tallies` (outcome -> count); a result launched once has none: its `outcome`
        counts once."""
        counts = dict(tallies) if tallies else ({outcome.value: 1} if outcome is not None else {})
        reproduced = counts.get(Outcome.REPRODUCED.value, 0)
        fixed = counts.get(Outcome.FIXED.value, 0)
        return cls(reproduced, fixed, sum(counts.values()) - reproduced - fixed)

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.reproduced + other.reproduced, self.fixed + other.fixed, self.other + other.other)

    @property
    def clean(self) -> int:
        """The runs that measured the bug: reproduced or fixed."""
        return self.reproduced + self.fixed

    @property
    def launches(self) -> int:
        """Every run, errors included: what the cap counts."""
        return self.clean + self.other

    @property
    def rate(self) -> float:
        """The observed reproduction rate among the clean runs (0 when there are none)."""
        return self.reproduced / self.clean if self.clean else 0.0

    def text(self, word: str = " reproduced") -> str:
        """'9/24 reproduced' (and how many runs said nothing of the bug, when some did)."""
        other = f", {self.other} not clean (error, timeout, infra)" if self.other else ""
        return f"{self.reproduced}/{self.clean}{word}{other}"


def needed_clean(confidence: float, rate: float) -> int:
    """How many clean runs a version needs before it may be called fixed next to a side reproducing at `rate`: the
    fewest n with (1 - rate)^n <= 1 - confidence (a bug at that rate would have shown with probability
    `confidence`); a huge number for a rate of 0 (nothing to tell it from)."""
    if rate <= 0.0:
        return 1 << 30
    if rate >= 1.0:
        return 1
    return math.ceil(math.log(1.0 - confidence) / math.log1p(-rate))


@dataclass(frozen=True)
class Policy:
    """How sure an answer must be, and how many repeats it may cost (see the module docstring)."""

    confidence: float = 0.95
    start: int = 10  # launches of a version first
    cap: int = 160  # launches of a version at most (doubling from `start`)
    dispersion: float = 1.0  # runs worth one independent run (> 1: runs fail in bursts; the module docstring)

    def text(self) -> str:
        """The policy in words, said before a flaky search starts."""
        return (
            f"adaptive repeats: {self.start} launches a version first, doubling while the boundary is open, at most "
            f"{self.cap} a version; an answer needs confidence {self.confidence:g}"
        )

    def more(self, tally: Tally) -> int:
        """How many launches to add to a version whose answer is open: up to the next doubling of `start` above
        what it has (errors count as launches), 0 at the cap."""
        if tally.launches >= self.cap:
            return 0
        target = self.start
        while target <= tally.launches:
            target *= 2
        return min(target, self.cap) - tally.launches


def _evidence(tally: Tally, dispersion: float = 1.0) -> float:
    """log B(1 + reproduced/d, 1 + fixed/d): a side's marginal likelihood under a uniform prior on its rate, each
    `dispersion` runs counted as one."""
    a, b = 1 + tally.reproduced / dispersion, 1 + tally.fixed / dispersion
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def boundary_posterior(tallies: Sequence[Tally], dispersion: float = 1.0) -> list[float]:
    """The posterior over where the rate changes along `tallies` (oldest first; an unmeasured version is an empty
    Tally): [P(no change), P(first new is version 1), ..., P(first new is version n-1)] (the module docstring)."""
    n = len(tallies)
    if n < 2:
        return [1.0]
    before = list(accumulate(tallies, initial=Tally()))  # before[j]: versions < j pooled
    whole = before[-1]
    logs = [math.log(NO_CHANGE_PRIOR) + _evidence(whole, dispersion)]
    each = math.log((1.0 - NO_CHANGE_PRIOR) / (n - 1))
    for j in range(1, n):
        after = Tally(whole.reproduced - before[j].reproduced, whole.fixed - before[j].fixed)
        logs.append(each + _evidence(before[j], dispersion) + _evidence(after, dispersion))
    top = max(logs)
    weights = [math.exp(v - top) for v in logs]
    total = sum(weights)
    return [w / total for w in weights]


def _pooled(tallies: Sequence[Tally], first_new: int) -> tuple[Tally, Tally]:
    """Both sides of a boundary before `first_new`, each side's tallies pooled."""
    return sum(tallies[:first_new], Tally()), sum(tallies[first_new:], Tally())


@dataclass(frozen=True)
class Verdict:
    """A boundary between two adjacent versions: `kind` regressed (the new side reproduces more), fixed (less), same
    (no change at all), or undecided; `confidence` the posterior of that answer (of the likeliest boundary when
    undecided); `old` and `new` the two versions' own tallies; `capped` whether a version reached the cap."""

    kind: str
    confidence: float
    old: Tally
    new: Tally
    policy: Policy = field(default_factory=Policy)
    capped: bool = False

    @property
    def decided(self) -> bool:
        """Whether the tallies settle the question at the policy's confidence."""
        return self.kind != UNDECIDED

    def text(self, old: str, new: str) -> str:
        """One line for the user, e.g. 'regressed in 2.7.0 (2.6.0: 0/24 reproduced; 2.7.0: 9/24; confidence
        0.97)'."""
        sides = f"{old}: {self.old.text()}; {new}: {self.new.text('')}"
        stated = f"confidence {_floor(self.confidence)}"
        if self.kind in (REGRESSED, FIXED):
            return f"{self.kind} in {new} ({sides}; {stated})"
        if self.kind == SAME:
            return f"the same rate in {old} and {new} ({sides}; {stated})"
        why = f"cap of {self.policy.cap} launches reached" if self.capped else "more repeats needed"
        return (
            f"could not decide between {old} and {new} ({sides}; {stated} < {self.policy.confidence:g}; {why}): "
            "not measured, not fixed"
        )


def _floor(p: float) -> str:
    """A confidence as stated: rounded down to two places, so that it never overstates (0.999 -> 0.99)."""
    return f"{math.floor(p * 100) / 100:.2f}"


def _verdict(tallies: Sequence[Tally], first_new: int, posterior: Sequence[float], policy: Policy) -> Verdict:
    """The verdict on the boundary before `first_new`: decided when its posterior reaches the confidence and the
    version on the side without the bug has the clean runs to be called fixed (`needed_clean`)."""
    old_side, new_side = _pooled(tallies, first_new)
    old, new = tallies[first_new - 1], tallies[first_new]
    rising = new_side.rate > old_side.rate
    fixed_one, bug_side = (old, new_side) if rising else (new, old_side)
    capped = max(t.launches for t in tallies) >= policy.cap
    stated = posterior[first_new]
    if len(tallies) > 2:  # the two versions' own tallies must show the change too: a drifting rate pools wrong
        stated = min(stated, boundary_posterior([old, new], policy.dispersion)[1])
    if stated >= policy.confidence and fixed_one.clean >= needed_clean(policy.confidence, bug_side.rate):
        return Verdict(REGRESSED if rising else FIXED, stated, old, new, policy, capped)
    if posterior[0] >= policy.confidence and all(t.clean for t in tallies):
        return Verdict(SAME, posterior[0], old, new, policy, capped)
    return Verdict(UNDECIDED, stated, old, new, policy, capped)


def decide(old: Tally, new: Tally, policy: Policy | None = None) -> Verdict:
    """What two adjacent versions' tallies say at the policy's confidence: regressed, fixed, the same, or
    undecided (the change-point posterior of two versions: "two rates" against "one rate")."""
    policy = policy or Policy()
    return _verdict([old, new], 1, boundary_posterior([old, new], policy.dispersion), policy)


# ------------------------------------------------------------------------------------------------ a flaky bisect

Measure = Callable[[int, int], Tally]  # (version index, n) -> the tally of n more launches of that version


@dataclass(frozen=True)
class Located:
    """A flaky bisect's answer: the boundary between `first_new - 1` and `first_new` with its verdict (undecided:
    the likeliest boundary when it stopped), the launches in all and every version's tally."""

    first_new: int
    verdict: Verdict
    launches: int
    tallies: tuple[Tally, ...]

    @property
    def last_old(self) -> int:
        """The version before the boundary."""
        return self.first_new - 1


def locate(
    count: int, measure: Measure, policy: Policy | None = None, known: Mapping[int, Tally] | None = None
) -> Located:
    """Bisect versions 0 .. count-1 (oldest first) for where the reproduction rate changes, with adaptive repeats
    (the module docstring). Both ends first; then, while no boundary holds at the confidence, the version that
    halves the posterior's mass gets `start` launches (an unmeasured one first), else the least-launched of it and
    the likeliest boundary's two versions doubles, until one answers or all of them are at the cap ("could not
    decide"). `known` holds tallies measured before (pooled repeats of earlier runs): they count, and are not
    launched again."""
    policy = policy or Policy()
    tallies = [Tally()] * count
    for i, tally in (known or {}).items():
        tallies[i] = tally

    def grow(index: int) -> bool:
        add = policy.more(tallies[index])
        if add:
            tallies[index] = tallies[index] + measure(index, add)
        return bool(add)

    for end in (0, count - 1):
        if not tallies[end].launches:
            grow(end)
    while True:
        posterior = boundary_posterior(tallies, policy.dispersion)
        best = max(range(1, count), key=lambda j: posterior[j])
        verdict = _verdict(tallies, best, posterior, policy)
        if verdict.decided and verdict.kind != SAME:
            return Located(best, verdict, sum(t.launches for t in tallies), tuple(tallies))
        if not any(grow(i) for i in _next(posterior, tallies, best, policy)):
            undecided = Verdict(UNDECIDED, verdict.confidence, tallies[best - 1], tallies[best], policy, capped=True)
            return Located(best, undecided, sum(t.launches for t in tallies), tuple(tallies))


def _next(posterior: Sequence[float], tallies: Sequence[Tally], best: int, policy: Policy) -> list[int]:
    """The versions to launch next, in order of preference: the one at the posterior's median (a bisection step)
    when unmeasured, else the least launched of it, the likeliest boundary's two versions and (when "no change" is
    not ruled out) both ends; only the first that can grow is launched."""
    change = list(accumulate(posterior[1:]))
    median = 1 + next((j for j, mass in enumerate(change) if mass >= change[-1] / 2), len(change) - 1)
    if not tallies[median].launches:
        return [median]
    candidates = {median, best - 1, best}
    if posterior[0] > 1.0 - policy.confidence:
        candidates |= {0, len(tallies) - 1}
    return sorted(candidates, key=lambda i: (tallies[i].launches, i))
