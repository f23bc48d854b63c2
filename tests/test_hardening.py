"""Verdicts that survive hangs, crashes, parallel launches and flakiness (issue: hardening).

Every case here is a small fake script under a real torchrun with real gloo: what is under test is the harness's
launching, killing and classifying, not a library.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path

import pytest

from harness.analysis.compare import compare
from harness.launch.execute import execute_repeated
from harness.launch.interpreter import Environment
from harness.launch.torchrun import LaunchResult
from harness.model.job import Job
from harness.model.outcome import Outcome, RankState
from harness.model.result import Result
from harness.session.pipeline import LocalEnvironment, Session
from harness.session.plan import Selection, plan_local
from tests.helpers import leftovers, run_one

from .conftest import MakeCase

pytestmark = pytest.mark.usefixtures("launch_mode")  # every test cold and warm (tests/conftest.py)

pytest_plugins = ["pytester"]

HANGS = """
import sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
print("READY", rank, flush=True)
if sys.argv[-1] == "collective":
    if rank == 0:
        dist.all_reduce(torch.ones(1))      # rank 0 reduces ...
    else:
        dist.recv(torch.ones(1), src=0)     # ... while rank 1 waits for a message never sent: a deadlock
else:
    if rank == 0:
        dist.all_reduce(torch.ones(1), async_op=True)  # pending work that rank 1 never joins
        dist.destroy_process_group()        # gloo waits for it: stuck in destroy_process_group
    else:
        time.sleep(3600)
