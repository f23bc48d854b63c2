"""Installed anywhere: the wheel `uv build` makes, installed in a fresh environment, answers from any folder what the
clone answers (it carries the record, the case folders, the probes and the matrix: hatch_build.py), says which
record answered and what `--version` it is, and installs nothing that only launching needs (the `run` extra).

The wheel is built once per session (module fixture), by the release workflow's own build step. Its dependencies
are pinned to this environment's versions (the answers are compared with this environment's) and come from uv's
cache, else from PyPI: where neither can give them the test fails, never skips (CI reaches PyPI).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.matrix.envcache import uv_binary

from .conftest import MakeCase

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"
LAUNCH_ONLY = {"psutil", "pytest", "pytest-xdist", "uv", "py-spy", "ruamel-yaml"}  # pyproject.toml's `run` extra
BLOCKED = ("psutil", "pytest", "xdist", "uv", "ruamel", "ruamel.yaml")  # their import names


def plain_env(**extra: str) -> dict[str, str]:
    """This process's environment without the tests' own record and store (tests/conftest.py sets them)."""
    env = {k: v for k, v in os.environ.items() if k not in {"BUGMATRIX_RECORD", "BUGMATRIX_DB", "VIRTUAL_ENV"}}
    return {**env, **extra}


def uv(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([uv_binary(), *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the wheel of this tree installed (and nothing else of this environment's)."""
    tmp = tmp_path_factory.mktemp("install")
    step = "Build the sdist and the wheel"  # the release's own step, replayed: the sdist, then the wheel from it
    [build] = [s["run"] for s in yaml.safe_load(RELEASE.read_text())["jobs"]["build"]["steps"] if s.get("name") == step]
    assert shlex.split(build)[:2] == ["uv", "build"], build
    built = uv(*shlex.split(build)[1:], "--out-dir", str(tmp / "dist"))
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp / "dist").glob("bugmatrix-*.whl")
    made = uv("venv", "--quiet", "--python", sys.executable, str(tmp / "venv"))
    assert made.returncode == 0, made.stderr
    pins = sorted(
        {
            f"{d.metadata['Name']}=={d.version}"
            for d in importlib.metadata.distributions()
            if d.metadata["Name"] and d.metadata["Name"] != "bugmatrix"
        }
    )
    (tmp / "pins.txt").write_text("\n".join(pins) + "\n")
    install = [
        "pip",
        "install",
        "--quiet",
        "--python",
        str(tmp / "venv" / "bin" / "python"),
        "--constraint",
        str(tmp / "pins.txt"),
        str(wheel),
    ]
    done = uv(*install, "--offline")  # uv's cache, when it holds the index pages
    if done.returncode != 0:
        done = uv(*install)  # else PyPI: where it cannot be reached, this fails (no skip)
    assert done.returncode == 0, f"the wheel's dependencies could not be installed:\n{done.stderr}"
    return tmp / "venv"


