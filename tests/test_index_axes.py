"""Axes read from the package index (rules), per-cell pairing problems, and the date bisection over dev builds;
hermetic (fake wheels on a `file://` index)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
import yaml

import harness.matrix.index
from harness.cli import main
from harness.matrix.axes import forget, select
from harness.matrix.basics import MatrixError
from harness.matrix.cellenvs import CellEnvironments
from harness.matrix.envcache import EnvCache
from harness.matrix.expand import UNRESOLVED, load_matrix
from harness.matrix.index import Release
from harness.matrix.resolve import resolve_cell
from harness.matrix.spec import AxisRule
from harness.model.outcome import Outcome
from harness.session.store import ResultStore
from harness.workflows.datebisect import (
    Build,
    DateLineError,
    DevBuild,
    build_date,
    commit_range,
    date_line,
    date_summary,
    plan_dates,
    probe_cell,
    read_builds,
)
from harness.workflows.search import search

from .fakeindex import FakeRelease, build_index

TORCHES = [
    ("2.4.0", "2024-04-01"),
    ("2.4.1", "2024-05-01"),
    ("2.5.0", "2024-06-01"),
    ("2.5.1", "2024-07-01"),
    ("2.6.0", "2024-08-01"),
]


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a new process would: no index pages cached."""
    forget()
    yield
    forget()


def stack(extra: tuple[FakeRelease, ...] = ()) -> list[FakeRelease]:
    return [
        *(FakeRelease("faketorch", v, f"{d}T00:00:00Z") for v, d in TORCHES),
        FakeRelease("faketorch", "2.7.0rc1", "2024-09-01T00:00:00Z"),
        FakeRelease("faketorch", "2.3.9", "2024-03-01T00:00:00Z", yanked=True),
        FakeRelease("fakerec", "1.0.0", "2024-06-02T00:00:00Z"),
        FakeRelease("fakerec", "1.1.0", "2024-08-02T00:00:00Z"),
        FakeRelease("fakegemm-cpu", "1.0.0", "2024-06-02T00:00:00Z", package="fakegemm"),
        FakeRelease("fakegemm-cpu", "1.1.0", "2024-08-02T00:00:00Z", package="fakegemm"),
        *extra,
    ]


def write_matrix(tmp_path: Path, index: str, groups: list[dict], **extra: object) -> Path:
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
        "cells": [],
        "groups": groups,
        **extra,
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def names(path: Path) -> list[str]:
    return [c.name for c in load_matrix(path).cells]


def test_select_is_a_pure_function_of_the_releases_and_the_rule() -> None:
    from datetime import datetime, timezone

    def rel(v: str, day: int, yanked: bool = False) -> Release:
        from packaging.version import Version

        return Release(Version(v), datetime(2024, 1, day, tzinfo=timezone.utc), yanked)

    found = [
        rel("1.0.0", 1),
        rel("1.0.1", 2),
        rel("1.1.0", 3),
        rel("1.1.1", 4, yanked=True),
        rel("2.0.0rc1", 5),
        rel("2.0.0", 6),
        rel("2.1.0.dev20240107", 7),
    ]
    assert select(found, AxisRule(releases="")) == ["1.0.0", "1.0.1", "1.1.0", "2.0.0"]
    assert select(found, AxisRule(releases="", per="minor")) == ["1.0.1", "1.1.0", "2.0.0"]
    assert select(found, AxisRule(releases="", per="major")) == ["1.1.0", "2.0.0"]
    assert select(found, AxisRule(releases="<2", last=2)) == ["1.0.1", "1.1.0"]
    assert select(found, AxisRule(releases="", pre=True, last=3)) == ["2.0.0rc1", "2.0.0", "2.1.0.dev20240107"]
    assert select(found, AxisRule(releases=">=2.1.0.dev0", pre=True)) == ["2.1.0.dev20240107"]
    minor = AxisRule(releases="", per="minor")
    assert select(found, minor, datetime(2024, 1, 4, tzinfo=timezone.utc)) == ["1.0.1", "1.1.0"]
    assert select(found, minor, datetime(2024, 1, 4)) == ["1.0.1", "1.1.0"]  # a naive date is UTC


