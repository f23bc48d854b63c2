"""Warm launches: one parent interpreter per environment and import set forks each launch's ranks (warm_parent.py).

    agent = start(ParentSpec(python, imports, env), Fork(folder, script, args, nproc, run_id, launch_env))
    agent.wait(timeout); agent.returncode             # as a Popen of torchrun, for torchrun.py's launch loop
    shutdown()                                         # every parent ends (the harness's exit does it too)

Promises:
- one parent per interpreter and import set, started with the launch environment of a cold launch: a parent that
  imported lightning is never the parent of a torch-only launch, and one started with another environment is
  replaced (the harness's environment changed); parents run in a session of their own and serve every thread of
  the harness (`-j 2`: two launches share a parent, each with its own agent);
- a parent is checked before each fork and replaced when it died, when a file it imported changed or vanished
  (the environment was rebuilt, evicted or pruned), or when it holds a deleted library (`(deleted)` in its maps):
  never a stale parent, never a silent fallback. A parent that could not import its modules, started a thread or
  initialised CUDA is refused (`WarmUnavailable`), and the caller says so;
- an agent is killed as torchrun is (`processes.kill_tree`: its session and every descendant); while it lives it is
  the subreaper of its launch, so a fork-only descendant or a setsid daemon is still its descendant; its parent
  and the other launches are never in its session or tree;
- `WarmAgent.returncode` is the agent's: its own record (`agent.json`, 0 or 1 as torchrun's), else the status the
  parent saw (`agent.status`), else its wait status where it became this process's child, else -SIGKILL (killed
  with its parent, which the parent dying does by PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

PARENT = Path(__file__).with_name("warm_parent.py")
READY_S = 300.0  # how long a parent gets to import its modules by default (torch under load: tens of seconds)
ANSWER_S = 30.0  # how long a parent gets to answer a fork request
RECORD_S = 1.0  # how long the parent gets to write a dead agent's status
MODE_ENV = "BUGMATRIX_LAUNCH_MODE"  # warm | cold: how launches start when the caller does not say
MODES = ("cold", "warm")
DEFAULT_MODE = "warm"  # how launches start when neither the caller nor $BUGMATRIX_LAUNCH_MODE says (docs/launching.md)


class WarmUnavailable(RuntimeError):
    """No warm parent can serve this launch (its imports failed, it started a thread or CUDA, it died starting)."""


class WarmStartTimeout(WarmUnavailable):
    """The parent did not finish its imports within the launch's start-up bound: the launch timed out starting."""


