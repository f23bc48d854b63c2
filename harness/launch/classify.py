"""Turning what a launch left behind into per-rank statuses and one outcome (rules: harness/model/outcome.py)."""

from __future__ import annotations

import re
import signal

from harness.launch.logscan import signature_line
from harness.launch.torchrun import CLOSING, STARTUP_S, STOP_GRACE_S, LaunchResult, RankRecord
from harness.model.outcome import Outcome, RankState, RankStatus, combine

EXIT_FIXED, EXIT_REPRODUCED, EXIT_SKIP = 0, 1, 125
CLOSING_TEXT = re.compile(CLOSING.pattern.decode())
_AGENT_EXIT = re.compile(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", re.S)
NO_RANK_STARTED = "failed before any rank started"  # the reason of an `error` whose launcher never started a rank
_NO_RANK_STARTED = re.compile(rf"[^:;]+ {NO_RANK_STARTED}: ")  # torchrun, or the warm launch's agent


__all__ = [
    "agent_exit_codes",
    "classify",
    "closing_pids",
    "launch_notes",
    "machine_failure",
    "no_rank_started",
    "node_verdicts",
    "rank_status",
    "signature_line",
]


def agent_exit_codes(agent_log: str) -> dict[int, int]:
    """Per-rank exit codes from torchrun's failure summary (negative = killed by that signal)."""
    return {int(rank): int(code) for rank, code in _AGENT_EXIT.findall(agent_log)}


def closing_pids(agent_log: str) -> set[int]:
    """The pids torchrun sent a closing signal (SIGTERM) to: the ranks it stopped because another one failed."""
    return {int(pid) for pid, _ in CLOSING_TEXT.findall(agent_log)}


def rank_status(
    record: RankRecord,
    signature: str,
    agent_code: int | None = None,
    *,
    closed: bool = False,
    torchrun_signal: int | None = None,
    grace_s: float = STOP_GRACE_S,
    launcher: str = "torchrun",
) -> RankStatus:
    """One rank's state from its own record and output, by the per-rank rules in harness/model/outcome.py.

    `closed`: torchrun sent this rank a closing signal (another rank had failed); `torchrun_signal`: the signal that
    killed torchrun itself, when one did (not the harness's timeout); `launcher`: what a reason calls torchrun (a warm
    launch's agent stands in for it)."""

    def status(state: RankState, detail: str) -> RankStatus:
        return RankStatus(
            rank=record.rank,
            state=state,
            exit_code=record.exit_code,
            detail=detail,
            finished_at=record.finished,
        )

    if record.terminated:
        return status(RankState.TERMINATED, "terminated by torchrun after another rank failed")
    if record.finished is None and record.stopped:
        return status(
            RankState.TERMINATED,
            f"stopped after another rank failed: still running {grace_s:g} s after "
            "torchrun's SIGTERM (blocked where the signal is not acted on, e.g. in native code), so the "
            "harness killed it",
        )
    if record.finished is None and closed:
        return status(
            RankState.TERMINATED,
            "stopped by torchrun after another rank failed (it ended before it "
            "could record the signal" + (", while starting)" if record.started is None else ")"),
        )
    if record.finished is None and torchrun_signal is not None:
        return status(
            RankState.ERROR,
            f"killed with the launch: {launcher} itself was killed by "
            f"{_signal_name(torchrun_signal)} before this rank reached a verdict",
        )
    if record.started is None:
        return status(RankState.ERROR, "never started (torchrun or the interpreter failed first)")
    if record.finished is None:
        code = f" (torchrun saw exit code {agent_code})" if agent_code is not None else ""
        return status(RankState.ERROR, f"died without a verdict{code}: {_last_line(record.log)}")
    # The whole log was searched while it was streamed; a record from elsewhere is searched here.
    seen = record.seen if record.searched == signature else signature_line(record.log, signature)
    if record.exception:
        return status(RankState.ERROR, f"uncaught {record.exception}")
    if record.exit_code == EXIT_FIXED:
        if seen:
            return status(RankState.ERROR, f"exited 0 but printed the failure signature: {seen}")
        return status(RankState.FIXED, "exit 0")
    if record.exit_code == EXIT_REPRODUCED:
        if seen:
            return status(RankState.REPRODUCED, seen)
        return status(RankState.ERROR, f"exit 1 without the failure signature: {_last_line(record.log)}")
    if record.exit_code == EXIT_SKIP:
        return status(RankState.SKIP, _last_line(record.log) or "exit 125")
    return status(RankState.ERROR, f"exit {record.exit_code}: {_last_line(record.log)}")


# What the machine, not the case, made a launch fail with: a full disk, and the truncated bytecode a full disk leaves
# in __pycache__ (`EOFError: marshal data too short` at the next import). Nothing was measured: `infra`.
MACHINE_FAILURE = re.compile(r"No space left on device|\[Errno 28\]|marshal data too short|bad marshal data")


def no_rank_started(outcome: Outcome, reason: str) -> bool:
    """Whether a result is the `error` of a launcher (torchrun, or a warm launch's agent) that failed before any rank
    started: nothing of the case ran (torch 1.13.0's torchrun on a newer Python). Still an `error`, never `infra`
    (infra is retried elsewhere); a bisection steps over such an endpoint (harness/workflows/bisect.py)."""
    return outcome is Outcome.ERROR and _NO_RANK_STARTED.match(reason) is not None


def machine_failure(launch: LaunchResult, outcome: Outcome, reason: str) -> str | None:
    """The line saying the machine failed the launch, when an `error` (any rank's output or torchrun's) or a
    `reproduced` (its deciding line: a probe that reports any import failure as its signature) shows one."""
    if outcome is Outcome.REPRODUCED:
        texts = [reason]
    elif outcome is Outcome.ERROR:
        texts = [reason, launch.agent_log, *(rec.log for rec in launch.ranks.values())]
    else:
        return None
    for text in texts:
        for line in text.splitlines():
            if MACHINE_FAILURE.search(line):
                return line.strip()[:300]
    return None


def classify(launch: LaunchResult, signature: str) -> tuple[Outcome, str, list[RankStatus]]:
    """The launch's outcome, a one-line reason and each rank's status; `infra` when the machine failed the launch
    (`machine_failure`), whatever the ranks said."""
    outcome, reason, ranks = _classify(launch, signature)
    line = machine_failure(launch, outcome, reason)
    if line:
        return Outcome.INFRA, f"the machine failed the launch, nothing was measured ({outcome.value}): {line}", ranks
    return outcome, reason, ranks


def _classify(launch: LaunchResult, signature: str) -> tuple[Outcome, str, list[RankStatus]]:
    codes = agent_exit_codes(launch.agent_log)
    closed = closing_pids(launch.agent_log)
    unknown = closed - {rec.pid for rec in launch.ranks.values() if rec.pid}  # ranks stopped before their record
    torchrun_signal = (
        -launch.returncode if launch.returncode and launch.returncode < 0 and not launch.timed_out else None
    )
    ranks = [
        rank_status(
            rec,
            signature,
            codes.get(r),
            closed=rec.pid in closed if rec.pid else bool(unknown),
            torchrun_signal=torchrun_signal,
            grace_s=launch.stop_grace_s,
            launcher=launch.launcher,
        )
        for r, rec in sorted(launch.ranks.items())
    ]
    if not any(launch.ranks[r].started for r in launch.ranks) and not launch.timed_out:
        return Outcome.ERROR, f"{launch.launcher} {NO_RANK_STARTED}: {_last_line(launch.agent_log)}", ranks
    outcome, reason = combine(ranks, timed_out=launch.timed_out)
    return outcome, "; ".join([reason, *node_verdicts(launch, ranks), *launch_notes(launch)]), ranks


def node_verdicts(launch: LaunchResult, ranks: list[RankStatus]) -> list[str]:
    """On several nodes, each node's verdict from its own ranks (none on one node, nor when every rank exited 0):
    `node 1 (ranks 2, 3):
    reproduced (rank 3)`; `collateral` for a node whose every rank that did not exit 0 was stopped, or failed after
    the launch's first failing rank, of another node, failed (a peer losing its connection); `timed out` with the
    ranks that hung. A rank's node is its GROUP_RANK (torchrun's c10d rendezvous orders the nodes as they join)."""
    if launch.nnodes <= 1 or all(s.state is RankState.FIXED for s in ranks):
        return []
    node_of = {
        s.rank: rec.node if (rec := launch.ranks.get(s.rank)) and rec.node is not None else s.rank // launch.nproc
        for s in ranks
    }
    failing = [s for s in ranks if s.state in (RankState.REPRODUCED, RankState.ERROR) and s.finished_at is not None]
    first = min(failing, key=lambda s: (s.finished_at or 0.0, s.rank), default=None)
    verdicts = []
    for node in sorted(set(node_of.values())):
        mine = [s for s in ranks if node_of[s.rank] == node]
        hung = [s.rank for s in mine if launch.ranks[s.rank].hung]
        outcome, _ = combine(mine, timed_out=False)
        if hung:
            verdict = f"timed out (hung: rank {', '.join(map(str, hung))})"
        elif first is not None and node_of[first.rank] != node and _collateral(mine, first):
            verdict = f"collateral (rank {first.rank} of node {node_of[first.rank]} failed first)"
        else:
            deciding = [s for s in failing if node_of[s.rank] == node]
            cause = min(deciding, key=lambda s: (s.finished_at or 0.0, s.rank), default=None)
            verdict = outcome.value + (f" (rank {cause.rank})" if cause else "")
        verdicts.append(f"node {node} (ranks {', '.join(str(s.rank) for s in mine)}): {verdict}")
    return verdicts


def _collateral(ranks: list[RankStatus], first: RankStatus) -> bool:
    """Whether these ranks (one node's) failed only after `first` (another node's rank) did: each exited 0, or was
    stopped, or failed after it; and one of them did not exit 0."""
    after = [
        s
        for s in ranks
        if s.state is RankState.TERMINATED
        or (s.state is RankState.ERROR and s.finished_at is not None and s.finished_at >= (first.finished_at or 0.0))
    ]
    return bool(after) and all(s in after or s.state is RankState.FIXED for s in ranks)


def launch_notes(launch: LaunchResult) -> list[str]:
    """What else the result must say, outcome unchanged: for a timeout, that no rank had started or how each hung
    rank hung; whose output was truncated and how big it was; the stray processes killed after the launch; that a
    launch asked to be warm ran cold, and why."""
    notes = []
    if launch.warm_refused:
        notes.append(f"launched cold, not warm: {launch.warm_refused}")
    if launch.timed_out and launch.startup_s is None:
        notes.append(
            f"no rank had started: {launch.launcher} did not start its workers within {STARTUP_S:g} s (its own "
            "start-up, before the case's timeout counts)"
        )
    if launch.timed_out:
        notes += [f"rank {r} {rec.hang_note}" for r, rec in sorted(launch.ranks.items()) if rec.hang_note]
    notes += [f"rank {r} {rec.log_note}" for r, rec in sorted(launch.ranks.items()) if rec.log_note]
    if launch.strays:
        names = ", ".join(sorted({s.split(" (pid", 1)[0] for s in launch.strays}))
        notes.append(f"killed {len(launch.strays)} stray process(es) the launch left running: {names}")
    return notes


def _signal_name(signum: int) -> str:
    try:
        return f"{signal.Signals(signum).name} (exit -{signum})"
    except ValueError:
        return f"signal {signum}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