def test_rule_axes_expand_from_the_index(tmp_path: Path) -> None:
    index = build_index(tmp_path / "index", stack())
    path = write_matrix(
        tmp_path,
        index,
        [
            {"name": "torch-{faketorch}", "axes": {"faketorch": {"releases": ">=2.4", "per": "minor"}}},
            {"name": "last-{faketorch}", "axes": {"faketorch": {"releases": "==2.*", "last": 2}}},
            {"name": "pre-{faketorch}", "axes": {"faketorch": {"releases": "", "pre": True, "last": 1}}},
            {
                "name": "then-{faketorch}",
                "as_of": "2024-06-15T00:00:00Z",
                "axes": {"faketorch": {"releases": "", "per": "minor"}},
            },
        ],
    )
    matrix = load_matrix(path)
    assert [c.name for c in matrix.cells] == [
        "torch-2.4.1",
        "torch-2.5.1",
        "torch-2.6.0",  # the last patch of each minor
        "last-2.5.1",
        "last-2.6.0",  # the newest two
        "pre-2.7.0rc1",  # a pre-release channel
        "then-2.4.1",
        "then-2.5.0",  # as the index was on the group's date (2.5.1 came in July)
    ]
    assert matrix.cell("torch-2.6.0").pins == {"faketorch": "2.6.0"}  # the cell name is the exact pin
    assert matrix.problems == {}
    assert resolve_cell(matrix, matrix.cell("torch-2.5.1")).versions == {"faketorch": "2.5.1"}


def test_a_new_upload_appears_in_the_next_bugmatrix_matrix_with_no_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    releases = stack()
    index = build_index(tmp_path / "index", releases)
    path = write_matrix(
        tmp_path,
        index,
        [
            {"name": "torch-{faketorch}", "axes": {"faketorch": {"releases": ">=2.5", "per": "minor"}}},
            {"name": "torchrec-{fakerec}", "axes": {"fakerec": {"releases": ">=1.0"}}},
        ],
    )
    before = path.read_text()

    def listed() -> list[str]:
        forget()  # the next `bugmatrix matrix` is a new process: nothing cached
        assert main(["matrix", "--matrix", str(path), "--json"]) == 0
        return [row["name"] for row in json.loads(capsys.readouterr().out)]

    assert listed() == ["torch-2.5.1", "torch-2.6.0", "torchrec-1.0.0", "torchrec-1.1.0"]
    build_index(
        tmp_path / "index",
        [
            *releases,
            FakeRelease("faketorch", "2.6.1", "2024-10-01T00:00:00Z"),
            FakeRelease("faketorch", "2.7.0", "2024-11-01T00:00:00Z"),
        ],
    )
    assert listed() == ["torch-2.5.1", "torch-2.6.1", "torch-2.7.0", "torchrec-1.0.0", "torchrec-1.1.0"]
    assert path.read_text() == before


def test_a_release_no_pairing_row_covers_is_an_infra_cell_not_a_guess(tmp_path: Path) -> None:
    """torchrec 1.10 uploaded before anyone adds its row: the cell exists, its jobs are `infra` with the missing
    row named; nothing is paired by guess, and the rest of the matrix loads."""
    index = build_index(tmp_path / "index", stack((FakeRelease("fakerec", "1.2.0", "2024-10-02T00:00:00Z"),)))
    path = write_matrix(tmp_path, index, [{"name": "rec-{fakerec}", "axes": {"fakerec": {"releases": ">=1.0"}}}])
    matrix = load_matrix(path)
    assert [c.name for c in matrix.cells] == ["rec-1.0.0", "rec-1.1.0", "rec-1.2.0"]
    new = matrix.cell("rec-1.2.0")
    assert new.pins == {"fakerec": "1.2.0", "fakegemm": UNRESOLVED, "faketorch": UNRESOLVED}  # not 1.1 / 2.6
    assert matrix.cell("rec-1.1.0").pins == {"fakerec": "1.1.0", "fakegemm": "==1.1.*", "faketorch": "==2.6.*"}
    assert list(matrix.problems) == ["rec-1.2.0"]
    with pytest.raises(MatrixError) as info:
        resolve_cell(matrix, new)
    message = str(info.value)
    assert message.startswith(f"{path}: cell rec-1.2.0: fakerec 1.2.0 has no row in the pairing 'fakerec-stack'")
    assert "\n" not in message
    resolved, why = CellEnvironments(matrix, EnvCache(tmp_path / "envs")).resolve(new)  # what a run's jobs get
    assert resolved is None and why == f"cannot resolve the cell: {message}"
    # The same release written by hand is a mistake in the file, refused at load as before.
    written = write_matrix(tmp_path, index, [{"name": "rec-{fakerec}", "axes": {"fakerec": ["1.2.0"]}}])
    with pytest.raises(MatrixError, match="has no row in the pairing"):
        load_matrix(written)


