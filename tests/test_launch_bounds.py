"""Bounds on what a case can do to the harness (issue: launch hardening).

A. memory stays flat however much a rank prints; the signature is still found, anywhere in the log;
B. no process of a launch is left, even a daemon that double-forked out of the session;
C. a rank that cannot cooperate with faulthandler (stuck in teardown, SIGUSR1 reset) still gets its stacks, taken
   from outside, and the result says whether it hung before or after its verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import pytest

from harness.launch.classify import signature_line
from harness.launch.interpreter import Environment
from harness.launch.logscan import scan_log
from harness.launch.torchrun import py_spy
from harness.model.outcome import Outcome, RankState
from harness.session.plan import Selection, plan_local
from tests.helpers import leftovers, run_one

from .conftest import MakeCase

pytestmark = pytest.mark.usefixtures("launch_mode")  # every test cold and warm (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------------------- A


@pytest.mark.parametrize("chunk", [7, 64, 4096])
def test_streamed_signature_is_the_first_line_the_whole_log_search_finds(tmp_path: Path, chunk: int) -> None:
    """The streaming search agrees with a search of the whole text, wherever the line falls, chunk edges included."""
    signature = r"FAKE-BUG-SIG\w+"
    filler = "".join(f"line {i}: nothing to see é\n" for i in range(40))  # non-ASCII: multi-byte characters
    hit = "RuntimeError: FAKE-BUG-SIGNATURE here\n"
    body = filler.encode()
    for offset in range(0, 3 * chunk + 2):  # the signature line starts at every offset around several chunk edges
        cut = body[:offset].rfind(b"\n") + 1 if offset else 0  # a line start at or before offset
        data = body[:cut] + b"x" * (offset - cut) + b"\n" + hit.encode() + body[cut:]
        log = tmp_path / "rank0.log"
        log.write_bytes(data)
        scan = scan_log(log, signature, chunk=chunk, head=16, tail=32, max_line=1 << 20)
        assert scan.seen == signature_line(data.decode(), signature) == hit.strip(), offset
        assert scan.size == len(data)
    # \r\n and a bare \r (progress bars) split lines as str.splitlines does, across a boundary too
    data = b"a" * (chunk - 1) + b"\r\n" + b"progress 10%\rRuntimeError: FAKE-BUG-SIGNATURE\r\n"
    log.write_bytes(data)
    assert scan_log(log, signature, chunk=chunk).seen == "RuntimeError: FAKE-BUG-SIGNATURE"
    log.write_bytes(filler.encode())
    assert scan_log(log, signature, chunk=chunk).seen is None


def test_signature_in_the_middle_of_a_big_log_and_of_an_overlong_line(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    with open(log, "wb") as fh:
        for i in range(200):
            fh.write(b"y" * 50_000 + b"\n")
            if i == 100:
                fh.write(b"E   RuntimeError: FAKE-BUG-SIGNATURE midway\n")
    scan = scan_log(log, "FAKE-BUG-SIGNATURE", chunk=65_536, head=1000, tail=2000)
    assert scan.seen == "E   RuntimeError: FAKE-BUG-SIGNATURE midway"
    assert scan.truncated and scan.size == log.stat().st_size
    assert len(scan.text) < 4000 and "omitted" in scan.text
    assert scan.text.endswith("y" * 50 + "\n") and scan.text.startswith("y" * 1000)
    # 20 MB without a single newline, the signature in the middle: found, in bounded windows
    with open(log, "wb") as fh:
        fh.write(b"z" * 10_000_003 + b" FAKE-BUG-SIGNATURE " + b"z" * 10_000_000)
    scan = scan_log(log, "FAKE-BUG-SIGNATURE", chunk=65_536, max_line=1 << 20, overlap=4096)
    assert scan.seen is not None and scan.truncated


def test_small_log_is_kept_whole(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    for size in (0, 10, 100, 150):
        log.write_bytes(bytes(range(48, 58)) * (size // 10) + b"\n" * (size % 10))
        scan = scan_log(log, "x", head=100, tail=50)
        assert (scan.text.encode(), scan.truncated) == (log.read_bytes(), False), size
    log.write_bytes(b"1" * 151)
    assert scan_log(log, head=100, tail=50).truncated
    assert scan_log(tmp_path / "missing.log", "x").size == 0


CHATTY = """
import sys
MB = int(sys.argv[-1])
block = ("x" * 99 + "\\n") * 10486                   # ~1 MiB of 100-byte lines
for i in range(MB):
    sys.stdout.write(block)
    if i == MB // 2:
        sys.stdout.write("RuntimeError: FAKE-BUG-SIGNATURE in the middle\\n")
