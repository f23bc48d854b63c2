"""The GPU kit: everything a lent GPU machine (its own python3 with torch, no network, transfers of <= 64 MiB) needs
to run the catalogue, and the one command that runs it there. docs/gpu-kit.md is the walk-through.

    # here, with a package index (~10 min on 2 cores, most of it slimming fbgemm-gpu); it prints the calls below:
    uv run python tools/gpu_kit.py prepare .kit
    # there, device calls back to back (the stash lasts while the machine is held), each carrying one piece:
    python3 tools/gpu_kit.py receive .kit/piece-1 && python3 tools/gpu_kit.py run --steps a two-rank bench
    python3 tools/gpu_kit.py receive .kit/piece-K           # each middle piece, if there are more than two
    python3 tools/gpu_kit.py run --steps b report           # carrying the last piece
    # here, with the files the last call brought back:
    uv run bugmatrix record fold <files_at>/kit.db --cell h100-torch-2.11.0+cu130 --pin torch=2.11.0+cu130

`prepare` writes the bundle (tools/offline_bundle.py: the harness's runtime, plus litgpt and its CLI extras), the
torchrec 1.6.1 stack without its fbgemm, and fbgemm-gpu 1.6.0's CUDA wheel slimmed to one architecture
(tools/slim_cuda_wheel.py), cut into pieces of at most --piece-mib (default 56: a piece and the working tree
travel together under the tool's 64 MiB). Every piece holds the same kit.json: each file's size and sha256 and which
segment of it each piece holds.

`receive` copies a piece into a stash outside the checkout (default /tmp/bugmatrix-kit), which lasts as long as the
machine is held. `run` reassembles and checks the files it has (stash and carried pieces), installs them into private
folders (no index), records the machine (machine.json: GPU model, driver, CUDA, NCCL, CPU model and cores, torch,
Python; CUDA and NCCL also go into the store's run through $BUGMATRIX_MACHINE), then runs its steps:
  a         every torch, lightning and litgpt case at world size 1 with --repeat 3, the image's own packages
  b         every torchrec and fbgemm case the same way, with torchrec's pins and the slimmed fbgemm-gpu (a folder of
            its own: torchmetrics 1.0.3 would shadow the image's for lightning)
  two-rank  a 2-rank job, which on a one-GPU machine must be a `skip` decided before any launch
  bench     benchmarks/bench_launch_overhead.py, 7 pairs (overhead.txt)
  report    report.md over the store
The store (kit.db) and kit.log (every step's command, exit code and wall time) stay in the stash and are copied into
--out ($OUT) by each call, with machine.json and the steps' own files: at most 8 files, as $OUT allows. Two calls of
about 6 and 3 minutes keep each under the tool's 10 minutes. $BUGMATRIX_DEVICE=cpu runs the same on a machine
without a GPU (tests/test_gpu_kit.py does, with a stand-in fbgemm wheel and a subset of the cases).

Exit codes: 0 every step ran (the cases' own verdicts are in the store and report, not in this code); 1 a step
failed or the 2-rank answer was not a fast skip on a GPU machine; 2 bad input (a missing or corrupt piece: named).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import slim_cuda_wheel  # noqa: E402

STASH = Path("/tmp/bugmatrix-kit")
MANIFEST = "kit.json"
PIECE_MIB = 56
# What the H100 run of 2026-11-24 carried beside the image (../shared/gpu/README.md): litgpt with its CLI extras ...
LITGPT = ["litgpt==0.5.13", "jsonargparse==4.41.0", "docstring-parser==0.18.0", "typeshed-client==2.14.0"]
# ... and, in a folder of their own, torchrec's stack with the CUDA fbgemm-gpu it was built against.
TORCHREC = ["torchrec==1.6.1", "tensordict==0.15.3", "torchmetrics==1.0.3", "pyvers==0.2.3"]
TORCHREC_FROM_SOURCE = ["iopath==0.1.10"]  # PyPI has no wheel of it: built here (pure Python)
FBGEMM = "fbgemm-gpu==1.6.0"
SECOND_PASS = ("torchrec-", "fbgemm-")  # cases that need torchrec's folder (fbgemm-gpu, torchrec and their pins)
TWO_RANK = ("torch-177844-fsdp2-nonfloat-param", "bug")
BENCH = ("torch-177844-fsdp2-nonfloat-param", "bug")  # the pairing the H100 overhead figure (1.18x) used
FAST_SKIP_S = 20.0  # a 2-rank job on a one-GPU machine must be answered within this (decided before any launch)


class KitError(Exception):
    """Bad input: a missing or corrupt piece, a folder that is not a kit (one line, exit 2)."""


def sha256(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------------------------------ prepare


def cut(files: list[tuple[str, Path]], piece_bytes: int) -> dict:
    """The manifest that cuts `files` (kit name, path here), in order, into pieces of at most `piece_bytes`: the
    files are laid end to end and cut at piece boundaries, so a piece holds segments (file, offset, length)."""
    manifest: dict = {"files": {}, "pieces": [[]]}
    room = piece_bytes
    for name, path in files:
        data = path.read_bytes()
        manifest["files"][name] = {"size": len(data), "sha256": sha256(data)}
        offset = 0
        while True:
            if room == 0:
                manifest["pieces"].append([])
                room = piece_bytes
            length = min(room, len(data) - offset)
            piece = manifest["pieces"][-1]
            piece.append(
                {
                    "file": name,
                    "offset": offset,
                    "length": length,
                    "segment": f"seg-{len(manifest['pieces']):02d}-{len(piece):03d}",
                }
            )
            offset, room = offset + length, room - length
            if offset >= len(data):
                break
    manifest["kit"] = sha256(json.dumps(manifest["files"], sort_keys=True).encode())[:12]
    return manifest


def write_pieces(manifest: dict, files: dict[str, Path], out: Path) -> list[Path]:
    """Write each piece's folder (its segments and the whole manifest) under `out`; the folders."""
    folders = []
    for k, piece in enumerate(manifest["pieces"], start=1):
        folder = out / f"piece-{k}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for seg in piece:
            with open(files[seg["file"]], "rb") as fh:
                fh.seek(seg["offset"])
                (folder / seg["segment"]).write_bytes(fh.read(seg["length"]))
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        folders.append(folder)
    return folders


