"""GitHub Actions glue: the nightly workflow's job matrix, computed from matrix.yaml.

`bugmatrix matrix --github [--cells A,B] [--cases X,Y]` prints `job_matrix(...)` as one line of JSON. The nightly
workflow's `plan` job hands that line to the `cell` job as `strategy.matrix: ${{ fromJSON(...) }}`, so every cell
becomes one job, on the runner that `runners:` in matrix.yaml names for the cell's device:

    {"include": [{"cell": "default", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "default"},
                 {"cell": "default-cuda", "device": "cuda", "runs-on": ["self-hosted", "linux", "x64", "gpu"],
                  "slug": "default-cuda"}]}

- `cell`: the cell's name, for `bugmatrix env build CELL` and `bugmatrix run --cell CELL`;
- `device`: `cpu` or `cuda`;
- `runs-on`: the label (a string) or labels (a list: the runner must have all of them) of `runners[device]`;
- `slug`: the name made safe for an artifact or a file name (the same as `cell` for the names matrix.yaml has now);
- `cases`: only when `cases` was given: the case-id substrings, space-separated, for `bugmatrix run $cases`.

It only reads the expanded cells (names, devices) and `runners:`: no index, no network, nothing is resolved.
Any problem is a one-line `MatrixError` (unknown cell, a device without a runner, too many jobs for GitHub) or,
for a malformed case substring, `ValueError`, so a bad manual dispatch fails in the `plan` job with the reason.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

from harness.matrix.basics import MatrixError
from harness.matrix.expand import Matrix

MAX_JOBS = 256  # GitHub Actions runs at most 256 jobs from one matrix
_CASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a case-id substring: never an option, never a glob
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")  # characters not allowed (or not wanted) in artifact and file names


def split_list(text: str | Iterable[str] | None) -> list[str]:
    """`"a, b  c"` -> `["a", "b", "c"]`: a workflow_dispatch input is one string; None or blank -> `[]`."""
    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    return [item for part in parts for item in re.split(r"[\s,]+", part) if item]


def job_matrix(
    matrix: Matrix, cells: str | Iterable[str] | None = None, cases: str | Iterable[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The `strategy.matrix` of the nightly's `cell` job: one `include` entry per selected cell, in matrix order.

    `cells`: cell names or shell-style globs (`torchrec-1.9.*`); None or empty selects every cell, and a name or
    glob that selects nothing is an error (a typo in a manual dispatch must not silently run nothing).
    `cases`: case-id substrings, passed through as the string field `cases` (space-separated), so that each job
    runs only the cases whose id contains one of them (`bugmatrix run SUBSTRING... --cell CELL`).
    Both also take one string of names separated by commas or spaces (see `split_list`).
    """
    wanted = split_list(cells)
    substrings = split_list(cases)
    for substring in substrings:
        if not _CASE.match(substring):
            raise ValueError(f"cases: {substring!r} is not a case-id substring (letters, digits, '.', '_', '-')")
    names = [c.name for c in matrix.cells]
    if wanted:
        for pattern in wanted:
            if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
                raise MatrixError(f"{matrix.path}: no cell named {pattern!r} (have: {', '.join(names) or 'none'})")
        selected = [c for c in matrix.cells if any(fnmatch.fnmatchcase(c.name, p) for p in wanted)]
    else:
        selected = list(matrix.cells)
    if not selected:
        raise MatrixError(f"{matrix.path}: the matrix has no cells")
    if len(selected) > MAX_JOBS:
        raise MatrixError(
            f"{matrix.path}: {len(selected)} cells, but GitHub Actions runs at most {MAX_JOBS} jobs "
            "from one matrix: pick cells with --cells"
        )
    include: list[dict[str, Any]] = []
    slugs: dict[str, str] = {}
    runners: dict[str, str | list[str]] = dict(matrix.spec.runners.items())  # keyed by a cell's device, as text
    for cell in selected:
        label = runners.get(cell.device)
        if not label:
            raise MatrixError(
                f"{matrix.path}: runners: no runner label for device {cell.device!r} (needed by cell {cell.name})"
            )
        slug = _UNSAFE.sub("_", cell.name)
        if slug in slugs:
            raise MatrixError(
                f"{matrix.path}: cells {slugs[slug]!r} and {cell.name!r} both give the artifact "
                f"name {slug!r}: rename one"
            )
        slugs[slug] = cell.name
        entry: dict[str, Any] = {
            "cell": cell.name,
            "device": cell.device,
            "runs-on": label if isinstance(label, str) else list(label),
            "slug": slug,
        }
        if substrings:
            entry["cases"] = " ".join(substrings)
        include.append(entry)
    return {"include": include}