def test_a_rule_that_breaks_a_written_pairing_is_that_cells_problem(tmp_path: Path) -> None:
    index = build_index(tmp_path / "index", stack())
    path = write_matrix(
        tmp_path,
        index,
        [
            {
                "name": "rec-1.0-torch-{faketorch}",
                "pins": {"fakerec": "1.0.0"},
                "axes": {"faketorch": {"releases": ">=2.5", "per": "minor"}},
            }
        ],
    )
    matrix = load_matrix(path)
    assert matrix.cell("rec-1.0-torch-2.5.1").pins["fakegemm"] == "==1.0.*"
    assert list(matrix.problems) == ["rec-1.0-torch-2.6.0"]
    assert "faketorch 2.6.0 breaks the pairing 'fakerec-stack'" in matrix.problems["rec-1.0-torch-2.6.0"]


def test_an_unreachable_index_makes_that_groups_cells_infra_and_the_rest_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = build_index(tmp_path / "index", stack())
    calls: list[str] = []
    real = harness.matrix.index._fetch

    def counting(url: str, name: str) -> str:
        calls.append(url)
        return real(url, name)

    monkeypatch.setattr(harness.matrix.index, "_fetch", counting)
    gone = (tmp_path / "nowhere").as_uri()
    path = write_matrix(
        tmp_path,
        index,
        [
            {"name": "torch-{faketorch}", "axes": {"faketorch": ["2.5.1"]}},
            {"name": "rec-{fakerec}", "index": "down", "axes": {"fakerec": {"releases": ">=1.0"}}},
            {"name": "rec2-{fakerec}", "axes": {"fakerec": {"releases": ">=1.0", "index": "down"}}},
            {"name": "none-{faketorch}", "axes": {"faketorch": {"releases": ">=9"}}},
        ],
        indexes={"local": index, "down": gone},
    )
    matrix = load_matrix(path)
    assert [c.name for c in matrix.cells] == ["torch-2.5.1", "rec-unresolved", "rec2-unresolved", "none-unresolved"]
    assert matrix.cell("rec-unresolved").pins == {
        "fakerec": UNRESOLVED,
        "fakegemm": UNRESOLVED,
        "faketorch": UNRESOLVED,
    }
    assert matrix.cell("rec2-unresolved").index_url == gone  # a rule's index is where its cells install from
    why = matrix.problems["rec-unresolved"]
    assert why.startswith("axis fakerec ({releases: '>=1.0'}) cannot be read: fakerec: not on the index")
    assert matrix.problems["none-unresolved"].startswith("axis faketorch: no release of faketorch on")
    assert sum(gone in c for c in calls) == 1  # an unreadable index is asked once per process, not once per axis
    with pytest.raises(MatrixError, match=r"cell rec-unresolved: axis fakerec"):
        resolve_cell(matrix, matrix.cell("rec-unresolved"))


