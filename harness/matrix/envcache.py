"""The environment cache: one uv virtual environment per distinct resolved cell, reused across runs.

Contract:
- An environment lives in `<root>/<key>/`, where `key` = hash of (requirements, overrides, Python, index, as_of)
  (`ResolvedCell.key`): cells with the same pins share it. `<root>/<key>/bugmatrix-env.json` is written last, so
  an environment without it does not exist.
- `build` is idempotent and safe across processes: a per-key file lock makes concurrent builders wait for the first
  one; the venv is built in a temporary folder and renamed into place, so an interrupted build leaves nothing that
  looks finished. It installs with `uv pip install` from uv's shared cache (hardlinks, so a second environment with
  the same torch costs almost no disk), with `--exclude-newer as_of` (time travel) and the cell's overrides.
- The first build of a key resolves online (the index as of `as_of`, nothing else: an offline resolution would pick
  whatever versions happen to be in uv's cache) and records the exact result (`uv pip freeze`) in
  `<root>/.resolved/<key>.txt`. Every later build of that key, after an eviction or on another run, installs that
  record with `--no-deps`: offline first (a warm cache links in well under a second), online on a cache miss; the
  same versions either way. `prune` keeps the records; deleting one makes the next build resolve again.
- After installing, an import smoke check imports every pinned package. A cell whose resolution, download or import
  fails yields `EnvStatus(ok=False, error=<uv's or the importer's message>)`; the caller records it as `infra`.
  Failures are remembered for the process only; a later run tries again.
- A process that uses an environment holds it (`hold`: a shared lock on `<root>/.<key>.use`) until it ends or
  `release`s it; `remove` and `prune` delete only what no process holds (another run's evictions or an `env
  prune` never pull an interpreter from under a launch), and say what they kept.
- `remove`/`prune` delete environments; `clean_cache` removes big packages (torch and its CUDA libraries) from uv's
  cache, holding bugmatrix's cache lock exclusively (`cache_in_use`), which every install holds shared: a clean
  in one process never pulls wheels from under an install in another. Nothing is deleted implicitly except by an
  explicit disk budget (see `harness/matrix/cellenvs.py`).
"""

from __future__ import annotations

import builtins
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness.launch import warm
from harness.launch.interpreter import Environment, InterpreterError, inspect_interpreter
from harness.launch.torchrun import run_abortable
from harness.matrix.basics import default_envs
from harness.matrix.resolve import ResolvedCell, exclude_newer

MARKER = "bugmatrix-env.json"
BUILD_TIMEOUT_S = 1800
SMOKE_TIMEOUT_S = 300
# The smoke check's first import also writes the bytecode of every package (torch, lightning, litgpt...): on a busy
# 2-core machine that took longer than 300 s (2026-11-25: the default cell and torchrec 1.2.0 were `infra` twice).
SMOKE_TIMEOUT_ENV = "BUGMATRIX_SMOKE_TIMEOUT_S"
# The packages that make up most of a torch stack's disk use in uv's cache.
BIG_PACKAGES = ("torch", "triton", "fbgemm-gpu", "fbgemm-gpu-cpu", "nvidia-*", "cuda-*")


@dataclass(frozen=True)
class EnvStatus:
    """The outcome of making one environment: usable (`ok`) with its interpreter, or the reason it is not."""

    key: str
    ok: bool
    python: str | None
    error: str = ""
    seconds: float = 0.0
    reused: bool = False


def uv_binary() -> str:
    """The uv executable: $BUGMATRIX_UV, else the locked one installed with bugmatrix, else uv on PATH."""
    if os.environ.get("BUGMATRIX_UV"):
        return os.environ["BUGMATRIX_UV"]
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv") or "uv"


def uv_command(*args: str) -> list[str]:
    """A uv command that reads no configuration file (`--no-config`): a cell's environment depends on the cell
    alone, never on the pyproject.toml or uv.toml of the folder bugmatrix runs from (the project's own
    `override-dependencies`, which drops the CUDA fbgemm-gpu from the default CPU environment, had reached every
    cell built from the repository root)."""
    return [uv_binary(), *args, "--no-config"]


def uv_cache_dir() -> Path | None:
    """uv's cache folder (the one the cells' builds use), or None when uv cannot say."""
    out = subprocess.run(uv_command("cache", "dir"), capture_output=True, text=True, check=False).stdout.strip()
    return Path(out) if out else None


