"""`bugmatrix audit -r` of a 300-line `pip freeze` against a record ten times the size of a full one: whole
process, best of N.

    uv run python benchmarks/bench_audit.py [--record /tmp/bench-audit-record] [--cells 78] [--runs 5]
        [--against DIR]   # also time another checkout in the same run, e.g. `git archive <ref> | tar -x -C DIR`

The synthetic record (built once at `--record` and reused; never commit it) holds, for every case x variant of
cases/ on both devices, `--cells` cells at 1 and 2 ranks, each cell pinning the case's packages at a version of its
own (outcomes flip at a boundary in the middle, as a fix would), with the digests the committed cases give (so no
row is superseded and every row is read): 34,320 rows at 78 cells with the 48 cases of 2026-11-27, where a full
record of today's matrix is about 2,500. The freeze is 300 lines as `pip freeze` writes them: the five libraries
under test, local versions and hashes, and 295 other distributions the record does not know (each listed as not
covered).

Timed: the whole `python -m harness audit -r freeze.txt --record ... --json` process, fresh each time (its bytecode
cached), after one warm-up run that also warms the page cache; and `--help` (start-up alone) for scale. With
`--against DIR`, the same commands of that checkout (the baseline: the code before a change) run in turn with these,
so that both see the same load: on a busy machine only such a pair compares (the CPU seconds more than the wall).
Target: under 1 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.case import discover  # noqa: E402
from harness.model.job import run_digest  # noqa: E402
from harness.session.record import Record, write  # noqa: E402

LIBRARIES = {
    "torch": "2.{i}.0",
    "torchrec": "1.{i}.0",
    "fbgemm-gpu-cpu": "1.{i}.0",
    "lightning": "2.{i}.1",
    "litgpt": "0.5.{i}",
}
RUN = "20261201T000000-bench-aaaaaa"


def build(root: Path, cells: int) -> int:
    """Write the synthetic record under `root`; return its row count."""
    cases = discover(ROOT / "cases")[0]
    rows = []
    for case in cases:
        for variant in case.spec.variants:
            digest = run_digest(case, variant)
            for device in ("cpu", "cuda"):
                for i in range(cells):
                    versions = {}
                    for package in case.spec.packages:
                        dist = "fbgemm-gpu-cpu" if package == "fbgemm-gpu" and device == "cpu" else package
                        versions[dist] = LIBRARIES.get(dist, LIBRARIES["torch"]).format(i=i)
                    outcome = "reproduced" if i < cells // 2 else "fixed"
                    for nproc in (1, 2):
                        rows.append(
                            {
                                "case": case.id,
                                "variant": variant,
                                "nproc": nproc,
                                "device": device,
                                "cell": f"bench-{i}",
                                "outcome": outcome,
                                "tallies": {},
                                "reason": "",
                                "versions": versions,
                                "python": "3.11.7",
                                "fingerprint": f"{case.id}-{variant}-{i}-{device}-{nproc}",
                                "digest": digest,
                                "date": f"2026-11-{1 + i % 28:02d}T00:00:00Z",
                                "duration_s": 10.0,
                                "run": RUN,
                                "machine": "m-bench",
                                "excerpt": f"[rank 0] {outcome.upper()}: synthetic",
                            }
                        )
    write(
        root,
        Record(rows=rows, runs={RUN: {"started": "2026-11-01T00:00:00Z", "machine": "m-bench", "command": "bench"}}),
    )
    return len(rows)


def freeze(path: Path) -> None:
    """A 300-line `pip freeze` with the libraries under test pinned mid-axis (hashes, a local version)."""
    lines = [
        "torch==2.30.0+cu124 \\",
        "    --hash=sha256:" + "a" * 64,
        "torchrec==1.30.0",
        "fbgemm-gpu-cpu==1.30.0",
        "lightning==2.30.1",
        "litgpt==0.5.30",
    ]
    lines += [f"somepackage{i}=={i % 9}.{i % 7}.{i}" for i in range(295)]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    """Build (once) and time."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, default=Path("/tmp/bench-audit-record"))
    parser.add_argument("--cells", type=int, default=78)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout of bugmatrix to time in the same run")
    args = parser.parse_args()
    if not (args.record / "results").is_dir():
        started = time.perf_counter()
        count = build(args.record, args.cells)
        print(f"built {args.record}: {count:,} rows in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    rows = sum(1 for p in (args.record / "results").glob("*.jsonl") for _ in p.open())
    requirements = args.record.parent / "bench-audit-freeze.txt"
    freeze(requirements)
    py = [sys.executable, "-m", "harness"]
    # bytecode cached, as an installed bugmatrix has it (this machine sets PYTHONDONTWRITEBYTECODE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {
        "BUGMATRIX_DB": "/nonexistent/bench-audit.db",
        "PYTHONPYCACHEPREFIX": str(Path(os.environ.get("TMPDIR", "/tmp")) / "bench-audit-pycache"),
    }

    def commands(root: Path) -> dict[str, tuple[Path, list[str]]]:
        return {
            "audit -r freeze.txt (300 lines) --json": (
                root,
                [*py, "audit", "-r", str(requirements), "--record", str(args.record), "--json"],
            ),
            "python -m harness --help (start-up alone)": (root, [*py, "--help"]),
        }

    checkouts = {"": ROOT} | ({" [baseline]": args.against.resolve()} if args.against else {})
    load = os.getloadavg()
    print(
        f"record {args.record}: {rows:,} rows; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{os.cpu_count()} cores" + (f"; baseline {args.against}" if args.against else "")
    )
    for name in commands(ROOT):
        timed = {label: commands(root)[name] for label, root in checkouts.items()}
        for label, (cwd, command) in timed.items():
            warm = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, check=False)
            if warm.returncode not in (0, 1):
                sys.exit(f"{name}{label}: exit {warm.returncode}: {warm.stderr.strip()[-500:]}")
        best = dict.fromkeys(timed, float("inf"))
        cpu = dict.fromkeys(timed, float("inf"))
        for _ in range(args.runs):
            for label, (cwd, command) in timed.items():  # in turn: each sees the same load
                before = os.times()
                started = time.perf_counter()
                subprocess.run(command, cwd=cwd, capture_output=True, env=env, check=False)
                best[label] = min(best[label], time.perf_counter() - started)
                after = os.times()
                cpu[label] = min(
                    cpu[label],
                    (after.children_user - before.children_user) + (after.children_system - before.children_system),
                )
        for label in timed:
            print(
                f"{name + label:56} best of {args.runs}: {best[label]:6.2f} s wall, {cpu[label]:5.2f} s CPU", flush=True
            )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
