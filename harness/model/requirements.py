"""Reading what an environment pins: a requirements file (what `pip freeze` and `uv pip compile` write) or
`pkg==version` arguments, as exact pins, without installing or running anything.

    pins, loose = read_requirements(Path("requirements.txt"))   # RequirementsError names the file and line
    pins, loose = parse_pins(["torch==2.6.0+cu124", "lightning==2.4.0"], where="argument")

Understood: `==`/`===` pins (a local version such as `+cu124` kept: readers compare by the public version),
`--hash` options and backslash continuations, comments, environment markers (evaluated with `packaging.markers`
against this interpreter, or the target a caller names (harness/model/lockfiles.py, which reads `uv.lock` and
`pylock.toml` too): a line whose marker is false is skipped), extras (ignored: the distribution is what
counts), `name @ git+https://...@<sha>` (a commit, with no version of its own), a direct wheel URL (its file name
says the version), `-r other.txt` (read too, relative to the file; a quoted or escaped path as pip reads it;
depth, files and bytes bounded, and only regular files read), and the options a frozen file may hold
(`--index-url`, `-c`, ...: skipped). A line that names a distribution without one exact version (`torch>=2.4`,
an editable install, a local path) is *loose*: reported, never guessed. A line that does not parse at all is a
`RequirementsError` (one line: `<file>:<line>: <problem>`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import EvaluateContext, InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

_COMMENT = re.compile(r"(^|\s+)#.*$")
_SHA = re.compile(r"@([0-9a-fA-F]{7,40})(#.*)?$")
_WHEEL = re.compile(r"/([A-Za-z0-9_.]+)-([0-9][^-/]*)-[^/]*\.whl(#.*)?$")


class RequirementsError(ValueError):
    """A requirements file or argument that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Pin:
    """One distribution pinned to one version (`version`, local part kept) or one git commit (`commit`)."""

    distribution: str  # canonical distribution name, as pinned (fbgemm-gpu-cpu, pytorch-lightning)
    version: str  # "" for a git install that says no version
    commit: str | None = None
    where: str = ""  # <file>:<line> or "argument"

    @property
    def text(self) -> str:
        """`2.6.0+cu124`, `0.4.0.dev0 @ <sha>` or `git <sha>`."""
        if self.commit:
            return f"{self.version} @ {self.commit}" if self.version else f"git {self.commit}"
        return self.version


@dataclass(frozen=True)
class Loose:
    """A requirement that does not name one exact version (or names no distribution)."""

    name: str
    text: str
    why: str


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, the line with its continuations joined and its comment cut)."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = _COMMENT.sub("", pending + line).strip()
        pending = ""
        if line:
            out.append((start, line))
    if pending.strip():
        line = _COMMENT.sub("", pending).strip()
        if line:
            out.append((start, line))
    return out


def marker_holds(
    marker: str,
    environment: Mapping[str, str | AbstractSet[str]] | None,
    where: str,
    context: EvaluateContext = "metadata",
) -> bool:
    """Whether an environment marker holds for `environment` (None: this interpreter; a dict: the target a lockfile
    is read for, harness/model/lockfiles.marker_environment; `context="lock_file"` for PEP 751's `extras` and
    `dependency_groups` sets); `RequirementsError` naming `where` when it does not parse or cannot be evaluated."""
    try:
        return Marker(marker).evaluate(dict(environment) if environment is not None else None, context)
    except InvalidMarker as exc:
        first = str(exc).splitlines()[0]
        raise RequirementsError(f"{where}: {marker!r} is not a marker ({first})") from None
    except Exception as exc:  # noqa: BLE001 - an undefined marker variable is the line's problem, said once
        raise RequirementsError(f"{where}: marker {marker} cannot be evaluated ({exc})") from None


def parse_line(line: str, where: str, environment: Mapping[str, str] | None = None) -> Pin | Loose | None:
    """One requirement line as a pin, a loose requirement, or None (an option, or a marker that is false for
    `environment`: None is this interpreter); `RequirementsError` when it does not parse."""
    if line.startswith(("-e ", "--editable")):
        return Loose(line.split(None, 1)[-1], line, "an editable install: no version to look up")
    if line.startswith("-"):
        return None
    if line.startswith((".", "/", "file:")):
        return Loose(line, line, "a local path: no version to look up")
    # per-requirement options (`--hash=sha256:...`) end the requirement; a marker never holds ` --`
    cut = re.search(r"\s--?[A-Za-z]", line)
    requirement_text = line[: cut.start()].strip() if cut else line
    try:
        req = Requirement(requirement_text)
    except InvalidRequirement as exc:
        first = str(exc).splitlines()[0]
        raise RequirementsError(f"{where}: {requirement_text!r} is not a requirement ({first})") from None
    if req.marker is not None and not marker_holds(str(req.marker), environment, where):
        return None
    name = canonicalize_name(req.name)
    if req.url:
        sha = _SHA.search(req.url)
        if req.url.startswith("git+") and sha:
            return Pin(name, "", sha.group(1).lower(), where)
        wheel = _WHEEL.search(req.url)
        if wheel and canonicalize_name(wheel.group(1)) == name:
            return Pin(name, wheel.group(2), None, where)
        return Loose(name, line, "a direct URL that names no commit or version")
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        try:
            Version(specs[0].version)
        except InvalidVersion:
            return Loose(name, line, f"{specs[0].version!r} is not a version")
        return Pin(name, specs[0].version, None, where)
    return Loose(name, requirement_text, "not pinned to one version")


