"""What an interpreter has installed (versions and git commits) and which devices this machine offers.

The inspection runs in the target interpreter with only the standard library, so it costs ~0.1 s, never imports torch,
and works on any environment the harness launches cases in.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging.utils import canonicalize_name

from harness.launch import early_smi
from harness.launch.processes import run_bounded
from harness.model.environment import Environment, Installed
from harness.model.errors import BugmatrixError


def _inspect():  # standard library only, no annotations: its source also runs in any interpreter (Python >= 3.8)
    import json
    import os
    import sys
    from importlib import metadata

    out = {}
    # The installed environment only: not the current directory ('' or its absolute path, which `python -c` and a
    # harness process started elsewhere see differently; ranks start in their case's folder anyway).
    # Nor what a running process adds inside site-packages (setuptools appends its `_vendor` folder, with vendored
    # dist-infos of older platformdirs/tomli/..., when imported): a fresh interpreter's path has none of those.
    here = os.getcwd() if os.path.isdir(".") else None
    sites = [
        os.path.abspath(p)
        for p in sys.path
        if p and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")
    ]
    path = [
        p
        for p in sys.path
        if p and os.path.abspath(p) != here and not any(os.path.abspath(p).startswith(site + os.sep) for site in sites)
    ]
    for dist in metadata.distributions(path=path):
        # Name and Version head the metadata file's header block: reading them there is ~10x faster than
        # `dist.metadata` (an email parse of the whole file, per access); anything unusual takes the parser.
        head = (dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "").partition("\n\n")[0]
        fields = {}
        for line in head.splitlines():
            key, sep, value = line.partition(":")
            if sep and key in ("Name", "Version") and key not in fields:
                fields[key] = value.strip()
        name, version = fields.get("Name"), fields.get("Version")
        if not name or not version:
            name, version = dist.metadata["Name"], dist.version
        if not name:
            continue
        commit = None
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
            commit = (direct.get("vcs_info") or {}).get("commit_id")
        except Exception:  # noqa: BLE001 - a broken direct_url.json only loses the commit
            pass
        out[name] = {"version": version, "commit": commit}
    return {"python": sys.version.split()[0], "packages": out}


_INSPECT = inspect.getsource(_inspect) + "import json\nprint(json.dumps(_inspect()))\n"  # the same, elsewhere


class InterpreterError(BugmatrixError, RuntimeError):
    """The interpreter could not be started or could not list its packages."""


INSPECT_TIMEOUT_ENV = "BUGMATRIX_INSPECT_S"  # seconds an interpreter gets to list its packages (default 30)
INSPECT_TIMEOUT_S = 30.0  # ~0.1 s on an idle machine; a hung one is killed, with whatever it started, after this


def inspect_interpreter(python: str | Path = sys.executable, timeout: float | None = None) -> Environment:
    """List what `python` has installed, without importing any of it; raise `InterpreterError` if it cannot.

    The harness's own interpreter (the default local run, or `--python python3` naming the very interpreter the
    harness runs in, as on a GPU image) is listed in-process, by the same code, saving a Python start-up and the
    listing's imports (~0.1 s of a `bugmatrix run`'s fixed cost, measured); any other runs it in a subprocess, in a
    session of its own, for at most `timeout` seconds (default $BUGMATRIX_INSPECT_S, else `INSPECT_TIMEOUT_S`),
    after which it and everything it started are killed. Whatever goes wrong (it cannot start, exits non-zero, hangs,
    prints anything but the listing) is an `InterpreterError` of one line under 200 characters naming it."""
    if str(python) == sys.executable:
        return _environment(python, _inspect())
    python = _absolute(str(python))
    if _same_interpreter(python, sys.executable):
        return _environment(python, _inspect())
    bound = _inspect_timeout() if timeout is None else timeout
    named = _shown(python)
    try:
        proc = run_bounded([str(python), "-c", _INSPECT], timeout=bound)
    except OSError as exc:
        raise InterpreterError(f"{named}: cannot be started ({exc.strerror or exc})") from None
    except subprocess.TimeoutExpired:
        raise InterpreterError(
            f"{named}: no package listing in {bound:g} s, killed with what it started (${INSPECT_TIMEOUT_ENV})"
        ) from None
    out, err = (stream.decode("utf-8", "replace") for stream in (proc.stdout, proc.stderr))
    if proc.returncode != 0:
        last = next((line.strip() for line in reversed(err.splitlines()) if line.strip()), "no message")
        raise InterpreterError(f"{named}: exit {proc.returncode} listing its packages: {last[:50]}")
    try:
        return _environment(python, json.loads(out))
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):  # ValidationError is a ValueError
        printed = repr(" ".join(out.split()))
        printed = printed if len(printed) <= 50 else printed[:47] + "..."
        raise InterpreterError(f"{named}: did not list its packages (printed {printed})") from None


def _inspect_timeout() -> float:
    text = os.environ.get(INSPECT_TIMEOUT_ENV, "").strip()
    if not text:
        return INSPECT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise InterpreterError(f"${INSPECT_TIMEOUT_ENV}: {text[:20]!r} is not a number of seconds above 0")
    return value


def _shown(python: str) -> str:
    """`python` as an error names it: on one line, at most 100 characters (the end of a longer path), so that the
    error's line stays under 200."""
    flat = python.replace("\n", "\\n").replace("\r", "\\r")
    return flat if len(flat) <= 100 else "..." + flat[-97:]