def prepare(
    out: Path,
    fbgemm_wheel: Path | None,
    sm: int,
    piece_bytes: int,
    python_version: str,
    bundle: Path | None = None,
    torchrec: Path | None = None,
) -> list[Path]:
    """Download (or take) the kit's files, slim fbgemm-gpu, and write the pieces under `out`; the piece folders.
    `bundle` / `torchrec`: folders of wheels to carry instead of downloading them (tests, or a second kit)."""
    import offline_bundle

    with tempfile.TemporaryDirectory(prefix="gpu-kit-") as tmp:
        staging = Path(tmp)
        if bundle is None:
            bundle = staging / "bundle"
            extra = [arg for spec in LITGPT for arg in ("--with", spec)]
            offline_bundle.main([str(bundle), "--python-version", python_version, *extra])
        if torchrec is None:
            torchrec = staging / "torchrec"
            torchrec.mkdir()
            offline_bundle.pip_download(TORCHREC, torchrec, python_version, deps=False)
            subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(torchrec), *TORCHREC_FROM_SOURCE],
                check=True,
            )
        if fbgemm_wheel is None:
            offline_bundle.pip_download([FBGEMM], staging / "fbgemm", python_version, deps=False)
            fbgemm_wheel = next((staging / "fbgemm").glob("*.whl"))
        slimmed = slim_cuda_wheel.slim(fbgemm_wheel, sm)
        packed = staging / f"fbgemm-sm{sm}.tar.xz"
        packed.write_bytes(slimmed.packed)
        print(
            f"{fbgemm_wheel.name}: sm_{sm} kept {slimmed.kept / 2**20:.0f} MiB of device code, zeroed "
            f"{slimmed.zeroed / 2**20:.0f} MiB; {len(slimmed.packed) / 2**20:.1f} MiB of tar.xz"
        )
        files = {f"bundle/{p.name}": p for p in sorted(bundle.glob("*.whl"))}
        files |= {f"torchrec/{p.name}": p for p in sorted(torchrec.glob("*.whl"))}
        files["fbgemm.tar.xz"] = packed  # last: the first piece holds all the first pass needs
        manifest = cut(list(files.items()), piece_bytes)
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob("piece-*"):
            shutil.rmtree(stale)
        folders = write_pieces(manifest, files, out)
    for folder in folders:
        size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
        print(f"{folder}: {size:.1f} MiB")
    print("device calls, back to back (`run` tool: carry the piece, then the command):")
    for line in device_calls(folders):
        print("  " + line)
    return folders