MAX_DEPTH = 16  # `-r` within `-r` ...: pip has no limit but the stack; a real project nests two or three deep
MAX_FILES = 256  # files read for one audit, includes counted
MAX_BYTES = 16 * 1024 * 1024  # bytes read for one audit (a 300-package lock with hashes is ~100 KB)
_INCLUDE = re.compile(r"(-r|--requirement)(?:\s+|=)(.+)$")


@dataclass
class Budget:
    """What one audit may still read (shared by every file it includes)."""

    files: int = MAX_FILES
    bytes: int = MAX_BYTES


def read_text(path: Path, budget: Budget, where: str | None = None) -> str:
    """A requirements file's (or a lockfile's) text: a regular file within the budget, else one line naming it (and
    `where` it was included from): `/dev/zero`, a FIFO or a folder never block or fill memory."""
    where = f"{where}: {path}" if where else str(path)
    if not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file" if path.exists() else "no such file"
        raise RequirementsError(f"{where}: cannot be read ({kind})")
    budget.files -= 1
    if budget.files < 0:
        raise RequirementsError(f"{where}: more than {MAX_FILES} requirement files included")
    try:
        with path.open("rb") as handle:
            data = handle.read(budget.bytes + 1)
        budget.bytes -= len(data)
        if budget.bytes < 0:
            raise RequirementsError(f"{where}: more than {MAX_BYTES // (1024 * 1024)} MiB of requirements")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequirementsError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None


def _include_target(argument: str, where: str) -> str:
    """The file an `-r` line names, as pip reads it: quotes and backslash escapes undone (`-r "my reqs.txt"`)."""
    try:
        words = shlex.split(argument)
    except ValueError as exc:
        raise RequirementsError(f"{where}: -r {argument}: {exc}") from None
    if len(words) != 1:
        raise RequirementsError(f"{where}: -r {argument}: names {len(words)} files, not one")
    return words[0]


def read_requirements(
    path: Path,
    seen: frozenset[Path] = frozenset(),
    budget: Budget | None = None,
    environment: Mapping[str, str] | None = None,
) -> tuple[list[Pin], list[Loose]]:
    """The pins and loose requirements of a requirements file (and the files it includes with `-r`, quoted or
    escaped paths included, relative to the including file); bounded in depth, files and bytes, each bound and
    every file that is not a regular file a `RequirementsError` naming it. Markers are evaluated for
    `environment` (None: this interpreter)."""
    budget = budget if budget is not None else Budget()
    if len(seen) >= MAX_DEPTH:
        raise RequirementsError(f"{path}: included more than {MAX_DEPTH} levels deep")
    return requirements_of(path, read_text(path, budget), seen, budget, environment)


def requirements_of(
    path: Path, text: str, seen: frozenset[Path], budget: Budget, environment: Mapping[str, str] | None = None
) -> tuple[list[Pin], list[Loose]]:
    """The pins and loose requirements in the text of the requirements file `path` (see read_requirements)."""
    pins: list[Pin] = []
    loose: list[Loose] = []
    for number, line in _logical_lines(text):
        include = _INCLUDE.match(line)
        if include:
            where = f"{path}:{number}"
            name = _include_target(include.group(2), where)
            target = (path.parent / name).resolve()
            if target in seen or target == path.resolve():
                raise RequirementsError(f"{where}: -r {name} includes itself")
            if not target.is_file():
                read_text(target, budget, where)  # raises: names what it is
            more_pins, more_loose = read_requirements(target, seen | {path.resolve()}, budget, environment)
            pins += more_pins
            loose += more_loose
            continue
        found = parse_line(line, f"{path}:{number}", environment)
        if isinstance(found, Pin):
            pins.append(found)
        elif isinstance(found, Loose):
            loose.append(found)
    return pins, loose


def parse_pins(
    items: list[str], where: str = "argument", environment: Mapping[str, str] | None = None
) -> tuple[list[Pin], list[Loose]]:
    """`pkg==version` arguments (one or several per item, separated by commas) as pins (markers evaluated for
    `environment`, None: this interpreter)."""
    pins: list[Pin] = []
    loose: list[Loose] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            found = parse_line(part, f"{where} {part!r}", environment)
            if isinstance(found, Pin):
                pins.append(found)
            elif isinstance(found, Loose):
                loose.append(found)
    return pins, loose
