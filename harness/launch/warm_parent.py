"""A warm parent: one interpreter that has imported torch (and the case's libraries) forks each launch's ranks.

The harness (harness/launch/warm.py) starts `python warm_parent.py MODULE...` in the cell's interpreter with the launch
environment of a cold launch (`OMP_NUM_THREADS=1` and the rest). Like rank_wrapper.py it is standard-library only
(any Python >= 3.8) and never imports the harness. It imports MODULE... once, checks that this started no thread and
did not initialise CUDA (a fork would inherit neither safely), and answers one JSON line:

    {"ready": true, "pid": ..., "threads": 1, "cuda": false, "files": {module: its file}, "failed": {module: why}}

then reads one JSON request per line on stdin and answers one line on stdout:

    {"launch": {"dir", "script", "args", "nproc", "env"}}  ->  {"pid": AGENT}   (a new launch, see below)
    {"ping": true}                                          ->  {"pid": ..., "threads": ...}

Per launch it forks an agent (torchrun's twin): a session of its own, a child subreaper (every orphan of the launch,
a setsid daemon included, is re-parented to it, not to this parent or init), killed with this parent
(PR_SET_PDEATHSIG). The agent forks the ranks with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, ...; its
own TCPStore at MASTER_ADDR:MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True, as torchrun's agent hosts it) and
bugmatrix's (BUGMATRIX_RANK_DIR, the launch marker, TMPDIR in the launch folder, `tempfile.tempdir` reset), in the
script's folder, each running rank_wrapper.py's `main` (the same wrapper as a cold launch) and leaving Python the
normal way (threads joined, atexit, interpreter shutdown: a teardown hang is one here too). Its output file
(`agent.log` in the launch folder) holds what `classify` reads in torchrun's: "Sending process N closing signal
SIGTERM" when it stops the others after a rank failed, and the failure summary (`rank : R` / `exitcode : C`).
Once every rank has exited it kills whatever the launch still runs (strays, listed) and writes `agent.json`:
{"returncode": 0 or 1 as torchrun's, "strays": ["name (pid N): command", ...]}.

This parent starts no thread, never touches CUDA, is a child subreaper too (an agent killed from outside leaves its
orphans here: they are killed at once) and exits, killing its launches, when stdin closes (the harness is gone).
"""

import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_ANSWERS = [None]  # the file answers go to (the harness's pipe; fd 1 itself is sent to the log, see `main`)
_STORE = [None]  # in an agent: its ranks' store, held until the agent exits


def _prctl(option, value):
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no ctypes, no prctl: not Linux
        return False


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _cuda_initialized():
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a torch without torch.cuda
        return False


