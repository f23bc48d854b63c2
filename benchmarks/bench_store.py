"""`bugmatrix report` and `bugmatrix compare` over a year of nightlies: whole-process wall times, best of N.

    uv run python benchmarks/bench_store.py [--db /tmp/bench-store.db] [--nights 365] [--runs 3]

The synthetic store (built once at `--db` and reused; never commit it) holds what a year of nightlies leaves: every
night each of 45 cells records one run (as a nightly shard does) of 80 results (16 cases x variants x world sizes),
with realistic fields: a log excerpt of 2-4 KB, per-rank statuses, the cell's versions, stacks mostly empty, an
occasional reason of a few hundred characters, and now and then an outcome that flips. 365 nights: 16,425 runs and
1,314,000 results. Rows go in through the store's own table layout (`ResultStore` makes the schema; the rows are
inserted in big transactions, not one `save` each, for speed), so the store is exactly what the code under test
writes; a store made by an older bugmatrix is upgraded when first opened, which is timed on its own ("open").

Timed, each as a fresh process with its bytecode cached, after one warm-up run that also warms the page cache:
`report --format markdown|json|html` (with `--matrix` at a missing path: no index look-ups), `compare` (the latest
two runs) and `compare RUN_A RUN_B` (the same cell on the last two nights); and `--help`, the start-up alone.

Target: each under 2 s on a store of over a million results.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.session import store as store_module  # noqa: E402

CASES = sorted(p.name for p in (ROOT / "cases").iterdir() if (p / "case.yaml").is_file())
NIGHT_S = 86_400.0
FIRST_NIGHT = 1_735_700_000.0  # early January 2025


def cells() -> list[tuple[str, str, dict[str, str]]]:
    """45 cells like matrix.yaml's: (name, device, versions)."""
    out = [
        (
            "default",
            "cpu",
            {
                "torch": "2.14.1",
                "torchrec": "1.9.2",
                "fbgemm-gpu-cpu": "1.9.0",
                "lightning": "2.6.6",
                "litgpt": "0.5.13",
            },
        ),
        (
            "default-cuda",
            "cuda",
            {"torch": "2.14.1", "torchrec": "1.9.2", "fbgemm-gpu": "1.9.0", "lightning": "2.6.6", "litgpt": "0.5.13"},
        ),
    ]
    for minor in range(15):
        out.append((f"torch-2.{minor}.1", "cpu", {"torch": f"2.{minor}.1"}))
    for minor in range(10):
        out.append(
            (
                f"torchrec-1.{minor}.0",
                "cpu",
                {"torch": f"2.{minor + 5}.0", "torchrec": f"1.{minor}.0", "fbgemm-gpu-cpu": f"1.{minor}.0"},
            )
        )
    for minor in range(10):
        version = f"2.{minor % 7}.{minor}"
        out.append((f"lightning-{version}", "cpu", {"torch": "2.14.1", "lightning": version}))
    for patch in range(8):
        out.append((f"litgpt-0.5.{patch}", "cpu", {"torch": "2.14.1", "litgpt": f"0.5.{patch}", "lightning": "2.6.6"}))
    return out


def jobs() -> list[tuple[str, str, int]]:
    """80 (case, variant, nproc) per cell."""
    out = []
    for case in CASES:
        out += [(case, "bug", 1), (case, "bug", 2), (case, "control", 1), (case, "control", 2), (case, "bug", 4)]
    return out[:80]


LOG_LINES = [
    "[rank{r}]:[W1121 02:{m:02d}:{s:02d}.{us:06d} {pid} torch/distributed/distributed_c10d.py:{l}] "
    "ProcessGroupGloo: using loopback device",
    "[rank{r}]: INFO: GPU available: False, used: False; TPU available: False, using: 0 TPU cores",
    "[rank{r}]: step {l}: loss={us} grad_norm=0.{pid} lr=3.0e-04 tokens/s={pid}.{m}",
    '[rank{r}]:   File "/envs/cell/lib/python3.11/site-packages/torchrec/distributed/embeddingbag.py", line {l}, '
    "in _create_mean_pooling_divisor",
    "[rank{r}]: UserWarning: TypedStorage is deprecated. It will be removed in the future (pid {pid})",
    '[rank{r}]: BUGMATRIX_RESULT {{"observed": "lengths changed", "step": {l}, "max_abs_diff": 0.{us}}}',
]


def log_pool(rng: random.Random, size: int = 64) -> list[str]:
    """Distinct log excerpts of 2-4 KB."""
    pool = []
    for _ in range(size):
        target, lines = rng.randint(2000, 4000), []
        while sum(len(x) + 1 for x in lines) < target:
            lines.append(
                rng.choice(LOG_LINES).format(
                    r=rng.randint(0, 3),
                    m=rng.randint(0, 59),
                    s=rng.randint(0, 59),
                    us=rng.randint(0, 999_999),
                    pid=rng.randint(1000, 99_999),
                    l=rng.randint(1, 4000),
                )
            )
        pool.append("\n".join(lines)[:target])
    return pool


