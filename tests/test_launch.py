"""Real torchrun launches of small fake cases: every way a rank can end gets the documented outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from harness.launch.execute import execute
from harness.launch.interpreter import Environment
from harness.launch.torchrun import LaunchResult
from harness.model.outcome import Outcome, RankState
from harness.session.plan import Selection, plan_local
from tests.helpers import MakeCase, leftovers, run_one

pytestmark = pytest.mark.usefixtures("launch_mode")  # every test cold and warm (tests/conftest.py)

BARRIER = """
import os, sys, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
"""


def test_hung_rank_is_killed_with_stacks_and_nothing_left(
    make_case: MakeCase, env: Environment, tmp_path: Path, launches: list[LaunchResult]
):
    script = """
    import time, torch.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        time.sleep(3600)      # rank 1 never joins
    dist.barrier()            # rank 0 waits forever
    """
    timeout = 20
    started = time.monotonic()
    result = run_one(make_case, env, script, nproc=[2], timeout=timeout)
    elapsed = time.monotonic() - started
    assert result.outcome is Outcome.TIMEOUT
    [launched] = launches
    assert launched.startup_s is not None  # the case's clock starts with its ranks, not with torchrun's start-up
    assert elapsed - launched.startup_s < timeout + 10, (elapsed, launched.startup_s)
    assert "--- rank 0 ---" in result.stacks and "--- rank 1 ---" in result.stacks
    assert "in barrier" in result.stacks  # rank 0's stack shows the collective it hangs in
    assert 'repro.py", line 5' in result.stacks  # rank 1's stack shows its sleep
    assert leftovers(str(tmp_path)) == []


@pytest.mark.parametrize(
    ("script", "outcome", "reason"),
    [
        ("import no_such_module_for_bugmatrix\n", Outcome.ERROR, "ModuleNotFoundError"),
        ("raise RuntimeError('Cannot copy out of meta tensor')\n", Outcome.ERROR, "uncaught RuntimeError"),
        ("print('FAKE-BUG-SIGNATURE seen'); raise SystemExit(0)\n", Outcome.ERROR, "exited 0 but printed"),
        ("print('something else'); raise SystemExit(1)\n", Outcome.ERROR, "without the failure signature"),
        ("raise SystemExit(3)\n", Outcome.ERROR, "exit 3"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGABRT)\n", Outcome.ERROR, "died without a verdict"),
        ("print('no CUDA here'); raise SystemExit(125)\n", Outcome.SKIP, "no CUDA here"),
        ("print('RuntimeError: FAKE-BUG-SIGNATURE'); raise SystemExit(1)\n", Outcome.REPRODUCED, "FAKE-BUG-SIGNATURE"),
        ("print('all good')\n", Outcome.FIXED, "every rank exited 0"),
        # the machine, not the case: a full disk, and the truncated bytecode it leaves behind, are never measurements
        ("raise OSError(28, 'No space left on device')\n", Outcome.INFRA, "the machine failed the launch"),
        ("raise EOFError('marshal data too short')\n", Outcome.INFRA, "marshal data too short"),
        (
            "print('RuntimeError: FAKE-BUG-SIGNATURE import: EOFError: marshal data too short'); raise SystemExit(1)\n",
            Outcome.INFRA,
            "nothing was measured (reproduced)",
        ),
    ],
    ids=[
        "import-error",
        "uncaught",
        "signature-exit0",
        "exit1-no-signature",
        "exit3",
        "sigabrt",
        "skip",
        "reproduced",
        "fixed",
        "disk-full",
        "truncated-bytecode",
        "probe-signature-disk-full",
    ],
)
def test_single_rank_outcomes(make_case: MakeCase, env: Environment, script: str, outcome: Outcome, reason: str):
    result = run_one(make_case, env, script)
    assert result.outcome is outcome, result.reason + "\n" + result.log_excerpt
    assert reason in result.reason


def test_rank_killed_by_signal_is_never_fixed(make_case: MakeCase, env: Environment) -> None:
    script = """
    import os, signal
    if os.environ["RANK"] == "1":
        os.kill(os.getpid(), signal.SIGKILL)   # as an ABI mismatch might
    """
    result = run_one(make_case, env, script, nproc=[2])
    assert result.outcome is Outcome.ERROR
    states = {r.rank: r.state for r in result.ranks}
    assert states[1] is RankState.ERROR and "-9" in result.ranks[1].detail


def test_one_rank_reproduces_while_its_peer_waits(make_case: MakeCase, env: Environment) -> None:
    script = """
    import sys, torch.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        print("RuntimeError: FAKE-BUG-SIGNATURE on rank 0")
        sys.exit(1)
    dist.barrier()   # rank 1 waits for a peer that is gone
    """
    result = run_one(make_case, env, script, nproc=[2])
    assert result.outcome is Outcome.REPRODUCED, result.reason
    assert result.ranks[0].state is RankState.REPRODUCED
    assert result.ranks[1].state in (RankState.TERMINATED, RankState.ERROR)


def test_parallel_launches_do_not_collide(make_case: MakeCase, env: Environment, tmp_path: Path) -> None:
    case = make_case(BARRIER, nproc=[2], variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    [job] = plan_local([case], Selection(devices=("cpu",)))
    results = []
    threads = [threading.Thread(target=lambda: results.append(execute(job, env))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.outcome for r in results] == [Outcome.FIXED] * 3, [r.reason for r in results]
    assert leftovers(str(tmp_path)) == []


def test_the_harnesss_own_interpreter_is_listed_in_process_as_a_subprocess_would_list_it() -> None:
    """`inspect_interpreter(sys.executable)` skips a Python start-up but must see exactly what the subprocess sees."""
    import json
    import subprocess
    import sys

    from harness.launch.interpreter import _INSPECT, _environment, inspect_interpreter

    here = inspect_interpreter(sys.executable)
    there = _environment(
        sys.executable,
        json.loads(subprocess.run([sys.executable, "-c", _INSPECT], check=True, capture_output=True, text=True).stdout),
    )
    differ = {
        name: (here.packages.get(name), there.packages.get(name))
        for name in set(here.packages) | set(there.packages)
        if here.packages.get(name) != there.packages.get(name)
    }
    assert not differ, (differ, sys.path)
    assert here == there and here.get("pydantic") is not None


def test_the_in_process_listing_ignores_what_imports_add_to_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing setuptools appends its `_vendor` folder (dist-infos of older platformdirs, tomli, ...) to sys.path;
    a subprocess never sees it, so the in-process listing must not either (CI failed on exactly this)."""
    import site
    import sys

    from harness.launch.interpreter import inspect_interpreter

    before = inspect_interpreter(sys.executable)
    vendor = next(
        (
            os.path.join(p, "setuptools", "_vendor")
            for p in site.getsitepackages()
            if os.path.isdir(os.path.join(p, "setuptools", "_vendor"))
        ),
        None,
    )
    if vendor is None:
        pytest.skip("no setuptools/_vendor in this environment")
    monkeypatch.setattr(sys, "path", [*sys.path, vendor, os.getcwd()])
    assert inspect_interpreter(sys.executable) == before


