"""What a command names before it opens anything: the default results store and the default record folder.

Light on purpose (as harness/matrix/basics.py): `bugmatrix --help` names both defaults and must not load the store,
the record or pydantic to do so; harness/session/store.py and harness/session/record.py import them from here.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.model.basics import data_path

DB_FALLBACK = ".bugmatrix/results.db"  # where $BUGMATRIX_DB is not set (the help and the docs name this one)
RECORD_FALLBACK = "record"  # where $BUGMATRIX_RECORD is not set (the help and the docs name this one)
NIGHTLY_DB = "nightly.db"  # the nightly's merged store: its file name in results/, and so in the baseline folder


def default_db() -> Path:
    """The default results store: $BUGMATRIX_DB, else `.bugmatrix/results.db` (read when called, so that what sets
    the variable after this module's import -- the tests' conftest, a wrapper -- is what a command opens)."""
    return Path(os.environ.get("BUGMATRIX_DB", DB_FALLBACK))


def default_record() -> Path:
    """The default record folder: $BUGMATRIX_RECORD, else `record` in the current directory, else the installed
    wheel's copy, else the one beside this package (`data_path`, as the cases are found: run from a clone's `docs/`,
    the clone's record answers, not an empty one). Read when called: harness/session/record.py reads it once, at its
    own import, as `DEFAULT_RECORD`."""
    if "BUGMATRIX_RECORD" in os.environ:
        return Path(os.environ["BUGMATRIX_RECORD"])
    return data_path(RECORD_FALLBACK)
