"""What a CUDA run of `bugmatrix run` does before its first launch that a CPU run does not, measured here with stand-ins
(a GPU machine is lent rarely): the time from the harness process's start to its first `launch()` call, and the
pieces on that path, each as the median of --runs fresh processes.

    uv run python benchmarks/bench_cuda_launch_path.py [--runs 7] [--dists 200] [--smi-s 0.6]

Stand-ins, built under a temporary folder:
- the image's interpreter: a venv of this Python whose site-packages holds --dists distributions (torch 2.11.0+cu130
  among them; the H200 image lists about 200), so the package listing reads as many METADATA files as there;
- the driver's /proc files: /proc/driver/nvidia/{version,gpus/<bus>/information} and the device node, as an H100
  machine has them (harness/launch/interpreter.py reads them: ~1 ms);
- nvidia-smi: a script that sleeps --smi-s seconds (0.3-1 s on a GPU machine without persistence mode) and answers
  `--query-gpu=name,driver_version` like the real one, on PATH, for a machine where /proc lists no GPU.

Scenarios (`launch` replaced by a stub that prints the elapsed time and exits, so nothing is launched):
  cpu            --device cpu, no GPU anywhere                      (the CPU run: the baseline)
  cuda-proc      --device cuda, GPUs read from the stand-in /proc   (a Firecracker GPU machine)
  cuda-smi       --device cuda, GPUs only from the stand-in nvidia-smi (a machine without the /proc files)
  cuda-listing   cuda-proc, with --python the stand-in interpreter (its packages listed in a subprocess)
Pieces timed alone: the in-process listing of --dists distributions, the subprocess listing, the /proc probe, and
`kill_strays` (the scan of every process's environment after each launch).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASE = ["torch-177844-fsdp2-nonfloat-param", "--variant", "bug", "--nproc", "1", "--no-store", "--redo", "-j", "1"]
DRIVER = r"""
import os, sys, time, threading
t0, c0 = time.perf_counter(), os.times()
import harness.launch.early_smi  # as harness/cli.py does first (where /proc lists no GPU: nvidia-smi starts now)
from pathlib import Path
import harness.launch.interpreter as interpreter
proc = Path(os.environ["BENCH_PROC"])
interpreter.PROC_GPUS, interpreter.PROC_VERSION = proc / "gpus", proc / "version"
interpreter.DEV_NODE = os.environ["BENCH_DEV"] + "/nvidia{minor}"
blocked = [0.0]
probe = interpreter.gpus
def gpus():  # the main thread's waits for the GPU probe (the prefetch thread runs it; the main one may wait on it)
    if threading.current_thread() is not threading.main_thread():
        return probe()
    started = time.perf_counter()
    try:
        return probe()
    finally:
        blocked[0] += time.perf_counter() - started
interpreter.gpus = gpus
import harness.launch.execute as execute
def first_launch(*args, **kwargs):
    c1 = os.times()
    cpu = sum(c1[:4]) - sum(c0[:4])
    print(f"FIRST_LAUNCH {time.perf_counter() - t0:.4f} {cpu:.4f} {blocked[0]:.4f}", flush=True)
    os._exit(0)
execute.launch = first_launch
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""
SMI = """#!/bin/sh
sleep {delay}
echo "NVIDIA H100 80GB HBM3, 580.159.04"
"""


def stand_ins(tmp: Path, dists: int, smi_s: float) -> dict[str, Path]:
    """The stand-in interpreter, /proc folder, device folder and nvidia-smi folder under `tmp`."""
    image = tmp / "image"
    venv.create(image, with_pip=False, symlinks=True)
    site = next(image.glob("lib/python*/site-packages"))
    names = ["torch", "lightning", "pytorch-lightning", "triton", "numpy"] + [f"package-{i}" for i in range(dists)]
    for n, name in enumerate(names[:dists]):
        version = "2.11.0+cu130" if name == "torch" else f"1.{n}.0"
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        header = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: stand-in\n"
        (info / "METADATA").write_text(header + "Requires-Dist: numpy\n" * 20 + "\n" + "long description\n" * 200)
    proc = tmp / "proc"
    (proc / "gpus" / "0000:00:07.0").mkdir(parents=True)
    (proc / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"
    )
    (proc / "gpus" / "0000:00:07.0" / "information").write_text(
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 35\nDevice Minor: \t 0\n"
    )
    dev = tmp / "dev"
    dev.mkdir()
    (dev / "nvidia0").write_text("")
    smi = tmp / "smi"
    smi.mkdir()
    (smi / "nvidia-smi").write_text(SMI.format(delay=smi_s))
    (smi / "nvidia-smi").chmod(0o755)
    return {
        "python": image / "bin" / "python",
        "proc": proc,
        "dev": dev,
        "smi": smi,
        "site": site,
        "none": tmp / "no-such-folder",
    }