def test_the_listing_reads_names_and_versions_as_importlib_metadata_parses_them() -> None:
    """The listing reads Name and Version from the metadata's header block instead of parsing each file whole: it must
    give what `importlib.metadata` gives for every installed distribution. Both are read in a fresh interpreter, as
    an inspection runs: in this test process another test may have imported something that puts more folders on
    sys.path (pkg_resources adds setuptools' _vendor, whose own platformdirs and tomli then shadow the installed)."""
    code = (
        "import json; from importlib import metadata; from harness.launch.interpreter import _inspect; "
        "listed = {n: i['version'] for n, i in _inspect()['packages'].items()}; "
        "parsed = {d.metadata['Name']: d.version for d in metadata.distributions() if d.metadata['Name']}; "
        "print(json.dumps([listed, parsed]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    listed, parsed = json.loads(proc.stdout)
    assert listed == parsed and len(parsed) > 20


def test_python3_naming_the_harnesss_own_interpreter_is_listed_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--python python3` on a GPU image names the interpreter the harness runs in: listed in-process (no Python
    start-up); the base interpreter a venv links to is another environment, listed by a subprocess."""
    import os
    import sys

    from harness.launch import interpreter

    folder = os.path.dirname(sys.executable)
    other_name = next(
        (
            os.path.join(folder, name)
            for name in ("python3", "python")
            if os.path.join(folder, name) != sys.executable
            and os.path.realpath(os.path.join(folder, name)) == os.path.realpath(sys.executable)
        ),
        None,
    )
    if other_name is None:
        pytest.skip("this interpreter has no second name in its folder")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("listed by a subprocess")

    monkeypatch.setattr(interpreter, "run_bounded", refuse)
    listed = interpreter.inspect_interpreter(other_name)
    assert listed.python == other_name and listed.packages == interpreter.inspect_interpreter(sys.executable).packages
    base = os.path.realpath(sys.executable)
    if os.path.dirname(base) != folder:  # a venv: its base interpreter is another environment
        assert not interpreter._same_interpreter(base, sys.executable)


def test_gpus_are_read_from_the_drivers_proc_files_without_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /proc/driver/nvidia lists GPUs, no nvidia-smi runs (it costs 0.3-1 s on a GPU machine); a GPU whose
    /dev/nvidiaN is absent (not given to this container) is not counted; no GPU listed there: nvidia-smi decides."""
    from harness.launch import interpreter

    from .conftest import fake_gpu_machine

    smi = fake_gpu_machine(tmp_path / "smi", monkeypatch)
    proc, dev = tmp_path / "gpus", tmp_path / "dev"
    dev.mkdir()
    for minor, bus in enumerate(["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"]):
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(
            f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 16\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
        )
        if minor < 2:
            (dev / f"nvidia{minor}").touch()
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Thu Sep 25 00:00:00 UTC 2025\nGCC version:  gcc 12\n"
    )
    monkeypatch.setattr(interpreter, "PROC_GPUS", proc)
    monkeypatch.setattr(interpreter, "PROC_VERSION", version)
    monkeypatch.setattr(interpreter, "DEV_NODE", str(dev / "nvidia{minor}"))
    interpreter.forget_gpus()
    assert interpreter.gpus() == interpreter.Gpus(("NVIDIA H100 80GB HBM3",) * 2, "580.95.05", "proc")
    assert interpreter.gpu_count() == 2 and (smi / "calls").read_text() == ""
    for folder in proc.iterdir():
        (folder / "information").unlink()
    interpreter.forget_gpus()
    assert interpreter.gpus() == interpreter.Gpus(("NVIDIA H100 80GB HBM3",), "580.95.05", "nvidia-smi")
    interpreter.forget_gpus()


def test_nvidia_smi_is_asked_once_whoever_asks(one_gpu: Path) -> None:
    """The GPU count (scheduling, skips) and the machine's description (the run's record) share one nvidia-smi
    call, also when threads ask at once (a prefetch and the run)."""
    from harness.launch import interpreter

    interpreter.machine_info.cache_clear()
    interpreter.prefetch_gpus()
    threads = [threading.Thread(target=interpreter.gpu_count) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = interpreter.machine_info()
    interpreter.machine_info.cache_clear()
    assert interpreter.gpu_count() == 1 and info["gpu"] == ["NVIDIA H100 80GB HBM3"] and info["driver"] == "580.95.05"
    assert (one_gpu / "calls").read_text() == "--query-gpu=name,driver_version --format=csv,noheader\n"


def test_nvidia_smi_starts_before_the_imports_for_a_launching_command_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /proc lists no GPU, `bugmatrix run` starts nvidia-smi as its first import (harness/launch/early_smi.py),
    and the GPU probe takes that call's answer instead of making another; `report` starts none, nor does a machine
    whose /proc files list the GPUs."""
    from harness.launch import early_smi, interpreter
    from tests.conftest import fake_gpu_machine

    smi = fake_gpu_machine(tmp_path / "fake-gpu", monkeypatch, sleep=0.3)
    no_proc, listed = tmp_path / "no-proc", tmp_path / "proc"
    (listed / "0000:18:00.0").mkdir(parents=True)
    early_smi.take()
    early_smi.start(["bugmatrix", "report"], str(no_proc))
    early_smi.start(["bugmatrix", "run", "x"], str(listed))
    assert early_smi.take() is None
    early_smi.start(["/x/harness/__main__.py", "run", "torch-177844"], str(no_proc))
    running = early_smi._started  # noqa: SLF001
    assert running is not None and running.poll() is None  # started and left running (it sleeps 0.3 s), not awaited
    assert interpreter.gpus() == interpreter.Gpus(("NVIDIA H100 80GB HBM3",), "580.95.05", "nvidia-smi")
    assert running.returncode == 0 and early_smi.take() is None  # the probe took that call's answer
    assert len((smi / "calls").read_text().splitlines()) == 1  # one call in all
    interpreter.forget_gpus()


def test_nothing_a_launch_puts_in_the_temporary_directory_outlives_it(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    told = tmp_path / "made.txt"
    script = f"""
    import os, tempfile
    made = tempfile.mkdtemp(prefix="left-by-the-case-")   # never removed by the script
    open(os.path.join(made, "cache.bin"), "w").write("x")
    open({str(told)!r}, "a").write(made + "\\n")
    """
    result = run_one(make_case, env, script, nproc=[2])
    assert result.outcome is Outcome.FIXED, result.reason
    made = [Path(line) for line in told.read_text().splitlines()]
    assert len(made) == 2  # one per rank
    for folder in made:
        assert folder.parent != Path(tempfile.gettempdir())  # the launch's own TMPDIR, not the machine's
        assert not folder.exists()
