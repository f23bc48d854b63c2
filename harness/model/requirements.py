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
depth, files and bytes bounded, and only regular files read), `-c constraints.txt` (the same bounds; see below),
and the options a frozen file may hold (`--index-url`, ...: skipped). A line that names a distribution without one
exact version (`torch>=2.4`, an editable install, a local path) is *loose*: reported, never guessed. A line that
does not parse at all is a `RequirementsError` (one line: `<file>:<line>: <problem>`).

Constraints, as pip reads them (`-c`/`--constraint`, in any file, at any depth; an `-r` inside a constraints file
reads requirements again, a `-c` inside a requirements file constraints, as pip's own reader does): a constraint
decides which version of a package is installed, never whether it is. So a package named only in a constraints file
is not installed and not audited; a loose requirement (`torch>=2.4`) that a constraint pins exactly (`torch==2.6.0`)
is that pin (its `where`: the constraint's line); an exact requirement stays as it is. A constraint that the
requirement (or another constraint of the same package) excludes is a conflict pip would refuse to resolve: one
line naming both lines (`RequirementsError`). As in pip, a constraint must name a package: an editable install, an
unnamed local path or extras in a constraints file are refused in one line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import EvaluateContext, InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
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


def _requirement_text(line: str) -> str:
    """A requirement line without its per-requirement options (`--hash=sha256:...` end the requirement; a marker
    never holds ` --`)."""
    cut = re.search(r"\s--?[A-Za-z]", line)
    return line[: cut.start()].strip() if cut else line


def parse_line(line: str, where: str, environment: Mapping[str, str] | None = None) -> Pin | Loose | None:
    """One requirement line as a pin, a loose requirement, or None (an option, or a marker that is false for
    `environment`: None is this interpreter); `RequirementsError` when it does not parse."""
    if line.startswith(("-e ", "--editable")):
        return Loose(line.split(None, 1)[-1], line, "an editable install: no version to look up")
    if line.startswith("-"):
        return None
    if line.startswith((".", "/", "file:")):
        return Loose(line, line, "a local path: no version to look up")
    requirement_text = _requirement_text(line)
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
_INCLUDE = re.compile(r"(-r|--requirement|-c|--constraint)(?:\s+|=)(.+)$")


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


def _include_target(option: str, argument: str, where: str) -> str:
    """The file an `-r`/`-c` line names, as pip reads it: quotes and backslash escapes undone (`-r "my reqs.txt"`)."""
    try:
        words = shlex.split(argument)
    except ValueError as exc:
        raise RequirementsError(f"{where}: {option} {argument}: {exc}") from None
    if len(words) != 1:
        raise RequirementsError(f"{where}: {option} {argument}: names {len(words)} files, not one")
    return words[0]


@dataclass(frozen=True)
class Constraint:
    """One line of a constraints file: what it says (a pin or a range), its requirement text, and its line."""

    item: Pin | Loose
    text: str
    where: str

    @property
    def name(self) -> str:
        """The canonical name of the package it constrains."""
        return self.item.distribution if isinstance(self.item, Pin) else self.item.name


@dataclass
class _Found:
    """One read of a requirements file and its includes: its bounds (`budget`), the marker environment, and what
    the files read so far hold: requirements (pins, loose) and constraints."""

    budget: Budget
    environment: Mapping[str, str] | None
    pins: list[Pin]
    loose: list[Loose]
    constraints: list[Constraint]


def read_requirements(
    path: Path,
    seen: frozenset[Path] = frozenset(),
    budget: Budget | None = None,
    environment: Mapping[str, str] | None = None,
) -> tuple[list[Pin], list[Loose]]:
    """The pins and loose requirements of a requirements file (and the files it includes with `-r`, quoted or
    escaped paths included, relative to the including file), with the constraints of its `-c` files applied (module
    doc); bounded in depth, files and bytes, each bound and every file that is not a regular file a
    `RequirementsError` naming it. Markers are evaluated for `environment` (None: this interpreter)."""
    budget = budget if budget is not None else Budget()
    return requirements_of(path, read_text(path, budget), seen, budget, environment)


def requirements_of(
    path: Path, text: str, seen: frozenset[Path], budget: Budget, environment: Mapping[str, str] | None = None
) -> tuple[list[Pin], list[Loose]]:
    """The pins and loose requirements in the text of the requirements file `path` (see read_requirements)."""
    found = _Found(budget, environment, [], [], [])
    _collect(path, text, seen, False, found)
    return constrained(found.pins, found.loose, found.constraints)


def _collect(
    path: Path,
    text: str,
    seen: frozenset[Path],
    constraint: bool,
    found: _Found,
) -> None:
    """Add the lines of `path` (read as requirements, or as constraints) and of the files it includes to `found`."""
    if len(seen) >= MAX_DEPTH:
        raise RequirementsError(f"{path}: included more than {MAX_DEPTH} levels deep")
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        include = _INCLUDE.match(line)
        if include:
            option = include.group(1)
            name = _include_target(option, include.group(2), where)
            target = (path.parent / name).resolve()
            if target in seen or target == path.resolve():
                raise RequirementsError(f"{where}: {option} {name} includes itself")
            nested = read_text(target, found.budget, where)  # a folder, a FIFO, /dev/zero: one line naming it
            _collect(target, nested, seen | {path.resolve()}, option in ("-c", "--constraint"), found)
            continue
        if constraint:
            _constraint_line(line, where, found.environment, found)
            continue
        item = parse_line(line, where, found.environment)
        if isinstance(item, Pin):
            found.pins.append(item)
        elif isinstance(item, Loose):
            found.loose.append(item)


def _constraint_line(line: str, where: str, environment: Mapping[str, str] | None, found: _Found) -> None:
    """One line of a constraints file into `found`; what pip refuses as a constraint is one line naming it."""
    if line.startswith(("-e ", "--editable")):
        raise RequirementsError(f"{where}: {line}: an editable install is not allowed as a constraint")
    if line.startswith((".", "/", "file:")):
        raise RequirementsError(f"{where}: {line}: a constraint must name a package")
    item = parse_line(line, where, environment)
    if item is None:
        return
    text = _requirement_text(line)
    if Requirement(text).extras:
        raise RequirementsError(f"{where}: {text}: a constraint cannot have extras")
    found.constraints.append(Constraint(item, text, where))


def _versions(item: Pin | Loose, text: str) -> SpecifierSet | None:
    """The versions a requirement or constraint (`item`, its line's `text`) admits; None: no range to hold (a git
    commit, a URL, an editable install, a local path)."""
    if isinstance(item, Pin):
        return SpecifierSet(f"=={item.version}") if item.version and not item.commit else None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    return None if requirement.url else requirement.specifier


def _admits(item: Pin | Loose, text: str, candidate: Pin) -> bool:
    """Whether a requirement or constraint admits installing `candidate`. What cannot be compared (a git commit
    with no version against a range) is admitted: pip would build it to know."""
    if isinstance(item, Pin) and item.commit:
        theirs = candidate.commit or ""
        return not theirs or theirs.startswith(item.commit) or item.commit.startswith(theirs)
    versions = _versions(item, text)
    return versions is None or not candidate.version or versions.contains(candidate.version, prereleases=True)


def _spelled(pin: Pin) -> str:
    """A pin as a requirement line says it: `torch==2.6.0`, `torchrec @ <sha>`."""
    return f"{pin.distribution} @ {pin.commit}" if pin.commit else f"{pin.distribution}=={pin.version}"


def constrained(pins: list[Pin], loose: list[Loose], constraints: list[Constraint]) -> tuple[list[Pin], list[Loose]]:
    """pip's `-c` (module doc): the constraints limit the versions of the packages the requirements name and install
    nothing themselves. Of a package, the requirement's own pin is kept where every constraint admits it, else the
    first of the constraints' exact pins that the requirement and every constraint admit (`torch==2.6.0` constrained
    to `torch==2.6.0+cu124` is the local build; `torch>=2.4` constrained to `torch==2.6.0` is 2.6.0); none: a
    `RequirementsError` naming the constraint's line that excludes it."""
    by_name: dict[str, list[Constraint]] = {}
    for constraint in constraints:
        by_name.setdefault(constraint.name, []).append(constraint)

    def choose(required: Pin | Loose, text: str, limits: list[Constraint]) -> Pin | None:
        candidates = [required] if isinstance(required, Pin) else []
        candidates += [c.item for c in limits if isinstance(c.item, Pin)]
        for candidate in candidates:
            if _admits(required, text, candidate) and all(_admits(c.item, c.text, candidate) for c in limits):
                return candidate
        if not candidates:
            return None  # only ranges: no one version to audit, the requirement stays loose
        blocking = next((c for c in limits if not _admits(c.item, c.text, candidates[0])), None)
        blocking = blocking or next(c for c in limits if c.item is candidates[0])
        where = f" ({required.where})" if isinstance(required, Pin) else ""
        raise RequirementsError(f"{blocking.where}: constraint {blocking.text} excludes {text}{where}")

    kept_pins: list[Pin] = []
    kept_loose: list[Loose] = []
    for pin in pins:
        limits = by_name.get(pin.distribution, [])
        kept_pins.append(choose(pin, _spelled(pin), limits) or pin if limits else pin)
    for item in loose:
        limits = by_name.get(item.name, [])
        chosen = choose(item, item.text, limits) if limits else None
        if chosen is None:
            kept_loose.append(item)
        else:
            kept_pins.append(chosen)
    return kept_pins, kept_loose


def parse_pins(
    items: Iterable[str], where: str = "argument", environment: Mapping[str, str] | None = None
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