def default_mode() -> str:
    """The launch mode when none is asked for: $BUGMATRIX_LAUNCH_MODE (warm | cold), else `DEFAULT_MODE`; a value
    that is neither raises ValueError naming the variable."""
    mode = os.environ.get(MODE_ENV, DEFAULT_MODE).strip().lower() or DEFAULT_MODE
    if mode not in MODES:
        raise ValueError(f"${MODE_ENV}: {mode!r} is not one of {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class ParentSpec:
    """What a warm parent is started with: the cell's interpreter, the modules it imports, its environment (a cold
    launch's, less a launch's own variables); where its errors go (`log`, else nowhere), how long its imports may
    take (`ready_s`: WarmStartTimeout past it) and the event that, set, ends its start (the run is interrupted)."""

    python: str
    imports: tuple[str, ...]
    env: dict[str, str]
    log: Path | None = None
    ready_s: float = READY_S
    stop: threading.Event | None = None

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """One parent per interpreter and import set."""
        return (self.python, tuple(self.imports))


@dataclass(frozen=True)
class Fork:
    """One launch a parent forks: `nproc` ranks of `script args`, its agent writing into `folder`, torchrun's run id
    `run_id`, and `env` (this launch's own variables) on top of its parent's environment."""

    folder: Path
    script: Path
    args: list[str]
    nproc: int
    run_id: str
    env: dict[str, str]

    def message(self) -> dict[str, Any]:
        """The request line's `launch` object (warm_parent.py's protocol)."""
        return {
            "dir": str(self.folder),
            "script": str(self.script),
            "args": list(self.args),
            "nproc": self.nproc,
            "env": dict(self.env),
            "run_id": self.run_id,
        }


@dataclass
class WarmParent:
    """One running warm parent and what it reported when ready."""

    key: tuple[Any, ...]
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    files: dict[str, str | None] = field(default_factory=dict)
    stamps: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def stale(self) -> str | None:
        """Why this parent cannot serve another launch (dead, an imported file changed, a deleted library), or None."""
        if self.proc.poll() is not None:
            return f"it exited ({self.proc.returncode})"
        for name, stamp in self.stamps.items():
            if _stamp(self.files.get(name)) != stamp:
                return f"{name} changed on disk ({self.files.get(name)})"
        try:
            with open(f"/proc/{self.proc.pid}/maps") as fh:
                for line in fh:
                    if line.rstrip().endswith("(deleted)") and ".so" in line:
                        return f"it holds a deleted library: {line.split(None, 5)[-1].strip()}"
        except OSError:
            pass
        return None

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request line and read the answer (one caller at a time)."""
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
            line = _read_line(self.proc.stdout, self.proc, ANSWER_S)
        return json.loads(line)

    def close(self) -> None:
        """End this parent: its stdin closes (it kills its launches and exits), then SIGKILL if it lingers."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


_parents: dict[tuple[Any, ...], WarmParent] = {}
_parents_lock = threading.Lock()  # guards _parents and _starting; held briefly, never while a parent imports
_starting: dict[tuple[Any, ...], threading.Lock] = {}  # per key: one thread starts its parent, the others wait


def _stamp(path: str | None) -> tuple[int, int] | None:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def _read_line(
    stream: IO[bytes], proc: subprocess.Popen[bytes], limit: float, stop: threading.Event | None = None
) -> bytes:
    """One line from a parent; WarmStartTimeout when it said nothing for `limit` seconds, WarmUnavailable when it
    died or `stop` was set (the run is being interrupted)."""
    import selectors

    deadline = time.monotonic() + limit
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            if sel.select(timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
                line = stream.readline()
                if not line:
                    break
                return line
            if proc.poll() is not None:
                break
        else:
            if time.monotonic() >= deadline:
                raise WarmStartTimeout(f"the warm parent (pid {proc.pid}) said nothing within {limit:g} s")
    raise WarmUnavailable(f"the warm parent (pid {proc.pid}) did not answer (exit {proc.poll()})")


def parent_for(spec: ParentSpec) -> WarmParent:
    """The live parent for `spec`'s interpreter and import set, started with its environment: the running one when
    it is not stale and has that environment, else a new one (the other one ended first). Every other stale parent
    is ended on the way: one whose environment was evicted or pruned holds its deleted files (disk the budget counts
    as free) only until the next launch, of any environment."""
    key = spec.key
    with _parents_lock:
        stale = [_parents.pop(k) for k, p in list(_parents.items()) if k != key and p.stale() is not None]
        starting = _starting.setdefault(key, threading.Lock())
    for parent in stale:
        parent.close()
    with starting:  # another environment's parent importing torch meanwhile does not hold this one up
        with _parents_lock:
            running = _parents.get(key)
        if running is not None and (running.env != spec.env or running.stale() is not None):
            with _parents_lock:
                _parents.pop(key, None)
            running.close()
            running = None
        if running is None:
            running = _start(spec)
            with _parents_lock:
                _parents[key] = running
        return running


def _start(spec: ParentSpec) -> WarmParent:
    """A new parent for `spec`, once it said it is ready and fit to fork (else it is killed: WarmUnavailable)."""
    proc = _spawn(spec)
    ready = _ready(spec, proc)
    problem = _unfit(spec, ready)
    if problem:
        _end(proc)
        raise WarmUnavailable(f"{spec.python}: {problem}")
    files = dict(ready.get("files") or {})
    return WarmParent(
        key=spec.key, env=dict(spec.env), proc=proc, files=files, stamps={n: _stamp(f) for n, f in files.items()}
    )


def _spawn(spec: ParentSpec) -> subprocess.Popen[bytes]:
    """The parent's process: `python warm_parent.py IMPORTS...` in a session of its own, its errors to `spec.log`."""
    errors = open(spec.log, "ab") if spec.log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child, closed below
    try:
        return subprocess.Popen(
            [spec.python, str(PARENT), *spec.imports],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=spec.env,
            cwd="/",
            start_new_session=True,
        )
    finally:
        if spec.log:
            errors.close()  # type: ignore[union-attr]


def _ready(spec: ParentSpec, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """The parent's ready line; it is killed when it says nothing within `spec.ready_s` (WarmStartTimeout), dies,
    says something else or `spec.stop` is set (WarmUnavailable)."""
    assert proc.stdout is not None
    try:
        ready = json.loads(_read_line(proc.stdout, proc, spec.ready_s, spec.stop))
        if isinstance(ready, dict):
            return ready
    except WarmStartTimeout:
        _end(proc)
        raise WarmStartTimeout(
            f"{spec.python}: the warm parent did not import {', '.join(spec.imports)} within {spec.ready_s:g} s"
        ) from None
    except (WarmUnavailable, ValueError):
        pass
    _end(proc)
    raise WarmUnavailable(f"{spec.python}: the warm parent did not start (exit {proc.returncode})")


def _unfit(spec: ParentSpec, ready: dict[str, Any]) -> str | None:
    """Why a ready parent cannot fork launches (an import failed, a thread or CUDA was started), or None."""
    imports = ", ".join(spec.imports)
    if ready.get("failed"):
        return "could not import " + "; ".join(f"{k} ({v})" for k, v in ready["failed"].items())
    if ready.get("threads", 1) != 1:
        return f"importing {imports} started {ready['threads'] - 1} thread(s): forking is unsafe"
    if ready.get("cuda"):
        return f"importing {imports} initialised CUDA: forked ranks could not use it"
    return None


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


class WarmAgent:
    """A warm launch's agent (forked by a parent, not this process's child), with what torchrun.py's launch loop
    and `processes.kill_tree` use of a Popen: pid, poll, wait, returncode."""

    def __init__(self, pid: int, folder: Path) -> None:
        self.pid = pid
        self.folder = folder
        self.returncode: int | None = None
        try:
            self._proc: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self._proc = None

    def _gone(self) -> bool:
        if self._proc is None:
            return True
        try:
            return self._proc.status() == psutil.STATUS_ZOMBIE or not self._proc.is_running()
        except psutil.Error:
            return True

    def poll(self) -> int | None:
        """The agent's exit code once it is gone (see the module doc), else None."""
        if self.returncode is None and self._gone():
            self.returncode = self._code()
        return self.returncode

    def _code(self) -> int:
        try:  # it became this process's child (its parent died; this process is a subreaper)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            pass
        deadline = time.monotonic() + RECORD_S
        while True:
            try:
                return int(json.loads((self.folder / "agent.json").read_text())["returncode"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
            try:
                return int((self.folder / "agent.status").read_text())
            except (OSError, ValueError):
                pass
            if time.monotonic() >= deadline:
                return -signal.SIGKILL
            time.sleep(0.02)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the agent to end; `subprocess.TimeoutExpired` after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"warm agent {self.pid}", timeout or 0.0)
            time.sleep(0.01 if deadline is None else max(0.0, min(0.01, deadline - time.monotonic())))
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the agent (its ranks die with it: PR_SET_PDEATHSIG)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def strays(self) -> list[str]:
        """The processes the agent killed once every rank had exited ('name (pid N): command')."""
        try:
            return list(json.loads((self.folder / "agent.json").read_text()).get("strays", []))
        except (OSError, ValueError, AttributeError):
            return []


def start(spec: ParentSpec, fork: Fork) -> WarmAgent:
    """Fork one launch from `spec`'s parent (started when none is running or it is stale): `fork.nproc` ranks of
    its script, `fork.env` on top of the parent's environment; its agent writes into `fork.folder`."""
    parent = parent_for(spec)
    try:
        answer = parent.request({"launch": fork.message()})
    except (OSError, WarmUnavailable):  # it died between the check and the request: one new parent, once
        parent = parent_for(spec)
        answer = parent.request({"launch": fork.message()})
    return WarmAgent(int(answer["pid"]), fork.folder)


def parents() -> list[WarmParent]:
    """The parents running now."""
    with _parents_lock:
        return list(_parents.values())


def retire(python: str | None = None, under: Path | None = None) -> None:
    """End the parents of `python`, or of every interpreter inside the folder `under` (every parent when neither):
    their environment is about to be deleted, and a parent holding its files would keep them on disk."""
    with _parents_lock:
        for key in [k for k in _parents if _serves(k[0], python, under)]:
            _parents.pop(key).close()


def _serves(interpreter: str, python: str | None, under: Path | None) -> bool:
    if python is not None:
        return interpreter == python
    return under is None or Path(interpreter).is_relative_to(under)


def shutdown() -> None:
    """End every parent (at the harness's exit)."""
    retire(None)


atexit.register(shutdown)