@pytest.fixture(scope="module")
def away(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with no clone in it: no cases/, record/, matrix.yaml or .bugmatrix/."""
    return tmp_path_factory.mktemp("elsewhere")


def installed(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed `bugmatrix`, run from `cwd` with no record or store named by the environment."""
    return subprocess.run(
        [str(venv / "bin" / "bugmatrix"), *args],
        cwd=cwd,
        env=plain_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def clone(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    """This clone's `bugmatrix` from its root, on its record (and a local store that does not exist)."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args, "--record", str(ROOT / "record")],
        cwd=ROOT,
        env=plain_env(BUGMATRIX_DB=str(store)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_installed_wheel_answers_from_any_folder_as_the_clone_does(venv: Path, away: Path, tmp_path: Path) -> None:
    absent = tmp_path / "absent.db"
    for args in (["audit", "torch==2.6.0", "--json"], ["report", "--format", "json"]):
        wheel, here = installed(venv, *args, cwd=away), clone(*args, store=absent)
        assert (wheel.returncode, here.returncode) == (1 if args[0] == "audit" else 0,) * 2, wheel.stderr
        assert json.loads(wheel.stdout) == json.loads(here.stdout), args
    packaged = venv.glob("lib/python*/site-packages/harness/_data/record")
    [record] = [str(p) for p in packaged]
    assert f"report of the record in {record}" in installed(venv, "report", "--format", "json", cwd=away).stderr
    text = installed(venv, "audit", "torch==2.6.0", cwd=away)
    assert text.stdout.splitlines()[0] == f"checked torch==2.6.0 against the record in {record} on cpu"
    # OSV: the same files, byte for byte
    wheel, here = (
        installed(venv, "osv", "export", str(tmp_path / "w"), cwd=away),
        clone("osv", "export", str(tmp_path / "c"), store=absent),
    )
    assert (wheel.returncode, here.returncode) == (0, 0), wheel.stderr
    assert f"advisory file(s) from the record in {record}" in wheel.stderr
    files = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert files and files == sorted(p.name for p in (tmp_path / "w").iterdir())
    assert all((tmp_path / "w" / f).read_bytes() == (tmp_path / "c" / f).read_bytes() for f in files)


def test_the_nightly_publishes_the_release_wheel_beside_the_site_and_uvx_answers_from_it(
    venv: Path, away: Path, tmp_path: Path
) -> None:
    """The Pages job's two steps replayed (issue 34 item 7; 7317000 published no wheel): `uv build --wheel` of the
    checkout, then `nightly wheel` into the site, newest and dated; the wheel holds what the release's (built from
    its sdist) holds, and `uvx --from <wheel> bugmatrix audit` (docs/affected.md, with the site's URL) answers as the
    installed release does, from a folder with no clone."""
    steps = yaml.safe_load(NIGHTLY.read_text())["jobs"]["pages"]["steps"]
    [build] = [shlex.split(s["run"]) for s in steps if s.get("run", "").startswith("uv build")]
    [publish] = [shlex.split(s["run"]) for s in steps if " nightly wheel " in s.get("run", "")]
    build[build.index("--out-dir") + 1] = str(tmp_path / "dist")
    built = uv(*build[1:])
    assert built.returncode == 0, built.stderr
    assert publish[:3] == ["uv", "run", "bugmatrix"]
    args = publish[3:]
    args[args.index("--dist") + 1] = str(tmp_path / "dist")
    args[args.index("--site") + 1] = str(tmp_path / "site")
    assert main([*args, "--date", "2026-11-28"]) == 0
    [newest] = (tmp_path / "site" / "dist").glob("bugmatrix-*.whl")
    [dated] = (tmp_path / "site" / "dist" / "2026-11-28").glob("bugmatrix-*.whl")
    [release] = (venv.parent / "dist").glob("bugmatrix-*.whl")
    assert newest.name == dated.name == release.name and newest.read_bytes() == dated.read_bytes()
    with zipfile.ZipFile(newest) as ours, zipfile.ZipFile(release) as theirs:
        assert sorted(ours.namelist()) == sorted(theirs.namelist())
    command = ["tool", "run", "--isolated", "--from", str(dated), "bugmatrix", "audit", "torch==2.6.0", "--json"]
    env = plain_env(UV_TOOL_DIR=str(tmp_path / "tools"))
    for extra in (["--offline"], []):  # uv's cache, else PyPI (where neither answers, this fails)
        uvx = subprocess.run(
            [uv_binary(), *extra, *command], cwd=away, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        if uvx.returncode == 1:
            break
    assert uvx.returncode == 1, uvx.stderr
    assert json.loads(uvx.stdout) == json.loads(installed(venv, "audit", "torch==2.6.0", "--json", cwd=away).stdout)


def test_inside_a_clone_the_clones_record_answers(venv: Path) -> None:
    text = installed(venv, "audit", "torch==2.6.0", cwd=ROOT)
    assert text.stdout.splitlines()[0].startswith("checked torch==2.6.0 against the record in record"), text.stdout


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def test_version_names_the_code_and_the_records_newest_result_and_commit(venv: Path, away: Path) -> None:
    from harness.session.record import load

    shown = installed(venv, "--version", cwd=away)
    assert shown.returncode == 0, shown.stderr
    code, record = shown.stdout.splitlines()
    head = git("rev-parse", "HEAD")
    assert code.startswith(f"bugmatrix {importlib.metadata.version('bugmatrix')} (commit {head}")
    newest = max(row["date"] for row in load(ROOT / "record").rows)
    changed = git("log", "-1", "--format=%H", "--", "record")
    assert record.startswith("the record in ") and "site-packages/harness/_data/record" in record, record
    assert f"newest result {newest}, commit {changed}" in record, record


def test_the_wheel_installs_nothing_that_only_launching_needs(venv: Path) -> None:
    listed = uv("pip", "list", "--format", "json", "--python", str(venv / "bin" / "python"))
    assert listed.returncode == 0, listed.stderr
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "bugmatrix" in names and "pydantic" in names
    assert not names & LAUNCH_ONLY, names & LAUNCH_ONLY


def without_launching(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`bugmatrix args` in a process where none of the launch-only dependencies can be imported."""
    block = "".join(f"sys.modules[{name!r}] = None\n" for name in BLOCKED)
    probe = f"import sys\n{block}from harness.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", probe, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_reading_needs_none_of_the_launch_only_dependencies(tmp_path: Path) -> None:
    record = ["--record", str(ROOT / "record")]
    for args, code in (
        (["--help"], 0),
        (["--version"], 0),
        (["list"], 0),
        (["audit", "torch==2.6.0", *record], 1),
        (["report", "--format", "json", *record], 0),
        (["osv", "export", str(tmp_path / "osv"), *record], 0),
    ):
        done = without_launching(*args, cwd=tmp_path)
        assert done.returncode == code, (args, done.stderr)
        assert "Traceback" not in done.stderr, args
    # an error is still one line: naming it imports nothing of what launches
    done = without_launching("audit", "torch=2.6.0", *record, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("bugmatrix audit: "), done.stderr
    assert "Traceback" not in done.stderr


def test_launching_without_the_run_extra_says_which_extra_in_one_line(tmp_path: Path, make_case: MakeCase) -> None:
    make_case("print('FIXED')\n", case_id="torch-1-fake")  # what `run` would launch, were psutil importable
    cases = ["--cases-dir", str(tmp_path / "cases")]
    for args in (
        ["run", "--db", str(tmp_path / "r.db")],
        ["bisect", "torch-1-fake", "--package", "torch"],
        ["narrow"],
        ["compat", "--db", str(tmp_path / "c.db")],
    ):
        done = without_launching(*cases, *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr.splitlines() == [
            f"bugmatrix {args[0]}: psutil is not installed; launching needs it: pip install 'bugmatrix[run]'"
        ], done.stderr
    assert not (tmp_path / "r.db").exists()


def test_the_wheels_own_copy_is_never_written(venv: Path, away: Path) -> None:
    """Where no clone is around, the writing commands' default is the wheel's own copy: refused in one line, nothing
    written (a write there would change the installed package, and the next install would drop it)."""
    [data] = venv.glob("lib/python*/site-packages/harness/_data")
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    for args, option in (
        (["record", "fold"], "--record"),
        (["expect", "--write"], "--cases-dir"),
        (["new", "https://github.com/pytorch/pytorch/issues/1", "--slug", "x"], "--cases-dir"),
    ):
        done = installed(venv, *args, cwd=away)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr.splitlines() == [
            f"bugmatrix {args[0]}: {option} {data / option[2:].replace('-dir', '')}: "
            "the installed wheel's own copy, read-only: run from a clone, or name a "
            f"folder of your own with {option}"
        ], done.stderr
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
