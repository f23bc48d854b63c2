"""tools/offline_bundle.py: what a machine with its own torch and no network is given to run the cases in place."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import offline_bundle  # noqa: E402


def test_the_bundle_carries_the_harness_runtime_at_the_locked_versions() -> None:
    wanted = {Requirement(r).name: str(Requirement(r).specifier) for r in offline_bundle.requirements()}
    assert {"pydantic", "pyyaml", "rich", "psutil", "packaging"} <= set(wanted)
    assert not {"uv", "pytest", "pytest-xdist"} & set(wanted)  # a local `run --python` uses none of them
    lock = (ROOT / "uv.lock").read_text()
    for name, spec in wanted.items():
        assert spec.startswith("=="), f"{name} is not pinned"
        assert f'name = "{name}"\nversion = "{spec[2:]}"' in lock, f"{name}{spec} is not uv.lock's version"


def test_wheels_the_target_has_are_dropped(tmp_path: Path) -> None:
    for wheel in (
        "pydantic-2.14.3-py3-none-any.whl",
        "rich-15.0.0-py3-none-any.whl",
        "PyYAML-6.0.3-cp312-cp312-manylinux_2_17_x86_64.whl",
    ):
        (tmp_path / wheel).write_bytes(b"")
    assert offline_bundle.drop_present(tmp_path, ["rich", "pyyaml"]) == ["pydantic-2.14.3-py3-none-any.whl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pydantic-2.14.3-py3-none-any.whl"]


def test_the_launcher_installs_offline_and_runs_the_harness_in_place() -> None:
    script = offline_bundle.RUN_SH
    assert "--no-index" in script and "uv " not in script  # no network, no uv on that machine
    assert '-m harness run --device "$device" --python "$python"' in script and "--json" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0  # it parses