def build(path: Path, nights: int) -> None:
    """Make the synthetic store at `path` (the current schema, then raw rows in one transaction a night)."""
    rng = random.Random(20250101)
    logs = log_pool(rng)
    long_reasons = [
        " | ".join(
            f"Traceback line {i}: RuntimeError: Split sizes doesn't match total dim 0 size (rank {r})"
            for i in range(rng.randint(2, 5))
        )
        for r in range(16)
    ]
    store_module.ResultStore(path)  # the schema, exactly as the code under test makes it
    columns = store_module._RESULT_COLUMNS
    insert = f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    the_cells, the_jobs = cells(), jobs()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    started = time.perf_counter()
    for night in range(nights):
        db.execute("BEGIN IMMEDIATE")
        night_at = FIRST_NIGHT + night * NIGHT_S
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(night_at))
        for c, (cell, device, versions) in enumerate(the_cells):
            run_id = f"{stamp}-runner{c:02d}-{rng.getrandbits(24):06x}"
            run_at = night_at + c * 7.0
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, 'complete', ?, ?)",
                (
                    run_id,
                    run_at,
                    run_at + 900.0,
                    f"runner{c:02d}",
                    f"bugmatrix run --cell {cell} --db results/{cell}.db",
                ),
            )
            rows = []
            for j, (case, variant, nproc) in enumerate(the_jobs):
                expected = "reproduced" if variant == "bug" and (len(case) + c) % 3 == 0 else "fixed"
                roll = rng.random()
                outcome = (
                    expected
                    if roll < 0.95
                    else "error"
                    if roll < 0.97
                    else "timeout"
                    if roll < 0.98
                    else "infra"
                    if roll < 0.99
                    else ("fixed" if expected == "reproduced" else "reproduced")
                )
                reason = (
                    rng.choice(long_reasons)
                    if outcome in ("error", "reproduced") and rng.random() < 0.3
                    else "every rank exited 0"
                    if outcome == "fixed"
                    else f"{outcome}: see the log"
                )
                ranks = [
                    {
                        "rank": r,
                        "state": outcome if outcome in ("fixed", "reproduced") else "error",
                        "exit_code": 0 if outcome == "fixed" else 1,
                        "detail": "",
                        "finished_at": run_at + j + r,
                    }
                    for r in range(nproc)
                ]
                rows.append(
                    (
                        run_id,
                        case,
                        variant,
                        nproc,
                        device,
                        cell,
                        outcome,
                        expected,
                        reason,
                        json.dumps(versions),
                        "3.11.7",
                        json.dumps(ranks),
                        5.0 + rng.random() * 60,
                        rng.choice(logs),
                        "" if rng.random() < 0.97 else rng.choice(logs)[:1500],
                        run_at + j * 11.0,
                        1,
                        "{}",
                        f"{case}:{variant}:{nproc}:{cell}:{night // 30}",
                    )
                )
            db.executemany(insert, rows)
        db.execute("COMMIT")
        if night % 30 == 29:
            print(f"  built {night + 1} nights ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    rebuild = getattr(store_module, "_rebuild_latest", None)
    if rebuild is not None:  # a store with a derived index of the newest results: rebuild it as an upgrade would
        db.execute("BEGIN IMMEDIATE")
        rebuild(db)
        db.execute("COMMIT")
    db.close()


def child_env() -> dict[str, str]:
    """Bytecode cached, as an installed bugmatrix has it, in a folder of its own (this machine sets
    PYTHONDONTWRITEBYTECODE, which would make every process compile every module from source)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": str(Path(os.environ.get("TMPDIR", "/tmp")) / "bench-store-pycache")}


def timed(command: list[str], runs: int) -> tuple[float, int]:
    best, out = float("inf"), 0
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, env=child_env())
        best = min(best, time.perf_counter() - started)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{command} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        out = len(proc.stdout)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=Path("/tmp/bench-store.db"))
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--runs", type=int, default=3, help="best of this many runs per command")
    args = parser.parse_args()
    if not args.db.is_file():
        print(
            f"building {args.db} ({args.nights} nights x {len(cells())} cells x {len(jobs())} results) ...",
            file=sys.stderr,
        )
        started = time.perf_counter()
        build(args.db, args.nights)
        print(f"  built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    db = sqlite3.connect(args.db)
    results = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    a, b = (
        r[0]
        for r in db.execute(
            "SELECT run_id FROM runs WHERE machine = 'runner00' ORDER BY started_at DESC LIMIT 2"
        ).fetchall()[::-1]
    )
    db.close()
    size = sum(p.stat().st_size for p in args.db.parent.glob(args.db.name + "*")) / 2**30
    started = time.perf_counter()
    store_module.ResultStore(args.db)  # open: upgrades a store made by an older bugmatrix (once)
    opened = time.perf_counter() - started
    load = os.getloadavg()
    print(
        f"store {args.db}: {results:,} results in {runs:,} runs, {size:.2f} GiB; first open {opened:.2f} s; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores"
    )
    py = [sys.executable, "-m", "harness"]
    missing = str(args.db.parent / "no-such-matrix.yaml")
    commands = {
        "report --format markdown": [*py, "report", "--db", str(args.db), "--format", "markdown", "--matrix", missing],
        "report --format json": [*py, "report", "--db", str(args.db), "--format", "json", "--matrix", missing],
        "report --format html": [*py, "report", "--db", str(args.db), "--format", "html", "--matrix", missing],
        "compare (latest two runs)": [*py, "compare", "--db", str(args.db)],
        "compare RUN_A RUN_B (one cell, two nights)": [*py, "compare", "--db", str(args.db), a, b],
        "python -m harness --help (start-up alone)": [*py, "--help"],
    }
    subprocess.run(commands["report --format html"], cwd=ROOT, capture_output=True, env=child_env(), check=False)
    for name, command in commands.items():  # after one warm-up: the bytecode cache and the page cache are warm
        best, chars = timed(command, args.runs)
        print(f"{name:45} best of {args.runs}: {best:6.2f} s  ({chars:,} chars out)", flush=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
