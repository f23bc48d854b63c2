"""The bisection search: probe bounds, both directions, skipped candidates, refusal, parallel == sequential."""

from __future__ import annotations

import math
import random

import pytest

from harness.model.outcome import Outcome
from harness.workflows.search import BisectRefused, search

R, F, S, E = Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP, Outcome.ERROR
VERSIONS = [f"1.{i}.0" for i in range(16)]


def prober(truth: dict[str, Outcome], log: list[str]):
    def probe(batch: list[str]) -> list[Outcome]:
        log.extend(batch)
        return [truth[v] for v in batch]

    return probe


@pytest.mark.parametrize("change_at", range(1, 16))
@pytest.mark.parametrize(("old", "new"), [(R, F), (F, R)], ids=["find-the-fix", "find-the-regression"])
def test_finds_the_change_within_log2_plus_2_probes(change_at: int, old: Outcome, new: Outcome) -> None:
    truth = {v: (old if i < change_at else new) for i, v in enumerate(VERSIONS)}
    log: list[str] = []
    result = search(VERSIONS, prober(truth, log))
    assert (result.last_old, result.first_new) == (VERSIONS[change_at - 1], VERSIONS[change_at])
    assert (result.old, result.new) == (old, new)
    assert len(log) == len(set(log)) <= math.ceil(math.log2(len(VERSIONS))) + 2
    assert [v for v, _ in result.probes] == log


def test_skipped_and_broken_candidates_are_stepped_over() -> None:
    truth = {v: (R if i < 9 else F) for i, v in enumerate(VERSIONS)}
    for broken in ("1.7.0", "1.8.0", "1.10.0"):
        truth[broken] = E if broken != "1.8.0" else S
    result = search(VERSIONS, prober(truth, []))
    # 1.8.0 is untestable and lies between the last reproduced (1.6.0... or earlier) and the first fixed
    assert result.first_new == "1.9.0"
    assert result.last_old == "1.6.0" and result.ambiguous == ["1.7.0", "1.8.0"]
    assert set(result.skipped) <= {"1.7.0", "1.8.0", "1.10.0"} and result.skipped


@pytest.mark.parametrize("parallel", [1, 3])
def test_the_candidate_just_after_a_skipped_midpoint_is_probed(parallel: int) -> None:
    """lightning-21244 between 2.1.4 (reproduced) and 2.2.1 (fixed): 2.2.0 errs (an undeclared import), 2.2.0.post0 was
    never probed and the answer was "between 2.1.4 and 2.2.1, untestable: 2.2.0, 2.2.0.post0"."""
    versions = ["2.1.4", "2.2.0", "2.2.0.post0", "2.2.1"]
    truth = {"2.1.4": R, "2.2.0": E, "2.2.0.post0": F, "2.2.1": F}
    log: list[str] = []
    result = search(versions, prober(truth, log), parallel=parallel)
    assert "2.2.0.post0" in log
    assert (result.last_old, result.first_new, result.ambiguous) == ("2.1.4", "2.2.0.post0", ["2.2.0"])


def test_an_untestable_neighbour_that_is_not_on_the_boundary_is_harmless() -> None:
    truth = {v: (R if i < 5 else F) for i, v in enumerate(VERSIONS)}
    truth["1.7.0"] = Outcome.INFRA
    result = search(VERSIONS, prober(truth, []))
    assert (result.last_old, result.first_new, result.ambiguous) == ("1.4.0", "1.5.0", [])


@pytest.mark.parametrize(("first", "last"), [(R, R), (F, F), (S, S), (S, E), (R, E)])
def test_endpoints_that_do_not_differ_are_refused(first: Outcome, last: Outcome) -> None:
    truth = {v: R for v in VERSIONS} | {VERSIONS[0]: first, VERSIONS[-1]: last}
    log: list[str] = []
    with pytest.raises(BisectRefused, match="the endpoints do not differ"):
        search(VERSIONS, prober(truth, log))
    assert log == [VERSIONS[0], VERSIONS[-1]]


@pytest.mark.parametrize(
    ("seed", "choices", "ends"),
    [
        *((seed, (R, F, F, R, S), (R, F)) for seed in range(40)),  # non-monotonic, with skips
        *((seed, (S, S, F, R, E), (S, F)) for seed in range(20)),  # a skip side: R and E are stepped over
    ],
)
def test_parallel_probes_never_change_the_answer(
    seed: int, choices: tuple[Outcome, ...], ends: tuple[Outcome, Outcome]
) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 40)
    candidates = [f"c{i}" for i in range(n)]
    truth = {c: rng.choice(choices) for c in candidates}
    truth[candidates[0]], truth[candidates[-1]] = ends
    sequential = search(candidates, prober(truth, []), parallel=1)
    for parallel in (2, 3, 7):
        fast = search(candidates, prober(truth, []), parallel=parallel)
        assert (fast.last_old, fast.first_new, fast.ambiguous) == (
            sequential.last_old,
            sequential.first_new,
            sequential.ambiguous,
        )