def _wrapper():
    spec = importlib.util.spec_from_file_location("bugmatrix_rank_wrapper", os.path.join(HERE, "rank_wrapper.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _describe(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            command = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        with open("/proc/%d/comm" % pid) as fh:
            name = fh.read().strip()
    except OSError:
        return None
    return "%s (pid %d): %s" % (name, pid, command[:160])


def _children():
    """This process's live children (zombies reaped on the way)."""
    me = os.getpid()
    found = []
    try:
        tasks = os.listdir("/proc/%d/task" % me)
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (me, task)) as fh:
                found += [int(pid) for pid in fh.read().split()]
        except OSError:
            continue
    live = []
    for pid in found:
        try:
            with open("/proc/%d/stat" % pid) as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            _reap(pid)
        else:
            live.append(pid)
    return live


def _reap(pid):
    try:
        return os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return (pid, 0)


def _kill_children(keep=()):
    """SIGKILL every child but `keep` until none is left (a subreaper gets the orphans back); what was killed."""
    killed = {}
    for _ in range(200):
        live = [pid for pid in _children() if pid not in keep]
        if not live:
            break
        for pid in live:
            if pid not in killed:
                killed[pid] = _describe(pid) or "pid %d" % pid
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    return list(killed.values())


def _status_code(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _agent_store():
    """torchrun's agent store: a TCPStore this agent hosts (port 0: the OS picks a free one); None without torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    from datetime import timedelta

    from torch.distributed import TCPStore

    return TCPStore("localhost", 0, None, True, timedelta(seconds=900), wait_for_workers=False)


def _rank(request, rank, reader, wrapper):
    """In a forked rank: torchrun's and bugmatrix's environment, then the wrapper; returns only by SystemExit."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has it: KeyboardInterrupt
    with os.fdopen(reader, "rb") as fh:
        port = fh.read().decode().strip()
    nproc = int(request["nproc"])
    os.environ.update(request["env"])
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        GROUP_RANK="0",
        ROLE_RANK=str(rank),
        ROLE_NAME="default",
        LOCAL_WORLD_SIZE=str(nproc),
        WORLD_SIZE=str(nproc),
        GROUP_WORLD_SIZE="1",
        ROLE_WORLD_SIZE=str(nproc),
        MASTER_ADDR="localhost",
        MASTER_PORT=port,
        TORCHELASTIC_RESTART_COUNT="0",
        TORCHELASTIC_MAX_RESTARTS="0",
        TORCHELASTIC_RUN_ID=request["run_id"],
        TORCHELASTIC_SIGNALS_TO_HANDLE="SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        TORCHELASTIC_USE_AGENT_STORE=str(port != ""),
        TORCH_NCCL_ASYNC_ERROR_HANDLING=os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        TORCHELASTIC_ERROR_FILE=os.path.join(request["env"]["TMPDIR"], "torchelastic", str(rank), "error.json"),
    )
    import tempfile

    tempfile.tempdir = None  # read $TMPDIR again: this launch's folder
    generator = sys.modules.get("numpy.random")  # imported in the parent: its global generator was seeded there
    if generator is not None:  # a cold rank seeds it from the OS at import; so does this one (`random` does at fork)
        generator.seed()
    script = request["script"]
    os.chdir(os.path.dirname(script))
    wrapper.main([wrapper.__file__, script] + list(request["args"]))  # exits through SystemExit
    sys.exit(0)


def _agent(request, wrapper):
    """In a forked agent: fork the ranks, host their store, act as torchrun does on a failure, clean up, exit."""
    folder = request["dir"]
    _detach(folder)
    ranks, pipes = _fork_ranks(request, wrapper)
    _STORE[0] = _open_store(pipes)
    codes, first_failure = _wait_ranks(ranks)
    strays = _kill_children()
    failed = sorted(rank for rank, code in codes.items() if code != 0)
    if failed:
        _failure_summary(request["script"], ranks, codes, [first_failure] + [r for r in failed if r != first_failure])
    sys.stdout.flush()
    record = {"returncode": 1 if failed else 0, "strays": strays, "codes": codes}
    tmp = os.path.join(folder, "agent.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(record, fh)
    os.replace(tmp, os.path.join(folder, "agent.json"))
    os._exit(record["returncode"])


def _detach(folder):
    """The agent's own session, subreaper and death with its parent; its output to `agent.log` in `folder`, its
    stdin from /dev/null, the harness's pipe closed (it stays the parent's alone)."""
    os.setsid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    log = os.open(os.path.join(folder, "agent.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    _ANSWERS[0].close()


def _fork_ranks(request, wrapper):
    """Fork the ranks, each waiting on a pipe for its store's port: {pid: rank} and {rank: the pipe's write end}."""
    pipes = {}
    ranks = {}
    for rank in range(int(request["nproc"])):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            for other in pipes.values():
                os.close(other)
            os.close(writer)
            _rank(request, rank, reader, wrapper)
        os.close(reader)
        pipes[rank] = writer
        ranks[pid] = rank
    return ranks, pipes


def _open_store(pipes):
    """Host the ranks' store and send each rank its port (empty: none); the store, to be held while they run."""
    try:
        store = _agent_store()
        port = str(store.port) if store is not None else ""
    except Exception as exc:  # noqa: BLE001 - said in the log, as torchrun would; the ranks run without it
        print("agent store failed: %s: %s" % (type(exc).__name__, exc), flush=True)
        store, port = None, ""
    for writer in pipes.values():
        try:
            os.write(writer, port.encode() + b"\n")
        except OSError:
            pass
        os.close(writer)
    return store


def _wait_ranks(ranks):
    """Reap the ranks (and adopted orphans on the way); after the first failure the others get SIGTERM, as torchrun
    sends it, said in the log. {rank: exit code} and the first rank that failed (None: none did)."""
    codes = {}
    first_failure = None
    closing = False
    while len(codes) < len(ranks):
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid not in ranks:
            continue  # an adopted orphan that died: reaped
        rank = ranks[pid]
        codes[rank] = _status_code(status)
        if codes[rank] != 0 and first_failure is None:
            first_failure = rank
        if first_failure is not None and not closing:
            closing = True
            for other_pid, other in ranks.items():
                if other not in codes:
                    print("Sending process %d closing signal SIGTERM" % other_pid, flush=True)
                    try:
                        os.kill(other_pid, signal.SIGTERM)
                    except OSError:
                        pass
    return codes, first_failure


def _failure_summary(script, ranks, codes, order):
    """torchrun's failure summary, the failed ranks in `order` (the first failure first)."""
    print("%s FAILED\nFailures:" % script)
    pid_of = {rank: pid for pid, rank in ranks.items()}
    for rank in order:
        print("  rank      : %d (local_rank: %d)" % (rank, rank))
        print("  exitcode  : %d (pid: %d)" % (codes[rank], pid_of[rank]))


def _answer(message):
    _ANSWERS[0].write(json.dumps(message) + "\n")
    _ANSWERS[0].flush()


def main(argv=None):
    """Import the modules, report, then fork one agent per launch request until stdin closes."""
    argv = sys.argv if argv is None else argv
    # Not this folder's modules under the imports; a rank replaces this entry with its script's folder, as the
    # wrapper replaces its own folder in a cold launch.
    sys.path[0] = os.devnull
    _ANSWERS[0] = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what an import prints goes to the log (stderr), never into the answers
    wrapper = _wrapper()
    files, failed = _import_all(argv[1:])
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # What the imports made is never collected again: a rank's collections (and its shutdown's) skip it, instead
    # of writing to every page of it, which copies each page from this parent (seconds per rank on a loaded machine).
    gc.collect()
    gc.freeze()
    state = {"pid": os.getpid(), "threads": _threads(), "cuda": _cuda_initialized()}
    _answer(dict(state, ready=True, files=files, failed=failed))
    agents = {}
    stdin = sys.stdin.fileno()
    pending = b""
    while True:
        ready, _, _ = select.select([stdin], [], [], 0.2)
        _tend(agents)
        if not ready:
            continue
        chunk = os.read(stdin, 1 << 16)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            _serve(json.loads(line), agents, wrapper)
    _kill_children()
    return 0


def _import_all(names):
    """Import each module: {name: its file} and {name: why it failed}."""
    failed = {}
    files = {}
    for name in names:
        try:
            module = importlib.import_module(name)
            files[name] = getattr(module, "__file__", None)
        except BaseException as exc:  # noqa: BLE001, B036 - said to the harness, which launches that cell cold
            failed[name] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    return files, failed


def _tend(agents):
    """Kill the orphans of agents killed from outside (strays of a finished launch); reap the agents that ended,
    writing the status of one that left no `agent.json` to `agent.status` in its folder."""
    for pid in _children():
        if pid not in agents:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for pid in list(agents):
        done, status = _reap(pid)
        if done:
            folder = agents.pop(pid)
            if not os.path.exists(os.path.join(folder, "agent.json")) and os.path.isdir(folder):
                with open(os.path.join(folder, "agent.status"), "w") as fh:
                    fh.write("%d\n" % _status_code(status))


def _serve(request, agents, wrapper):
    """Answer one request: a launch forks its agent (recorded in `agents`: pid -> folder), anything else is a ping."""
    if "launch" not in request:
        _answer({"pid": os.getpid(), "threads": _threads(), "cuda": _cuda_initialized()})
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _agent(request["launch"], wrapper)  # never returns: a rank exits by SystemExit from here
    agents[pid] = request["launch"]["dir"]
    _answer({"pid": pid})


if __name__ == "__main__":
    sys.exit(main())
