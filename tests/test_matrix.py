"""matrix.yaml: expansion, couplings as data, time-travel resolution and environments, hermetic (fake wheels)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.matrix.basics import MatrixError
from harness.matrix.envcache import EnvCache, cache_in_use
from harness.matrix.expand import load_matrix
from harness.matrix.resolve import resolve_cell

from .fakeindex import FakeRelease, build_index, fake_torch

BROKEN = "raise ImportError('undefined symbol: _ZN3c10fake (a fake ABI break)')\n"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("index")
    return build_index(
        root,
        [
            # a coupled stack: fakerec 1.N <-> fakegemm-cpu 1.N <-> faketorch 2.(N+5)
            FakeRelease("faketorch", "2.5.0", "2024-01-10T00:00:00Z"),
            FakeRelease("faketorch", "2.5.1", "2024-01-20T00:00:00Z"),
            FakeRelease("faketorch", "2.6.0", "2024-03-01T00:00:00Z"),
            FakeRelease("fakegemm-cpu", "1.0.0", "2024-01-15T00:00:00Z", package="fakegemm"),
            FakeRelease("fakegemm-cpu", "1.1.0", "2024-03-02T00:00:00Z", package="fakegemm"),
            FakeRelease("fakerec", "1.0.0", "2024-01-16T00:00:00Z", requires=["fakegemm", "fakedep"]),
            FakeRelease("fakerec", "1.1.0", "2024-03-03T00:00:00Z", requires=["fakegemm", "fakedep"]),
            # an unpinned dependency with releases before and after: time travel must pick the one of the day
            FakeRelease("fakedep", "1.0", "2024-01-01T00:00:00Z"),
            FakeRelease("fakedep", "9.0", "2025-01-01T00:00:00Z"),
            FakeRelease("fakebroken", "1.0", "2024-01-01T00:00:00Z", module=BROKEN),
            # what an old release needs but does not declare (lightning 2.1.0-2.1.2 and setuptools' pkg_resources)
            FakeRelease("fakeshim", "1.0", "2023-06-01T00:00:00Z"),
            FakeRelease("fakeshim", "2.0", "2025-06-01T00:00:00Z"),
        ],
    )


def write_matrix(tmp_path: Path, index: str, **extra: object) -> Path:
    doc = {
        "indexes": {"local": index},
        "defaults": {"index": "local", "python": "3.11", "device": "cpu"},
        "device_packages": {"fakegemm": {"cpu": "fakegemm-cpu", "cuda": "fakegemm"}},
        "couplings": [
            {
                "name": "fakerec-stack",
                "lead": "fakerec",
                "rows": [
                    {"fakerec": "==1.0.*", "fakegemm": "==1.0.*", "faketorch": "==2.5.*"},
                    {"fakerec": "==1.1.*", "fakegemm": "==1.1.*", "faketorch": "==2.6.*"},
                ],
            }
        ],
        "cells": [{"name": "default", "pins": {"fakerec": "1.1.0"}}],
        "groups": [
            {
                "name": "fakerec-{fakerec}-{device}",
                "axes": {"fakerec": ["1.0.0", "1.1.0"]},
                "devices": ["cpu", "cuda"],
                "exclude": [{"fakerec": "1.0.0", "device": "cuda"}],
            }
        ],
    }
    doc.update(extra)
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_expansion_couplings_and_include_exclude(tmp_path: Path, index: str) -> None:
    matrix = load_matrix(write_matrix(tmp_path, index))
    assert [c.name for c in matrix.cells] == ["default", "fakerec-1.0.0-cpu", "fakerec-1.1.0-cpu", "fakerec-1.1.0-cuda"]
    cell = matrix.cell("fakerec-1.0.0-cpu")
    assert cell.pins == {"fakerec": "1.0.0", "fakegemm": "==1.0.*", "faketorch": "==2.5.*"}
    resolved = resolve_cell(matrix, cell)
    assert resolved.versions == {"fakegemm": "1.0.0", "fakerec": "1.0.0", "faketorch": "2.5.1"}
    assert "fakegemm-cpu==1.0.0" in resolved.requirements  # the device picks the distribution
    assert resolved.as_of is not None and resolved.as_of.isoformat().startswith("2024-01-20")  # newest pin
    # the same pins under another name share one environment
    default, same = (resolve_cell(matrix, matrix.cell(n)) for n in ("default", "fakerec-1.1.0-cpu"))
    assert default.key == same.key


def test_a_cell_that_breaks_a_pairing_is_rejected(tmp_path: Path, index: str) -> None:
    path = write_matrix(tmp_path, index, cells=[{"name": "bad", "pins": {"fakerec": "1.0.0", "faketorch": "2.6.0"}}])
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert str(info.value) == (
        f"{path}: cells.0 (bad): faketorch 2.6.0 breaks the pairing 'fakerec-stack': "
        "fakerec ==1.0.* needs faketorch ==2.5.*"
    )


def test_an_unpaired_cell_keeps_its_written_pins(tmp_path: Path, index: str) -> None:
    """`unpaired: true` (a coupling case's mismatched releases): the pins that break a pairing are kept as written,
    nothing is filled in; the same pins without it are still refused."""
    cells = [
        {"name": "mismatch", "unpaired": True, "pins": {"fakerec": "1.0.0", "fakegemm": "1.1.0", "faketorch": "2.6.0"}}
    ]
    groups = [
        {
            "name": "rec-{fakerec}-gemm-{fakegemm}",
            "unpaired": True,
            "axes": {"fakerec": ["1.0.0"], "fakegemm": ["1.1.0"]},
        }
    ]
    matrix = load_matrix(write_matrix(tmp_path, index, cells=cells, groups=groups))
    assert matrix.cell("mismatch").pins == {"fakerec": "1.0.0", "fakegemm": "1.1.0", "faketorch": "2.6.0"}
    assert matrix.cell("rec-1.0.0-gemm-1.1.0").pins == {"fakerec": "1.0.0", "fakegemm": "1.1.0"}  # nothing filled
    resolved = resolve_cell(matrix, matrix.cell("mismatch"))
    assert resolved.versions == {"fakegemm": "1.1.0", "fakerec": "1.0.0", "faketorch": "2.6.0"}
    cells[0]["unpaired"] = False
    with pytest.raises(MatrixError, match="breaks the pairing"):
        load_matrix(write_matrix(tmp_path, index, cells=cells))


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"cells": [{"name": "x", "pins": {"fakerec": "banana!"}}]}, "cells.0.pins"),
        ({"cells": [{"name": "x", "pins": {}}]}, "cells.0.pins"),
        ({"cells": [{"name": "x", "pins": {"fakerec": "1.0.0"}, "device": "tpu"}]}, "cells.0.device"),
        ({"groups": [{"name": "g-{nope}", "axes": {"fakerec": ["1.0.0"]}}]}, "groups.0.name"),
        ({"groups": [{"name": "g", "axes": {"fakerec": []}}]}, "groups.0.axes"),
        ({"cells": [{"name": "x", "pins": {"fakerec": "7.0.0"}}]}, "has no row in the pairing"),
        ({"cells": [{"name": "x", "pins": {"fakerec": "1.0.0"}, "index": "nowhere"}]}, "index 'nowhere'"),
        ({"couplings": [{"name": "c", "lead": "a", "rows": [{"b": "==1"}]}]}, "couplings.0"),
        ({"surprise": 1}, "surprise"),
        ({"companions": [{"when": {"fakerec": "<<1"}, "add": ["fakeshim"]}]}, "companions.0"),
        ({"companions": [{"when": {"fakerec": "<1.1"}, "add": ["fake shim!"]}]}, "companions.0"),
        ({"companions": [{"when": {}, "add": ["fakeshim"]}]}, "companions.0.when"),
    ],
)
def test_invalid_matrix_names_file_and_field(tmp_path: Path, index: str, extra: dict, field: str) -> None:
    path = write_matrix(tmp_path, index, **extra)
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and field in message and "\n" not in message


def test_unknown_version_is_a_clear_error(tmp_path: Path, index: str) -> None:
    path = write_matrix(tmp_path, index, cells=[{"name": "x", "pins": {"fakedep": "3.0"}}], groups=[])
    matrix = load_matrix(path)
    with pytest.raises(MatrixError, match=r"cell x: no release of fakedep matches ==3.0"):
        resolve_cell(matrix, matrix.cell("x"))


def test_time_travel_builds_the_environment_of_the_day(tmp_path: Path, index: str) -> None:
    matrix = load_matrix(write_matrix(tmp_path, index))
    cache = EnvCache(tmp_path / "envs")
    resolved = resolve_cell(matrix, matrix.cell("fakerec-1.0.0-cpu"))
    status = cache.build(resolved)
    assert status.ok, status.error
    installed = cache.environment(status.key)
    assert installed.get("fakedep").version == "1.0"  # not 9.0, uploaded a year later
    assert installed.get("fakegemm-cpu").version == "1.0.0"
    assert Path(status.python or "").is_absolute()
    again = cache.build(resolved)
    assert again.ok and again.reused
    assert [e["cell"] for e in cache.list()] == ["fakerec-1.0.0-cpu"]


def test_a_companion_joins_only_the_cells_it_names_and_resolves_as_of_their_day(tmp_path: Path, index: str) -> None:
    path = write_matrix(
        tmp_path, index, companions=[{"when": {"fakerec": "<1.1", "faketorch": ">=2.5"}, "add": ["fakeshim"]}]
    )
    matrix = load_matrix(path)
    old, new = (resolve_cell(matrix, matrix.cell(n)) for n in ("fakerec-1.0.0-cpu", "fakerec-1.1.0-cpu"))
    assert old.requirements[-1] == "fakeshim" and "fakeshim" not in new.requirements
    assert old.key != resolve_cell(load_matrix(write_matrix(tmp_path, index)), matrix.cell("fakerec-1.0.0-cpu")).key
    cache = EnvCache(tmp_path / "envs")
    status = cache.build(old)
    assert status.ok, status.error
    assert cache.environment(status.key).get("fakeshim").version == "1.0"  # the day's release, not 2.0
    # every package of `when` must match: a cell without faketorch pinned gets nothing
    path = write_matrix(tmp_path, index, companions=[{"when": {"fakerec": "<1.1", "fakedep": ">=1"}, "add": ["x"]}])
    matrix = load_matrix(path)
    assert "x" not in resolve_cell(matrix, matrix.cell("fakerec-1.0.0-cpu")).requirements


def test_a_cell_that_cannot_import_or_resolve_is_infra_not_fatal(tmp_path: Path, index: str) -> None:
    path = write_matrix(
        tmp_path,
        index,
        groups=[],
        cells=[
            {"name": "broken", "pins": {"fakebroken": "1.0"}},
            {
                "name": "unresolvable",
                "pins": {"fakedep": "1.0", "fakerec": "1.1.0", "faketorch": "2.6.0"},
                "as_of": "2024-02-01T00:00:00Z",
            },  # fakerec 1.1.0 was not out yet
        ],
    )
    matrix = load_matrix(path)
    cache = EnvCache(tmp_path / "envs")
    broken = cache.build(resolve_cell(matrix, matrix.cell("broken")))
    assert not broken.ok and "import smoke check failed" in broken.error and "undefined symbol" in broken.error
    unresolvable = cache.build(resolve_cell(matrix, matrix.cell("unresolvable")))
    assert not unresolvable.ok and unresolvable.error.startswith("uv failed")
    assert cache.list() == []  # nothing half-built is left looking finished
    assert [p.name for p in (tmp_path / "envs").iterdir() if not p.name.startswith(".")] == []


def test_a_relative_environments_folder_still_launches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--envs envs` (relative) builds there and launches from there, although a launch runs in the case's folder:
    the case's verdict comes back, as expected."""
    index = build_index(tmp_path / "index", [fake_torch("2.5.0", "2024-01-01T00:00:00Z")])
    monkeypatch.chdir(tmp_path)
    write_matrix(tmp_path, index, couplings=[], groups=[], cells=[{"name": "c", "pins": {"torch": "2.5.0"}}])
    case = tmp_path / "cases" / "fake-1-relative"
    case.mkdir(parents=True)
    (case / "repro.py").write_text("print('RuntimeError: FAKE-SIG')\nraise SystemExit(1)\n")
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "t",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch"],
                "nproc": [1],
                "signature": "FAKE-SIG",
                "variants": {"bug": {"expect": [{"outcome": "reproduced"}]}},
            }
        )
    )
    code = main(
        [
            "--cases-dir",
            "cases",
            "run",
            "--cell",
            "c",
            "--matrix",
            "matrix.yaml",
            "--envs",
            "envs",
            "--no-store",
            "--json",
        ]
    )
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert code == 0 and (result["outcome"], result["launched"]) == ("reproduced", True), result
    assert [p.name for p in (tmp_path / "envs").iterdir() if not p.name.startswith(".")]  # built under ./envs


