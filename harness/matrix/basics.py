"""What a command names before it plans anything: the default matrix file and environments folder, and the errors
of planning that every command catches.

Light on purpose: a local `bugmatrix run` imports this module and none of the planner (spec, axes, index, resolve,
the environment cache), which it does not use; the planner's modules import their names from here.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.model.basics import data_path
from harness.model.errors import BugmatrixError

DEFAULT_MATRIX = Path("matrix.yaml")  # what the help and the docs name
PYPI = "https://pypi.org/simple"  # the default package index (harness/matrix/index.py)
ENVS_FALLBACK = ".bugmatrix/envs"  # where $BUGMATRIX_ENVS is not set (the help and the docs name this one)


def default_matrix() -> Path:
    """The matrix file a plain `bugmatrix` reads: `matrix.yaml` in the current directory, else the installed wheel's
    copy, else the one beside this package (`data_path`, as the cases and the record are found)."""
    return data_path(str(DEFAULT_MATRIX))


def default_envs() -> Path:
    """The default environments folder: $BUGMATRIX_ENVS, else `.bugmatrix/envs` (read when called)."""
    return Path(os.environ.get("BUGMATRIX_ENVS", ENVS_FALLBACK))


class MatrixError(BugmatrixError):
    """matrix.yaml is invalid, or a cell cannot be formed; the message names the file and the field or cell."""


class IndexLookupError(BugmatrixError, RuntimeError):
    """The index could not be read, or has no such package."""
