"""Killing a whole process tree, and running a command under a time bound that kills its tree: launches no job.

Promises:
- `run_bounded` starts its command in a session (and process group) of its own; past its time bound the command,
  its group and every descendant (even one that left the group) are SIGKILLed and reaped, and
  `subprocess.TimeoutExpired` raised: nothing it started is left running (`subprocess.run(timeout=)` kills only the
  direct child);
- it is what the harness uses to ask an interpreter what it has installed (interpreter.py), which `analysis/`
  reaches: so this module imports nothing that launches a job (tests/test_layout.py), and the launcher
  (torchrun.py) takes its tree kill from here. psutil is imported only when a tree is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any


def run_bounded(command: list[str], timeout: float, **popen: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(command, capture_output=True)` in a session of its own; after `timeout` seconds its whole tree
    is killed (`kill_tree`) and `subprocess.TimeoutExpired` raised. `popen` goes to Popen (`text=True`, `env`...)."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **popen)
    out, err = communicate(proc, timeout)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def communicate(proc: subprocess.Popen[Any], timeout: float) -> tuple[Any, Any]:
    """`proc.communicate(timeout=timeout)`; past it, `proc`'s whole tree is killed, then TimeoutExpired raised."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        try:
            proc.communicate(timeout=10)  # the pipes close with the last process holding them
        except subprocess.TimeoutExpired:  # one that escaped the tree (a double fork) still holds them: leave it
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        raise


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL `proc`, its session and every descendant (even those in another session); reap them all: none is
    left running, or a zombie of this process, when it returns."""
    import psutil

    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    # Workers orphaned by an exited torchrun (or warm agent: killed with its parent) are no longer its children, but
    # stay in its session and process group; re-parented to this process (a subreaper), they are reaped here too.
    members = descendants + [p for p in _session(proc.pid) if p.pid != proc.pid and p not in descendants]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in members:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # unkillable (D state): nothing more can be done from user space
        pass
    # Once torchrun is gone its children are re-parented: to this process when it is a subreaper, then reaped here.
    reap({child.pid for child in members} - {proc.pid}, timeout=10)


def _session(sid: int) -> list[Any]:
    """The live processes of session `sid` (psutil.Process; zombies included: they are reaped, not killed)."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid:
                found.append(proc)
        except OSError:
            continue
    return found


def reap(pids: set[int], timeout: float) -> None:
    """Wait until every pid is gone, reaping those that are (or become) this process's children.

    Only the given pids are waited for (never `waitpid(-1)`), so no other thread's subprocess loses its status."""
    import psutil

    pending = set(pids)
    deadline = time.monotonic() + timeout
    while pending:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    pending.discard(pid)
            except ChildProcessError:  # not (or no longer) ours: wait for whoever reaps it, or for its adoption
                if not psutil.pid_exists(pid):
                    pending.discard(pid)
            except OSError:
                pending.discard(pid)
        if not pending or time.monotonic() >= deadline:
            return
        time.sleep(0.02)
