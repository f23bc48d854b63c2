"""What an interpreter has installed (versions and git commits) and which devices this machine offers.

The inspection runs in the target interpreter with only the standard library, so it costs ~0.1 s, never imports torch,
and works on any environment the harness launches cases in.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from packaging.utils import canonicalize_name
from pydantic import BaseModel

from harness.model.common import distributions


def _inspect():  # standard library only, no annotations: its source also runs in any interpreter (Python >= 3.8)
    import json
    import sys
    from importlib import metadata

    out = {}
    for dist in metadata.distributions():
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


class Installed(BaseModel):
    """One installed distribution: its version and, when installed from git, the commit."""

    name: str
    version: str
    commit: str | None = None


class Environment(BaseModel):
    """An interpreter the harness can launch cases with, and what it has installed."""

    python: str
    python_version: str
    packages: dict[str, Installed]

    def get(self, package: str) -> Installed | None:
        """The installed distribution providing `package` (aliases such as fbgemm-gpu -> fbgemm-gpu-cpu)."""
        for name in distributions(package):
            found = self.packages.get(canonicalize_name(name))
            if found:
                return found
        return None

    def missing(self, packages: list[str]) -> list[str]:
        """The names in `packages` that this environment does not provide."""
        return [p for p in packages if self.get(p) is None]

    def versions_of(self, packages: list[str]) -> dict[str, str]:
        """`{package: "version"}` (or `"version @ commit"`) for the installed ones among `packages`."""
        out: dict[str, str] = {}
        for package in packages:
            found = self.get(package)
            if found:
                out[found.name] = found.version + (f" @ {found.commit}" if found.commit else "")
        return out


class InterpreterError(RuntimeError):
    """The interpreter could not be started or could not list its packages."""


def inspect_interpreter(python: str | Path = sys.executable, timeout: float = 60) -> Environment:
    """List what `python` has installed, without importing any of it; raise `InterpreterError` if it cannot.

    The harness's own interpreter (the default local run) is listed in-process, by the same code, saving a Python
    start-up (~80 ms of a `bugmatrix run`'s fixed cost); any other runs it in a subprocess."""
    if str(python) == sys.executable:
        return _environment(python, _inspect())
    python = _absolute(str(python))
    try:
        proc = subprocess.run(
            [str(python), "-c", _INSPECT], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{python}: {exc}") from None
    if proc.returncode != 0:
        raise InterpreterError(f"{python}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return _environment(python, json.loads(proc.stdout))


def _absolute(python: str) -> str:
    """`python` as a path that works from any directory (ranks start in their script's folder): a relative path is
    made absolute without following links (a venv's `bin/python` is a link out of the venv), a bare name is looked
    up on PATH as a shell would."""
    if os.sep in python or (os.altsep and os.altsep in python):
        return os.path.abspath(python)
    return shutil.which(python) or python


def _environment(python: str | Path, data: dict) -> Environment:
    packages = {
        canonicalize_name(name): Installed(name=name, **info) for name, info in data["packages"].items()
    }
    return Environment(python=str(python), python_version=data["python"], packages=packages)


@lru_cache(maxsize=1)
def gpu_count() -> int:
    """How many NVIDIA GPUs the driver lists (`nvidia-smi -L`); 0 without a driver or without `nvidia-smi`."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if proc.returncode != 0:
        return 0
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


def cuda_available() -> bool:
    """True when this machine has an NVIDIA GPU that the driver lists."""
    return gpu_count() > 0


def machine_name() -> str:
    """This machine as a run records it: JSON of `machine_info` with the host name (which the record leaves out)."""
    return json.dumps({"host": platform.node(), **machine_info()}, sort_keys=True)


@lru_cache(maxsize=1)
def machine_info() -> dict[str, object]:
    """What a result was measured on, without the host name: OS, architecture, CPU model and cores, and with an
    NVIDIA driver, each GPU's model and the driver version (`nvidia-smi`, one call per process)."""
    info: dict[str, object] = {"os": platform.system(), "arch": platform.machine(), "cores": os.cpu_count() or 0,
                               "cpu": _cpu_model()}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            proc = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        rows = [line.split(", ") for line in proc.stdout.splitlines() if ", " in line] if proc else []
        if proc is not None and proc.returncode == 0 and rows:
            info["gpu"] = sorted({row[0] for row in rows})
            info["driver"] = rows[0][-1]
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