def test_a_pre_release_channel_on_its_own_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch's nightlies live on their own index: a group follows it, and its cells install from it."""
    stable = build_index(tmp_path / "stable", stack())
    nightly = build_index(
        tmp_path / "nightly",
        [FakeRelease("faketorch", f"2.7.0.dev202409{d:02d}", f"2024-09-{d:02d}T06:00:00Z") for d in (1, 2, 3)],
    )
    path = write_matrix(
        tmp_path,
        stable,
        [
            {
                "name": "nightly-{faketorch}",
                "axes": {"faketorch": {"releases": ">=2.7.0.dev0", "pre": True, "last": 2, "index": "nightly"}},
            },
            {"name": "stable-{faketorch}", "axes": {"faketorch": {"releases": "", "last": 1}}},
        ],
        indexes={"local": stable, "nightly": nightly},
    )
    matrix = load_matrix(path)
    assert [c.name for c in matrix.cells] == ["nightly-2.7.0.dev20240902", "nightly-2.7.0.dev20240903", "stable-2.6.0"]
    cell = matrix.cell("nightly-2.7.0.dev20240903")
    assert cell.index_url == nightly
    resolved = resolve_cell(matrix, cell)
    assert resolved.versions == {"faketorch": "2.7.0.dev20240903"}
    assert resolved.as_of is not None and resolved.as_of.isoformat().startswith("2024-09-03T06")
    monkeypatch.setenv("BUGMATRIX_PLAN_AS_OF", "2024-09-02T12:00:00Z")  # replaying the plan of that day
    assert names(path) == ["nightly-2.7.0.dev20240901", "nightly-2.7.0.dev20240902", "stable-2.6.0"]
    monkeypatch.setenv("BUGMATRIX_PLAN_AS_OF", "yesterday")
    with pytest.raises(MatrixError, match="BUGMATRIX_PLAN_AS_OF"):
        load_matrix(path)


@pytest.mark.parametrize(
    ("axis", "field"),
    [
        ({"releases": "banana"}, "faketorch: releases"),
        ({"releases": "", "per": "week"}, "faketorch: per"),
        ({"releases": "", "last": 0}, "faketorch: last"),
        ({"releases": "", "surprise": 1}, "faketorch: surprise"),
        ({}, "faketorch: releases: Field required"),
        (
            {"releases": "", "index": "elsewhere"},
            "groups.0.axes.faketorch.index: index 'elsewhere' is not in `indexes`",
        ),
        (5, "faketorch: an axis is a list of versions or a rule"),
        ([5], "faketorch.0: must be a version"),
        ([{"git": ""}], "faketorch.0: git"),
    ],
)
def test_an_invalid_rule_names_file_and_field(tmp_path: Path, axis: object, field: str) -> None:
    path = write_matrix(tmp_path, "file:///nowhere", [{"name": "t-{faketorch}", "axes": {"faketorch": axis}}])
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and field in message and "\n" not in message, message


def test_one_index_per_group(tmp_path: Path) -> None:
    path = write_matrix(
        tmp_path,
        "file:///a",
        [{"name": "t-{faketorch}", "index": "local", "axes": {"faketorch": {"releases": "", "index": "other"}}}],
        indexes={"local": "file:///a", "other": "file:///b"},
    )
    with pytest.raises(MatrixError, match=r"groups.0: the group's cells install from one index"):
        load_matrix(path)


