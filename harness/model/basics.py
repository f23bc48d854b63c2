"""What a command names before it reads a case: the folder of case folders a plain `bugmatrix` reads.

Light on purpose (as harness/matrix/basics.py and harness/session/basics.py): `bugmatrix --help` names it and must
not load the case schema (pydantic) to do so; harness/model/case.py imports it from here.
"""

from __future__ import annotations

from pathlib import Path


def default_cases_dir() -> Path:
    """The folder a plain `bugmatrix` reads: `cases/` in the current directory, else the one beside this package."""
    return Path("cases") if Path("cases").is_dir() else Path(__file__).resolve().parent.parent.parent / "cases"
