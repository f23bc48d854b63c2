"""Launching a case script under torchrun, with a timeout that kills the whole process tree.

Promises:
- every launch uses `torchrun --standalone`, whose rendezvous binds port 0 (the OS hands out a free port, so
  parallel launches cannot pick the same one); a launch that still fails with "address already in use" before
  any rank started is retried, up to `PORT_RETRIES` times;
- a launch that outlives its timeout first gets every rank's Python stack (SIGUSR1 -> faulthandler), then its
  whole process tree is killed (SIGKILL to torchrun's session and to every descendant, even those that left it);
- the same kill happens on any exception in the caller's thread, Ctrl-C included, before it propagates;
- when `launch` returns, no process it started is left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

WRAPPER = Path(__file__).with_name("rank_wrapper.py")
PORT_RETRIES = 3
STACK_GRACE_S = 3.0
_COLLISION = ("address already in use", "eaddrinuse", "errno 98")

_active: set[subprocess.Popen[bytes]] = set()
_active_lock = threading.Lock()
_stopping = threading.Event()


class LaunchAborted(RuntimeError):
    """The run is being interrupted: no new launch starts, running ones were killed."""


def abort_all() -> None:
    """Kill every launch in flight (from any thread) and refuse new ones; for Ctrl-C / SIGTERM handling."""
    _stopping.set()
    with _active_lock:
        procs = list(_active)
    for proc in procs:
        kill_tree(proc)


def allow_launches() -> None:
    """Undo `abort_all` (a new run in the same process)."""
    _stopping.clear()


@dataclass
class RankRecord:
    """What one rank wrote about itself (see rank_wrapper.py), plus its output."""

    rank: int
    pid: int | None = None
    started: float | None = None
    finished: float | None = None
    exit_code: int | None = None
    exception: str | None = None
    terminated: bool = False
    log: str = ""
    stacks: str = ""


@dataclass
class LaunchResult:
    """Everything one torchrun launch left behind."""

    command: list[str]
    nproc: int
    returncode: int | None
    timed_out: bool
    duration_s: float
    agent_log: str
    ranks: dict[int, RankRecord] = field(default_factory=dict)
    attempts: int = 1


def torchrun_command(python: str, script: Path, args: list[str], nproc: int) -> list[str]:
    """The torchrun command line that runs `script` through the rank wrapper on `nproc` local ranks."""
    return [
        python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        str(WRAPPER), str(script), *args,
    ]


def launch(
    python: str,
    script: Path,
    args: list[str],
    nproc: int,
    timeout: float,
    env: dict[str, str] | None = None,
) -> LaunchResult:
    """Run `script args` under torchrun with `nproc` ranks; never leaves a process behind (see module doc)."""
    result = _launch_once(python, script, args, nproc, timeout, env)
    while result.attempts <= PORT_RETRIES and _port_collision(result):
        attempts = result.attempts + 1
        result = _launch_once(python, script, args, nproc, timeout, env)
        result.attempts = attempts
    return result


def _port_collision(result: LaunchResult) -> bool:
    nobody_ran = not any(r.started for r in result.ranks.values())
    text = result.agent_log.lower()
    return result.returncode != 0 and nobody_ran and any(marker in text for marker in _COLLISION)


def _launch_once(
    python: str, script: Path, args: list[str], nproc: int, timeout: float, env: dict[str, str] | None
) -> LaunchResult:
    if _stopping.is_set():
        raise LaunchAborted("the run was interrupted")
    command = torchrun_command(python, script, args, nproc)
    with tempfile.TemporaryDirectory(prefix="bugmatrix-launch-") as tmp:
        rank_dir = Path(tmp)
        agent_log_path = rank_dir / "torchrun.log"
        child_env = {**os.environ, **(env or {})}
        child_env.update(BUGMATRIX_RANK_DIR=str(rank_dir), PYTHONUNBUFFERED="1")
        child_env.setdefault("OMP_NUM_THREADS", "1")
        # Bytecode is written: with PYTHONDONTWRITEBYTECODE inherited, every rank of every launch compiles torch
        # from source again (measured: 24 s vs 11 s per `import torch` on a busy 2-core machine).
        child_env.pop("PYTHONDONTWRITEBYTECODE", None)
        started = time.monotonic()
        timed_out = False
        with open(agent_log_path, "wb") as agent_log:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=agent_log, stderr=subprocess.STDOUT,
                env=child_env, start_new_session=True, cwd=script.parent,
            )
            with _active_lock:
                _active.add(proc)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _dump_stacks(rank_dir)
            finally:
                kill_tree(proc)
                with _active_lock:
                    _active.discard(proc)
        if _stopping.is_set():
            raise LaunchAborted("the run was interrupted")
        duration = time.monotonic() - started
        ranks = {r: _read_rank(rank_dir, r) for r in range(nproc)}
        return LaunchResult(
            command=command, nproc=nproc, returncode=proc.returncode, timed_out=timed_out,
            duration_s=duration, agent_log=_read_text(agent_log_path), ranks=ranks,
        )


def _dump_stacks(rank_dir: Path) -> None:
    """Ask every live rank for its Python stacks (SIGUSR1 -> faulthandler) and wait briefly for them."""
    asked: list[Path] = []
    for record_file in rank_dir.glob("rank*.json"):
        try:
            pid = json.loads(record_file.read_text())["pid"]
            os.kill(pid, signal.SIGUSR1)
            asked.append(record_file.with_suffix(".stacks"))
        except (OSError, ValueError, KeyError):
            continue
    deadline = time.monotonic() + STACK_GRACE_S
    while time.monotonic() < deadline and not all(_nonempty(p) for p in asked):
        time.sleep(0.05)
    time.sleep(0.1)  # let the last writer finish its frames


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL `proc`, its process group and every descendant (even those in another session); reap `proc`."""
    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    # Workers orphaned by an exited torchrun are no longer its children, but stay in its process group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in descendants:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(descendants, timeout=10)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # unkillable (D state): nothing more can be done from user space
        pass


def _read_rank(rank_dir: Path, rank: int) -> RankRecord:
    record = RankRecord(rank=rank)
    base = rank_dir / f"rank{rank}"
    try:
        data = json.loads((base.with_suffix(".json")).read_text())
    except (OSError, ValueError):
        data = {}
    for key in ("pid", "started", "finished", "exit_code", "exception", "terminated"):
        if key in data:
            setattr(record, key, data[key])
    record.log = _read_text(base.with_suffix(".log"))
    record.stacks = _read_text(base.with_suffix(".stacks"))
    return record


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


if __name__ == "__main__":  # manual check: python -m harness.launch.torchrun SCRIPT NPROC
    res = launch(sys.executable, Path(sys.argv[1]).resolve(), sys.argv[3:], int(sys.argv[2]), 120)
    print(res.returncode, res.timed_out, f"{res.duration_s:.1f}s", {r: v.exit_code for r, v in res.ranks.items()})
