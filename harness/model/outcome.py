"""Outcomes, per-rank statuses, and the documented rules that combine ranks into one outcome.

Rules (each rank first gets a status, then the launch gets one outcome):

Per rank (see `classify.rank_status`):
  exit 0, signature absent ............ fixed
  exit 0, signature printed ........... error   (contradiction: never "fixed" by accident)
  exit 1, signature printed ........... reproduced
  exit 1, signature absent ............ error   (failed some other way)
  exit 125 ............................ skip
  uncaught exception / other exit ..... error
  no verdict, stopped after another
  rank failed ......................... terminated (collateral: its SIGTERM handler ran, or torchrun's log shows it
                                        sent the rank its closing signal, or the rank was still running 3 s after
                                        that signal and the harness killed it; whatever the timing, also before
                                        the rank recorded its start)
  no verdict, torchrun itself killed .. error   (the reason names the signal that killed torchrun)
  no verdict otherwise ................ error   (died: killed by a signal, aborted, never started)

Per launch (`combine`), in order:
  1. the launch ran past its timeout ..................... timeout
  2. no rank reported at all ............................. error (torchrun itself failed)
  3. some rank reproduced, and no rank hit an error before
     the first reproduction (later errors and terminated
     ranks are collateral: peers losing their connection) .. reproduced
  4. any rank error (or all ranks terminated) ............ error (the reason names the first rank to fail)
  5. any rank skip ....................................... skip
  6. every rank fixed .................................... fixed
`fixed` therefore requires every one of the launched ranks to have exited 0 on its own.

Repeats (`--repeat K`, `combine_repeats`): only `reproduced` and `fixed` are the bug's own outcomes (the clean
launches); an `error`, `timeout`, `infra` or `skip` among the repeats says nothing of the bug and is kept apart in
the tallies, never turning the set `flaky` by itself:
  1. at least half of the launches clean, all of them one outcome ...... that outcome (4 reproduced + 1 error:
                                                                          reproduced, the tallies show the error)
  2. at least half of the launches clean, both outcomes among them ..... flaky
  3. fewer than half clean ............................................. the commonest other outcome (ties: error,
                                                                          timeout, infra, skip): the set mostly
                                                                          failed to measure the bug
A repeat the machine failed (`infra`) ends the set only when every launch so far was `infra`; otherwise it counts
among the others and the set goes on to K launches (harness/launch/execute.py `execute_repeated`).
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel


class Outcome(str, Enum):
    """What one run of case x variant x world size established."""

    REPRODUCED = "reproduced"
    FIXED = "fixed"
    ERROR = "error"
    SKIP = "skip"
    TIMEOUT = "timeout"
    INFRA = "infra"
    FLAKY = "flaky"  # repeats of the same launch disagreed (see `--repeat`)


def shown(outcome: Outcome | None) -> str:
    """An outcome as a table cell: its value, or `-` when there is none."""
    return outcome.value if outcome else "-"


class RankState(str, Enum):
    """What one rank of a launch established on its own."""

    REPRODUCED = "reproduced"
    FIXED = "fixed"
    ERROR = "error"
    SKIP = "skip"
    TERMINATED = "terminated"


class RankStatus(BaseModel):
    """One rank's verdict with the evidence behind it."""

    rank: int
    state: RankState
    exit_code: int | None = None
    detail: str = ""
    finished_at: float | None = None


def combine(ranks: list[RankStatus], *, timed_out: bool) -> tuple[Outcome, str]:
    """Combine per-rank statuses into one outcome and a one-line reason, by the rules in this module's doc."""
    if timed_out:
        return Outcome.TIMEOUT, "the launch ran past its timeout and was killed"
    if not ranks:
        return Outcome.ERROR, "no rank reported a verdict (torchrun failed before the script ran)"
    by_state = {state: [r for r in ranks if r.state is state] for state in RankState}
    reproduced, errors = by_state[RankState.REPRODUCED], by_state[RankState.ERROR]
    if reproduced:
        first = min(r.finished_at or 0.0 for r in reproduced)
        early = [e for e in errors if e.finished_at is not None and e.finished_at < first]
        if not early:
            return Outcome.REPRODUCED, reproduced[0].detail
        errors = early
    if errors:  # the first to fail (by when it recorded its verdict) is the cause; the later ones may be collateral
        cause = min(errors, key=lambda e: (e.finished_at is None, e.finished_at or 0.0, e.rank))
        return Outcome.ERROR, f"rank {cause.rank}: {cause.detail}"
    if len(by_state[RankState.TERMINATED]) == len(ranks):
        return Outcome.ERROR, "every rank was terminated before reaching a verdict"
    if by_state[RankState.SKIP]:
        return Outcome.SKIP, by_state[RankState.SKIP][0].detail
    if len(by_state[RankState.FIXED]) == len(ranks):
        return Outcome.FIXED, "every rank exited 0"
    terminated = by_state[RankState.TERMINATED][0]
    return Outcome.ERROR, f"rank {terminated.rank} was terminated before reaching a verdict"


CLEAN = (Outcome.REPRODUCED, Outcome.FIXED)  # the bug's own outcomes: what a repeat rate is measured on
_OTHERS = (Outcome.ERROR, Outcome.TIMEOUT, Outcome.INFRA, Outcome.SKIP)  # the order that breaks a tie among the rest


def combine_repeats(outcomes: list[Outcome]) -> Outcome:
    """One outcome for repeats of the same launch (the module docstring's rule): the clean launches' outcome when
    at least half are clean (`flaky` when they disagree), else the commonest of the others."""
    clean = [o for o in outcomes if o in CLEAN]
    if clean and 2 * len(clean) >= len(outcomes):
        distinct = set(clean)
        return distinct.pop() if len(distinct) == 1 else Outcome.FLAKY
    others = [o for o in outcomes if o not in CLEAN]
    return max(dict.fromkeys(others), key=lambda o: (others.count(o), -_rank(o)))


def _rank(outcome: Outcome) -> int:
    return _OTHERS.index(outcome) if outcome in _OTHERS else len(_OTHERS)