def _absolute(python: str) -> str:
    """`python` as a path that works from any directory (ranks start in their script's folder): a relative path is
    made absolute without following links (a venv's `bin/python` is a link out of the venv), a bare name is looked
    up on PATH as a shell would."""
    if os.sep in python or (os.altsep and os.altsep in python):
        return os.path.abspath(python)
    return shutil.which(python) or python


def _same_interpreter(python: str, executable: str) -> bool:
    """Whether `python` is `executable` under another name: the same file (links followed) in the same folder (a
    venv's bin/python and bin/python3), which finds the same environment. A venv's python and the base interpreter it
    links to are the same file in different folders, with different environments: not the same."""
    try:
        return os.path.dirname(python) == os.path.dirname(executable) and os.path.realpath(python) == os.path.realpath(
            executable
        )
    except (OSError, ValueError):
        return False


def _environment(python: str | Path, data: dict) -> Environment:
    packages: dict[str, Installed] = {
        canonicalize_name(name): Installed(name=name, **info) for name, info in data["packages"].items()
    }
    return Environment(python=str(python), python_version=data["python"], packages=packages)


PROC_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the driver exposes here, each with `information`
PROC_VERSION = Path("/proc/driver/nvidia/version")
DEV_NODE = "/dev/nvidia{minor}"  # a GPU's device node: present where this machine (or container) may use it
_DRIVER = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


@dataclass(frozen=True)
class Gpus:
    """This machine's NVIDIA GPUs as the driver lists them: each one's model, the driver version, and where it was
    read (`proc`: the driver's /proc files; `nvidia-smi`; `none`: no driver)."""

    models: tuple[str, ...] = ()
    driver: str | None = None
    source: str = "none"


_gpus: Gpus | None = None
_gpus_lock = threading.Lock()


def gpus() -> Gpus:
    """This machine's NVIDIA GPUs, probed once per process (threads asking at once share one probe): from the
    driver's /proc files where they list a GPU whose device node exists here (~1 ms), else from one `nvidia-smi
    --query-gpu` call (0.3-1 s on a GPU machine without persistence mode: a run asked it twice, in series, before its
    first launch)."""
    global _gpus
    with _gpus_lock:
        if _gpus is None:
            _gpus = _gpus_from_proc() or _gpus_from_smi()
        return _gpus


def prefetch_gpus() -> None:
    """Start `gpus()` in a background thread, so that a `nvidia-smi` call overlaps what a run does before its first
    launch (loading cases, listing the interpreter) instead of adding to it."""
    threading.Thread(target=gpus, name="bugmatrix-gpus", daemon=True).start()