def test_a_rebuilt_environment_gets_the_versions_of_its_first_build(tmp_path: Path) -> None:
    """An evicted environment comes back with the versions its key first resolved to, whatever the cache holds."""
    releases = [
        FakeRelease("fakelib", "1.0", "2024-02-01T00:00:00Z", requires=["fakedep"]),
        FakeRelease("fakedep", "1.0", "2024-01-01T00:00:00Z"),
    ]
    index = build_index(tmp_path / "index", releases)
    matrix = load_matrix(
        write_matrix(tmp_path, index, couplings=[], groups=[], cells=[{"name": "c", "pins": {"fakelib": "1.0"}}])
    )
    cache = EnvCache(tmp_path / "envs")
    resolved = resolve_cell(matrix, matrix.cell("c"))
    assert cache.build(resolved).ok
    assert "fakedep==1.0" in cache.resolution(resolved.key).read_text()
    # The index changes under the same cutoff (a late upload back-dated, a yanked page refreshed ...).
    build_index(tmp_path / "index", [*releases, FakeRelease("fakedep", "1.5", "2024-01-15T00:00:00Z")])
    cache.remove(resolved.key)
    assert cache.prune(set()) == []  # the record survives a prune
    again = EnvCache(tmp_path / "envs").build(resolved)
    assert again.ok and not again.reused
    assert EnvCache(tmp_path / "envs").environment(resolved.key).get("fakedep").version == "1.0"
    cache.remove(resolved.key)
    cache.resolution(resolved.key).unlink()  # no record: resolve afresh
    assert cache.build(resolved).ok
    assert cache.environment(resolved.key).get("fakedep").version == "1.5"