"""
# Where each rank hangs: the script line it is stuck on (rank 0, rank 1).
HANG_AT = {
    "collective": ("dist.all_reduce(torch.ones(1))  ", "dist.recv("),
    "destroy": ("dist.destroy_process_group()", "time.sleep(3600)"),
}


def line_of(snippet: str) -> int:
    return next(i for i, line in enumerate(HANGS.splitlines(), 1) if snippet in line)


def test_twenty_hangs_end_as_timeouts_with_every_stack_and_leave_no_process(
    make_case: MakeCase, env: Environment, tmp_path: Path, launches: list[LaunchResult]
) -> None:
    timeout = 20  # generous: up to 6 ranks import torch at once on a 2-core machine
    case = make_case(
        HANGS,
        nproc=[2],
        timeout=timeout,
        variants={mode: {"args": [mode], "expect": [{"outcome": "fixed"}]} for mode in HANG_AT},
    )
    jobs = [Job(case, mode, 2, "cpu") for mode in HANG_AT for _ in range(10)]
    started = time.monotonic()
    results = Session(LocalEnvironment(env)).run(jobs, cores=6)
    wall = time.monotonic() - started
    assert len(results) == 20 and len(launches) == 20
    # The limit is the case's, counted from its first rank's start (torchrun's own start-up is bounded apart).
    assert all(launched.startup_s is not None for launched in launches)
    ran = [launched.duration_s - launched.startup_s for launched in launches]
    assert max(ran) < timeout + 10, [(round(x.duration_s, 1), x.startup_s) for x in launches]  # plus a small grace
    hung = 0
    for job, result in zip(jobs, results, strict=True):
        assert result.outcome is Outcome.TIMEOUT, (result.reason, result.log_excerpt)
        if result.log_excerpt.count("READY") < 2:
            continue  # a rank was still importing torch when the limit hit (an overloaded machine)
        hung += 1
        for rank, snippet in enumerate(HANG_AT[job.variant]):  # every rank's stack, showing where it hangs
            assert f"--- rank {rank} ---" in result.stacks, result.stacks
            rank_stacks = result.stacks.split(f"--- rank {rank} ---")[1].split("--- rank")[0]
            assert f'repro.py", line {line_of(snippet)} in <module>' in rank_stacks, (job.variant, rank, rank_stacks)
    assert hung >= 10, f"only {hung} of 20 launches reached their hang within {timeout} s"
    assert wall < 20 * (timeout + 10)
    assert leftovers(str(tmp_path)) == []  # nothing from 40 hung ranks and 20 torchruns is left


# A rank that exits 0 on its own; torchrun may SIGTERM it first when its peer dies early (collateral).
EXITED_0 = {RankState.FIXED, RankState.TERMINATED}


@pytest.mark.parametrize(
    ("script", "outcome", "states"),
    [
        pytest.param(
            """
            import os, sys
            if os.environ["RANK"] == "1":
                raise ValueError("rank 1 fails some other way")
            """,
            Outcome.ERROR,
            {0: EXITED_0, 1: {RankState.ERROR}},
            id="one-exits-0-other-raises",
        ),
        pytest.param(
            """
            import os, sys
            if os.environ["RANK"] == "1":
                print("RuntimeError: FAKE-BUG-SIGNATURE on rank 1")
                sys.exit(1)
            """,
            Outcome.REPRODUCED,
            {0: EXITED_0, 1: {RankState.REPRODUCED}},
            id="one-exits-0-other-reproduces",
        ),
        pytest.param(
            """
            import os, signal
            if os.environ["RANK"] == "0":
                os.kill(os.getpid(), signal.SIGABRT)   # as an ABI mismatch does
            """,
            Outcome.ERROR,
            {0: {RankState.ERROR}, 1: EXITED_0},
            id="sigabrt",
        ),
        pytest.param(
            """
            print("FAKE-BUG-SIGNATURE")            # the signature, but exit 0 on every rank
            """,
            Outcome.ERROR,
            {0: {RankState.ERROR}, 1: {RankState.ERROR}},
            id="signature-but-exit-0",
        ),
    ],
)
def test_two_rank_crashes_get_the_documented_outcome(
    make_case: MakeCase, env: Environment, script: str, outcome: Outcome, states: dict[int, set[RankState]]
) -> None:
    result = run_one(make_case, env, script, nproc=[2])
    assert result.outcome is outcome, (result.reason, result.log_excerpt)
    for rank in result.ranks:
        assert rank.state in states[rank.rank], (rank, result.log_excerpt)


# Rank 1 fails with its verdict while rank 0 is blocked where torchrun's SIGTERM is not acted on: as a rank stuck in
# native code (NCCL's rendezvous on a GPU), here a sleep with SIGTERM masked, or a barrier its peer never joins.
BLOCKED_PEER = """
import os, signal, sys, time
if os.environ["RANK"] == "0":
    if sys.argv[-1] == "deaf":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        time.sleep(3600)
    import torch.distributed as dist
    dist.init_process_group("gloo")        # waits for rank 1, which never joins
    dist.barrier()
time.sleep(1)
print("RuntimeError: FAKE-BUG-SIGNATURE on rank 1", flush=True)
sys.exit(1)
"""


@pytest.mark.parametrize("blocked", ["deaf", "rendezvous"])
def test_a_failed_ranks_blocked_peer_is_stopped_in_seconds_as_collateral(
    make_case: MakeCase, env: Environment, blocked: str
) -> None:
    """torchrun gives a SIGTERM'd rank 30 s before SIGKILL (an H100 run: every 2-rank job lasted ~35 s); the harness
    kills what still runs STOP_GRACE_S after torchrun's closing signal, and labels it collateral (`terminated`),
    never the case's error."""
    case = make_case(
        BLOCKED_PEER, nproc=[2], variants={"bug": {"args": [blocked], "expect": [{"outcome": "reproduced"}]}}
    )
    [job] = plan_local([case], Selection(devices=("cpu",)))
    result = execute_repeated(job, env)
    ended = time.time()
    states = {rank.rank: rank for rank in result.ranks}
    assert result.outcome is Outcome.REPRODUCED, (result.reason, result.log_excerpt)
    assert states[1].state is RankState.REPRODUCED and states[1].finished_at is not None
    assert states[0].state is RankState.TERMINATED, (states[0], result.log_excerpt)
    assert ended - states[1].finished_at < 12, (ended - states[1].finished_at, result.log_excerpt)  # was 30-35 s
    if blocked == "deaf":
        assert "so the harness killed it" in states[0].detail


