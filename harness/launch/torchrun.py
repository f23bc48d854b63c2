"""Launching a case script under torchrun, with a timeout that kills the whole process tree.

A warm launch (`mode="warm"`, the default: harness/launch/warm.py `DEFAULT_MODE`) forks the ranks from a parent
that has imported torch instead (harness/launch/warm.py): its agent stands where torchrun stands below (its session,
its tree, its closing signals and failure summary in its log), and every promise below holds for it too; a launch no
warm parent can serve runs under torchrun, and its result says why (`LaunchResult.warm_refused`).

Promises:
- every launch uses `torchrun --standalone`, whose rendezvous binds port 0 (the OS hands out a free port, so
  parallel launches cannot pick the same one); a launch that still fails with "address already in use" before
  any rank started is retried, up to `PORT_RETRIES` times;
- the timeout is the case's: its clock starts when the first rank starts (its wrapper writes its record), so
  torchrun's own start-up (its agent imports torch: 2 s on an idle machine, 26 s measured under load 28 on 2 cores)
  never uses up a case's limit before the case has run; that start-up has its own bound, `STARTUP_S` (no rank
  started by then: a timeout, with a note saying so); so is its wind-down: a launch whose ranks have all exited is
  not timed out while torchrun writes its summary and exits (it is killed after `WIND_DOWN_S`, the ranks' verdicts
  standing);
- a launch that outlives its timeout first gets every live rank's stacks, taken from outside the rank (`py-spy
  dump --native`: Python and native frames, whatever state the rank is in) and from inside it (SIGUSR1 ->
  faulthandler, sent only to a rank that still handles SIGUSR1: to one that reset it, SIGUSR1 would be fatal); each
  hung rank is noted as having hung before or after its verdict (its script returned: a teardown hang); then its
  whole process tree is killed (SIGKILL to torchrun's session and to every descendant, even those that left it);
- when torchrun stops the ranks because one failed (it logs "Sending process N closing signal SIGTERM"), the ranks
  still running `STOP_GRACE_S` later (blocked where SIGTERM is not acted on: native code, a masked or ignored signal)
  are SIGKILLed by the harness and marked `stopped` (collateral, as a rank that handled the SIGTERM), so the launch
  ends in seconds instead of after torchrun's own 30 s grace; torchrun then writes its failure summary and exits;
- the same kill happens on any exception in the caller's thread, Ctrl-C included, before it propagates;
- when `launch` returns, no process it started is left running: every process of a launch carries
  `BUGMATRIX_LAUNCH=<this launch's id>` in its environment, and after the launch ends (timed out or not) the
  processes still carrying it are killed and listed in `LaunchResult.strays` (a daemon that double-forked and left
  the session is one). The harness makes itself a child subreaper where Linux allows it, so such orphans are
  re-parented to it rather than to init, and it reaps the ones it recognises as this launch's;
- a rank's log is read in bounded memory however much it printed (see logscan.py): head, tail, size and the first
  signature line are kept;
- a launch of `nnodes` > 1 nodes runs one torchrun agent per node on this machine, each in a session of its own
  (`--nnodes N --node_rank I`, a c10d rendezvous on 127.0.0.1 at a port the harness bound at port 0 and held until
  node 0's agent started, retried on a collision as above), each node with its own GPUs; the ranks' files are
  named by global rank; every promise above holds per agent (its closing signals, its stopped ranks, its tree,
  its marker `<launch>-node<I>` and strays), an agent that exits failing makes the other nodes' ranks still
  running `STOP_GRACE_S` later stopped (collateral), and a timeout takes every node's stacks and kills every
  agent; such a launch is always cold (a warm parent forks one node's ranks);
- nothing a launch writes to the temporary directory outlives it: torchrun, its ranks and whatever they start get
  `TMPDIR` inside the launch's own folder, removed when the launch returns (torchrun's `torchelastic_*` log folders,
  Inductor's compile cache, a case's `mkdtemp` it never removes: thousands of folders over a matrix run otherwise,
  and a compile cache that one launch leaves for the next).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from harness.launch import warm
from harness.launch.logscan import human_size, scan_log
from harness.launch.processes import communicate, kill_tree, reap

WRAPPER = Path(__file__).with_name("rank_wrapper.py")
PORT_RETRIES = 3
STACK_GRACE_S = 3.0  # how long faulthandler gets to write the stacks after SIGUSR1
PYSPY_NATIVE_S = 4.0  # how long `py-spy dump --native` gets (all ranks in parallel) ...
PYSPY_PLAIN_S = 1.5  # ... and, where it failed, a Python-only `py-spy dump`
STACKS_CHARS = 64_000  # per rank and per source
WATCH_S = 1.0  # how often a running launch looks for orphans it adopted (to reap them once they die)
POLL_S = 0.2  # how often a running launch reads torchrun's new output for its closing signals
STARTUP_S = 300.0  # how long torchrun gets to start the first rank (the case's timeout starts counting then)
WIND_DOWN_S = 60.0  # how long torchrun gets to exit once every rank has (its summary, its store)
STOP_GRACE_S = 3.0  # how long ranks get to act on torchrun's SIGTERM before the harness kills them (torchrun: 30 s)
CLOSING = re.compile(rb"Sending process (\d+) closing signal (SIG\w+)")  # torchrun stopping a rank after a failure
MARKER_ENV = "BUGMATRIX_LAUNCH"  # every process of a launch inherits this launch's id
TRACER_ENV = "BUGMATRIX_TRACER_PID"  # the ranks allow this process's descendants (py-spy) to ptrace them
_COLLISION = ("address already in use", "eaddrinuse", "errno 98")
_PR_SET_CHILD_SUBREAPER = 36
REMOVE_TRIES = 10  # how often a launch's folder is removed before it is left behind (see `launch_folder`)
WARM_IMPORTS = ("torch",)  # what a warm parent imports before it forks (not lightning: it reads RANK at import)
_PER_LAUNCH = ("BUGMATRIX_RANK_DIR", MARKER_ENV, "TMPDIR")  # a warm launch's own variables, set in its forks

_active: set[subprocess.Popen[bytes]] = set()
_active_lock = threading.Lock()
_stopping = threading.Event()
_subreaper: bool | None = None
_subreaper_lock = threading.Lock()


class LaunchAborted(RuntimeError):
    """The run is being interrupted: no new launch starts, running ones were killed."""


def abort_all() -> None:
    """Kill every launch in flight (from any thread) and refuse new ones; for Ctrl-C / SIGTERM handling."""
    _stopping.set()
    with _active_lock:
        procs = list(_active)
    for proc in procs:
        kill_tree(proc)


def refuse_if_interrupted() -> None:
    """Raise `LaunchAborted` once `abort_all` has run: nothing new starts in an interrupted run (a launch, a build,
    a job that was waiting for cores)."""
    if _stopping.is_set():
        raise LaunchAborted("the run was interrupted")


def _register(proc: subprocess.Popen[Any]) -> None:
    """Count `proc` among the launches `abort_all` kills; kill it at once when `abort_all` already ran (it read the
    launches in flight between the caller's `refuse_if_interrupted` and this: it missed `proc`)."""
    with _active_lock:
        _active.add(proc)
    if _stopping.is_set():
        kill_tree(proc)


def run_abortable(command: list[str], timeout: float, **popen: Any) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` (text, output captured) for a command a run waits on besides its launches (an environment
    build, a cache clean): `abort_all` kills it and its descendants as it kills a launch, and it then raises
    `LaunchAborted`, as it does when the run is already interrupted; after `timeout` seconds its tree is killed and
    `subprocess.TimeoutExpired` raised. Without this, Ctrl-C waited minutes for an install in progress."""
    refuse_if_interrupted()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **popen
    )
    try:
        _register(proc)
        out, err = communicate(proc, timeout)
    finally:
        with _active_lock:
            _active.discard(proc)
    refuse_if_interrupted()
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def allow_launches() -> None:
    """Undo `abort_all` (a new run in the same process)."""
    _stopping.clear()


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux >= 3.4), once: orphans of its descendants are re-parented to it
    instead of init, so they stay within reach. False where that is unavailable (the launch still works)."""
    global _subreaper
    with _subreaper_lock:
        if _subreaper is None:
            _subreaper = False
            if sys.platform.startswith("linux"):
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
                except (OSError, AttributeError):
                    _subreaper = False
        return _subreaper


@dataclass
class RankRecord:
    """What one rank wrote about itself (see rank_wrapper.py), plus its output."""

    rank: int
    pid: int | None = None
    node: int | None = None  # the node (torchrun agent) that ran it: its GROUP_RANK
    local_rank: int | None = None
    started: float | None = None
    finished: float | None = None
    exit_code: int | None = None
    exception: str | None = None
    terminated: bool = False
    log: str = ""  # the whole log, or its head and tail with an omission line between (see `log_truncated`)
    stacks: str = ""
    log_bytes: int = 0  # how much the rank printed
    log_truncated: bool = False
    seen: str | None = None  # the first line of the whole log matching `searched`
    searched: str | None = None  # the signature the whole log was searched for while streaming (None: not searched)
    hung: bool = False  # still running when the launch timed out
    stopped: bool = False  # killed by the harness: still running STOP_GRACE_S after torchrun's closing signal

    @property
    def log_note(self) -> str:
        """'printed 400.0 MiB (truncated: head and tail kept)' for a truncated log, else ''."""
        if not self.log_truncated:
            return ""
        return f"printed {human_size(self.log_bytes)} ({self.log_bytes} bytes; output truncated: head and tail kept)"

    @property
    def hang_note(self) -> str:
        """For a rank still running at the timeout: whether it hung after its verdict (teardown) or before."""
        if not self.hung:
            return ""
        if self.finished is not None and not self.terminated:
            return (
                f"hung after its verdict: its script returned (exit {self.exit_code}) but the process did not "
                "exit (a teardown hang: atexit, interpreter shutdown or native destructors)"
            )
        if self.seen:
            return f"hung after printing the failure signature, before its script returned: {self.seen[:120]}"
        return "hung before reaching a verdict"


@dataclass
class LaunchResult:
    """Everything one torchrun launch left behind."""

    command: list[str]
    nproc: int
    returncode: int | None
    timed_out: bool
    duration_s: float
    agent_log: str
    ranks: dict[int, RankRecord] = field(default_factory=dict)
    attempts: int = 1
    strays: list[str] = field(default_factory=list)  # processes of this launch killed after it ended
    marker: str = ""  # the launch's id, the value of BUGMATRIX_LAUNCH in its processes' environment
    stop_grace_s: float = STOP_GRACE_S  # what a `stopped` rank was given to act on torchrun's SIGTERM
    startup_s: float | None = None  # from the launch to its first rank's start (None: no rank started)
    mode: str = "cold"  # cold: under torchrun; warm: forked from a warm parent (harness/launch/warm.py)
    warm_refused: str = ""  # why a launch asked to be warm ran cold (no warm parent could serve it)
    nnodes: int = 1  # torchrun agents, each a node of `nproc` ranks: `ranks` holds nnodes x nproc, by global rank

    @property
    def launcher(self) -> str:
        """What started the ranks, as the reasons name it: torchrun, or a warm launch's agent."""
        return "torchrun" if self.mode == "cold" else "the warm launch's agent"


def torchrun_command(python: str, script: Path, args: list[str], nproc: int) -> list[str]:
    """The torchrun command line that runs `script` through the rank wrapper on `nproc` local ranks."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        str(WRAPPER),
        str(script),
        *args,
    ]


def launch(
    python: str,
    script: Path,
    args: list[str],
    nproc: int,
    timeout: float,
    env: dict[str, str] | None = None,
    signature: str | None = None,
    mode: str | None = None,
    nnodes: int = 1,
) -> LaunchResult:
    """Run `script args` under torchrun with `nproc` ranks; never leaves a process behind (see module doc).

    With `signature`, each rank's whole log is searched for it while it is streamed (`RankRecord.seen`). `mode`
    warm forks the ranks from a warm parent instead (harness/launch/warm.py), with the same promises; None:
    $BUGMATRIX_LAUNCH_MODE, else `warm.DEFAULT_MODE`. `nnodes` > 1 starts that many torchrun agents, each a node of
    `nproc` ranks (`node_command`), always cold."""
    mode = mode or warm.default_mode()
    result = _launch_once(python, script, args, nproc, timeout, env, signature, mode, nnodes)
    while result.attempts <= PORT_RETRIES and _port_collision(result):
        attempts = result.attempts + 1
        result = _launch_once(python, script, args, nproc, timeout, env, signature, mode, nnodes)
        result.attempts = attempts
    return result


def _port_collision(result: LaunchResult) -> bool:
    nobody_ran = not any(r.started for r in result.ranks.values())
    text = result.agent_log.lower()
    return result.returncode != 0 and nobody_ran and any(marker in text for marker in _COLLISION)


def _launch_once(
    python: str,
    script: Path,
    args: list[str],
    nproc: int,
    timeout: float,
    env: dict[str, str] | None,
    signature: str | None,
    mode: str = "cold",
    nnodes: int = 1,
) -> LaunchResult:
    refuse_if_interrupted()
    command = torchrun_command(python, script, args, nproc)
    marker = uuid.uuid4().hex
    adopting = become_subreaper()
    warm_refused = ""
    if mode == "warm" and nnodes > 1:  # said in the result (launch_notes), as any launch no warm parent can serve
        mode, warm_refused = "cold", f"a launch of {nnodes} nodes launches cold (a warm parent forks one node)"
    with launch_folder() as tmp:
        rank_dir = Path(tmp)
        child_env = {**os.environ, **(env or {})}
        child_env.update(BUGMATRIX_RANK_DIR=str(rank_dir), PYTHONUNBUFFERED="1")
        child_env.update({MARKER_ENV: marker, TRACER_ENV: str(os.getpid())})
        scratch = rank_dir / "tmp"
        scratch.mkdir()
        child_env["TMPDIR"] = str(scratch)
        child_env.setdefault("OMP_NUM_THREADS", "1")
        # Bytecode is written: with PYTHONDONTWRITEBYTECODE inherited, every rank of every launch compiles torch
        # from source again (measured: 24 s vs 11 s per `import torch` on a busy 2-core machine).
        child_env.pop("PYTHONDONTWRITEBYTECODE", None)
        started = time.monotonic()
        timed_out = False
        hung: set[int] = set()
        stopped: set[int] = set()
        adopted: set[int] = set()
        strays: list[str] = []
        startup: float | None = None
        winding = False  # every rank has exited at the deadline: torchrun gets WIND_DOWN_S more to exit
        agents: list[_Agent] = []
        if mode == "warm":
            forked = [python, str(warm.PARENT), *WARM_IMPORTS, "->", str(WRAPPER), str(script), *args]
            try:
                agents = [_Agent(_start_warm(python, script, args, nproc, child_env), rank_dir / "agent.log", marker)]
                command = forked
            except warm.WarmStartTimeout as exc:  # its start-up, bounded as torchrun's: no rank started
                refuse_if_interrupted()
                ranks = {r: RankRecord(rank=r) for r in range(nproc)}
                duration = time.monotonic() - started
                return LaunchResult(forked, nproc, None, True, duration, str(exc), ranks, mode=mode)
            except warm.WarmUnavailable as exc:  # said in the result (launch_notes), never silently
                mode, warm_refused = "cold", str(exc)
        try:
            if mode == "cold":
                agents = _start_cold(command, nnodes, nproc, child_env, rank_dir, script.parent)
            for agent in agents:
                _register(agent.proc)
            deadline = started + STARTUP_S  # torchrun's start-up; once a rank starts, the case's own limit
            closing = _Closing([agent.log for agent in agents])
            next_watch = started + WATCH_S
            while not _all_exited(agents, max(0.0, min(POLL_S, deadline - time.monotonic()))):
                now = time.monotonic()
                if startup is None:
                    first = _first_start(rank_dir)
                    if first is not None:  # the case's clock starts with its first rank
                        startup = max(0.0, now - started - max(0.0, time.time() - first))
                        deadline = started + startup + timeout
                if now >= deadline:
                    if startup is not None and not winding and not _workers(agents):
                        # Every rank has exited; torchrun is writing its summary and exiting (seconds on a
                        # loaded machine): not the case's time. The kill below ends a torchrun that never does.
                        winding, deadline = True, now + WIND_DOWN_S
                        continue
                    if not winding:
                        timed_out = True
                        hung = _take_stacks(rank_dir)
                    break
                if adopting and now >= next_watch:
                    for agent in agents:
                        _watch_adopted(agent.marker, adopted)
                    next_watch = now + WATCH_S
                if closing.since is None:
                    closing.read(now, agents)
                elif not closing.acted and now - closing.since >= STOP_GRACE_S:
                    stopped = {rank for agent in agents for rank in _stop_ranks(agent.proc, rank_dir)}
                    closing.acted, closing.since = True, now
                elif closing.acted and now - closing.since >= _exit_grace(agents, startup):
                    break  # torchrun did not exit once its ranks were gone: the kill below ends it
        finally:
            strays = _end_agents(agents, adopted)
        refuse_if_interrupted()
        duration = time.monotonic() - started
        ranks = {r: _read_rank(rank_dir, r, signature, r in hung) for r in range(nnodes * nproc)}
        for r in stopped & set(ranks):
            ranks[r].stopped = True
        return LaunchResult(
            command=agents[0].command if len(agents) > 1 else command,
            nproc=nproc,
            returncode=_returncode(agents),
            timed_out=timed_out,
            duration_s=duration,
            agent_log=_agent_logs(agents),
            ranks=ranks,
            strays=strays,
            marker=marker,
            startup_s=startup if startup is not None or timed_out else _startup(ranks, duration),
            mode=mode,
            warm_refused=warm_refused,
            nnodes=nnodes,
        )


@dataclass
class _Agent:
    """One agent of a launch: torchrun (one per node), or a warm launch's agent; its log and its marker (the value
    of BUGMATRIX_LAUNCH that it and every process it starts carry)."""

    proc: Any  # subprocess.Popen[bytes], or warm.WarmAgent
    log: Path
    marker: str
    node: int = 0
    command: list[str] = field(default_factory=list)


def node_command(command: list[str], nnodes: int, node: int, endpoint: str, run_id: str) -> list[str]:
    """`command` (`torchrun_command`'s, one node) as node `node` of `nnodes` on this machine: instead of
    `--standalone`, a c10d rendezvous at `endpoint` (127.0.0.1:PORT) named `run_id`, whose store node 0 hosts
    (`is_host`: the other nodes only connect, never race to bind its port). torchrun's c10d rendezvous ignores
    `--node_rank` (it orders the nodes as they join: their ranks' GROUP_RANK says which is which); it is passed
    for the torch versions and readers that go by it."""
    flags = [
        f"--nnodes={nnodes}",
        f"--node_rank={node}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={endpoint}",
        f"--rdzv_id={run_id}",
        f"--rdzv_conf=is_host={int(node == 0)}",
    ]
    at = command.index("--standalone")
    return [*command[:at], *flags, *command[at + 1 :]]


def _start_cold(
    command: list[str], nnodes: int, nproc: int, child_env: dict[str, str], rank_dir: Path, cwd: Path
) -> list[_Agent]:
    """Start torchrun: one agent, or one per node (`node_command`), each in a session of its own with its own log,
    marker (`<launch>-node<N>`) and GPUs (`_node_gpus`). The rendezvous port is bound here (port 0: the OS picks a
    free one, never one in use) and held until node 0's agent is started, which binds it once it has imported
    torch; another process binding it in between makes node 0 fail "address already in use" before any rank
    started, and the launch is retried (`_port_collision`)."""
    marker = child_env[MARKER_ENV]
    if nnodes == 1:
        return [_spawn(_Agent(None, rank_dir / "torchrun.log", marker, 0, command), child_env, cwd)]
    holder = reserve_port()
    endpoint = f"127.0.0.1:{holder.getsockname()[1]}"
    agents: list[_Agent] = []
    try:
        for node in range(nnodes):
            env = {**child_env, MARKER_ENV: f"{marker}-node{node}", **_node_gpus(child_env, node, nproc)}
            agent = _Agent(None, rank_dir / f"torchrun-node{node}.log", env[MARKER_ENV], node)
            agent.command = node_command(command, nnodes, node, endpoint, marker)
            holder.close()  # the port is free for node 0's store from here on (a no-op for the later nodes)
            agents.append(_spawn(agent, env, cwd))
    except BaseException:
        for agent in agents:
            kill_tree(agent.proc)
        raise
    finally:
        holder.close()
    return agents


def reserve_port() -> socket.socket:
    """A socket bound to a free loopback port (port 0: the OS picks one no socket holds), for the caller to hold
    until the process that will bind it has started."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    return holder


def _spawn(agent: _Agent, env: dict[str, str], cwd: Path) -> _Agent:
    with open(agent.log, "ab") as log:
        agent.proc = subprocess.Popen(
            agent.command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=cwd,
        )
    return agent


def _node_gpus(env: dict[str, str], node: int, nproc: int) -> dict[str, str]:
    """`CUDA_VISIBLE_DEVICES` for node `node`: its own `nproc` GPUs, as on a machine of its own (its ranks pin
    `cuda:LOCAL_RANK`, which every node counts from 0) -- the next ones of those visible to the harness."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    devices = visible.split(",") if visible else [str(i) for i in range((node + 1) * nproc)]
    return {"CUDA_VISIBLE_DEVICES": ",".join(devices[node * nproc : (node + 1) * nproc])}


def _exit_grace(agents: list[_Agent], startup: float | None) -> float:
    """How long the agents get to exit once the harness stopped their ranks: `STOP_GRACE_S`; on several nodes whose
    ranks ran, `WIND_DOWN_S` (a node's agent notices its ranks' failure seconds later under load: not hung; one
    whose ranks never started waits for a rendezvous that will not come)."""
    return WIND_DOWN_S if len(agents) > 1 and startup is not None else STOP_GRACE_S


def _all_exited(agents: list[_Agent], timeout: float) -> bool:
    """Whether every agent has exited, waiting up to `timeout` seconds for the first one still running."""
    running = [agent.proc for agent in agents if agent.proc.poll() is None]
    if not running:
        return True
    try:
        running[0].wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return len(running) == 1


def _end_agents(agents: list[_Agent], adopted: set[int]) -> list[str]:
    """Kill every agent's whole tree and session, then every process still carrying its marker; the strays killed
    ('name (pid N): command', `node N: ...` on several nodes), a warm agent's own first."""
    strays: list[str] = []
    for agent in agents:
        kill_tree(agent.proc)
        with _active_lock:
            _active.discard(agent.proc)
    for agent in agents:
        own = agent.proc.strays() if isinstance(agent.proc, warm.WarmAgent) else []
        found = own + kill_strays(agent.marker, adopted)
        strays += [f"node {agent.node}: {stray}" for stray in found] if len(agents) > 1 else found
    return strays


def _returncode(agents: list[_Agent]) -> int | None:
    """The launch's exit code: its agent's; on several nodes, the first node's that failed, else 0 (None while
    one is running: never, once the launch ended)."""
    codes = [agent.proc.returncode for agent in agents]
    if None in codes:
        return None
    return next((code for code in codes if code != 0), 0)


def _agent_logs(agents: list[_Agent]) -> str:
    """The agent's log; on several nodes, each node's under a `--- torchrun node N ---` line."""
    if len(agents) == 1:
        return scan_log(agents[0].log).text
    return "\n".join(f"--- torchrun node {agent.node} ---\n{scan_log(agent.log).text}" for agent in agents)


@contextmanager
def launch_folder() -> Iterator[Path]:
    """A launch's own temporary folder (its rank records, logs and the ranks' TMPDIR), removed afterwards. Its
    removal never fails the launch: a file that a process of the launch was still writing as it was killed (or
    that the warm parent wrote for an agent it reaped) lands while the folder is removed ("Directory not empty",
    seen once in 1,800 CI launches, where it turned a measured `reproduced` into `infra`): removed again a few
    times, then left in the temporary folder."""
    path = Path(tempfile.mkdtemp(prefix="bugmatrix-launch-"))
    try:
        yield path
    finally:
        for _ in range(REMOVE_TRIES):
            try:
                shutil.rmtree(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def _start_warm(python: str, script: Path, args: list[str], nproc: int, child_env: dict[str, str]) -> warm.WarmAgent:
    """A warm launch's agent: `child_env` less this launch's own variables (its folder, its marker, its TMPDIR) is
    its parent's environment; those go with the fork, whose folder and run id they name."""
    own = {k: child_env[k] for k in _PER_LAUNCH if k in child_env}
    spec = warm.ParentSpec(
        python, WARM_IMPORTS, {k: v for k, v in child_env.items() if k not in own}, ready_s=STARTUP_S, stop=_stopping
    )
    fork = warm.Fork(Path(own["BUGMATRIX_RANK_DIR"]), script, list(args), nproc, own[MARKER_ENV], own)
    return warm.start(spec, fork)


class _Closing:
    """Watches torchrun's output (each agent's log, read as it is appended) for its first closing signal; on
    several nodes, also for an agent that exited failing (its peers' ranks are then collateral)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.offsets = [0] * len(paths)
        self.tails = [b""] * len(paths)
        self.since: float | None = None  # when the first closing signal was seen (then: when the harness acted)
        self.acted = False

    def read(self, now: float, agents: list[_Agent]) -> None:
        """Read what each agent appended since the last call; note `now` when it holds a closing signal, or when
        one of several agents exited with a failure."""
        if len(agents) > 1 and any(agent.proc.poll() not in (None, 0) for agent in agents):
            self.since = now
            return
        for i, path in enumerate(self.paths):
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets[i])
                    chunk = fh.read(1 << 20)
            except OSError:
                continue
            self.offsets[i] += len(chunk)
            text, self.tails[i] = self.tails[i] + chunk, chunk[-200:]  # a line cut between two reads is seen whole
            if CLOSING.search(text):
                self.since = now


def _stop_ranks(proc: subprocess.Popen[bytes], rank_dir: Path) -> set[int]:
    """SIGKILL torchrun's workers that outlived `STOP_GRACE_S` after its closing signal; the ranks they ran (those
    that wrote their record). torchrun, whose ranks are gone, then writes its failure summary and exits."""
    try:
        workers = [child for child in psutil.Process(proc.pid).children() if child.status() != psutil.STATUS_ZOMBIE]
    except psutil.Error:
        return set()
    rank_of = {pid: rank for rank, pid in _rank_pids(rank_dir).items()}
    stopped = set()
    for worker in workers:
        try:
            worker.kill()
        except psutil.Error:
            continue
        if worker.pid in rank_of:
            stopped.add(rank_of[worker.pid])
    return stopped


def _rank_pids(rank_dir: Path) -> dict[int, int]:
    pids = {}
    for record_file in rank_dir.glob("rank*.json"):
        try:
            data = json.loads(record_file.read_text())
            pids[int(data["rank"])] = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return pids


def _first_start(rank_dir: Path) -> float | None:
    """When the first rank of the launch started (its wrapper's record, time.time()); None before any did."""
    times = []
    for record_file in rank_dir.glob("rank*.json"):
        try:
            times.append(float(json.loads(record_file.read_text())["started"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return min(times) if times else None


def _startup(ranks: dict[int, RankRecord], duration: float) -> float | None:
    """For a launch that ended before its loop saw a rank start: the start-up from the ranks' own records."""
    first = min((r.started for r in ranks.values() if r.started is not None), default=None)
    if first is None:
        return None
    return max(0.0, duration - max(0.0, time.time() - first))


def _workers(agents: list[_Agent]) -> bool:
    """Whether an agent (torchrun) still has a live worker (a child process that is not a zombie)."""
    for agent in agents:
        try:
            if any(child.status() != psutil.STATUS_ZOMBIE for child in psutil.Process(agent.proc.pid).children()):
                return True
        except psutil.Error:
            continue
    return False


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _take_stacks(rank_dir: Path) -> set[int]:
    """Every live rank's stacks, from outside (py-spy) then from inside (faulthandler); the ranks that were live.

    Writes rank<R>.pyspy, rank<R>.stacks-note (why a source is missing) and lets faulthandler write rank<R>.stacks."""
    live = {rank: pid for rank, pid in _rank_pids(rank_dir).items() if _running(pid)}
    notes: dict[int, list[str]] = {rank: [] for rank in live}
    spy = py_spy()
    if spy is None:
        for rank in live:
            notes[rank].append("py-spy is not installed next to the harness: no stacks from outside")
    else:
        failed = _py_spy_dumps(spy, rank_dir, live, native=True, limit=PYSPY_NATIVE_S)
        retry = {rank: live[rank] for rank in failed}
        again = _py_spy_dumps(spy, rank_dir, retry, native=False, limit=PYSPY_PLAIN_S)
        for rank, why in failed.items():
            if rank in again:
                notes[rank].append(f"no stacks from outside: {why}; then {again[rank]}")
            else:
                notes[rank].append(f"Python frames only from outside: {why}")
    asked: list[Path] = []
    for rank, pid in live.items():
        if not _handles(pid, signal.SIGUSR1):
            notes[rank].append(
                "faulthandler was not asked: this rank no longer handles SIGUSR1 (its handler was "
                "reset or removed), so SIGUSR1 would have killed it"
            )
            continue
        try:
            os.kill(pid, signal.SIGUSR1)
            asked.append(rank_dir / f"rank{rank}.stacks")
        except OSError:
            continue
    deadline = time.monotonic() + STACK_GRACE_S
    while asked and time.monotonic() < deadline and not all(_nonempty(p) for p in asked):
        time.sleep(0.05)
    if asked:
        time.sleep(0.1)  # let the last writer finish its frames
    for rank, lines in notes.items():
        if lines:
            (rank_dir / f"rank{rank}.stacks-note").write_text("\n".join(lines) + "\n")
    return set(live)


def py_spy() -> str | None:
    """The py-spy executable: next to this interpreter (the harness's environment), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def _py_spy_dumps(spy: str, rank_dir: Path, pids: dict[int, int], *, native: bool, limit: float) -> dict[int, str]:
    """`py-spy dump` of every pid in parallel, each into rank<R>.pyspy; {rank: why} for those that failed."""
    running: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
    failed: dict[int, str] = {}
    for rank, pid in pids.items():
        out = rank_dir / f"rank{rank}.pyspy"
        command = [spy, "dump", "--pid", str(pid), *(["--native"] if native else [])]
        try:
            with open(out, "wb") as fh:
                running[rank] = (
                    subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT),
                    out,
                )
        except OSError as exc:
            failed[rank] = f"py-spy did not start: {exc}"
    deadline = time.monotonic() + limit
    try:
        for rank, (proc, out) in running.items():
            try:
                code: int | None = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                how = f"gave up after {limit:g} s" if code is None else f"exit {code}: {_last_line_of(out)}"
                failed[rank] = f"`py-spy dump{' --native' if native else ''}` {how}"
    finally:  # also on Ctrl-C: no py-spy outlives its dump (the kernel detaches a dead tracer; the rank goes on)
        for proc, _ in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for rank in failed:
        (rank_dir / f"rank{rank}.pyspy").unlink(missing_ok=True)
    return failed


def _last_line_of(path: Path) -> str:
    lines = [line.strip() for line in scan_log(path).text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _handles(pid: int, signum: int) -> bool:
    """Whether `pid` catches `signum` (a handler is installed: SigCgt in /proc/PID/status); True where unknown."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _has_marker(proc: psutil.Process, marker: str) -> bool:
    try:
        return proc.environ().get(MARKER_ENV) == marker
    except (psutil.Error, OSError):
        return False


def _watch_adopted(marker: str, adopted: set[int]) -> None:
    """Note the orphans of this launch that were re-parented to this (subreaper) process, to reap them later."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        if child.pid not in adopted and _has_marker(child, marker):
            adopted.add(child.pid)


def kill_strays(marker: str, adopted: set[int] | None = None) -> list[str]:
    """SIGKILL every live process still carrying this launch's marker (anywhere, whoever its parent is), until none
    is left; reap them and the launch's adopted orphans. Returns 'name (pid N): command' for each one killed."""
    killed: dict[int, str] = {}
    me = os.getpid()
    for _ in range(20):  # a stray may fork while it is being killed: look again until nothing carries the marker
        found = []
        for proc in psutil.process_iter(["pid"]):
            if proc.pid == me or proc.pid in killed and not _running(proc.pid):
                continue
            try:
                if proc.status() == psutil.STATUS_ZOMBIE or not _has_marker(proc, marker):
                    continue
                found.append(proc)
                killed.setdefault(proc.pid, f"{proc.name()} (pid {proc.pid}): {' '.join(proc.cmdline())[:160]}")
                proc.kill()
            except psutil.Error:
                continue
        if not found:
            break
        time.sleep(0.02)
    reap(set(killed) | set(adopted or ()), timeout=10)
    return list(killed.values())


def _read_rank(rank_dir: Path, rank: int, signature: str | None = None, hung: bool = False) -> RankRecord:
    record = RankRecord(rank=rank, hung=hung)
    base = rank_dir / f"rank{rank}"
    try:
        data = json.loads((base.with_suffix(".json")).read_text())
    except (OSError, ValueError):
        data = {}
    for key in ("pid", "node", "local_rank", "started", "finished", "exit_code", "exception", "terminated"):
        if key in data:
            setattr(record, key, data[key])
    log = scan_log(base.with_suffix(".log"), signature)
    record.log, record.log_bytes, record.log_truncated = log.text, log.size, log.truncated
    record.seen, record.searched = log.seen, log.signature
    record.stacks = _stacks_of(base)
    return record


def _stacks_of(base: Path) -> str:
    """A rank's stacks: py-spy's (from outside), faulthandler's (from inside), and why one of them is missing."""
    parts = []
    outside = _bounded(base.with_suffix(".pyspy"))
    inside = _bounded(base.with_suffix(".stacks"))
    note = _bounded(base.with_suffix(".stacks-note"))
    if outside:
        parts.append(f"[from outside: py-spy dump]\n{outside}")
    if inside:
        parts.append(f"[from inside: faulthandler (SIGUSR1)]\n{inside}" if outside else inside)
    if note:
        parts.append(f"[note]\n{note}")
    return "\n".join(part.rstrip("\n") for part in parts) + ("\n" if parts else "")


def _bounded(path: Path) -> str:
    text = scan_log(path, head=STACKS_CHARS, tail=4096).text
    return text


if __name__ == "__main__":  # manual check: python -m harness.launch.torchrun SCRIPT NPROC
    res = launch(sys.executable, Path(sys.argv[1]).resolve(), sys.argv[3:], int(sys.argv[2]), 120)
    print(res.returncode, res.timed_out, f"{res.duration_s:.1f}s", {r: v.exit_code for r, v in res.ranks.items()})
