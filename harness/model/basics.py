"""What a command names before it reads a case: where a plain `bugmatrix` finds its data, in a clone or installed.

The folder of case folders, the committed record, the compatibility probes and the matrix lie in a clone's source
tree; a built wheel carries its own copy of each (hatch_build.py).

Light on purpose (as harness/matrix/basics.py and harness/session/basics.py): `bugmatrix --help` names these
defaults and must not load the case schema (pydantic) to do so; harness/model/case.py imports them from here.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # harness/
# What a built wheel carries (hatch_build.py): record/, cases/, probes/, matrix.yaml and VERSION.json. A clone has
# no such folder: its data lies in the source tree, beside the package.
PACKAGED = PACKAGE / "_data"
SOURCE_TREE = PACKAGE.parent


def data_path(name: str, here: bool = True) -> Path:
    """Where a plain `bugmatrix` finds `name` (`cases`, `record`, `probes`, `matrix.yaml`): in the current folder when
    it holds one (`here`: a clone, or a folder of one's own cases), else the copy an installed wheel carries, else
    the clone this package is imported from (run from a clone's `docs/`, the clone's answers). Where none exists,
    the first of these (what an error then names)."""
    candidates = ([Path(name)] if here else []) + [PACKAGED / name, SOURCE_TREE / name]
    return next((path for path in candidates if path.exists()), candidates[0])


def packaged(path: Path) -> bool:
    """Whether `path` lies in the installed wheel's own copy of the data: read-only (a write there would change the
    installed package, which the next install replaces)."""
    return path.resolve().is_relative_to(PACKAGED.resolve())


def default_cases_dir() -> Path:
    """The folder a plain `bugmatrix` reads: `cases/` in the current directory, else the installed wheel's copy,
    else the one beside this package (`data_path`)."""
    return data_path("cases")
