"""The build hook (hatchling): what an installed wheel needs to answer from any folder.

Readers compile every case script and hash it to tell superseded results (harness/model/job.py `run_digest`), so the
wheel carries the record, the case folders, the probes and the matrix themselves, under harness/_data/ (found there
by harness/model/basics.py `data_path`). It also carries what `bugmatrix --version` says of the code and the record
(harness/session/version.py `facts`), asked of git here because an installed wheel has no git. An sdist carries
that file too, so that the wheel built from it (`uv build`) says the same; an editable install reads the clone.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DATA = ("record", "cases", "probes", "matrix.yaml")  # what the readers read beside the code
TARGET = "harness/_data"  # harness/model/basics.py PACKAGED


def version_module(root: Path) -> ModuleType:
    """harness/session/version.py, loaded on its own (the build environment has none of the harness's dependencies)."""
    spec = importlib.util.spec_from_file_location("bugmatrix_version", root / "harness" / "session" / "version.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CustomBuildHook(BuildHookInterface):
    """Adds harness/_data/ to the wheel (the data, and the version facts) and the facts to the sdist."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Force-include the data (wheel) and the version facts (wheel and sdist), written from git now unless the
        tree already carries them (an unpacked sdist)."""
        if version == "editable":
            return
        root = Path(self.root)
        version_of = version_module(root)
        if not (root / TARGET / version_of.BUILT).is_file():
            self.scratch = Path(tempfile.mkdtemp(prefix="bugmatrix-build-"))
            written = self.scratch / version_of.BUILT
            written.write_text(json.dumps(version_of.facts(root), indent=1, sort_keys=True) + "\n")
            build_data["force_include"][str(written)] = f"{TARGET}/{version_of.BUILT}"
        if self.target_name == "wheel":
            for name in DATA:
                build_data["force_include"][str(root / name)] = f"{TARGET}/{name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the scratch folder of the facts."""
        if getattr(self, "scratch", None):
            shutil.rmtree(self.scratch, ignore_errors=True)