sys.exit(1)
"""
DRIVER = """
import json, sys
from pathlib import Path
from harness.launch.execute import execute
from harness.launch.interpreter import inspect_interpreter
from harness.model.case import load_case
from harness.session.plan import Selection, plan_local


def peak_rss_kib():
    # VmHWM belongs to this process's address space and starts afresh at exec; ru_maxrss does not (Linux carries
    # the forking parent's peak across execve, so under a big pytest worker it read ~288 MiB for a 54 MiB harness).
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))


[job] = plan_local([load_case(Path(sys.argv[1]))], Selection(devices=("cpu",)))
result = execute(job, inspect_interpreter(sys.executable))
print(json.dumps({"outcome": result.outcome.value, "reason": result.reason, "log": result.log_excerpt,
                  "maxrss_kib": peak_rss_kib()}))
"""


def test_a_rank_printing_300_mb_leaves_the_harness_under_200_mb(make_case: MakeCase) -> None:
    """The harness's own peak RSS (its process alone, not torchrun's or the ranks') stays flat; before: ~1.1 GB.

    Typically ~54 MiB, read from the driver's VmHWM: ru_maxrss would include the pytest worker that forked it."""
    case = make_case(CHATTY, variants={"bug": {"args": ["300"], "expect": [{"outcome": "reproduced"}]}})

    def measure() -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, str(case.folder / "case.yaml")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.splitlines()[-1])

    out = measure()
    assert out["outcome"] == "reproduced", out["reason"]
    assert out["reason"].startswith("RuntimeError: FAKE-BUG-SIGNATURE in the middle")
    assert "rank 0 printed 300.0 MiB (" in out["reason"] and "output truncated" in out["reason"]
    assert "[first signature line] RuntimeError: FAKE-BUG-SIGNATURE" in out["log"]
    assert out["maxrss_kib"] < 200 * 1024, f"harness peak RSS {out['maxrss_kib'] / 1024:.0f} MiB"


# ---------------------------------------------------------------------------------------------------------- B

DAEMON = """
import os, sys, time
tag = os.path.dirname(os.path.abspath(__file__))   # the test's tmp path: how the test finds what is left
hold = float(sys.argv[-1])
r, w = os.pipe()
if os.fork() == 0:                  # the classic daemon: fork, setsid, fork again, the middle one exits
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(3600)", tag])
    os._exit(0)
os.close(w)
os.wait()
pid = int(os.read(r, 64))
with open(os.path.join(tag, "daemon-%s.pid" % os.environ["RANK"]), "w") as fh:
    fh.write(str(pid))
time.sleep(hold)                    # keep the launch alive a while (another launch's sweep must spare it)
print("exits 0, its daemon still running")
"""


def daemons(case_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(case_dir.glob("daemon-*.pid"))]


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_double_forked_daemon_is_killed_and_reaped_after_the_launch(
    make_case: MakeCase, env: Environment, tmp_path: Path, nproc: int
) -> None:
    case = make_case(DAEMON, nproc=[nproc], variants={"bug": {"args": ["0"], "expect": [{"outcome": "fixed"}]}})
    [job] = plan_local([case], Selection(devices=("cpu",)))
    from harness.launch.execute import execute

    result = execute(job, env)
    assert result.outcome is Outcome.FIXED, (result.reason, result.log_excerpt)  # the verdict is unchanged
    assert f"killed {nproc} stray process(es) the launch left running" in result.reason, result.reason
    assert "stray processes killed after the launch" in result.log_excerpt
    pids = daemons(case.folder)
    assert len(pids) == nproc
    assert leftovers(str(tmp_path)) == []
    assert not [pid for pid in pids if psutil.pid_exists(pid)]  # gone, not even a zombie: reaped


