"""pytorch/pytorch#41694: torch.multiprocessing.spawn hangs forever when one child fails and another does not exit
on SIGTERM.

https://github.com/pytorch/pytorch/issues/41694

When a spawned process exits with an error, `ProcessContext.join` (what `torch.multiprocessing.spawn` loops on)
sends SIGTERM to the processes still alive and then `process.join()`s each of them with no timeout. A child whose
SIGTERM handler does not end it (a trainer's graceful-shutdown handler that blocks, or a process stuck in C++ that
never runs the Python handler) is never joined: the parent waits forever and the failing child's error is never
raised. PR #115219 ("Multiprocessing api to use sigkill if sigterm doesn't kill the process", first in torch 2.3.0)
joins the terminated processes for at most 30 s and then SIGKILLs those still alive, so `join` raises the failing
child's error.

    python repro.py [--device cpu]

A world of one: this script spawns its own two children with `torch.multiprocessing.spawn(..., join=False)` and
joins them as `spawn` does (`while not context.join(): pass`). Child 1 installs a SIGTERM handler that ignores the
signal and then waits; child 0 waits until child 1's handler is installed, then raises. A watchdog thread gives the
join DEADLINE_S seconds from child 0's exit (more than the fix's 30 s wait before its SIGKILL): past it, the join is
hung, and the watchdog SIGKILLs the children still alive itself, which ends the join; the script then prints the
signature and exits 1. The fixed join raises child 0's error before the deadline (exit 0).

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import os
import signal
import sys
import tempfile
import threading
import time

import torch
import torch.multiprocessing as mp

SIGNATURE = "torch.multiprocessing.spawn's join hangs after a child failed"
DEADLINE_S = 40  # after child 0's exit; the fix waits 30 s after its SIGTERM before SIGKILL
READY_WAIT_S = 60


def _ignore_sigterm(signum, frame):
    print("[child 1] got SIGTERM: ignored (a shutdown handler that does not end the process)", flush=True)


def child(index, ready_path):
    if index == 1:
        signal.signal(signal.SIGTERM, _ignore_sigterm)
        with open(ready_path, "w") as f:
            f.write("ready")
        while True:  # the rest of a long job
            time.sleep(0.5)
    deadline = time.monotonic() + READY_WAIT_S
    while not os.path.exists(ready_path):
        if time.monotonic() > deadline:
            raise RuntimeError("child 1 never installed its SIGTERM handler (cannot test)")
        time.sleep(0.05)
    raise ValueError("child 0 fails on purpose")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.device != "cpu":
        print("SKIP: processes and signals only: the CPU run is the case (--device cpu)")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the script spawns its own two processes)")
        return 125
    directory = tempfile.mkdtemp()
    ready_path = os.path.join(directory, "child1-ready")
    context = mp.spawn(child, args=(ready_path,), nprocs=2, join=False)
    started = time.monotonic()

    hung = []

    def watchdog():
        while context.processes[0].exitcode is None:  # the deadline runs from child 0's failure
            if time.monotonic() - started > READY_WAIT_S + 60:
                break
            time.sleep(0.1)
        time.sleep(DEADLINE_S)
        alive = [p for p in context.processes if p.is_alive()]
        if alive:  # the join is still waiting on them: end the hang so the script can say so
            hung.append([p.exitcode for p in context.processes])
            for process in alive:
                os.kill(process.pid, signal.SIGKILL)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        while not context.join():
            pass
    except mp.ProcessRaisedException as e:
        if "child 0 fails on purpose" not in str(e):
            raise
        if hung:
            print(f"torch {torch.__version__}: REPRODUCED: {SIGNATURE}: still joining {DEADLINE_S} s after child 0 "
                  f"exited, child exit codes then {hung[0]} (child 0 raised; child 1 ignores SIGTERM and was never "
                  "killed); the script SIGKILLed child 1 itself to end the join", flush=True)
            return 1
        print(f"torch {torch.__version__}: OK: join raised child 0's error after {time.monotonic() - started:.1f} s "
              f"(child exit codes {[p.exitcode for p in context.processes]}): "
              f"{str(e).strip().splitlines()[-1]}", flush=True)
        return 0
    raise AssertionError("join returned without the error child 0 raised")


if __name__ == "__main__":
    sys.exit(main())