@pytest.mark.parametrize("change_at", range(1, 16))
@pytest.mark.parametrize(
    ("old", "new"), [(S, F), (S, R), (R, S)], ids=["testable-fixed", "testable-reproduced", "untestable-again"]
)
def test_a_skip_endpoint_finds_where_the_case_becomes_testable(change_at: int, old: Outcome, new: Outcome) -> None:
    """torch-138575's script skips (exit 125) on torch 2.2.2, which lacks the API it drives, and says `fixed` on
    2.3.1: `expect` needs the first testable release to write `skip` with an exact bound, so a `skip` endpoint is a
    side of the search, not a candidate to step over."""
    truth = {v: (old if i < change_at else new) for i, v in enumerate(VERSIONS)}
    log: list[str] = []
    result = search(VERSIONS, prober(truth, log))
    assert (result.last_old, result.first_new, result.ambiguous) == (VERSIONS[change_at - 1], VERSIONS[change_at], [])
    assert len(log) <= math.ceil(math.log2(len(VERSIONS))) + 2


def test_with_a_skip_side_the_third_verdict_and_errors_are_stepped_over() -> None:
    truth = {v: (S if i < 6 else F) for i, v in enumerate(VERSIONS)}
    truth["1.6.0"], truth["1.9.0"] = R, E  # neither side: like exit 125 in `git bisect run`
    result = search(VERSIONS, prober(truth, []))
    assert (result.last_old, result.first_new, result.ambiguous) == ("1.5.0", "1.7.0", ["1.6.0"])


@pytest.mark.parametrize("installs_from", [1, 3, 9])
def test_an_oldest_release_that_cannot_be_installed_is_stepped_over_not_refused(installs_from: int) -> None:
    """The default range starts at a release that cannot be installed here (lightning 2.0.0 resolving a torch that
    does not import on this Python): the search bisects inward to the oldest that installs and starts there."""
    infra = Outcome.INFRA
    truth = {v: infra if i < installs_from else (R if i < 12 else F) for i, v in enumerate(VERSIONS)}
    log: list[str] = []
    result = search(VERSIONS, prober(truth, log))
    assert (result.last_old, result.first_new, result.old, result.new) == ("1.11.0", "1.12.0", R, F)
    assert result.untestable == VERSIONS[:installs_from]
    assert len(log) <= 2 * math.ceil(math.log2(len(VERSIONS))) + 2  # stepping in is a bisection too
    truth = {v: infra if i < installs_from else F for i, v in enumerate(VERSIONS)}  # then nothing differs: said whole
    with pytest.raises(BisectRefused, match=rf"{VERSIONS[installs_from]} is fixed, 1.15.0 is fixed \(1.0.0"):
        search(VERSIONS, prober(truth, []))


def test_a_newest_release_that_cannot_be_installed_is_stepped_over_too() -> None:
    truth = {v: Outcome.INFRA if i > 12 else (R if i < 5 else F) for i, v in enumerate(VERSIONS)}
    result = search(VERSIONS, prober(truth, []))
    assert (result.last_old, result.first_new, result.untestable) == ("1.4.0", "1.5.0", VERSIONS[13:])
    truth = {v: Outcome.INFRA for v in VERSIONS}  # nothing installs: refused, as before
    with pytest.raises(BisectRefused, match="1.0.0 is infra, 1.15.0 is infra"):
        search(VERSIONS, prober(truth, []))


def test_an_endpoint_the_caller_calls_unusable_is_stepped_over_like_infra() -> None:
    """torch 1.13.0 installs, but its torchrun crashes before any rank starts (an `error`, not `infra`: infra is
    retried elsewhere): bisect passes `unusable`, and the search steps over it to the next release that runs."""
    truth = {v: E if i < 2 else (R if i < 12 else F) for i, v in enumerate(VERSIONS)}
    log: list[str] = []
    result = search(VERSIONS, prober(truth, log), unusable=lambda v, o: o is E and VERSIONS.index(v) < 2)
    assert (result.last_old, result.first_new, result.untestable) == ("1.11.0", "1.12.0", VERSIONS[:2])
    assert log[:5] == ["1.0.0", "1.15.0", "1.1.0", "1.3.0", "1.2.0"]  # steps of 1, 2, then between: no middle
    with pytest.raises(BisectRefused, match="1.0.0 is error"):  # an error the caller does not call unusable
        search(VERSIONS, prober(truth, []))


