"""`nvidia-smi`, started before the harness's own imports where the driver's /proc files list no GPU.

A run must know the GPUs before its first launch (a CUDA job needs one per rank). Where /proc/driver/nvidia/gpus
lists them, reading it costs ~1 ms; elsewhere one `nvidia-smi` call costs 0.3-1 s, and started by the `run` command
(harness/commands/run.py) it overlapped only the loading of the cases and the package listing (measured with a 0.6 s
stand-in: the run still waited 0.57 s for it before its first launch; benchmarks/bench_cuda_launch_path.py). Started
here instead, when the `bugmatrix` command line (harness/cli.py) imports this module first, for a command that
launches (its name in sys.argv), it runs while pydantic, rich and the rest are imported (~0.75 s of CPU), and
`harness.launch.interpreter` takes its answer. Standard library only, so that it starts before anything heavy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

LAUNCHING = ("run", "bisect", "narrow", "compat", "expect")  # the commands that may launch a CUDA job
QUERY = ["--query-gpu=name,driver_version", "--format=csv,noheader"]
_started: subprocess.Popen[str] | None = None


def start(argv: list[str], proc_gpus: str = "/proc/driver/nvidia/gpus") -> None:
    """Start `nvidia-smi QUERY` in the background when `argv` names a launching command, nvidia-smi is on PATH and
    `proc_gpus` lists no GPU; at most once per process."""
    global _started
    if _started is not None or not any(a in LAUNCHING for a in argv[1:3]):
        return
    try:
        if os.listdir(proc_gpus):
            return  # the /proc files answer, in a millisecond
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if not smi:
        return
    try:
        _started = subprocess.Popen([smi, *QUERY], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        _started = None


def take() -> subprocess.Popen[str] | None:
    """The nvidia-smi process `start` began (once: a second caller gets None and asks again itself)."""
    global _started
    proc, _started = _started, None
    return proc


start(sys.argv)