def first_launch(extra: list[str], proc: Path, dev: Path, path: str) -> tuple[float, float, float]:
    """(wall s, CPU s with children, s the main thread waited for the GPU probe) from the harness process's first line
    to its first launch() call (Python's own start-up excluded). On a loaded machine wall time is mostly waiting for
    a core: the CPU seconds and the probe wait are the figures that carry over to a quiet GPU machine."""
    env = {**os.environ, "BENCH_PROC": str(proc), "BENCH_DEV": str(dev), "PATH": path, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, "run", *CASE, *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in out.stdout.splitlines():
        if line.startswith("FIRST_LAUNCH "):
            wall, cpu, blocked = map(float, line.split()[1:])
            return wall, cpu, blocked
    raise SystemExit(f"no launch: {extra}\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")


def cpu_of(command: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s of the child, 0) of one run of `command`."""
    before, started = os.times(), time.perf_counter()
    subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
    after = os.times()
    return time.perf_counter() - started, (after[2] + after[3]) - (before[2] + before[3]), 0.0


def in_process(call) -> tuple[float, float, float]:
    """(wall s, CPU s of this process, 0) of one `call()`."""
    before, started = os.times(), time.perf_counter()
    call()
    after = os.times()
    return time.perf_counter() - started, sum(after[:4]) - sum(before[:4]), 0.0


def medians(runs: int, measure) -> tuple[float, float, float]:
    values = [measure() for _ in range(runs)]
    return tuple(statistics.median(v[i] for v in values) for i in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dists", type=int, default=200)
    parser.add_argument("--smi-s", type=float, default=0.6)
    args = parser.parse_args()
    from harness.launch import interpreter
    from harness.launch.torchrun import kill_strays

    with tempfile.TemporaryDirectory(prefix="bench-cuda-path-") as tmp:
        s = stand_ins(Path(tmp), args.dists, args.smi_s)
        no_smi = os.pathsep.join(
            p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()
        )
        with_smi = f"{s['smi']}{os.pathsep}{no_smi}"
        print(f"{'':60s} {'wall':>9s} {'CPU':>9s} {'probe wait':>11s}  (medians of {args.runs}; ms)")

        def row(name: str, stats: tuple[float, float, float]) -> None:
            print(f"{name:60s} {stats[0] * 1000:9.1f} {stats[1] * 1000:9.1f} {stats[2] * 1000:11.1f}", flush=True)

        row(
            "python -c pass (this interpreter's start-up)",
            medians(args.runs, lambda: cpu_of([sys.executable, "-c", "pass"])),
        )
        row(
            "python -c 'import harness.cli' (the harness's imports)",
            medians(args.runs, lambda: cpu_of([sys.executable, "-c", "import harness.cli"])),
        )
        scenarios = {
            "cpu": (["--device", "cpu"], s["none"], no_smi),
            "cuda-proc": (["--device", "cuda"], s["proc"], no_smi),
            f"cuda-smi ({args.smi_s} s stand-in nvidia-smi)": (["--device", "cuda"], s["none"], with_smi),
            f"cuda-listing ({args.dists} dists, subprocess)": (
                ["--device", "cuda", "--python", str(s["python"])],
                s["proc"],
                no_smi,
            ),
        }
        for name, (extra, proc, path) in scenarios.items():
            row(
                f"to first launch: {name}",
                medians(args.runs, lambda e=extra, p=proc, q=path: first_launch(e, p, s["dev"], q)),
            )
        sys.path.insert(0, str(s["site"]))
        row(
            f"listing in-process ({args.dists} dists + this venv's)",
            medians(args.runs, lambda: in_process(interpreter._inspect)),
        )  # noqa: SLF001
        sys.path.remove(str(s["site"]))
        row(
            f"listing in a subprocess ({args.dists} dists)",
            medians(args.runs, lambda: cpu_of([str(s["python"]), "-c", interpreter._INSPECT])),
        )  # noqa: SLF001
        interpreter.PROC_GPUS, interpreter.PROC_VERSION = s["proc"] / "gpus", s["proc"] / "version"
        interpreter.DEV_NODE = str(s["dev"]) + "/nvidia{minor}"
        row("GPU probe from /proc", medians(args.runs, lambda: in_process(interpreter._gpus_from_proc)))  # noqa: SLF001
        row(
            f"kill_strays over {len(os.listdir('/proc'))} /proc entries",
            medians(args.runs, lambda: in_process(lambda: kill_strays("no-such-launch"))),
        )


if __name__ == "__main__":
    main()
