"""Replacing several files of a folder at once, so that a kill at any moment leaves it as before or as after.

    replace_all(root, {"runs.jsonl": text, "results/x.jsonl": text})   # the writer (`record fold`, `expect --write`)
    recover(root)                                                      # what any writer does first
    pending(root)                                                      # what a reader reads instead (no writing)

A folder of files cannot be swapped with one `rename` when the folder itself is what is committed, so the swap is
journaled inside it, in `root/.record-journal/` (ignored by git, as a safety net):

1. every new file is written under `.record-journal/files/<name>` and synced to disk;
2. the commit marker `.record-journal/COMMITTED` (the names, one JSON string a line) is written beside it under a
   temporary name, synced and renamed into place: from this rename on, the write has happened;
3. each new file is renamed over its place in `root` (a rename is atomic; a name whose journal file is gone was
   moved already);
4. the marker is removed, then the journal.

A kill before step 2 leaves a journal without a marker: *uncommitted*, nothing of `root` was touched, and the next
writer removes it (roll back). A kill after it leaves a *committed* journal: the next writer renames what is left of
it into place (roll forward) and removes it. Either way the folder is the one before or the one after, byte for byte.

A reading command never writes, so it never finishes a journal: it reads the folder as the next writer will leave
it (`pending`: a committed journal's files in place of theirs; an uncommitted one is ignored), which is the logical
state, the same answer the reader would give a moment later. Refusing to read instead would stop every report and
audit on a machine whose fold was killed until someone folds again, for a state that is already decided.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.session.contract import StoreError

JOURNAL = ".record-journal"
MARKER = "COMMITTED"
_FILES = "files"
LEGACY_TEMPORARY = ".*.jsonl.tmp"  # what an older writer left beside a file it was replacing when it was killed


class JournalError(StoreError):
    """A commit marker that cannot be read, or a journal where none may be (the message names it)."""


def _sync_folder(path: Path) -> None:
    """Make the names in `path` (renames, new entries) durable; a platform without folder handles has none to sync."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _write_synced(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _committed(root: Path) -> list[str] | None:
    """The names a committed journal under `root` replaces, or None when there is no committed journal."""
    marker = root / JOURNAL / MARKER
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalError(f"{marker}: cannot be read ({exc})") from None
    try:
        names = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise JournalError(f"{marker}: not a list of names ({exc.msg})") from None
    if not all(isinstance(n, str) and n and not Path(n).is_absolute() and ".." not in Path(n).parts for n in names):
        raise JournalError(f"{marker}: not a list of names inside {root}")
    return names


def pending(root: Path) -> dict[str, Path]:
    """For a reader: each file a committed journal under `root` has not yet put in place, by name relative to `root`,
    with the path that holds its new content; {} when there is no journal or it is uncommitted. Writes nothing."""
    names = _committed(root) or []
    files = root / JOURNAL / _FILES
    return {name: files / name for name in names if (files / name).is_file()}


def recover(root: Path) -> str | None:
    """For a writer, before it reads or writes `root`: finish a committed journal (roll forward) or remove an
    uncommitted one (roll back), and remove what an older writer's killed write left (`LEGACY_TEMPORARY`). Returns
    what was done, in words, or None when there was nothing to do."""
    journal = root / JOURNAL
    strays = [p for folder in (root, root / "results") if folder.is_dir() for p in folder.glob(LEGACY_TEMPORARY)]
    for stray in strays:
        stray.unlink()
    if not journal.exists():
        return f"removed {len(strays)} temporary file(s) a killed write left" if strays else None
    names = _committed(root)
    if names is None:
        shutil.rmtree(journal)
        return "an interrupted write was rolled back (it had not committed): the record is as it was before it"
    _put_in_place(root, names)
    return f"an interrupted write was completed (it had committed): {len(names)} file(s) in place"


def _put_in_place(root: Path, names: list[str]) -> None:
    """Steps 3 and 4: rename each journaled file that is still there over its place, sync, remove the journal."""
    journal = root / JOURNAL
    folders = {root}  # a folder made for a new file is a new name in root
    for name in names:
        source = journal / _FILES / name
        if source.is_file():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
            folders.add(target.parent)
    for folder in sorted(folders):
        _sync_folder(folder)
    (journal / MARKER).unlink()  # from here on the journal is uncommitted, and holds nothing root lacks
    shutil.rmtree(journal)


def replace_all(root: Path, files: dict[str, str]) -> None:
    """Put `files` (text by name relative to `root`) in place under `root` at once: after a kill at any moment, the
    next `recover` leaves `root` as before or as after (see the module docstring). Call `recover` first."""
    if not files:
        return
    journal = root / JOURNAL
    if journal.exists():  # a writer that did not recover first: never mix two writes in one journal
        raise JournalError(f"{journal}: an unfinished write is pending (recover it first)")
    written = journal / _FILES
    for name, text in files.items():
        _write_synced(written / name, text)
    for folder in sorted({(written / name).parent for name in files} | {written, journal, root}, reverse=True):
        _sync_folder(folder)
    marker = journal / f"{MARKER}.tmp"
    _write_synced(marker, "".join(json.dumps(name) + "\n" for name in files))
    os.replace(marker, journal / MARKER)
    _sync_folder(journal)
    _put_in_place(root, list(files))
