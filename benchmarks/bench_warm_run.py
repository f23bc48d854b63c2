"""A launching command warm vs cold, whole-process, interleaved (issue 36, item 5: the main job, a bisect).

    uv run python benchmarks/bench_warm_run.py [--rounds K] [--memory] -- COMMAND ARGS...

Each round runs `bugmatrix COMMAND ARGS --warm --db FRESH` then `bugmatrix COMMAND ARGS --cold --db FRESH` (a new
empty results store per launch, so nothing is reused; the environments folder is the caller's, so a cell's
environment is built before the first timed round: run the command once first, or pass `--prime`), as whole
processes from this checkout, and prints the wall time of each, the machine's load before and after, and the ratio
of the medians. It compares the outcomes of the two stores job by job (a `run --json` answer's results) and says
whether they are all equal. With `--memory`, it samples once a second the resident memory (RSS and PSS, from
/proc) of every warm parent alive during the warm runs (processes running harness/launch/warm_parent.py) and
prints the peak per parent and in total.

Examples:
    # the main job (`bugmatrix run` on the default setup), one round: ~10 min warm + ~45 min cold on 2 cores
    uv run python benchmarks/bench_warm_run.py -- run --json
    # a lightning bisect between two releases, environments primed first
    uv run python benchmarks/bench_warm_run.py --prime --rounds 2 -- bisect lightning-19427 --package lightning \
        --old 2.0.9.post0 --new 2.6.6 --no-commits --json

Targets (issue 36): the main job >= 4x faster warm, the same outcomes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.session.store import ResultStore  # noqa: E402

PARENT = "warm_parent.py"


def load() -> str:
    """The load averages and the core count, as the docs state them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


class ParentMemory:
    """Samples the resident memory of every warm parent once a second while running; `peaks` per parent pid."""

    def __init__(self) -> None:
        self.peaks: dict[int, tuple[int, int, str]] = {}  # pid -> (peak RSS, peak PSS, command line)
        self.total: tuple[int, int] = (0, 0)  # the peak of the sums over the parents alive at once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ParentMemory:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            rss_sum = pss_sum = 0
            found = {p.pid: p for p in psutil.process_iter(["pid", "ppid", "cmdline"]) if _parent_line(p)}
            for proc in found.values():
                if proc.info["ppid"] in found:  # a launch's agent or rank: a fork, carrying its parent's command line
                    continue
                cmd = proc.info["cmdline"]
                try:
                    full = proc.memory_full_info()
                except (psutil.Error, OSError):
                    continue
                rss, pss = full.rss, getattr(full, "pss", 0)
                rss_sum, pss_sum = rss_sum + rss, pss_sum + pss
                was = self.peaks.get(proc.pid, (0, 0, ""))
                imports = " ".join(cmd[2 : cmd.index("->")] if "->" in cmd else cmd[2:3])
                self.peaks[proc.pid] = (max(was[0], rss), max(was[1], pss), f"{cmd[0]} [{imports}]")
            self.total = (max(self.total[0], rss_sum), max(self.total[1], pss_sum))


def _parent_line(proc: psutil.Process) -> bool:
    cmd = proc.info["cmdline"] or []
    return len(cmd) >= 2 and cmd[1].endswith(PARENT)


def bugmatrix(args: list[str], mode: str, db: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """One whole `bugmatrix` process with `--MODE --db DB` (an empty store made first: `bisect` and `narrow` refuse
    a --db that does not exist), timed."""
    ResultStore(db)
    command = [sys.executable, "-m", "harness", *args, f"--{mode}", "--db", str(db)]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    return time.perf_counter() - started, proc


def outcomes(proc: subprocess.CompletedProcess[str]) -> dict[str, str] | None:
    """Each job's outcome from a `--json` answer (`results`: run; `probes`/`levels`: whatever it lists), or None."""
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None
    items = data.get("results") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return {"answer": json.dumps(data, sort_keys=True, default=str)[:4000]}
    return {f"{r.get('cell', '')} {r['case']}::{r['variant']}[{r['device']}-{r['nproc']}]": r["outcome"] for r in items}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--prime", action="store_true", help="run the command once, warm, untimed, first")
    parser.add_argument("--memory", action="store_true", help="sample the warm parents' resident memory")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS (a bugmatrix command line)")
    args = parser.parse_args()
    command = [a for a in args.command if a != "--"]
    if not command:
        parser.error("give the bugmatrix command line after --")
    times: dict[str, list[float]] = {"warm": [], "cold": []}
    answers: dict[str, dict[str, str] | None] = {}
    memory = ParentMemory()
    with tempfile.TemporaryDirectory(prefix="bench-warm-run-") as tmp:
        if args.prime:
            bugmatrix(command, "warm", Path(tmp) / "prime.db")
        for round_ in range(args.rounds):
            for mode in ("warm", "cold"):
                before = load()
                if mode == "warm" and args.memory:
                    with memory:
                        elapsed, proc = bugmatrix(command, mode, Path(tmp) / f"{mode}-{round_}.db")
                else:
                    elapsed, proc = bugmatrix(command, mode, Path(tmp) / f"{mode}-{round_}.db")
                times[mode].append(elapsed)
                answers[mode] = outcomes(proc)
                print(f"round {round_ + 1} {mode}: {elapsed:.1f} s, exit {proc.returncode}; load {before} -> {load()}")
                if proc.returncode not in (0, 1):
                    print(proc.stderr[-2000:], file=sys.stderr)
    warm, cold = statistics.median(times["warm"]), statistics.median(times["cold"])
    print(f"median warm {warm:.1f} s, cold {cold:.1f} s: {cold / warm:.2f}x faster warm")
    w, c = answers.get("warm"), answers.get("cold")
    if w is None or c is None:
        print("outcomes: not compared (no JSON answer: pass --json)")
    else:
        differ = sorted(k for k in w.keys() | c.keys() if w.get(k) != c.get(k))
        print(f"outcomes: {len(w)} warm, {len(c)} cold, {len(differ)} differ")
        for k in differ[:40]:
            print(f"  {k}: warm {w.get(k)}, cold {c.get(k)}")
    if args.memory:
        for pid, (rss, pss, what) in sorted(memory.peaks.items()):
            print(f"warm parent {pid} {what}: peak RSS {rss / 2**20:.0f} MiB, PSS {pss / 2**20:.0f} MiB")
        rss, pss = memory.total
        print(f"warm parents at once: peak RSS {rss / 2**20:.0f} MiB, PSS {pss / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