def test_parallel_launches_each_kill_only_their_own_strays(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    from harness.launch.execute import execute

    slow = make_case(
        DAEMON, case_id="fake-1-slow", nproc=[2], variants={"bug": {"args": ["8"], "expect": [{"outcome": "fixed"}]}}
    )
    quick = make_case(
        DAEMON, case_id="fake-2-quick", nproc=[1], variants={"bug": {"args": ["0"], "expect": [{"outcome": "fixed"}]}}
    )
    results = {}

    def run(case) -> None:
        [job] = plan_local([case], Selection(devices=("cpu",)))
        results[case.id] = execute(job, env)

    threads = [threading.Thread(target=run, args=(c,)) for c in (slow, quick)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The quick launch's sweep ran while the slow one (and its daemons) were alive: it spared them.
    assert results[slow.id].outcome is Outcome.FIXED, results[slow.id].reason
    assert results[quick.id].outcome is Outcome.FIXED, results[quick.id].reason
    assert "killed 2 stray process(es)" in results[slow.id].reason, results[slow.id].reason
    assert "killed 1 stray process(es)" in results[quick.id].reason, results[quick.id].reason
    assert leftovers(str(tmp_path)) == []


# ---------------------------------------------------------------------------------------------------------- C

pyspy_only = pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")

TEARDOWN = """
import atexit, os
def spin_at_exit():
    while True:                     # 100 % CPU in interpreter shutdown, after the verdict
        pass
if os.environ["RANK"] == "1":
    atexit.register(spin_at_exit)
print("OK: rank", os.environ["RANK"], "fixed")
"""


@pyspy_only
def test_a_rank_hung_in_shutdown_after_its_verdict_gets_its_stack_from_outside(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    result = run_one(make_case, env, TEARDOWN, nproc=[2], timeout=15)
    assert result.outcome is Outcome.TIMEOUT, result.reason  # a teardown hang is still a timeout
    assert "rank 1 hung after its verdict: its script returned (exit 0)" in result.reason, result.reason
    assert "rank 0 hung" not in result.reason
    rank1 = result.stacks.split("--- rank 1 ---")[1]
    assert "[from outside: py-spy dump]" in rank1
    assert "spin_at_exit (repro.py:" in rank1, rank1  # the frame it spins in, atexit's callback
    assert leftovers(str(tmp_path)) == []


RESET = """
import os, signal
def stuck():
    while True:
        pass
signal.signal(signal.SIGUSR1, signal.SIG_DFL)   # as a library that installs and then removes its own handler
stuck()
"""


@pyspy_only
def test_a_rank_that_reset_sigusr1_is_not_killed_by_it_and_still_has_its_stack(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    result = run_one(make_case, env, RESET, timeout=15)
    assert result.outcome is Outcome.TIMEOUT, result.reason
    assert "rank 0 hung before reaching a verdict" in result.reason, result.reason
    assert "stuck (repro.py:" in result.stacks, result.stacks  # py-spy's frames: the function it spins in ...
    assert "<module> (repro.py:7)" in result.stacks  # ... called from the script's line 7
    assert "no longer handles SIGUSR1" in result.stacks  # faulthandler was not asked: SIGUSR1 would have killed it
    assert [r.state for r in result.ranks] == [RankState.ERROR]  # no verdict: the script never returned
    assert "Signal 10" not in result.log_excerpt
    assert leftovers(str(tmp_path)) == []


def test_stacks_fall_back_to_faulthandler_without_py_spy(
    make_case: MakeCase, env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.launch.torchrun as torchrun

    monkeypatch.setattr(torchrun, "py_spy", lambda: None)
    script = """
    import time
    time.sleep(3600)
    """
    result = run_one(make_case, env, script, timeout=10)
    assert result.outcome is Outcome.TIMEOUT
    assert 'repro.py", line 3 in <module>' in result.stacks, result.stacks
    assert "py-spy is not installed" in result.stacks


NO_SUBREAPER = DRIVER.replace(
    "result = execute(",
    """
from harness.launch import torchrun
torchrun.become_subreaper = lambda: False          # as where prctl is unavailable
result = execute(""",
)


def test_the_harness_still_kills_strays_where_it_cannot_be_a_subreaper(make_case: MakeCase, tmp_path: Path) -> None:
    """Without prctl the daemon is re-parented elsewhere; the launch's marker still finds and kills it."""
    case = make_case(DAEMON, nproc=[1], variants={"bug": {"args": ["0"], "expect": [{"outcome": "fixed"}]}})
    proc = subprocess.run(
        [sys.executable, "-c", NO_SUBREAPER, str(case.folder / "case.yaml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["outcome"] == "fixed", out["reason"]
    assert "killed 1 stray process(es)" in out["reason"], out["reason"]
    assert leftovers(str(tmp_path)) == []
    assert "BUGMATRIX_LAUNCH" not in os.environ  # the marker is each launch's, never the harness's own


# ---------------------------------------------------------------------------------------------------------- D

SLOW_TORCHRUN = """
import runpy, sys, time
before, after = float(sys.argv.pop(1)), float(sys.argv.pop(1))
time.sleep(before)
try:
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
finally:
    time.sleep(after)
"""


SLOW_PARENT = """
import runpy, sys, time
time.sleep({seconds})
sys.argv[0] = {parent!r}
runpy.run_path({parent!r}, run_name="__main__")
"""


def slow_torchrun(monkeypatch: pytest.MonkeyPatch, seconds: float, after: float = 0.0) -> None:
    """torchrun that takes `seconds` before it starts (as its agent importing torch on a loaded machine: 26 s
    measured at load 28 on 2 cores, 2 s idle) and `after` to exit once its ranks have. Its warm twin (launches
    warm: $BUGMATRIX_LAUNCH_MODE): a warm parent that takes `seconds` before its imports."""
    from harness.launch import torchrun, warm

    if warm.default_mode() == "warm":
        if after:
            pytest.skip("torchrun's own wind-down (its summary, its store); a warm agent has neither to wait for")
        slow = Path(tempfile.mkdtemp(prefix="bugmatrix-test-")) / "slow_parent.py"
        slow.write_text(SLOW_PARENT.format(seconds=seconds, parent=str(warm.PARENT)))
        warm.retire()  # the next launch starts a parent: this slow one
        monkeypatch.setattr(warm, "PARENT", slow)
        return
    plain = torchrun.torchrun_command

    def command(python: str, script: Path, args: list[str], nproc: int) -> list[str]:
        return [python, "-c", SLOW_TORCHRUN, str(seconds), str(after), *plain(python, script, args, nproc)[3:]]

    monkeypatch.setattr(torchrun, "torchrun_command", command)


def test_torchruns_start_up_does_not_count_against_the_cases_timeout(
    make_case: MakeCase, env: Environment, monkeypatch: pytest.MonkeyPatch, launches: list
) -> None:
    """The timeout is the case's: a torchrun slower to start than the whole limit still runs the case (its clock
    starts with the first rank), and a case that then hangs times out with its stacks."""
    slow_torchrun(monkeypatch, 8)
    result = run_one(make_case, env, "print('OK')\n", timeout=5, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    assert result.outcome is Outcome.FIXED, (result.reason, result.log_excerpt)
    assert launches[-1].startup_s is not None and launches[-1].startup_s >= 8, launches[-1].startup_s
    monkeypatch.setattr("harness.launch.torchrun.py_spy", lambda: None)
    result = run_one(make_case, env, "import time\ntime.sleep(3600)\n", case_id="fake-2-hang", timeout=5)
    assert result.outcome is Outcome.TIMEOUT and 'repro.py", line 2 in <module>' in result.stacks, result.stacks
    assert launches[-1].duration_s - launches[-1].startup_s < 5 + 10


def test_torchruns_wind_down_does_not_count_against_the_cases_timeout(
    make_case: MakeCase, env: Environment, monkeypatch: pytest.MonkeyPatch, launches: list
) -> None:
    """Once every rank has exited, torchrun writing its summary and exiting (seconds on a loaded machine: a 5 s case
    timed out after its rank printed OK) is not the case's time: the ranks' verdict stands."""
    slow_torchrun(monkeypatch, 0, after=8)
    result = run_one(make_case, env, "print('OK')\n", timeout=3, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    assert result.outcome is Outcome.FIXED, (result.reason, result.log_excerpt)
    assert launches[-1].duration_s - launches[-1].startup_s >= 8, launches[-1]


def test_a_torchrun_that_never_starts_a_rank_times_out_saying_so(
    make_case: MakeCase, env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun's start-up has its own bound (STARTUP_S), not the case's timeout; past it: a timeout whose reason
    says no rank had started (so no stacks are missing)."""
    from harness.launch import torchrun

    monkeypatch.setattr(torchrun, "STARTUP_S", 3.0)
    slow_torchrun(monkeypatch, 3600)
    result = run_one(make_case, env, "print('OK')\n", timeout=600)
    assert result.outcome is Outcome.TIMEOUT and result.duration_s < 60, result.duration_s
    assert "no rank had started: " in result.reason and " did not start its workers within" in result.reason
