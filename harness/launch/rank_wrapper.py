"""Runs one rank of a case script and records that rank's own verdict.

torchrun starts this file (not the script) in every worker: `python rank_wrapper.py SCRIPT [ARGS...]`; a warm
launch's forked ranks call its `main` with the same argv (warm_parent.py).
It is standard-library only and runs in the cell's interpreter (any Python >= 3.8), never importing the harness.

For rank R (the global rank, $RANK: on several nodes, every node's ranks write into one folder) it writes into
$BUGMATRIX_RANK_DIR:
  rank<R>.log     the rank's stdout and stderr at file-descriptor level (C++ output and crash dumps included)
  rank<R>.json    {"rank", "pid", "started", "node" (GROUP_RANK), "local_rank", and once known: "finished",
                  "exit_code", "exception", "terminated"}
                  replaced atomically, so a reader sees the last complete record
  rank<R>.stacks  every thread's Python stack, written when the harness sends SIGUSR1 to a hung rank

Under Yama's ptrace_scope=1 only a process's ancestors may ptrace it, and py-spy (the harness's child, not the
rank's ancestor) would be refused: the rank declares the harness ($BUGMATRIX_TRACER_PID) as its tracer, which
admits the harness's descendants (prctl PR_SET_PTRACER; a no-op without Yama).
"""

import faulthandler
import json
import os
import runpy
import signal
import sys
import time
import traceback


def _write(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh)
    os.replace(tmp, path)


def _exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints and exits 1, as Python does
    return 1


PR_SET_PTRACER = 0x59616D61


def _allow_tracer():
    tracer = os.environ.get("BUGMATRIX_TRACER_PID")
    if not tracer or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PTRACER, int(tracer), 0, 0, 0)
    except Exception:  # noqa: BLE001 - no ctypes, no prctl: the harness falls back to faulthandler
        pass


def main(argv=None):
    out_dir = os.environ["BUGMATRIX_RANK_DIR"]
    rank = int(os.environ.get("RANK", "0"))
    base = os.path.join(out_dir, "rank%d" % rank)
    record = {"rank": rank, "pid": os.getpid(), "started": time.time()}
    for key, name in (("node", "GROUP_RANK"), ("local_rank", "LOCAL_RANK")):  # which node's agent ran it, as what
        if os.environ.get(name, "").isdigit():
            record[key] = int(os.environ[name])

    def on_sigterm(signum, frame):
        # torchrun terminates the surviving workers when one fails: that is collateral, not a verdict. A verdict
        # already recorded (the script returned; SIGTERM came during shutdown) stands.
        if "finished" not in record:
            record.update(terminated=True, finished=time.time(), exit_code=128 + signum)
        _write(base + ".json", record)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(record["exit_code"])

    # First of all: a SIGTERM that comes while the wrapper sets up (a peer failed at once, on a loaded machine)
    # is recorded as collateral too, not a death without a verdict.
    signal.signal(signal.SIGTERM, on_sigterm)
    _write(base + ".json", record)
    _allow_tracer()

    log_fd = os.open(base + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    stacks = open(base + ".stacks", "w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    faulthandler.enable(file=sys.stderr, all_threads=True)

    argv = sys.argv if argv is None else argv
    script, args = argv[1], argv[2:]
    sys.argv = [script] + args
    # As `python SCRIPT` would: the script's folder first, and not this wrapper's (harness/) folder.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:  # noqa: B036 - the verdict must record whatever escaped the script
        traceback.print_exc()
        record["exception"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
        code = 1
    record.update(finished=time.time(), exit_code=code)
    sys.stdout.flush()
    sys.stderr.flush()
    _write(base + ".json", record)
    sys.exit(code)


if __name__ == "__main__":
    main()