def device_calls(folders: list[Path]) -> list[str]:
    """The device calls that send `folders` and run the kit: 'carry [PIECE]: COMMAND', one per piece."""
    kit = "python3 tools/gpu_kit.py"
    calls = []
    for k, folder in enumerate(folders):
        piece = os.path.relpath(folder, ROOT)
        if k == 0:
            command = f"{kit} receive {piece} && {kit} run --steps a two-rank bench"
        elif k < len(folders) - 1:
            command = f"{kit} receive {piece}"
        else:
            command = f"{kit} run --steps b report"
        calls.append(f"carry [{piece}]: {command}")
    if len(folders) == 1:
        calls[0] = calls[0].replace(" --steps a two-rank bench", "")
    return calls


# ------------------------------------------------------------------------------------------------------ receive


def receive(piece: Path, stash: Path) -> int:
    """Check a piece's segments against its manifest and copy them into `stash`; how many segments."""
    try:
        manifest = json.loads((piece / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise KitError(f"{piece}: not a kit piece ({exc})") from None
    stash.mkdir(parents=True, exist_ok=True)
    if _kit_id(stash) not in (None, manifest["kit"]):  # an older kit's segments: same names, other bytes
        for stale in [*stash.glob("seg-*"), stash / MANIFEST]:
            stale.unlink()
    own = [seg for p in manifest["pieces"] for seg in p if (piece / seg["segment"]).exists()]
    if not own:
        raise KitError(f"{piece}: holds none of its manifest's segments")
    for seg in own:
        shutil.copyfile(piece / seg["segment"], stash / seg["segment"])
    shutil.copyfile(piece / MANIFEST, stash / MANIFEST)
    return len(own)


def _kit_id(folder: Path) -> str | None:
    try:
        return json.loads((folder / MANIFEST).read_text())["kit"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def assemble(stash: Path, places: list[Path]) -> tuple[dict[str, Path], list[str]]:
    """Reassemble the kit's files from segments found in `stash` or `places` (the stash's kit, else the first
    place's; a folder of another kit is left alone), each checked against its sha256; (the complete files by kit
    name, what is missing: 'piece K' per absent piece)."""
    manifest_at = next((p / MANIFEST for p in [stash, *places] if _kit_id(p)), None)
    if manifest_at is None:
        raise KitError(
            f"no {MANIFEST} in {stash} or {', '.join(map(str, places)) or 'the checkout'}: "
            "send the pieces first (`gpu_kit.py receive`)"
        )
    manifest = json.loads(manifest_at.read_text())
    where = {}
    for folder in [p for p in [*places, stash] if _kit_id(p) == manifest["kit"]]:
        for seg_file in folder.glob("seg-*"):
            where[seg_file.name] = seg_file
    files_dir = stash / "files"
    done: dict[str, Path] = {}
    missing_pieces = sorted(
        {k for k, piece in enumerate(manifest["pieces"], 1) for seg in piece if seg["segment"] not in where}
    )
    for name, info in manifest["files"].items():
        segments = [seg for piece in manifest["pieces"] for seg in piece if seg["file"] == name]
        if any(seg["segment"] not in where for seg in segments):
            continue
        data = b"".join(where[seg["segment"]].read_bytes() for seg in sorted(segments, key=lambda s: s["offset"]))
        if sha256(data) != info["sha256"]:
            raise KitError(
                f"{name}: reassembled file does not match its sha256 in {manifest_at}: send its pieces again"
            )
        target = files_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        done[name] = target
    return done, [f"piece {k}" for k in missing_pieces]


# ---------------------------------------------------------------------------------------------------------- run


class Log:
    """kit.log: one line per step (command, exit code, wall time), echoed to stdout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def say(self, line: str) -> None:
        """Append a line (and print it)."""
        print(line, flush=True)
        with self.path.open("a") as fh:
            fh.write(line + "\n")

    def step(
        self, name: str, command: list[str], env: dict[str, str], stdout: Path | None = None, timeout: float = 1800
    ) -> tuple[int, float, str]:
        """Run one step; (exit code, seconds, its output's tail). Output goes to `stdout` when given."""
        started = time.monotonic()
        with open(stdout, "w") if stdout else tempfile.TemporaryFile("w+") as out:
            try:
                proc = subprocess.run(
                    command,
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
                code, err = proc.returncode, proc.stderr
            except subprocess.TimeoutExpired:
                code, err = 124, f"timed out after {timeout:.0f} s"
            if not stdout:
                out.seek(0)
                err = out.read() + err
        took = time.monotonic() - started
        shown = " ".join(c if len(c) < 80 else c[:77] + "..." for c in command)
        self.say(f"[{name}] exit {code} in {took:.1f} s: {shown}")
        return code, took, err[-3000:]


PROBE = """
import json, platform
out = {"python": platform.python_version()}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    available = torch.cuda.is_available()
    out["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if available else None
    out["torch_gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if available else []
except Exception as exc:  # report it: the machine file says what could not be read
    out["torch_error"] = repr(exc)[:300]
print(json.dumps(out))
"""
MACHINE = "import json; from harness.launch.interpreter import machine_info; print(json.dumps(machine_info()))"


def install(python: str, wheels: list[Path], site: Path, log: Log, env: dict[str, str]) -> bool:
    """pip-install `wheels` into `site` with no index and no dependencies; False when pip failed."""
    site.mkdir(parents=True, exist_ok=True)
    if not wheels:
        return True
    code, _, tail = log.step(
        f"install {site.name}",
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(site),
            *map(str, wheels),
        ],
        env,
    )
    if code:
        log.say(tail)
    return code == 0


def cell_name(machine: dict) -> str:
    """A name for the record's cell: the GPU's short model and the torch build, e.g. h100-torch-2.11.0+cu130."""
    gpus = machine.get("gpu") or []
    model = next((w.lower() for g in gpus for w in str(g).split() if w[:1] in "HABLV" and w[1:2].isdigit()), None)
    return f"{model or ('gpu' if gpus else 'cpu')}-torch-{machine.get('torch', 'unknown')}"


def case_ids(cases: list[str] | None) -> tuple[list[str], list[str]]:
    """The catalogue's case folders (or those containing one of `cases`), split into the two passes."""
    names = sorted(p.parent.name for p in (ROOT / "cases").glob("*/case.yaml"))
    if cases:
        names = [n for n in names if any(c in n for c in cases)]
    second = [n for n in names if n.startswith(SECOND_PASS)]
    return [n for n in names if n not in second], second


STEPS = ("a", "b", "two-rank", "bench", "report")


def run(
    out: Path,
    stash: Path,
    pieces: list[Path],
    device: str,
    python: str,
    repeat: int,
    jobs: int,
    cases: list[str] | None,
    variants: list[str] | None,
    two_rank: tuple[str, str],
    bench: tuple[str, str],
    bench_runs: int,
    steps: tuple[str, ...] = STEPS,
) -> int:
    """The GPU session's work (see the module doc): the machine, then `steps` in order; the exit code. The store and
    kit.log live in the stash, so that a second call (another piece, other steps) adds to them; each call copies
    them into `out` ($OUT is emptied before every call)."""
    out.mkdir(parents=True, exist_ok=True)
    log = Log(stash / "kit.log")
    files, missing = assemble(stash, pieces)
    bundle = [p for n, p in sorted(files.items()) if n.startswith("bundle/")]
    torchrec = [p for n, p in sorted(files.items()) if n.startswith("torchrec/")]
    log.say(
        f"kit: {len(files)} file(s) complete"
        + (f"; missing: {', '.join(missing)}" if missing else "")
        + f"; steps: {' '.join(steps)}"
    )
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base.update(PYTHONUNBUFFERED="1")
    failed = False

    site_a, site_b = stash / "site-a", stash / "site-b"
    ok_a = _site(python, site_a, bundle, None, log, base)
    ok_b = (
        "b" in steps
        and "fbgemm.tar.xz" in files
        and _site(python, site_b, bundle + torchrec, files["fbgemm.tar.xz"], log, base)
    )
    env_a = {**base, "PYTHONPATH": f"{site_a}{os.pathsep}{ROOT}"}
    env_b = {**base, "PYTHONPATH": f"{site_b}{os.pathsep}{ROOT}"}

    # the machine, read once per call (a torch import: seconds), so that the harness need not on its launch path
    probe = _json_of(log, "probe torch", [python, "-c", PROBE], env_a, stash / "probe.json")
    extra = {k: probe[k] for k in ("cuda", "nccl") if probe.get(k)}
    env_a["BUGMATRIX_MACHINE"] = env_b["BUGMATRIX_MACHINE"] = json.dumps(extra, sort_keys=True)
    machine = _json_of(log, "machine", [python, "-c", MACHINE], env_a, stash / "machine-info.json")
    machine |= {k: v for k, v in probe.items() if k not in machine and v not in (None, [])}
    (stash / "machine.json").write_text(json.dumps(machine, indent=1, sort_keys=True) + "\n")
    log.say("machine: " + json.dumps(machine, sort_keys=True))

    db = stash / "kit.db"
    first, second = case_ids(cases)
    harness = [
        python,
        "-m",
        "harness",
        "run",
        "--device",
        device,
        "--python",
        python,
        "--nproc",
        "1",
        "--repeat",
        str(repeat),
        "-j",
        str(jobs),
        "--redo",
        "--db",
        str(db),
        "--json",
    ]
    harness += [arg for v in variants or [] for arg in ("--variant", v)]
    for step, selected, env, ok in (("a", first, env_a, ok_a), ("b", second, env_b, ok_b)):
        if step not in steps or not selected:
            continue
        name = f"pass-{step}"
        if not ok:
            log.say(
                f"[{name}] not run: its files are missing or did not install "
                f"({', '.join(missing) or 'see the install line above'}): send the missing pieces first"
            )
            failed = True
            continue
        code, _, tail = log.step(name, [*harness, *selected], env, stdout=out / f"{name}.json")
        summary = _summary(out / f"{name}.json")
        log.say(f"[{name}] {summary}" if summary else f"[{name}] {tail.strip()[-500:]}")
        failed |= code not in (0, 1, 5)  # 1: some verdict not as expected (the store says which); 5: none ran

    if "two-rank" in steps:  # on a machine with fewer GPUs: a skip decided before any launch
        case, variant = two_rank
        code, took, tail = log.step(
            "world-size-2",
            [
                python,
                "-m",
                "harness",
                "run",
                case,
                "--variant",
                variant,
                "--nproc",
                "2",
                "--device",
                device,
                "--python",
                python,
                "--redo",
                "--db",
                str(db),
                "--json",
            ],
            env_a,
            stdout=out / "world-size-2.json",
        )
        verdict = _two_rank(out / "world-size-2.json", took, device, machine)
        log.say(f"[world-size-2] {verdict}")
        failed |= verdict.startswith("NOT")

    if "bench" in steps and bench_runs > 0:  # the harness's cost against bare torchrun
        case, variant = bench
        code, _, tail = log.step(
            "overhead",
            [
                python,
                "benchmarks/bench_launch_overhead.py",
                "--case",
                case,
                "--variant",
                variant,
                "--nproc",
                "1",
                "--device",
                device,
                "--runs",
                str(bench_runs),
                "--batch",
                "1",
            ],
            env_a,
            stdout=out / "overhead.txt",
        )
        lines = (out / "overhead.txt").read_text().strip().splitlines()
        log.say(f"[overhead] {lines[-1] if lines else tail.strip()[-500:]}")
        failed |= code != 0

    if "report" in steps:  # over the store; no matrix: nothing may reach for a package index
        log.step(
            "report",
            [
                python,
                "-m",
                "harness",
                "report",
                "--db",
                str(db),
                "--matrix",
                str(stash / "no-matrix.yaml"),
                "--format",
                "markdown",
                "-o",
                str(out / "report.md"),
            ],
            env_a,
        )
    pin = f" --pin torch={machine['torch']}" if machine.get("torch") else ""  # the build tag the metadata lacks
    log.say(f"fold it here: uv run bugmatrix record fold <files_at>/kit.db --cell {cell_name(machine)}{pin}")
    for name in ("kit.db", "kit.log", "machine.json"):
        if (stash / name).exists():
            shutil.copyfile(stash / name, out / name)
    return 1 if failed else 0


def _site(python: str, site: Path, wheels: list[Path], fbgemm: Path | None, log: Log, env: dict[str, str]) -> bool:
    """Install `wheels` (and unpack the slimmed fbgemm) into a fresh `site`; False when that failed."""
    shutil.rmtree(site, ignore_errors=True)
    ok = install(python, wheels, site, log, env)
    if ok and fbgemm is not None:
        started = time.monotonic()
        names = slim_cuda_wheel.unpack(fbgemm, site)
        log.say(f"[unpack fbgemm] {', '.join(names)} in {time.monotonic() - started:.1f} s")
    listed = sorted(p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info"))
    log.say(f"[{site.name}] {', '.join(listed) or 'nothing installed'}")
    return ok


def _json_of(log: Log, name: str, command: list[str], env: dict[str, str], path: Path) -> dict:
    """Run a step that prints one JSON object; the object ({} when it failed: the log says why)."""
    code, _, tail = log.step(name, command, env, stdout=path)
    try:
        return json.loads(path.read_text()) if code == 0 else {}
    except (OSError, ValueError):
        log.say(tail)
        return {}


def _summary(path: Path) -> str:
    """'N results: outcome counts; M not as expected' from a `run --json` file ('' when it is not one)."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    results = payload.get("results", [])
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    missed = [
        f"{r['case']}::{r['variant']} {r['outcome']} (expected {r['expected']})"
        for r in results
        if r.get("expected") and r["outcome"] not in ("skip",) and r["outcome"] != r["expected"]
    ]
    line = f"{len(results)} results: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return line + (f"; not as expected: {'; '.join(missed)}" if missed else "; all as expected")


def _two_rank(path: Path, took: float, device: str, machine: dict) -> str:
    """What the 2-rank job came to, and on a GPU machine with one GPU whether that was the fast skip it must be."""
    try:
        result = json.loads(path.read_text())["results"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return f"NOT ANSWERED: no result in {path.name} ({took:.1f} s)"
    said = f"{result['outcome']} in {took:.1f} s (launched: {result.get('launched')}): {result.get('reason', '')}"
    if device != "cuda" or len(machine.get("gpu") or []) >= 2:
        return said
    fast = result["outcome"] == "skip" and not result.get("launched") and took <= FAST_SKIP_S
    return ("fast skip confirmed: " if fast else f"NOT the fast skip expected (<= {FAST_SKIP_S:.0f} s): ") + said


# --------------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """prepare | receive | run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("prepare", help="here: write the kit's pieces (needs a package index)")
    p.add_argument("out", type=Path, nargs="?", default=ROOT / ".kit", help="the kit folder (default .kit, ignored)")
    p.add_argument("--fbgemm-wheel", type=Path, help=f"a {FBGEMM} CUDA wheel already here (default: download it)")
    p.add_argument("--sm", type=int, default=90, help="the GPU architecture to keep (90: H100/H200)")
    p.add_argument("--piece-mib", type=float, default=PIECE_MIB, help=f"the size of a piece (default {PIECE_MIB})")
    p.add_argument("--python-version", default="3.12", help="the GPU image's Python (default 3.12)")
    p.add_argument("--bundle", type=Path, help="a folder of wheels to carry instead of the downloaded bundle")
    p.add_argument("--torchrec", type=Path, help="a folder of wheels to carry instead of the torchrec stack")
    r = steps.add_parser("receive", help="there: put one piece into the stash")
    r.add_argument("piece", type=Path)
    r.add_argument("--stash", type=Path, default=STASH)
    u = steps.add_parser("run", help="there: run everything (see the module doc)")
    u.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bugmatrix-kit-out"))
    u.add_argument("--stash", type=Path, default=STASH)
    u.add_argument(
        "--device",
        default=os.environ.get("BUGMATRIX_DEVICE") or "cuda",
        help="cpu or cuda (default $BUGMATRIX_DEVICE, else cuda)",
    )
    u.add_argument("--python", default=sys.executable, help="the interpreter with torch (default: this one)")
    u.add_argument("--repeat", type=int, default=3)
    u.add_argument("-j", "--jobs", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    u.add_argument("--cases", nargs="*", help="only the cases whose folder contains one of these (default: all)")
    u.add_argument("--variant", nargs="*", help="only these variants (default: all)")
    u.add_argument("--two-rank", nargs=2, default=list(TWO_RANK), metavar=("CASE", "VARIANT"))
    u.add_argument(
        "--pieces",
        type=Path,
        nargs="*",
        default=sorted((ROOT / ".kit").glob("piece-*")),
        help="piece folders carried with this call (default .kit/piece-*), besides the stash",
    )
    u.add_argument("--bench", nargs=2, default=list(BENCH), metavar=("CASE", "VARIANT"))
    u.add_argument("--bench-runs", type=int, default=7, help="overhead pairs (0: no benchmark)")
    u.add_argument(
        "--steps",
        nargs="+",
        choices=STEPS,
        default=list(STEPS),
        help="a: the torch, lightning, litgpt cases; b: torchrec and fbgemm; two-rank; bench; report (default: all)",
    )
    args = parser.parse_args(argv)
    try:
        if args.step == "prepare":
            if args.fbgemm_wheel and not args.fbgemm_wheel.is_file():
                raise KitError(f"--fbgemm-wheel {args.fbgemm_wheel}: no such file")
            prepare(
                args.out,
                args.fbgemm_wheel,
                args.sm,
                int(args.piece_mib * 2**20),
                args.python_version,
                args.bundle,
                args.torchrec,
            )
            return 0
        if args.step == "receive":
            print(f"{args.piece}: {receive(args.piece, args.stash)} segment(s) into {args.stash}")
            return 0
        if args.device not in ("cpu", "cuda"):
            raise KitError(f"$BUGMATRIX_DEVICE={args.device}: expected cpu or cuda")
        return run(
            args.out,
            args.stash,
            args.pieces,
            args.device,
            args.python,
            args.repeat,
            args.jobs,
            args.cases,
            args.variant,
            tuple(args.two_rank),
            tuple(args.bench),
            args.bench_runs,
            tuple(args.steps),
        )
    except KitError as exc:
        print(f"gpu_kit: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:  # pip could not fetch or build a wheel: its own output says why
        print(f"gpu_kit: {' '.join(map(str, exc.cmd[:4]))} ... exited {exc.returncode}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