def _pip_install(cell: ResolvedCell, python: Path) -> list[str]:
    """`uv pip install` into `python`'s environment from `cell`'s index, hardlinking from uv's shared cache."""
    return [
        *uv_command("pip", "install"),
        "--quiet",
        "--python",
        str(python),
        "--index-url",
        cell.cell.index_url,
        "--link-mode",
        "hardlink",
    ]


def install_command(cell: ResolvedCell, python: Path, overrides: Path, offline: bool = False) -> list[str]:
    """The `uv pip install` that puts `cell`'s requirements into the environment of `python`: uv's shared cache,
    hardlinks, the cell's index, its time-travel cutoff and its overrides (written to `overrides`)."""
    command = _pip_install(cell, python)
    if cell.as_of:
        command += ["--exclude-newer", exclude_newer(cell.as_of)]
    if offline:
        command.append("--offline")
    if cell.overrides:
        overrides.write_text("\n".join(cell.overrides) + "\n")
        command += ["--override", str(overrides)]
    return command + cell.requirements


class EnvCache:
    """Environments under one root folder (see the module docstring for the contract)."""

    def __init__(self, root: Path | None = None) -> None:
        # launches run in the case's folder: interpreters need absolute paths
        self.root = Path(root if root is not None else default_envs()).absolute()
        self.root.mkdir(parents=True, exist_ok=True)
        self._failed: dict[str, EnvStatus] = {}
        self._held: dict[str, TextIO] = {}

    def path(self, key: str) -> Path:
        return self.root / key

    def python(self, key: str) -> Path:
        return self.path(key) / "bin" / "python"

    def exists(self, key: str) -> bool:
        return (self.path(key) / MARKER).is_file()

    @contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        with open(self.root / f".{key}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def build(self, cell: ResolvedCell, offline: bool = False) -> EnvStatus:
        """The environment for `cell`, built if missing; never raises for resolver/download/import failures."""
        key = cell.key
        if key in self._failed:
            return self._failed[key]
        if self.exists(key):
            return EnvStatus(key, True, str(self.python(key)), reused=True)
        with self._lock(key):
            if self.exists(key):
                return EnvStatus(key, True, str(self.python(key)), reused=True)
            started = time.monotonic()
            error = self._build_into(cell, offline)
            status = EnvStatus(
                key,
                error is None,
                str(self.python(key)) if error is None else None,
                error or "",
                round(time.monotonic() - started, 2),
            )
        if not status.ok:
            self._failed[key] = status
        return status

    def _build_into(self, cell: ResolvedCell, offline: bool) -> str | None:
        holder = Path(tempfile.mkdtemp(prefix=f".{cell.key}.building-", dir=self.root))
        staging = holder / "env"
        try:
            error = _run(uv_command("venv", "--quiet", "--python", cell.cell.python, str(staging)), BUILD_TIMEOUT_S)
            if error:
                return f"uv failed: {error}"
            python = staging / "bin" / "python"
            record = self.resolution(cell.key)
            with cache_in_use(shared=True):  # a disk-budget clean in any bugmatrix process waits for this install
                error = self._install(cell, python, record, holder / "overrides.txt", offline)
            if error:
                return f"uv failed: {error}"
            smoke = "; ".join(f"import {name}" for name in cell.imports) or "pass"
            error = _run([str(staging / "bin" / "python"), "-c", smoke], smoke_timeout())
            if error:
                hint = f" (a busy machine: set ${SMOKE_TIMEOUT_ENV} to wait longer)" if "timed out" in error else ""
                return f"import smoke check failed ({smoke}): {error}{hint}"
            (staging / MARKER).write_text(
                json.dumps(
                    {
                        "key": cell.key,
                        "cell": cell.cell.name,
                        "versions": cell.versions,
                        "requirements": cell.requirements,
                        "overrides": cell.overrides,
                        "as_of": cell.as_of.isoformat() if cell.as_of else None,
                        "built_at": time.time(),
                    },
                    indent=2,
                )
            )
            if not record.is_file() and not offline:
                self._record_resolution(record, python)
            target = self.path(cell.key)
            if target.exists():  # a stale, unfinished folder from an interrupted build
                shutil.rmtree(target)
            staging.rename(target)
            return None
        finally:
            shutil.rmtree(holder, ignore_errors=True)

    @staticmethod
    def _install(cell: ResolvedCell, python: Path, record: Path, overrides: Path, offline: bool) -> str | None:
        if not record.is_file():  # first build of this key: resolve (online, unless told otherwise)
            return _run(install_command(cell, python, overrides, offline=offline), BUILD_TIMEOUT_S)
        # the versions this key resolved to the first time: offline first, online on a cache miss, same pins
        frozen = [*_pip_install(cell, python), "--no-deps", "-r", str(record)]
        error = _run([*frozen, "--offline"], BUILD_TIMEOUT_S)
        if error and not offline:
            error = _run(frozen, BUILD_TIMEOUT_S)
        return error

    def resolution(self, key: str) -> Path:
        """Where the exact versions that `key` resolved to are recorded (see the module docstring)."""
        return self.root / ".resolved" / f"{key}.txt"

    def _record_resolution(self, record: Path, python: Path) -> None:
        frozen = subprocess.run(
            uv_command("pip", "freeze", "--python", str(python)), capture_output=True, text=True, check=False
        )
        if frozen.returncode != 0 or not frozen.stdout.strip():
            return  # nothing recorded: the next build resolves again
        record.parent.mkdir(parents=True, exist_ok=True)
        partial = record.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(frozen.stdout)
        partial.replace(record)

    def environment(self, key: str) -> Environment:
        """What the environment `key` has installed; raises `InterpreterError` if it cannot be started."""
        return inspect_interpreter(self.python(key))

    def list(self) -> list[dict[str, Any]]:
        """Every built environment's record (key, cell, versions, as_of, built_at)."""
        out = []
        for marker in sorted(self.root.glob(f"*/{MARKER}")):
            try:
                out.append(json.loads(marker.read_text()))
            except (OSError, ValueError):
                continue
        return out

    def hold(self, key: str) -> None:
        """Mark `key`'s environment in use by this process (until `release` or the process ends): no `remove` or
        `prune`, in this process or another, deletes it meanwhile."""
        if key in self._held:
            return
        fh = open(self.root / f".{key}.use", "w")  # noqa: SIM115  # held open: the lock lives as long as the file
        fcntl.flock(fh, fcntl.LOCK_SH)
        self._held[key] = fh

    def release(self, key: str) -> None:
        """This process no longer uses `key`'s environment."""
        fh = self._held.pop(key, None)
        if fh is not None:
            fh.close()  # closing drops the lock

    def remove(self, key: str) -> bool:
        """Delete one environment (its files are hardlinks into uv's cache, which keeps the packages), unless
        another process holds it (then False: it is kept). This process's own hold is dropped first."""
        self.release(key)
        with open(self.root / f".{key}.use", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            warm.retire(under=self.path(key))  # a warm parent of this environment would keep its files on disk
            shutil.rmtree(self.path(key), ignore_errors=True)
            return True

    def prune(self, keep: set[str]) -> builtins.list[str]:  # `list` here is the method above
        """Delete every environment whose key is not in `keep` and that no process holds, and leftovers of
        interrupted builds; returns the names removed."""
        removed = []
        for folder in self.root.iterdir():
            if not folder.is_dir() or folder.name in keep or folder.name == ".resolved":
                continue
            if folder.name.startswith("."):  # .<key>.building-*: a build in progress holds its key's build lock
                key = folder.name[1:].partition(".building-")[0]
                with open(self.root / f".{key}.lock", "w") as fh:
                    try:
                        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    shutil.rmtree(folder, ignore_errors=True)
            elif not self.remove(folder.name):
                continue
            removed.append(folder.name)
        return removed


@contextmanager
def cache_in_use(shared: bool) -> Iterator[None]:
    """An inter-process lock on uv's cache among bugmatrix processes: installs hold it shared, `clean_cache`
    exclusively, so a disk-budget clean never deletes wheels under an install in progress (in any process)."""
    lock_dir = Path(os.environ.get("BUGMATRIX_LOCKS", Path(tempfile.gettempdir()) / "bugmatrix-locks"))
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / "uv-cache.lock"
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, mode | fcntl.LOCK_NB)
        except BlockingIOError:  # say why nothing happens: the wait can last as long as another run's install
            held = "a clean of uv's cache (a --disk-budget)" if shared else "installs in progress"
            sys.stderr.write(
                f"waiting for {held} in another bugmatrix process to finish ({path}); "
                f"{'installing' if shared else 'cleaning uv cache'} afterwards\n"
            )
            sys.stderr.flush()
            fcntl.flock(fh, mode)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def clean_cache(packages: tuple[str, ...] = BIG_PACKAGES) -> str:
    """Remove `packages` (glob patterns allowed) from uv's cache; returns uv's message."""
    listing = uv_cache_dir()
    names = set()
    for pattern in packages:
        if "*" not in pattern:
            names.add(pattern)
            continue
        # uv keeps PyPI's wheels under wheels-*/pypi/<name> and another index's (a mirror, $BUGMATRIX_INDEX_URL)
        # under wheels-*/index/<hash>/<name>, the name normalized (nvidia-cublas-cu12; older layouts used `_`)
        for form in {pattern.lower(), pattern.replace("-", "_").lower()}:
            for where in ("wheels-*/pypi/", "wheels-*/index/*/"):
                for wheel_dir in listing.glob(where + form) if listing else ():
                    names.add(wheel_dir.name.replace("_", "-"))
    if not names:
        return ""
    # --force: without it uv waits for every process using the cache to exit, and `uv run bugmatrix ...` (our own
    # parent) holds it for as long as the run lasts: the disk budget deadlocked. Instead, bugmatrix's own lock keeps
    # the clean away from installs in progress (environments already built keep their hardlinks).
    try:
        with cache_in_use(shared=False):
            proc = run_abortable(uv_command("cache", "clean", "--force", *sorted(names)), 600)
            # `cache clean NAME` drops uv's entries for NAME but leaves the unpacked wheels (archive-v0), which hold
            # the bytes: measured, it freed 2 MiB of a 29 GiB cache; `prune` removes the now unreferenced ones.
            pruned = run_abortable(uv_command("cache", "prune", "--force"), 600)
    except subprocess.TimeoutExpired:
        return "uv cache clean: timed out after 600 s; nothing more was cleaned"
    return (proc.stdout + proc.stderr + pruned.stdout + pruned.stderr).strip()


def _inodes(path: Path) -> Iterator[os.stat_result]:
    """The stat of every file under `path`, each inode once (a hardlinked file is one file)."""
    seen: set[tuple[int, int]] = set()
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                yield st


def disk_usage(path: Path) -> int:
    """Bytes used under `path`, counting each hardlinked file once."""
    return disk_tally(path)[0]


def disk_tally(path: Path) -> tuple[int, int]:
    """(bytes used under `path`, bytes of those held by files no other path links), in one walk, each inode once. The
    second is what deleting the folder's files frees: in uv's cache, a wheel an environment was installed from stays
    linked from that environment, so cleaning it frees nothing until the environment goes too."""
    used = unlinked = 0
    for st in _inodes(path):
        used += st.st_blocks * 512
        if st.st_nlink == 1:
            unlinked += st.st_blocks * 512
    return used, unlinked


def smoke_timeout() -> float:
    """Seconds the import smoke check may take: $BUGMATRIX_SMOKE_TIMEOUT_S, else SMOKE_TIMEOUT_S."""
    text = os.environ.get(SMOKE_TIMEOUT_ENV, "")
    try:
        return float(text) if text else SMOKE_TIMEOUT_S
    except ValueError:
        raise ValueError(f"${SMOKE_TIMEOUT_ENV}: not a number of seconds: {text!r}") from None


def _run(command: list[str], timeout: float) -> str | None:
    """None on success, else the last lines of the command's output (or why it could not run)."""
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # the smoke check's
        proc = run_abortable(command, timeout, stdin=subprocess.DEVNULL, env=env)  # imports leave bytecode
        # for every later launch; Ctrl-C kills the build at once (LaunchAborted), never recorded as a failed cell
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f}s: {' '.join(command[:4])} ..."
    except OSError as exc:
        return f"{command[0]}: {exc.strerror}"
    if proc.returncode == 0:
        return None
    text = (proc.stderr or proc.stdout).strip().splitlines()
    code = f"exit {proc.returncode}" if proc.returncode > 0 else f"killed by signal {-proc.returncode}"
    tail = [line.strip() for line in text[-6:] if line.strip()]
    # a chained error's cause (the undefined symbol behind "Could not load this library") is above the last lines
    cause = next((line.strip() for line in text[:-6] if "undefined symbol" in line), None)
    return f"{code}: " + " | ".join(([cause] if cause else []) + tail)


__all__ = ["EnvCache", "EnvStatus", "InterpreterError", "clean_cache", "disk_tally", "disk_usage", "uv_binary"]