def test_both_endpoints_unusable_start_from_the_middle() -> None:
    """The oldest torch's launcher crashes and the newest does not install: the middle release is probed, both
    ends step towards it, and the answer names the releases that run (not "an endpoint cannot be installed")."""
    truth = {v: E if i < 2 else Outcome.INFRA if i > 13 else (R if i < 5 else F) for i, v in enumerate(VERSIONS)}
    result = search(VERSIONS, prober(truth, []), unusable=lambda v, o: o is E)
    assert (result.last_old, result.first_new) == ("1.4.0", "1.5.0")
    assert result.untestable == [*VERSIONS[:2], *VERSIONS[14:]]


@pytest.mark.parametrize("installs_from", [1, 2])
@pytest.mark.parametrize("change_at", range(3, 20))
def test_what_stepping_measured_bounds_the_bisection(installs_from: int, change_at: int) -> None:
    """lightning's default bisect: its oldest releases do not install, and stepping to the first that does went by
    the middle of the whole range, whose decisive results the bisection then ignored (8 of 13 probes went to finding
    2.0.1). Stepping goes to the next release, and a decisive result met on the way is a bound: at most
    2 + 2 (stepping) + ceil(log2(19 - installs_from)) probes; the old search took 9 to 11 of these 34."""
    versions = [f"2.{i}.0" for i in range(20)]
    truth = {v: Outcome.INFRA if i < installs_from else (R if i < change_at else F) for i, v in enumerate(versions)}
    log: list[str] = []
    result = search(versions, prober(truth, log))
    assert (result.last_old, result.first_new) == (versions[change_at - 1], versions[change_at])
    assert result.untestable == versions[:installs_from]
    assert len(log) == len(set(log)) <= 4 + math.ceil(math.log2(19 - installs_from))


# ------------------------------------------------------------------- a flaky case: adaptive repeats (`--repeat auto`)


def flaky_measure(rates: dict[str, float], seed: int, log: list[tuple[str, int]]):
    """n more launches of a version reproducing at its rate (a seeded generator: the same answer every run)."""
    from harness.analysis.flaky import Tally

    rng = random.Random(seed)

    def measure(version: str, n: int) -> Tally:
        log.append((version, n))
        reproduced = sum(rng.random() < rates[version] for _ in range(n))
        return Tally(reproduced, n - reproduced)

    return measure


def test_a_flaky_case_is_located_with_its_confidence_and_reuses_pooled_tallies() -> None:
    from harness.analysis.flaky import Policy, Tally
    from harness.workflows.search import Adaptive, verdict_line

    rates = {v: (0.0 if i < 5 else 0.4) for i, v in enumerate(VERSIONS)}
    log: list[tuple[str, int]] = []
    known = {VERSIONS[0]: Tally(0, 30), VERSIONS[-1]: Tally(12, 18)}  # earlier runs' repeats, pooled by the store
    found = search(
        VERSIONS,
        prober({}, []),  # never called: a flaky case is not bisected on outcomes
        adaptive=Adaptive(flaky_measure(rates, 37, log), lambda v: known.get(v, Tally()), Policy()),
    )
    assert (found.last_old, found.first_new) == ("1.4.0", "1.5.0") and found.decided
    assert (found.old, found.new) == (F, R)
    assert found.verdict is not None and found.verdict.confidence >= 0.95
    assert VERSIONS[0] not in {v for v, _ in log} and VERSIONS[-1] not in {v for v, _ in log}  # pooled: not launched
    assert found.reused == 60 and found.launches == 60 + sum(n for _, n in log)
    line = verdict_line(found)
    assert line.startswith("regressed in 1.5.0 (1.4.0: 0/") and "confidence 0.9" in line, line
    assert f"{found.launches} launches, 60 reused" in line


def test_a_flaky_case_that_cannot_be_decided_says_so_never_a_boundary() -> None:
    from harness.analysis.flaky import Policy, Tally
    from harness.workflows.search import Adaptive, verdict_line

    rates = dict.fromkeys(VERSIONS[:4], 0.3)  # the same rate everywhere: no boundary to find
    log: list[tuple[str, int]] = []
    found = search(
        VERSIONS[:4],
        prober({}, []),
        adaptive=Adaptive(flaky_measure(rates, 5, log), lambda v: Tally(), Policy(cap=20)),
    )
    assert not found.decided
    assert max(sum(n for v, n in log if v == version) for version in VERSIONS[:4]) <= 20  # the cap holds
    line = verdict_line(found)
    assert line.startswith(f"could not decide at confidence 0.95 after {found.launches} launches (cap of 20"), line
    assert "regressed in" not in line and "fixed in" not in line and "not fixed" in line
