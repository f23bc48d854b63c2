"""Warm launches (harness/launch/warm.py, warm_parent.py): torchrun's contract from a fork, and what rests on it.

Real launches of small scripts with real gloo; the parents are real interpreters. The four launch test files run in
both modes as well (BUGMATRIX_LAUNCH_MODE=warm); what is here is what only a warm launch has: its parent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.launch import warm
from harness.launch.classify import classify
from harness.launch.interpreter import Environment
from harness.launch.processes import kill_tree
from harness.launch.torchrun import WARM_IMPORTS, LaunchResult, become_subreaper, launch
from harness.model.outcome import Outcome, RankState

from .conftest import MakeCase
from .helpers import leftovers

# What torchrun's agent sets in each worker (torch/distributed/elastic/agent/server/local_elastic_agent.py) and what
# bugmatrix adds; MASTER_PORT, TORCHELASTIC_RUN_ID and TORCHELASTIC_ERROR_FILE differ per launch by nature.
SAME = (
    "RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK ROLE_RANK ROLE_NAME GROUP_WORLD_SIZE ROLE_WORLD_SIZE "
    "MASTER_ADDR TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_USE_AGENT_STORE "
    "TORCH_NCCL_ASYNC_ERROR_HANDLING TORCHELASTIC_SIGNALS_TO_HANDLE OMP_NUM_THREADS PYTHONUNBUFFERED"
).split()
PER_LAUNCH = [
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_ERROR_FILE",
    "BUGMATRIX_RANK_DIR",
    "BUGMATRIX_LAUNCH",
    "TMPDIR",
]

CONTRACT = """
import json, os, signal, sys, tempfile, torch, torch.distributed as dist
handlers = {s: signal.getsignal(getattr(signal, s)) for s in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGHUP", "SIGQUIT")}
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
seen = {k: os.environ.get(k) for k in sys.argv[1].split(",")}
seen.update(sum=t.item(), cwd=os.getcwd(), tmp=tempfile.gettempdir(), name=__name__, argv=sys.argv[2:],
            path0=sys.path[0], file=__file__, ppid_alive=os.getppid() > 1,
            signals={s: getattr(h, "__name__", str(h)) for s, h in handlers.items()})
dist.destroy_process_group()
with open(os.path.join(os.path.dirname(__file__), "%s-%s.json" % (sys.argv[2], os.environ["RANK"])), "w") as fh:
    json.dump(seen, fh)
"""


def script(tmp_path: Path, source: str, name: str = "repro.py") -> Path:
    folder = tmp_path / "case"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def test_a_warm_rank_gets_torchruns_environment_folder_and_script_as_a_cold_one(tmp_path: Path) -> None:
    """Every variable torchrun sets, the same values (the launch's own ones set and inside its launch folder), the
    script's folder as cwd and sys.path[0], $TMPDIR and tempfile in the launch's folder, `__main__`, the signal
    handlers a fresh interpreter has (Ctrl-C a KeyboardInterrupt), gloo working."""
    path = script(tmp_path, CONTRACT)
    keys = ",".join(SAME + PER_LAUNCH)
    seen = {}
    for mode in ("cold", "warm"):
        result = launch(sys.executable, path, [keys, mode], 2, 120, mode=mode)
        assert result.mode == mode and not result.warm_refused
        assert [r.exit_code for r in result.ranks.values()] == [0, 0], result.agent_log + str(result.ranks)
        seen[mode] = [json.loads((path.parent / f"{mode}-{rank}.json").read_text()) for rank in (0, 1)]
    for cold, hot in zip(seen["cold"], seen["warm"], strict=True):
        assert {k: hot[k] for k in SAME} == {k: cold[k] for k in SAME}
        assert all(hot[k] for k in PER_LAUNCH), hot  # set, as torchrun and the harness set them
        rank_dir = Path(hot["BUGMATRIX_RANK_DIR"])
        assert Path(hot["TMPDIR"]).parent == rank_dir and hot["tmp"] == hot["TMPDIR"]  # tempfile reset after fork
        assert Path(hot["TORCHELASTIC_ERROR_FILE"]).is_relative_to(hot["TMPDIR"])
        for key in ("sum", "cwd", "name", "path0", "file", "ppid_alive", "signals"):
            assert hot[key] == cold[key], key
        assert hot["argv"] == ["warm"] and cold["argv"] == ["cold"]
    assert seen["warm"][0]["sum"] == 3.0 and seen["warm"][0]["cwd"] == str(path.parent)
    assert leftovers(str(tmp_path)) == []


FORK_ONLY_DAEMON = """
import os, sys, time
if os.environ["RANK"] == "0":
    r, w = os.pipe()
    if os.fork() == 0:              # a daemon that never execs: its /proc/PID/environ is its parent's
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            time.sleep(3600)
            os._exit(0)
        os._exit(0)
    os.wait()
    with open(os.path.join(os.path.dirname(__file__), "daemon.pid"), "w") as fh:
        fh.write(os.read(r, 64).decode())
print("exits 0")
"""


@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_fork_only_setsid_daemon_is_killed_after_the_launch(tmp_path: Path, mode: str) -> None:
    """A warm rank's forks do not show the launch's marker in /proc/PID/environ (the environment at execve: the
    parent's); the launch's subreaper agent still finds the daemon and kills it, and the result lists it."""
    path = script(tmp_path, FORK_ONLY_DAEMON)
    result = launch(sys.executable, path, [], 2, 120, mode=mode)
    assert result.mode == mode
    assert [r.exit_code for r in result.ranks.values()] == [0, 0], result.agent_log
    daemon = int((path.parent / "daemon.pid").read_text())
    assert not psutil.pid_exists(daemon)
    assert len(result.strays) == 1 and f"(pid {daemon})" in result.strays[0], result.strays
    assert leftovers(str(tmp_path)) == []


HANG_OR_EXIT = """
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
time.sleep(float(sys.argv[1]))
print("done")
"""


def test_a_warm_launch_killed_at_its_timeout_spares_its_parent_and_the_other_launch(tmp_path: Path) -> None:
    """`-j 2`: two launches share one parent. One hangs past its timeout and is killed with its ranks; the other
    ends on its own, fixed, and the parent serves the next launch."""
    path = script(tmp_path, HANG_OR_EXIT)
    results: dict[str, LaunchResult] = {}

    def run(name: str, hold: str, timeout: float) -> None:
        results[name] = launch(sys.executable, path, [hold], 2, timeout, mode="warm")

    launch(sys.executable, path, ["0"], 1, 60, mode="warm")  # the parent is up: both launches below share it
    [parent] = [p for p in warm.parents() if p.key == (sys.executable, WARM_IMPORTS)]
    threads = [
        threading.Thread(target=run, args=("hung", "3600", 4)),
        threading.Thread(target=run, args=("quick", "8", 120)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["hung"].timed_out and all(r.hung for r in results["hung"].ranks.values())
    assert not results["quick"].timed_out
    assert [r.exit_code for r in results["quick"].ranks.values()] == [0, 0], results["quick"].agent_log
    assert parent.proc.poll() is None and parent.stale() is None
    again = launch(sys.executable, path, ["0"], 1, 60, mode="warm")
    assert again.ranks[0].exit_code == 0 and parent in warm.parents()
    assert leftovers(str(tmp_path)) == []


def test_a_warm_parent_killed_mid_launch_leaves_ranks_that_say_so_and_is_replaced(tmp_path: Path) -> None:
    """The warm twin of a torchrun SIGKILLed from outside: the parent dies, its agent and ranks die with it
    (PR_SET_PDEATHSIG), each rank an `error` naming the launcher's death; the next launch gets a new parent."""
    path = script(tmp_path, HANG_OR_EXIT)
    launch(sys.executable, path, ["0"], 1, 60, mode="warm")
    [parent] = [p for p in warm.parents() if p.key == (sys.executable, WARM_IMPORTS)]
    out: dict[str, LaunchResult] = {}
    runner = threading.Thread(target=lambda: out.update(r=launch(sys.executable, path, ["3600"], 2, 120, mode="warm")))
    runner.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # both ranks started: an agent with two children
        try:
            if any(len(agent.children()) == 2 for agent in psutil.Process(parent.proc.pid).children()):
                break
        except psutil.NoSuchProcess:  # the first launch's agent, reaped by the parent while it was listed
            pass
        time.sleep(0.1)
    time.sleep(1.0)
    os.kill(parent.proc.pid, signal.SIGKILL)
    runner.join(60)
    result = out["r"]
    outcome, _, ranks = classify(result, "NEVER")
    assert outcome is Outcome.ERROR
    for rank in ranks:
        assert rank.state is RankState.ERROR and "the warm launch's agent itself was killed by SIGKILL" in rank.detail
    assert leftovers(str(tmp_path)) == []
    again = launch(sys.executable, path, ["0"], 1, 60, mode="warm")
    assert again.ranks[0].exit_code == 0 and parent not in warm.parents()


LEADER_DIES_FIRST = """
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(3600)
    os._exit(0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(pid))
"""


def test_the_tree_kill_reaps_a_session_whose_leader_died_first(tmp_path: Path) -> None:
    """A warm agent killed with its parent leaves its ranks to this process (a subreaper), no longer anyone's
    descendants but still in its session: the tree kill kills and reaps them, none left running or a zombie here
    (it reaped only the leader's descendants: a killed parent's ranks were still exiting when the launch returned)."""
    assert become_subreaper()
    pid_file = tmp_path / "member.pid"
    leader = subprocess.Popen([sys.executable, "-c", LEADER_DIES_FIRST, str(pid_file)], start_new_session=True)
    deadline = time.monotonic() + 60
    member = None
    while time.monotonic() < deadline and member is None:  # the leader has exited: its child is this process's
        try:
            pid = int(pid_file.read_text())
            member = pid if psutil.Process(pid).ppid() == os.getpid() else None
        except (OSError, ValueError, psutil.NoSuchProcess):
            pass
        time.sleep(0.05)
    assert member is not None and psutil.Process(member).status() != psutil.STATUS_ZOMBIE
    kill_tree(leader)
    assert not psutil.pid_exists(member)


def fake_module(folder: Path, body: str) -> dict[str, str]:
    """A module `bmx_fake_import` in `folder`, and the environment that imports it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bmx_fake_import.py").write_text(body)
    return {**os.environ, "PYTHONPATH": str(folder), "OMP_NUM_THREADS": "1"}


def test_a_parent_is_replaced_when_it_died_or_an_imported_file_changed(tmp_path: Path) -> None:
    env = fake_module(tmp_path / "mods", "X = 1\n")
    first = warm.parent_for(warm.ParentSpec(sys.executable, ("bmx_fake_import",), env))
    assert warm.parent_for(warm.ParentSpec(sys.executable, ("bmx_fake_import",), env)) is first  # one parent per key
    other = warm.parent_for(warm.ParentSpec(sys.executable, ("json",), env))  # another import set: another parent
    assert other is not first
    time.sleep(0.01)
    (tmp_path / "mods" / "bmx_fake_import.py").write_text("X = 2\n")  # the environment was rebuilt
    assert first.stale() is not None
    second = warm.parent_for(warm.ParentSpec(sys.executable, ("bmx_fake_import",), env))
    assert second is not first and first.proc.poll() is not None  # the stale one was ended, not left running
    os.kill(second.proc.pid, signal.SIGKILL)
    second.proc.wait()
    third = warm.parent_for(warm.ParentSpec(sys.executable, ("bmx_fake_import",), env))
    assert third is not second and third.proc.poll() is None
    (tmp_path / "mods" / "bmx_fake_import.py").unlink()  # its environment evicted: ended at the next launch, any
    assert other in warm.parents() and warm.parent_for(warm.ParentSpec(sys.executable, ("json",), env)) is other
    assert third not in warm.parents() and third.proc.poll() is not None
    warm.retire(sys.executable)
    assert third.proc.poll() is not None and other.proc.poll() is not None


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n", "thread"),
        ("raise ImportError('no such thing')\n", "could not import bmx_fake_import (ImportError: no such thing)"),
    ],
)
def test_a_parent_whose_imports_start_a_thread_or_fail_is_refused(tmp_path: Path, body: str, said: str) -> None:
    env = fake_module(tmp_path / "mods", body)
    with pytest.raises(warm.WarmUnavailable, match=said.replace("(", r"\(").replace(")", r"\)")):
        warm.parent_for(warm.ParentSpec(sys.executable, ("bmx_fake_import",), env))


def test_a_launch_no_warm_parent_can_serve_runs_cold_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.launch import torchrun

    monkeypatch.setattr(torchrun, "WARM_IMPORTS", ("torch", "no_such_module_for_bugmatrix"))
    path = script(tmp_path, "print('ok')\n")
    result = launch(sys.executable, path, [], 1, 60, mode="warm")
    assert result.mode == "cold" and "no_such_module_for_bugmatrix" in result.warm_refused
    outcome, reason, _ = classify(result, "NEVER")
    assert outcome is Outcome.FIXED and "launched cold, not warm:" in reason


def test_the_launch_mode_comes_from_the_environment_warm_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warm.MODE_ENV, raising=False)
    assert warm.default_mode() == "warm"  # parity proven (issue 36: the record's cold verdicts, re-run warm)
    monkeypatch.setenv(warm.MODE_ENV, "cold")
    assert warm.default_mode() == "cold"
    monkeypatch.setenv(warm.MODE_ENV, "tepid")
    with pytest.raises(ValueError, match="BUGMATRIX_LAUNCH_MODE"):
        warm.default_mode()


def test_cold_in_case_yaml_enters_the_digest_only_when_set_and_launches_cold(
    make_case: MakeCase, env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.launch import execute
    from harness.model.job import run_digest
    from harness.session.plan import Selection, plan_local

    plain = make_case("print('ok')\n", case_id="fake-1-plain")
    before = run_digest(plain, "bug")
    cold = make_case("print('ok')\n", case_id="fake-2-cold", cold="exercises the elastic agent")
    by_variant = make_case(
        "print('ok')\n",
        case_id="fake-3-variant",
        variants={"bug": {"cold": "reads RANK at import", "expect": [{"outcome": "fixed"}]}},
    )
    assert cold.spec.cold_of("bug") == "exercises the elastic agent"
    assert by_variant.spec.cold_of("bug") == "reads RANK at import" and plain.spec.cold_of("bug") is None
    assert run_digest(plain, "bug") == before != run_digest(cold, "bug")
    modes = []
    monkeypatch.setattr(execute, "launch", lambda *a, **k: modes.append(k["mode"]) or launch(*a, **k))
    monkeypatch.setenv(warm.MODE_ENV, "warm")
    for case in (plain, by_variant):
        [job] = plan_local([case], Selection(devices=("cpu",)))
        execute.execute(job, env)
    assert modes == [None, "cold"]


def test_check_case_asks_a_script_using_torchrun_itself_for_cold(make_case: MakeCase) -> None:
    from harness.analysis.caselint import cold_unsaid, torchrun_imports

    source = "import torch.distributed.elastic.multiprocessing as mp\nfrom torch.distributed import run\n"
    assert torchrun_imports(source) == ["torch.distributed.elastic.multiprocessing", "torch.distributed.run"]
    assert torchrun_imports("import torch.distributed as dist\nfrom torch.distributed import all_reduce\n") == []
    plain = make_case(source, case_id="fake-1-plain")
    [line] = cold_unsaid(plain.spec, source)
    assert line.startswith("cold: the script imports torch.distributed.elastic.multiprocessing, torch.distributed.run")
    said = make_case(source, case_id="fake-2-said", cold="restarts workers through the elastic agent")
    assert cold_unsaid(said.spec, source) == []


def test_run_says_how_each_job_was_launched_and_cold_or_warm_share_a_fingerprint(
    make_case: MakeCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main
    from harness.session.store import ResultStore

    monkeypatch.delenv(warm.MODE_ENV, raising=False)
    make_case("print('ok')\n", variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    cases, db = str(tmp_path / "cases"), str(tmp_path / "r.db")
    base = ["--cases-dir", cases, "run", "--json", "--device", "cpu", "--db", db, "--redo"]
    seen = {}
    for flag in ("--warm", "--cold"):
        assert main([*base, flag]) == 0
        [item] = json.loads(capsys.readouterr().out)["results"]
        seen[flag] = item
    assert seen["--warm"]["launch"] == "warm" and seen["--cold"]["launch"] == "cold"
    assert seen["--warm"]["fingerprint"] == seen["--cold"]["fingerprint"]  # how it launched is not what it measured
    stored = ResultStore(Path(db)).results()
    assert sorted(entry[-1].extra["launch"] for entry in stored) == ["cold", "warm"]
    record = tmp_path / "record"
    assert main(["--cases-dir", cases, "record", "fold", "--record", str(record), "--offline", db]) == 0
    rows = [json.loads(line) for line in (record / "results" / "fake-1-case.jsonl").read_text().splitlines()]
    assert [row["launch"] for row in rows] == ["warm"]  # the cold run confirmed it: a row keeps its first measurement
    capsys.readouterr()
    monkeypatch.setenv(warm.MODE_ENV, "tepid")
    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "$BUGMATRIX_LAUNCH_MODE" in err and "tepid" in err
    assert main([*base, "--cold"]) == 0  # the command line decides before the variable is read
    with pytest.raises(SystemExit) as both:
        main([*base, "--cold", "--warm"])
    assert both.value.code == 2


def test_warm_ranks_draw_fresh_random_numbers_as_cold_ones_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's and `random`'s global generators are seeded at import from the OS; a rank forked from a parent that
    imported them must not draw its parent's numbers (every rank and every launch the same)."""
    from harness.launch import torchrun

    monkeypatch.setattr(torchrun, "WARM_IMPORTS", ("torch", "numpy.random", "random"))
    path = script(
        tmp_path,
        """
        import json, os, random, sys
        import numpy
        out = os.path.join(os.path.dirname(__file__), "%s-%s.json" % (sys.argv[1], os.environ["RANK"]))
        with open(out, "w") as fh:
            json.dump([random.random(), float(numpy.random.rand())], fh)
        """,
    )
    for tag in ("a", "b"):
        result = launch(sys.executable, path, [tag], 2, 60, mode="warm")
        assert result.mode == "warm" and result.returncode == 0, result.agent_log
    drawn = [tuple(json.loads((path.parent / f"{t}-{r}.json").read_text())) for t in "ab" for r in (0, 1)]
    assert len({d[0] for d in drawn}) == 4 and len({d[1] for d in drawn}) == 4, drawn


def test_deleting_an_environment_ends_its_warm_parents_first(tmp_path: Path) -> None:
    """A parent holding a deleted environment's files would keep them on disk (and miscount its size): eviction,
    `--disk-budget` and `env prune` delete through `EnvCache.remove`, which ends that environment's parents first."""
    from harness.matrix.envcache import EnvCache

    cache = EnvCache(tmp_path / "envs")
    folder = cache.path("abc123")
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    mine = warm.parent_for(warm.ParentSpec(str(python), ("json",), env))
    other = warm.parent_for(warm.ParentSpec(sys.executable, ("json",), env))
    assert cache.remove("abc123") and not folder.exists()
    assert mine.proc.poll() is not None and mine not in warm.parents()
    assert other.proc.poll() is None and other in warm.parents()  # another environment's parent lives on
    warm.retire(sys.executable)


def test_a_cells_warm_parents_end_when_every_cell_of_its_environment_has_finished(tmp_path: Path) -> None:
    """A run over many cells (or a bisect over many releases) must not keep one parent per environment it walked
    (~0.3-0.5 GiB each, measured): when the last cell of an environment finishes, its parents end; an environment
    another unfinished cell shares keeps its parent."""
    from types import SimpleNamespace

    from harness.matrix.cellenvs import CellEnvironments
    from harness.matrix.envcache import EnvCache

    envs = CellEnvironments(None, EnvCache(tmp_path / "envs"))  # type: ignore[arg-type]  # no matrix is read here
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    parents = {}
    for key in ("one", "two"):
        (envs.cache.path(key) / "bin").mkdir(parents=True)
        python = envs.cache.path(key) / "bin" / "python"
        python.symlink_to(sys.executable)
        parents[key] = warm.parent_for(warm.ParentSpec(str(python), ("json",), env))
    envs._cells_of.update(one={"a"}, two={"b", "c"})
    envs.cell_finished(SimpleNamespace(name="a"))  # type: ignore[arg-type]
    envs.cell_finished(SimpleNamespace(name="b"))  # type: ignore[arg-type]
    assert parents["one"].proc.poll() is not None and parents["one"] not in warm.parents()
    assert parents["two"].proc.poll() is None  # cell c still runs in it
    envs.cell_finished(SimpleNamespace(name="c"))  # type: ignore[arg-type]
    assert parents["two"].proc.poll() is not None and parents["two"] not in warm.parents()


def test_a_file_landing_while_the_launch_folder_is_removed_never_fails_the_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in CI: a file written into a launch's folder as it was being removed ("Directory not empty") made
    `launch` raise, and the job's measured `reproduced` became `infra`. The folder's removal is retried and never
    raises; the launch's result stands."""
    import errno
    import shutil as shutil_module

    from harness.launch import torchrun

    real = shutil_module.rmtree
    calls = []

    def racing(path: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(path)
        if len(calls) == 1:  # a file lands as the folder is removed
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(torchrun.shutil, "rmtree", racing)
    path = script(tmp_path, "import sys\nsys.exit(0)\n")
    result = launch(sys.executable, path, [], 1, 60)
    assert result.returncode == 0 and len(calls) == 2 and not Path(calls[0]).exists()
    with torchrun.launch_folder() as folder:  # one that never goes is left behind, silently
        monkeypatch.setattr(torchrun.shutil, "rmtree", lambda *a, **k: (_ for _ in ()).throw(OSError("busy")))
    assert folder.exists()
    real(folder)
