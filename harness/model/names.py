"""The grammar of the names that become paths and keys: case ids, variants and cells.

A case id is its folder's name and names its record file (`record/results/<id>.jsonl`); a variant and a cell are
keys of every result, and a cell names its environment's folder. Whatever arrives from outside -- a case folder, a
`run --json` payload, a results store (a nightly shard, another machine's), a record line -- passes `check_name`
before it is used, so a name like `../../x` can neither write outside a folder nor be read as a case. Light (no
pydantic): the schemas take their patterns from here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

CASE_ID = r"^[a-z0-9][a-z0-9-]*$"  # every folder of cases/ and probes/: lowercase, digits, hyphens
VARIANT = r"^[a-z0-9][a-z0-9_-]*$"
CELL = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"  # matrix.yaml cell names (a version's dots and local `+`)
MAX_LENGTH = 80  # the longest library, a 9-digit issue number and a 60-character slug (`new`); a record file
# name is the id plus `.jsonl`, well inside any file system's 255 bytes
_PATTERNS = {"case id": re.compile(CASE_ID), "variant": re.compile(VARIANT), "cell": re.compile(CELL)}


class UnsafeName(ValueError):
    """A case id, variant or cell that does not follow its grammar (the message says which and what it was)."""


@lru_cache(maxsize=4096)  # a record repeats few names many times
def _valid(kind: str, value: str) -> bool:
    return len(value) <= MAX_LENGTH and _PATTERNS[kind].fullmatch(value) is not None


def check_name(kind: str, value: object) -> str:
    """`value` when it is a valid `kind` ('case id', 'variant' or 'cell'); else raise `UnsafeName` (one line)."""
    if isinstance(value, str) and _valid(kind, value):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise UnsafeName(
        f"{kind} {shown} is not a valid {kind} ({_PATTERNS[kind].pattern}, at most {MAX_LENGTH} characters)"
    )


def check_key(case: object, variant: object, cell: object) -> None:
    """Check a result's three names at once (`UnsafeName` names the first that is not valid)."""
    check_name("case id", case)
    check_name("variant", variant)
    check_name("cell", cell)


def inside(folder: Path, relative: str | Path) -> Path:
    """`folder / relative`, resolved, when it lies inside `folder` (symbolic links followed); else `UnsafeName`."""
    base = folder.resolve()
    path = (base / relative).resolve()
    if path != base and base not in path.parents:
        raise UnsafeName(f"{relative} lies outside {folder}")
    return path