def test_a_cache_clean_waits_for_installs_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BUGMATRIX_LOCKS", str(tmp_path))
    order: list[str] = []
    installing = threading.Event()

    def install() -> None:
        with cache_in_use(shared=True), cache_in_use(shared=True):  # installs do not block each other
            installing.set()
            time.sleep(0.5)
            order.append("install done")

    def clean() -> None:
        installing.wait()
        with cache_in_use(shared=False):
            order.append("clean")

    threads = [threading.Thread(target=install), threading.Thread(target=clean)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert order == ["install done", "clean"]
    # the clean that had to wait said so (a disk-budget run otherwise sat silent behind another run's install)
    assert "waiting for installs in progress in another bugmatrix process" in capsys.readouterr().err


def test_a_cuda_cell_built_from_the_repository_root_keeps_fbgemm_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's own `[tool.uv] override-dependencies` (which keeps the CUDA fbgemm-gpu out of the default CPU
    environment) must not leak into the cells: a cell's build depends on the cell alone, whatever the folder."""
    root = Path(__file__).resolve().parent.parent
    assert "fbgemm-gpu; sys_platform == 'never'" in (root / "pyproject.toml").read_text()  # the override is there
    index = build_index(
        tmp_path / "index",
        [
            FakeRelease("torch", "2.5.0", "2024-01-01T00:00:00Z"),
            FakeRelease("fbgemm-gpu", "1.0.0", "2024-01-02T00:00:00Z", requires=["torch"]),
            FakeRelease("fbgemm-gpu-cpu", "1.0.0", "2024-01-02T00:00:00Z", package="fbgemm_gpu"),
            FakeRelease("torchrec", "1.0.0", "2024-01-03T00:00:00Z", requires=["fbgemm-gpu"]),
        ],
    )
    matrix = load_matrix(
        write_matrix(
            tmp_path,
            index,
            couplings=[],
            groups=[],
            device_packages={},
            cells=[
                {
                    "name": "rec-cuda",
                    "device": "cuda",
                    "pins": {"torch": "2.5.0", "torchrec": "1.0.0", "fbgemm-gpu": "1.0.0"},
                },
                {
                    "name": "rec-cpu",
                    "device": "cpu",
                    "pins": {"torch": "2.5.0", "torchrec": "1.0.0", "fbgemm-gpu": "1.0.0"},
                },
            ],
        )
    )
    monkeypatch.chdir(root)  # where a GPU runner's job runs: the checkout
    cache = EnvCache(tmp_path / "envs")
    cuda = resolve_cell(matrix, matrix.cell("rec-cuda"))
    assert "fbgemm-gpu==1.0.0" in cuda.requirements and cuda.overrides == []
    status = cache.build(cuda)
    assert status.ok, status.error
    assert cache.environment(status.key).get("fbgemm-gpu").name == "fbgemm-gpu"  # the CUDA build, installed
    cpu = cache.build(resolve_cell(matrix, matrix.cell("rec-cpu")))  # the CPU twin still drops the CUDA one
    assert cpu.ok, cpu.error
    installed = cache.environment(cpu.key)
    assert installed.get("fbgemm-gpu").name == "fbgemm-gpu-cpu" and "fbgemm-gpu" not in installed.packages