def test_collateral_whatever_the_timing_and_a_killed_torchrun_says_so() -> None:
    """A rank torchrun sent its closing signal to is collateral even when it died before recording it (SIGTERM
    during start-up on a loaded machine: it was an `error` "died without a verdict: " with nothing after the colon),
    also one that never wrote its record; a rank left without a verdict because torchrun itself was SIGKILLed says
    so."""
    from harness.launch.classify import classify
    from harness.launch.torchrun import LaunchResult, RankRecord

    closing = (
        "[W] Sending process 4242 closing signal SIGTERM\n[W] Sending process 4343 closing signal SIGTERM\n"
        "[1]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 4141)\n"
    )
    verdict = RankRecord(
        rank=1, pid=4141, started=1.0, finished=2.0, exit_code=1, log="RuntimeError: FAKE-BUG-SIGNATURE on rank 1\n"
    )
    for unrecorded in (RankRecord(rank=0, pid=4242, started=1.0), RankRecord(rank=0)):
        launch = LaunchResult(
            command=[],
            nproc=2,
            returncode=1,
            timed_out=False,
            duration_s=3.0,
            agent_log=closing,
            ranks={0: unrecorded, 1: verdict},
        )
        outcome, _, ranks = classify(launch, "FAKE-BUG-SIGNATURE")
        assert outcome is Outcome.REPRODUCED and ranks[0].state is RankState.TERMINATED, ranks[0]
        assert "stopped by torchrun after another rank failed" in ranks[0].detail
    killed = LaunchResult(
        command=[],
        nproc=2,
        returncode=-9,
        timed_out=False,
        duration_s=3.0,
        agent_log="",
        ranks={0: RankRecord(rank=0, pid=4242, started=1.0), 1: verdict},
    )
    outcome, reason, ranks = classify(killed, "FAKE-BUG-SIGNATURE")
    assert ranks[0].state is RankState.ERROR
    assert (
        ranks[0].detail == "killed with the launch: torchrun itself was killed by SIGKILL (exit -9) before this "
        "rank reached a verdict"
    )