def test_written_axes_never_touch_the_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a matrix without rule axes must not read the index")

    monkeypatch.setattr(harness.matrix.index, "_fetch", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("BUGMATRIX_PLAN_AS_OF", "not a date")  # only rules read it
    path = write_matrix(
        tmp_path, "https://pypi.org/simple", [{"name": "rec-{fakerec}", "axes": {"fakerec": ["1.0.0", "1.1.0"]}}]
    )
    assert names(path) == ["rec-1.0.0", "rec-1.1.0"]


# --- bisecting by date across dev builds ----------------------------------------------------------------------


def dev(name: str, day: int, commit: str = "", **more: object) -> FakeRelease:
    version = f"{'2.10.0' if name == 'faketorch' else '1.5.0'}.dev202508{day:02d}"
    return FakeRelease(name, version, f"2025-08-{day:02d}T07:00:00Z", git_version=commit, **more)  # type: ignore[arg-type]


def test_build_date() -> None:
    assert str(build_date("2.10.0.dev20250801")) == "2025-08-01"
    assert str(build_date("2.10.0.dev20250801+cpu")) == "2025-08-01"
    assert str(build_date("2025.8.1")) == "2025-08-01"  # torchrec-nightly / fbgemm-gpu-nightly on PyPI
    assert build_date("2.10.0") is None and build_date("2.10.0.dev1") is None
    assert build_date("2.10.0.dev20251340") is None


def test_the_date_line_over_a_fake_nightly_index(tmp_path: Path) -> None:
    """Days with builds of new commits are candidates; a pruned day, a yanked day, a day without a wheel for this
    platform and a day a companion lacks are gaps; a rebuild of the same commits is skipped; commits are read."""
    sha = {d: f"{d:x}" * 40 for d in range(1, 10)}
    nightly = build_index(
        tmp_path / "nightly",
        [
            dev("faketorch", 1, sha[1]),
            dev("faketorch", 2, sha[2]),
            # day 3: pruned from the index
            dev("faketorch", 4, sha[4]),
            dev("faketorch", 5, sha[5], tag="cp311-cp311-win_amd64"),  # no wheel for this platform
            dev("faketorch", 6, sha[4]),  # the same commit as day 4, rebuilt
            dev("faketorch", 7, sha[7]),
            dev("faketorch", 8, sha[8], yanked=True),
            dev("faketorch", 9, sha[9]),
            FakeRelease("faketorch", "2.10.0.dev20250809+git" + "a" * 12, "2025-08-09T09:00:00Z"),  # a later one, +git
            # the companion, same days (none on day 9); day 6 rebuilt day 4's commit too (else the stack changed)
            *(dev("fakerec", d, f"{4 if d == 6 else d}" * 40) for d in (1, 2, 3, 4, 5, 6, 7, 8)),
        ],
    )
    stable = build_index(tmp_path / "stable", stack())
    matrix = load_matrix(write_matrix(tmp_path, stable, [], indexes={"local": stable, "nightly": nightly}))
    line = date_line(matrix, "faketorch", ["fakerec"], date(2025, 8, 1), date(2025, 8, 9), "cpu", index_url=nightly)
    assert [(str(b.day), b.version, b.commits["faketorch"]) for b in line.builds] == [
        ("2025-08-01", "2.10.0.dev20250801", sha[1]),
        ("2025-08-02", "2.10.0.dev20250802", sha[2]),
        ("2025-08-04", "2.10.0.dev20250804", sha[4]),
        ("2025-08-07", "2.10.0.dev20250807", sha[7]),
    ]
    assert line.builds[0].pins == {"faketorch": "2.10.0.dev20250801", "fakerec": "1.5.0.dev20250801"}  # same day
    assert line.builds[0].commits["fakerec"] == "1" * 40
    assert [(str(g.day), g.why) for g in line.gaps] == [
        ("2025-08-03", "no faketorch build dated 2025-08-03 on the index (pruned, yanked or never made)"),
        ("2025-08-05", "faketorch 2.10.0.dev20250805: no wheel for this platform"),
        ("2025-08-08", "no faketorch build dated 2025-08-08 on the index (pruned, yanked or never made)"),
        ("2025-08-09", "no fakerec build dated 2025-08-09 on the index (pruned, yanked or never made)"),
    ]
    assert [(str(a), str(b)) for a, b in line.same] == [("2025-08-06", "2025-08-04")]
    solo = date_line(matrix, "faketorch", [], date(2025, 8, 9), date(2025, 8, 9), "cpu", index_url=nightly)
    assert [(b.version, b.commits["faketorch"]) for b in solo.builds] == [
        ("2.10.0.dev20250809+git" + "a" * 12, "a" * 12)
    ]  # the newest of the day; the commit from its label

    # The search over the line: the fix landed in day 7's commit. Gaps are never probed as good or bad.
    fixed_from = date(2025, 8, 7)
    probed: list[str] = []

    def prober(batch: list[DevBuild]) -> list[Outcome]:
        probed.extend(str(b.day) for b in batch)
        return [Outcome.FIXED if b.day >= fixed_from else Outcome.REPRODUCED for b in batch]

    found = search(line.builds, prober)
    assert (str(found.last_old.day), str(found.first_new.day)) == ("2025-08-04", "2025-08-07")
    assert commit_range(found) == (sha[4], sha[7])  # where the commit level starts
    assert set(probed) <= {str(b.day) for b in line.builds}
    assert line.between(found.last_old, found.first_new) == [
        "2025-08-05: faketorch 2.10.0.dev20250805: no wheel for this platform",
        "2025-08-06: the same commit(s) as 2025-08-04",
    ]
    summary = date_summary(line, found)
    assert summary.startswith(f"dates 2025-08-04 (2.10.0.dev20250804, {sha[4][:12]}) (reproduced) → 2025-08-07 ")
    assert "untestable in between: 2025-08-05" in summary and "\n" not in summary

    # A probe is the stack of its day, installable from the nightly index.
    cell = probe_cell(matrix, found.first_new, "cpu", nightly)
    assert cell.name == "bisect-faketorch-2.10.0.dev20250807" and cell.index_url == nightly
    assert resolve_cell(matrix, cell).versions == {"faketorch": "2.10.0.dev20250807", "fakerec": "1.5.0.dev20250807"}


def test_the_date_line_is_pure(tmp_path: Path) -> None:
    d = date(2025, 8, 1)
    builds = {
        "t": [
            Build("t", "2.0.0.dev20250801", d, "w", None),
            Build("t", "2.0.0.dev20250802", d.replace(day=2), "w", None),
        ]
    }
    line = plan_dates("t", builds, d, d.replace(day=2))
    assert [b.version for b in line.builds] == ["2.0.0.dev20250801", "2.0.0.dev20250802"]  # unknown commits: kept
    with pytest.raises(DateLineError):
        plan_dates("t", builds, d.replace(day=2), d)
    with pytest.raises(DateLineError, match="not on the index"):
        read_builds("t", "t", (tmp_path / "none").as_uri(), d, d)


SLOW_FIXED_SCRIPT = """
import sys
import faketorch
if getattr(faketorch, "BUGGY", False):
    print("RuntimeError: FAKE-SIG")
    sys.exit(1)
"""


def test_bisect_by_date_names_the_day_and_steps_over_gaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bugmatrix bisect --dates` over a nightly channel: one probe per distinct day's build, gaps never probed."""
    from harness.cli import main

    from .fakeindex import fake_torch

    def nightly_torch(day: int, buggy: bool) -> FakeRelease:
        release = fake_torch(f"2.10.0.dev202508{day:02d}", f"2025-08-{day:02d}T07:00:00Z")
        return FakeRelease(
            release.name,
            release.version,
            release.uploaded,
            module=f"BUGGY = {buggy}\n",
            files=release.files,
            git_version=f"{day:x}" * 40,
            package="torch",
        )

    days = {1: True, 2: True, 4: True, 5: True, 6: False, 7: False, 8: False}  # fixed on the 6th; 3rd pruned
    nightly = build_index(tmp_path / "nightly", [nightly_torch(d, b) for d, b in days.items()])
    stable = build_index(tmp_path / "stable", [fake_torch("2.9.0", "2025-07-01T00:00:00Z")])
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump({"indexes": {"local": stable, "nightly": nightly}, "defaults": {"index": "local"}})
    )
    case = tmp_path / "cases" / "torch-1-bug"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SLOW_FIXED_SCRIPT.replace("faketorch", "torch"))
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "t",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch"],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {"bug": {"expect": [{"outcome": "fixed"}]}},
            }
        )
    )
    ResultStore(tmp_path / "r.db")  # an explicit --db must exist
    code = main(
        [
            "--cases-dir",
            str(tmp_path / "cases"),
            "bisect",
            "torch-1-bug",
            "--package",
            "torch",
            "--device",
            "cpu",
            "--dates",
            "2025-08-01..2025-08-08",
            "--channel",
            "nightly",
            "--pre",
            "--matrix",
            str(tmp_path / "matrix.yaml"),
            "--envs",
            str(tmp_path / "envs"),
            "--db",
            str(tmp_path / "r.db"),
            "-j",
            "1",
            "--no-commits",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "2025-08-05 (2.10.0.dev20250805, 5555555555" in captured.err and "(reproduced)" in captured.err
    assert "2025-08-06 (2.10.0.dev20250806, 6666666666" in captured.err
    assert "over 7 days of torch dev builds 2025-08-01 … 2025-08-08 (1 gap(s)" in captured.err  # 3rd: never probed