def test_a_cache_clean_removes_the_cuda_libraries_by_their_uv_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv keeps `nvidia-cublas-cu12` under that hyphenated name, and a non-PyPI index's wheels under their own
    folder: `nvidia-*` must match it there too (the clean once looked only for `nvidia_*` under PyPI's folder, left
    every CUDA library in the cache and freed a fraction of what a torch stack takes), and the unpacked wheels that
    hold the bytes go too."""
    import subprocess

    from harness.matrix.envcache import clean_cache, uv_cache_dir, uv_command

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("BUGMATRIX_LOCKS", str(tmp_path / "locks"))
    url = build_index(tmp_path / "index", [FakeRelease("nvidia-fakeblas-cu12", "1.0"), FakeRelease("keepme", "1.0")])
    subprocess.run(uv_command("venv", "--quiet", str(tmp_path / "venv")), check=True)
    subprocess.run(
        [
            *uv_command("pip", "install"),
            "--quiet",
            "--python",
            str(tmp_path / "venv"),
            "--index-url",
            url,
            "nvidia-fakeblas-cu12",
            "keepme",
        ],
        check=True,
    )
    cache = uv_cache_dir()
    assert cache is not None and list(cache.glob("wheels-*/index/*/nvidia-fakeblas-cu12"))
    subprocess.run(uv_command("venv", "--quiet", "--clear", str(tmp_path / "venv")), check=True)  # no links left
    clean_cache(("nvidia-*",))
    assert not list(cache.glob("wheels-*/index/*/nvidia-fakeblas-cu12"))
    assert not list(cache.glob("archive-v*/*/nvidia_fakeblas_cu12"))  # the unpacked bytes are gone too
    assert list(cache.glob("wheels-*/index/*/keepme"))


def test_the_smoke_timeout_can_be_raised_for_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.matrix.envcache import SMOKE_TIMEOUT_ENV, SMOKE_TIMEOUT_S, smoke_timeout

    monkeypatch.delenv(SMOKE_TIMEOUT_ENV, raising=False)
    assert smoke_timeout() == SMOKE_TIMEOUT_S
    monkeypatch.setenv(SMOKE_TIMEOUT_ENV, "1200")
    assert smoke_timeout() == 1200
    monkeypatch.setenv(SMOKE_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match=r"BUGMATRIX_SMOKE_TIMEOUT_S: not a number of seconds: 'soon'"):
        smoke_timeout()


def test_an_environment_another_process_uses_is_never_evicted_or_pruned(tmp_path: Path) -> None:
    """Two runs sharing an environments folder: one's disk-budget eviction or an `env prune` keeps what the other
    holds (it once deleted an interpreter between another run's build and its launch)."""
    from harness.matrix.cellenvs import CellEnvironments

    index = build_index(tmp_path / "index", [FakeRelease("fakelib", "1.0", "2024-02-01T00:00:00Z")])
    matrix = load_matrix(
        write_matrix(tmp_path, index, couplings=[], groups=[], cells=[{"name": "c", "pins": {"fakelib": "1.0"}}])
    )
    running = CellEnvironments(matrix, EnvCache(tmp_path / "envs"))  # the other run: it uses the environment
    resolved, env, problem = running.get(matrix.cell("c"))
    assert env is not None and resolved is not None, problem
    other = EnvCache(tmp_path / "envs")  # another process's cache object: its own lock files
    assert other.remove(resolved.key) is False and other.exists(resolved.key)
    assert other.prune(set()) == [] and other.exists(resolved.key)
    running.cache.release(resolved.key)  # the run is done with it
    assert other.prune(set()) == [resolved.key] and not other.exists(resolved.key)


def test_a_budget_cleans_uv_cache_only_when_that_frees_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the budget, uv's cache is cleaned only when it holds enough that no environment links: wheels that
    environments (another run's, in a shared folder) were installed from free nothing and would be downloaded again."""
    import os

    import harness.matrix.cellenvs as cellenvs
    from harness.matrix.cellenvs import CellEnvironments

    cache_dir, envs = tmp_path / "uv-cache", tmp_path / "envs"
    (cache_dir / "archive-v0" / "torch").mkdir(parents=True)
    (envs / "k1" / "site-packages").mkdir(parents=True)
    wheel = cache_dir / "archive-v0" / "torch" / "lib.so"
    wheel.write_bytes(os.urandom(1 << 20))
    os.link(wheel, envs / "k1" / "site-packages" / "lib.so")  # an environment installed from it
    cleaned: list[int] = []
    monkeypatch.setattr(cellenvs, "uv_cache_dir", lambda: cache_dir)
    monkeypatch.setattr(cellenvs, "clean_cache", lambda: cleaned.append(1) or "")
    monkeypatch.setattr(cellenvs, "CLEAN_WORTH", 512 << 10)
    environments = CellEnvironments(None, EnvCache(envs))  # type: ignore[arg-type]  # fit reads no matrix
    assert environments.fit(0) and cleaned == []  # over budget, but cleaning would free nothing
    (cache_dir / "archive-v0" / "torch" / "old.so").write_bytes(os.urandom(1 << 20))  # no environment links it
    assert environments.fit(0) and cleaned == [1]
    built: list[object] = []
    for budget, builds in ((0, []), (1 << 40, ["cell"])):  # ahead of its jobs, only while usage fits the budget
        ahead = CellEnvironments(None, EnvCache(envs), disk_budget=budget)  # type: ignore[arg-type]
        monkeypatch.setattr(ahead, "get", built.append)
        built.clear()
        ahead.build_ahead("cell")  # type: ignore[arg-type]
        assert built == builds
