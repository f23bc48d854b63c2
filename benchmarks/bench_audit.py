"""`bugmatrix audit -r` of a 300-line `pip freeze`, and of a 300-package `uv.lock` holding the same pins, against a
record ten times the size of a full one: whole process, best of N.

    uv run python benchmarks/bench_audit.py [--record /tmp/bench-audit-record] [--cells 78] [--runs 5]
        [--against DIR]   # also time another checkout in the same run, e.g. `git archive <ref> | tar -x -C DIR`

The synthetic record (built once at `--record` and reused; never commit it) holds, for every case x variant of
cases/ on both devices, `--cells` cells at 1 and 2 ranks, each cell pinning the case's packages at a version of its
own (outcomes flip at a boundary in the middle, as a fix would), with the digests the committed cases give (so no
row is superseded and every row is read): 34,320 rows at 78 cells with the 48 cases of 2026-11-27, where a full
record of today's matrix is about 2,500. The freeze is 300 lines as `pip freeze` writes them: the five libraries
under test, local versions and hashes, and 295 other distributions the record does not know (each listed as not
covered). The uv.lock (written beside it, 1.2 MB) is what `uv lock` writes for a project depending on the same 300
releases: a virtual root, a dependency tree reaching every package (a tenth of the edges behind a platform marker),
sdists and 6 to 24 wheels with hashes per package, and torch resolved twice (a fork: `+cu124` on Linux, the plain
release on macOS), so the reader walks the graph and evaluates markers for this machine as it does for a user's;
its answer is checked to be the freeze's before anything is timed.

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
REGISTRY = "https://pypi.org/simple"


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


def _artifacts(name: str, version: str, wheels: int) -> list[str]:
    """A package's `sdist` and `wheels` lines as uv writes them (urls, sha256 hashes, sizes, upload times)."""
    file = name.replace("-", "_")
    stamp = 'upload-time = "2026-10-13T12:07:08.553Z"'

    def digest(tag: str) -> str:
        return (f"{name}{version}{tag}".encode().hex() * 8)[:64]

    base = "https://files.pythonhosted.org/packages/ab/cd/" + "0123456789abcdef" * 3 + "0123456789ab"
    tags = [f"cp3{10 + i % 4}-cp3{10 + i % 4}-manylinux_2_{17 + i // 4}_x86_64" for i in range(wheels)]
    lines = [
        f'sdist = {{ url = "{base}/{file}-{version}.tar.gz", hash = "sha256:{digest("sdist")}", '
        f"size = 24757, {stamp} }}",
        "wheels = [",
    ]
    lines += [
        f'    {{ url = "{base}/{file}-{version}-{tag}.whl", hash = "sha256:{digest(tag)}", size = 15038, {stamp} }},'
        for tag in tags
    ]
    return [*lines, "]"]


def uv_lock(path: Path) -> None:
    """A 300-package uv.lock with the freeze's pins (module doc): what `uv lock` writes, graph and forks included."""
    others = [(f"somepackage{i}", f"{i % 9}.{i % 7}.{i}") for i in range(295)]
    libraries = [("fbgemm-gpu-cpu", "1.30.0"), ("lightning", "2.30.1"), ("litgpt", "0.5.30"), ("torchrec", "1.30.0")]
    children = {i: [j for j in (50 + 2 * i, 51 + 2 * i) if j < len(others)] for i in range(len(others))}

    def edge(j: int) -> str:
        marker = ", marker = \"sys_platform == 'linux'\"" if j % 10 == 3 else ""
        return f'    {{ name = "{others[j][0]}"{marker} }},'

    linux, darwin = "sys_platform == 'linux'", "sys_platform != 'linux'"
    lines = ["version = 1", "revision = 3", 'requires-python = ">=3.10"', f'resolution-markers = [\n    "{linux}",']
    lines += [f'    "{darwin}",', "]", ""]
    lines += ["[[package]]", 'name = "bench-app"', 'version = "0.1.0"', 'source = { virtual = "." }']
    lines += ["dependencies = [", *(f'    {{ name = "{n}" }},' for n, _ in libraries)]
    lines += [
        f'    {{ name = "torch", version = "{v}", source = {{ registry = "{REGISTRY}" }}, marker = "{m}" }},'
        for v, m in (("2.30.0+cu124", linux), ("2.30.0", darwin))
    ]
    lines += [*(edge(j) for j in range(50)), "]", ""]
    for name, version in libraries:
        lines += [
            "[[package]]",
            f'name = "{name}"',
            f'version = "{version}"',
            f'source = {{ registry = "{REGISTRY}" }}',
        ]
        lines += ["dependencies = [", '    { name = "torch" },', *(edge(j) for j in range(4)), "]"]
        lines += [*_artifacts(name, version, 6), ""]
    for version, marker in (("2.30.0+cu124", linux), ("2.30.0", darwin)):
        lines += [
            "[[package]]",
            'name = "torch"',
            f'version = "{version}"',
            f'source = {{ registry = "{REGISTRY}" }}',
        ]
        lines += [f'resolution-markers = [\n    "{marker}",\n]', "dependencies = [", *(edge(j) for j in range(4)), "]"]
        lines += [*_artifacts("torch", version, 24)[1:], ""]  # torch: wheels only
    for i, (name, version) in enumerate(others):
        lines += [
            "[[package]]",
            f'name = "{name}"',
            f'version = "{version}"',
            f'source = {{ registry = "{REGISTRY}" }}',
        ]
        if children[i]:
            lines += ["dependencies = [", *(edge(j) for j in children[i]), "]"]
        lines += [*_artifacts(name, version, 6 + i % 12), ""]
    path.write_text("\n".join(lines))


def affected(out: str) -> list[str]:
    """The cases an `audit --json` answer lists as affected (what the lock and the freeze must agree on)."""
    import json

    return sorted(f"{a['case']}/{a['variant']}" for a in json.loads(out)["affected"])


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
    lock = args.record.parent / "bench-audit-lock" / "uv.lock"
    lock.parent.mkdir(exist_ok=True)
    uv_lock(lock)
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
            f"audit -r uv.lock ({lock.stat().st_size // 1024} KB, 300 packages) --json": (
                root,
                [*py, "audit", "-r", str(lock), "--record", str(args.record), "--json"],
            ),
            "python -m harness --help (start-up alone)": (root, [*py, "--help"]),
        }

    answers = [
        subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
        for name, (_, command) in commands(ROOT).items()
        if "audit" in name
    ]
    if any(a.returncode not in (0, 1) for a in answers) or affected(answers[0].stdout) != affected(answers[1].stdout):
        sys.exit(f"the uv.lock and the freeze answer differently: {[a.stderr.strip()[-300:] for a in answers]}")
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