def forget_gpus() -> None:
    """Drop the probed GPUs (tests that stand in a different machine)."""
    global _gpus
    with _gpus_lock:
        _gpus = None


def _gpus_from_proc() -> Gpus | None:
    """The GPUs in /proc/driver/nvidia/gpus/*/information whose /dev/nvidiaN exists (a container sees the folders
    of the GPUs it was given), or None when that lists none (then nvidia-smi decides)."""
    try:
        folders = sorted(PROC_GPUS.iterdir())
    except OSError:
        return None
    models = []
    for folder in folders:
        try:
            fields = dict(
                line.split(":", 1) for line in (folder / "information").read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        minor = fields.get("Device Minor", "").strip()
        if minor and not Path(DEV_NODE.format(minor=minor)).exists():
            continue
        models.append(fields.get("Model", "").strip() or "NVIDIA GPU")
    if not models:
        return None
    try:
        found = _DRIVER.search(PROC_VERSION.read_text())
    except OSError:
        found = None
    return Gpus(models=tuple(models), driver=found.group(1) if found else None, source="proc")


def _gpus_from_smi() -> Gpus:
    """The GPUs `nvidia-smi --query-gpu=name,driver_version` lists: one call; none without it or when it fails."""
    early = early_smi.take()  # started before the harness's imports, where /proc listed no GPU
    try:
        if early is not None:
            stdout, _ = early.communicate(timeout=30)
            returncode = early.returncode
        else:
            smi = shutil.which("nvidia-smi")
            if not smi:
                return Gpus()
            proc = subprocess.run([smi, *early_smi.QUERY], capture_output=True, text=True, timeout=30, check=False)
            stdout, returncode = proc.stdout, proc.returncode
    except (OSError, subprocess.TimeoutExpired):
        if early is not None:
            early.kill()
        return Gpus()
    rows = [line.rsplit(", ", 1) for line in stdout.splitlines() if ", " in line]
    if returncode != 0 or not rows:
        return Gpus()
    return Gpus(models=tuple(row[0] for row in rows), driver=rows[0][-1], source="nvidia-smi")


def gpu_count() -> int:
    """How many NVIDIA GPUs the driver lists here (`gpus`); 0 without a driver."""
    return len(gpus().models)


def cuda_available() -> bool:
    """True when this machine has an NVIDIA GPU that the driver lists."""
    return gpu_count() > 0


def machine_name() -> str:
    """This machine as a run records it: JSON of `machine_info` with the host name (which the record leaves out)."""
    return json.dumps({"host": platform.node(), **machine_info()}, sort_keys=True)


MACHINE_ENV = "BUGMATRIX_MACHINE"  # a JSON object of facts the harness cannot read cheaply itself (cuda, nccl)


@lru_cache(maxsize=1)
def machine_info() -> dict[str, object]:
    """What a result was measured on, without the host name: OS, architecture, CPU model and cores, and with an
    NVIDIA driver, each GPU's model and the driver version (`gpus`: probed once per process); plus the facts
    $BUGMATRIX_MACHINE adds (a JSON object of strings and numbers, e.g. `{"cuda": "13.0", "nccl": "2.28.9"}`, as
    tools/gpu_kit.py reads them once from the interpreter's torch, off the launch path). A value that is not
    such an object raises InterpreterError naming the variable (one line, exit 2)."""
    info: dict[str, object] = {
        "os": platform.system(),
        "arch": platform.machine(),
        "cores": os.cpu_count() or 0,
        "cpu": _cpu_model(),
    }
    found = gpus()
    if found.models:
        info["gpu"] = sorted(set(found.models))
        if found.driver:
            info["driver"] = found.driver
    return info | _machine_env()


def _machine_env() -> dict[str, object]:
    text = os.environ.get(MACHINE_ENV, "").strip()
    if not text:
        return {}
    try:
        extra = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InterpreterError(f"${MACHINE_ENV}: not JSON ({exc})") from None
    if not isinstance(extra, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool) for k, v in extra.items()
    ):
        raise InterpreterError(f"${MACHINE_ENV}: expected a JSON object of strings and numbers, got {text[:80]!r}")
    return extra


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