def test_a_torchrun_killed_from_outside_leaves_ranks_that_say_so(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    """torchrun SIGKILLed mid-launch (the OOM killer, a stray `kill -9`): its ranks are killed as strays, each an
    `error` naming torchrun's death, not an empty "died without a verdict: ". Its warm twin (launches warm:
    $BUGMATRIX_LAUNCH_MODE): the warm parent SIGKILLed; its agent and ranks die with it, each rank naming that."""
    import psutil

    from harness.launch import torchrun, warm

    warm_mode = warm.default_mode() == "warm"

    case = make_case("import time\ntime.sleep(3600)\n", nproc=[2], timeout=120)
    [job] = plan_local([case], Selection(devices=("cpu",)))

    def kill_torchrun() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with torchrun._active_lock:
                procs = list(torchrun._active)
            if procs:
                try:
                    if len(psutil.Process(procs[0].pid).children()) == 2:
                        time.sleep(1.0)
                        (psutil.Process(procs[0].pid).parent() if warm_mode else procs[0]).kill()
                        return
                except psutil.Error:
                    pass
            time.sleep(0.1)

    import threading

    killer = threading.Thread(target=kill_torchrun)
    killer.start()
    result = execute_repeated(job, env)
    killer.join()
    assert result.outcome is Outcome.ERROR and result.duration_s < 60, result.reason
    for rank in result.ranks:
        who = "the warm launch's agent" if warm_mode else "torchrun"
        assert rank.state is RankState.ERROR and f"{who} itself was killed by SIGKILL" in rank.detail, rank
    assert leftovers(str(tmp_path)) == []


INTERLEAVED = """
import os, sys, time
rank = int(os.environ["RANK"])
text = sys.argv[-1] if sys.argv[-1] != "halves" else ("FAKE-BUG-" if rank == 0 else "SIGNATURE")
for ch in text:                  # one character at a time, on one line of torchrun's shared stdout
    os.write(1, ch.encode())
    time.sleep(0.01)
os.write(1, b"\\n")
sys.exit(1 if sys.argv[-1] != "halves" else 0)
"""


def test_output_interleaved_on_one_line_is_read_per_rank(make_case: MakeCase, env: Environment) -> None:
    case = make_case(
        INTERLEAVED,
        nproc=[2],
        variants={
            "whole": {"args": ["RuntimeError: FAKE-BUG-SIGNATURE"], "expect": [{"outcome": "reproduced"}]},
            "halves": {"args": ["halves"], "expect": [{"outcome": "fixed"}]},
        },
    )
    whole, halves = (execute_repeated(Job(case, v, 2, "cpu"), env) for v in ("whole", "halves"))
    # Each rank printed the whole signature, interleaved character by character with its peer: still reproduced.
    assert whole.outcome is Outcome.REPRODUCED, whole.reason
    # No rank printed the signature; only the interleaving spells it. Both exited 0: fixed, not reproduced.
    assert halves.outcome is Outcome.FIXED, halves.reason


FLIP = """
import pathlib, sys
counter = pathlib.Path(sys.argv[-1])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
if n % 3 == 0:                    # launches 1, 4, 7, ...: the bug shows; the others: it does not
    print("RuntimeError: FAKE-BUG-SIGNATURE")
    sys.exit(1)
"""


def test_repeats_that_disagree_are_flaky_with_their_rate(make_case: MakeCase, env: Environment, tmp_path: Path) -> None:
    case = make_case(
        FLIP,
        variants={
            "bug": {"args": [str(tmp_path / "count")], "expect": [{"outcome": "reproduced"}]},
        },
    )
    [job] = plan_local([case], Selection(devices=("cpu",)))
    flaky = execute_repeated(job, env, repeat=3)
    assert flaky.outcome is Outcome.FLAKY and not flaky.ok
    assert flaky.tallies == {"reproduced": 1, "fixed": 2} and flaky.repeats == 3
    assert flaky.reason.startswith("flaky: fixed 2/3, reproduced 1/3"), flaky.reason
    (tmp_path / "count").write_text("0")
    steady = execute_repeated(job, env, repeat=1)
    assert steady.outcome is Outcome.REPRODUCED and steady.tallies == {}


DISK_FULL_ON_SECOND = """
import sys
from pathlib import Path
counter = Path(sys.argv[sys.argv.index("--device") + 2])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
if n == 1:                        # the second launch: the disk filled under it
    raise OSError(28, "No space left on device")
"""


def test_a_repeat_the_machine_failed_is_kept_apart_and_the_set_goes_on(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    case = make_case(
        DISK_FULL_ON_SECOND,
        variants={
            "bug": {"args": [str(tmp_path / "count")], "expect": [{"outcome": "fixed"}]},
        },
    )
    [job] = plan_local([case], Selection(devices=("cpu",)))
    result = execute_repeated(job, env, repeat=3)
    # the second launch's infra is one of the others: it neither ends the set nor makes it flaky
    assert (tmp_path / "count").read_text() == "3"  # the third repeat was launched
    assert result.outcome is Outcome.FIXED, result.reason
    assert result.tallies == {"fixed": 2, "infra": 1}
    assert "No space left on device" in result.reason, result.reason


def test_a_set_whose_first_launch_the_machine_failed_stops_as_infra(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    script = DISK_FULL_ON_SECOND.replace("if n == 1:", "if n == 0:")
    case = make_case(script, variants={"bug": {"args": [str(tmp_path / "count")], "expect": [{"outcome": "fixed"}]}})
    [job] = plan_local([case], Selection(devices=("cpu",)))
    result = execute_repeated(job, env, repeat=3)
    assert result.outcome is Outcome.INFRA and "No space left on device" in result.reason, result.reason
    assert (tmp_path / "count").read_text() == "1"  # every launch so far was infra: nothing more launched


ERROR_ON_SECOND = """
import sys
from pathlib import Path
counter = Path(sys.argv[sys.argv.index("--device") + 2])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
if n == 1:                        # the second launch fails some other way: it says nothing of the bug
    raise ValueError("unrelated breakage")
print("RuntimeError: FAKE-BUG-SIGNATURE")
sys.exit(1)
"""


def test_an_error_among_repeats_is_kept_apart_not_flaky(make_case: MakeCase, env: Environment, tmp_path: Path) -> None:
    case = make_case(
        ERROR_ON_SECOND,
        variants={"bug": {"args": [str(tmp_path / "count")], "expect": [{"outcome": "reproduced"}]}},
    )
    [job] = plan_local([case], Selection(devices=("cpu",)))
    result = execute_repeated(job, env, repeat=5)
    assert result.outcome is Outcome.REPRODUCED and result.ok, result.reason
    assert result.tallies == {"reproduced": 4, "error": 1}
    assert "error 1/5" in result.reason and "unrelated breakage" in result.reason, result.reason
    assert "FAKE-BUG-SIGNATURE" in result.log_excerpt  # the evidence is a reproducing launch's


PARALLEL_CASE = """
title: fifty launches
upstream: [https://example.invalid/1]
packages: [torch]
nproc: [2]
devices: [cpu]
timeout: 240
signature: FAKE-SIG
variants:
{variants}
"""
PARALLEL_SCRIPT = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size()   # both ranks met in the same process group, nobody else's
print("FAKE-SIG: rank", dist.get_rank(), "saw", int(t.item()), "ranks")
dist.barrier()
dist.destroy_process_group()
sys.exit(1)
"""


def test_fifty_two_rank_launches_under_four_xdist_workers(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]')
    folder = pytester.mkdir("cases") / "fake-50-parallel"
    folder.mkdir()
    variants = "\n".join(f"  v{i:02d}:\n    expect: [{{outcome: reproduced}}]" for i in range(50))
    (folder / "case.yaml").write_text(PARALLEL_CASE.format(variants=variants))
    (folder / "repro.py").write_text(textwrap.dedent(PARALLEL_SCRIPT))
    db = pytester.path / "results.db"
    result = pytester.runpytest_subprocess("cases", "-n", "4", "-p", "xdist", "--bugmatrix-db", str(db))
    result.assert_outcomes(passed=50)  # every launch reproduced on both ranks: no rendezvous collided
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT variant, outcome, ranks FROM results").fetchall()
        runs = con.execute("SELECT status FROM runs").fetchall()
    assert sorted(v for v, _, _ in rows) == [f"v{i:02d}" for i in range(50)]  # none lost, none duplicated
    assert {o for _, o, _ in rows} == {"reproduced"}
    assert all(len(json.loads(r)) == 2 for _, _, r in rows)
    assert runs == [("complete",)]


def test_compare_lists_a_flaky_result_apart_from_regressions() -> None:
    def result(outcome: Outcome, tallies: dict[str, int] | None = None) -> Result:
        return Result(
            case="c",
            variant="bug",
            nproc=2,
            device="cpu",
            outcome=outcome,
            expected=Outcome.FIXED,
            reason="",
            tallies=tallies or {},
        )

    [flaky] = compare(
        [("cell", result(Outcome.FIXED))], [("cell", result(Outcome.FLAKY, {"fixed": 2, "reproduced": 1}))]
    )
    assert (flaky.kind, flaky.unexpected, flaky.tally) == ("flaky", False, "fixed 2/3, reproduced 1/3")
    [regression] = compare([("cell", result(Outcome.FIXED))], [("cell", result(Outcome.REPRODUCED))])
    assert (regression.kind, regression.unexpected) == ("regressed", True)
