"""Reading what a lockfile pins: `uv.lock` (uv's universal lock) and `pylock.toml` (PEP 751), as the same exact pins
and loose requirements a requirements file gives (harness/model/requirements.py), for one target environment.

    environment = marker_environment("macos", "3.12")          # None, None: this machine and interpreter
    pins, loose = read_pins(Path("uv.lock"), environment)       # or pylock.toml, or a requirements file

A lockfile holds a resolution for every platform and Python at once; what is installed depends on the target, so its
markers are evaluated for one: this machine by default (`packaging.markers.default_environment()`), or the platform
and Python version asked for (`--python-platform`, uv's names: linux, macos, windows or a target triple such as
x86_64-manylinux_2_28; `--python-version`). Counted as installed, for that target:

- `uv.lock`: every package reachable from the project (the workspace members; a lock with none: every package) through
  dependencies whose markers hold, with **every** extra and dependency group of the project itself (the lock holds
  them all, and the question is whether any of them pins an affected release); of a package resolved more than once
  (a forked resolution), the entry whose `resolution-markers` hold.
- `pylock.toml` / `pylock.<name>.toml`: every package whose `marker` holds, with every extra and dependency group the
  file names selected.

A registry, URL or archive package is a pin (`version`); a git package is a pin with its commit (uv: the source URL's
`#<sha>`; PEP 751: `vcs.commit-id`); the project itself and any local folder (editable, virtual, directory) is loose:
it has no release to look up. One package left at two different releases for the target (uv's conflicting extras)
is loose too, never a guess. A file that is not one of these is one line naming it and the field, e.g.
`uv.lock: package 12 (torch): version: missing` (a `RequirementsError`, exit 2).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.model.requirements import (
    Budget,
    Loose,
    Pin,
    RequirementsError,
    marker_holds,
    read_text,
    requirements_of,
)
from harness.model.version import PinVersion

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_EXTRA = re.compile(r"""\bextra\s*[!=]=\s*['"]([^'"]+)['"]""")
_PYTHON_VERSION = re.compile(r"^3\.\d{1,3}(\.\d{1,3})?$")
LOCAL_SOURCES = ("editable", "virtual", "directory")
# The lines of a uv.lock that list a package's files (`sdist = { url = ... }` and each `{ url = ... },` of `wheels`),
# whole inline tables one to a line as uv writes them: blanked before parsing (line numbers kept), since no answer
# reads them and they are most of the file (9 in 10 bytes of this repository's lock; TOML-parsing them was 0.13 s
# of a 300-package audit, benchmarks/bench_audit.py).
_UV_FILES = re.compile(r'^(?:sdist = |    )\{ url = "[^"\n]*"[^\n]*\},?$', re.MULTILINE)

# ------------------------------------------------------------------------------------------------- the target


@dataclass(frozen=True)
class MarkerEnvironment:
    """The environment a lockfile's markers are evaluated for, and how to say it (`linux x86_64, Python 3.12.0`)."""

    values: dict[str, str]
    label: str


_OS = {  # uv's operating system words -> (sys_platform, platform_system, os_name)
    "linux": ("linux", "Linux", "posix"),
    "darwin": ("darwin", "Darwin", "posix"),
    "windows": ("win32", "Windows", "nt"),
}
_ALIASES = {"linux": "x86_64-unknown-linux-gnu", "macos": "aarch64-apple-darwin", "windows": "x86_64-pc-windows-msvc"}
_MACHINE = {  # (triple's architecture, os) -> platform_machine as that OS reports it
    ("aarch64", "darwin"): "arm64",
    ("x86_64", "windows"): "AMD64",
    ("aarch64", "windows"): "ARM64",
    ("i686", "windows"): "x86",
}


def _platform(name: str) -> tuple[str, str]:
    """(architecture, os word) of one of uv's `--python-platform` names, or a UsageError-worthy ValueError."""
    triple = _ALIASES.get(name, name)
    arch, _, rest = triple.partition("-")
    arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)
    if "windows" in rest:
        os_word = "windows"
    elif "darwin" in rest or "macos" in rest:
        os_word = "darwin"
    elif "linux" in rest:  # -unknown-linux-gnu, -manylinux_2_28, -musllinux_1_2, -manylinux2014
        os_word = "linux"
    else:
        raise ValueError(name)
    if not re.fullmatch(r"[a-z0-9_]+", arch):
        raise ValueError(name)
    return arch, os_word


def marker_environment(python_platform: str | None = None, python_version: str | None = None) -> MarkerEnvironment:
    """The marker environment of this machine and interpreter, with the platform (`linux`, `macos`, `windows` or a
    target triple as uv names it) and the Python version (`3.11`, `3.11.4`) replaced where given; ValueError naming
    the option when one is not understood."""
    values: dict[str, str] = {key: str(value) for key, value in default_environment().items()}  # each is text
    where: list[str] = []
    if python_platform is not None:
        try:
            arch, os_word = _platform(python_platform.strip().lower())
        except ValueError:
            raise ValueError(
                f"--python-platform {python_platform}: not a platform (linux, macos, windows, or a "
                "target such as x86_64-manylinux_2_28 or aarch64-apple-darwin)"
            ) from None
        values["sys_platform"], values["platform_system"], values["os_name"] = _OS[os_word]
        values["platform_machine"] = _MACHINE.get((arch, os_word), arch)
        values["platform_release"] = values["platform_version"] = ""  # not knowable from the name
        where.append(f"--python-platform {python_platform}")
    if python_version is not None:
        if not _PYTHON_VERSION.match(python_version.strip()):
            raise ValueError(f"--python-version {python_version}: not a Python version such as 3.11 or 3.11.4")
        full = python_version.strip() if python_version.count(".") == 2 else f"{python_version.strip()}.0"
        values["python_full_version"] = values["implementation_version"] = full
        values["python_version"] = ".".join(full.split(".")[:2])
        where.append(f"--python-version {python_version}")
    label = (
        f"{values['sys_platform']} {values['platform_machine']}, Python {values['python_full_version']} ("
        + (", ".join(where) if where else "this machine")
        + ")"
    )
    return MarkerEnvironment(values, label)


# ------------------------------------------------------------------------------------------------- the readers


def lock_kind(path: Path, text: str) -> str | None:
    """`uv.lock`, `pylock.toml` or None (a requirements file): by the file's name, else by what it holds (a TOML
    table header `[[package]]`/`[[packages]]` or a top-level `version =`/`lock-version =` key)."""
    if path.name == "uv.lock":
        return "uv.lock"
    if path.name.startswith("pylock.") and path.name.endswith(".toml"):  # pylock.toml, pylock.<name>.toml
        return "pylock.toml"
    if re.search(r"^\s*lock-version\s*=", text, re.MULTILINE):
        return "pylock.toml"
    if re.search(r"^\s*(\[\[package\]\]|version\s*=)", text, re.MULTILINE):
        return "uv.lock"
    return None


@dataclass
class PinsFile:
    """A requirements file or lockfile, read (bounded) and told apart: `kind` is `uv.lock`, `pylock.toml` or None."""

    path: Path
    text: str
    kind: str | None
    budget: Budget

    def pins(self, environment: MarkerEnvironment | None = None) -> tuple[list[Pin], list[Loose]]:
        """The pins and loose requirements for `environment` (None: this machine and interpreter)."""
        values = environment.values if environment is not None else None
        if self.kind is None:
            return requirements_of(self.path, self.text, frozenset(), self.budget, values)
        try:
            data = tomllib.loads(_UV_FILES.sub("", self.text) if self.kind == "uv.lock" else self.text)
        except tomllib.TOMLDecodeError as exc:
            raise RequirementsError(f"{self.path}: not a {self.kind} (TOML: {exc})") from None
        except RecursionError:
            raise RequirementsError(f"{self.path}: not a {self.kind} (TOML nested too deep)") from None
        reader = _uv_lock if self.kind == "uv.lock" else _pylock
        return reader(self.path, data, values if values is not None else marker_environment().values)


def open_pins(path: Path) -> PinsFile:
    """`path` read as read_requirements reads it (one regular file, within requirements.MAX_BYTES, else one line
    naming it) and told apart by lock_kind."""
    budget = Budget()
    text = read_text(path, budget)
    return PinsFile(path, text, lock_kind(path, text), budget)


def read_pins(path: Path, environment: MarkerEnvironment | None = None) -> tuple[list[Pin], list[Loose]]:
    """The pins and loose requirements of a `uv.lock`, a `pylock.toml` or a requirements file, for `environment`
    (None: this machine and interpreter)."""
    return open_pins(path).pins(environment)


def _field(
    table: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...] = str, required: bool = True
) -> Any:
    """`table[key]` of the expected type; missing (when required) or of another type: one line naming `where` and
    the field."""
    value = table.get(key)
    if value is None:
        if required:
            raise RequirementsError(f"{where}: {key}: missing")
        return None
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RequirementsError(f"{where}: {key}: {value!r} is not a {expected}")
    return value


def _version(table: Mapping[str, Any], where: str, required: bool = True) -> str | None:
    version: str | None = _field(table, "version", where, required=required)
    if version is not None:
        try:
            Version(version)
        except InvalidVersion:
            raise RequirementsError(f"{where}: version: {version!r} is not a version") from None
    return version


def _requires_python(path: Path, data: Mapping[str, Any], values: Mapping[str, str]) -> None:
    """A lock whose `requires-python` excludes the target Python cannot say what is installed there: one line."""
    spec = _field(data, "requires-python", str(path), required=False)
    if spec is None:
        return
    try:
        allowed = SpecifierSet(spec)
    except InvalidSpecifier:
        raise RequirementsError(f"{path}: requires-python: {spec!r} is not a version specifier") from None
    if not allowed.contains(values["python_full_version"], prereleases=True):
        raise RequirementsError(
            f"{path}: requires-python: {spec} excludes Python {values['python_full_version']} "
            "(choose one with --python-version)"
        )


def _tables(value: Any, where: str, key: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise RequirementsError(f"{where}: {key}: not an array of tables")
    return value


def _uv_marker(marker: str | None, values: Mapping[str, str], where: str) -> bool:
    """Whether a uv.lock marker holds for the target, any one extra or group chosen (uv writes a conflicting
    extra or group as `extra == 'extra-3-pkg-cpu'`): true when it holds with no extra or with one it names."""
    if marker is None:
        return True
    choices = ["", *dict.fromkeys(_EXTRA.findall(marker))]
    return any(marker_holds(marker, {**values, "extra": extra}, where) for extra in choices)


@dataclass
class _Entry:
    """One `[[package]]` of a uv.lock, checked: its release (or commit, or local source) and whether the target's
    fork holds it."""

    index: int
    name: str
    where: str
    table: Mapping[str, Any]
    version: str | None
    commit: str | None
    local: str | None  # editable | virtual | directory: the source's kind, None for a release
    selected: bool  # no resolution-markers, or one holds for the target


def _uv_entry(index: int, table: Mapping[str, Any], path: Path, values: Mapping[str, str]) -> _Entry:
    where = f"{path}: package {index}"
    name = canonicalize_name(_field(table, "name", where))
    where = f"{where} ({name})"
    source = _field(table, "source", where, dict)
    local = next((kind for kind in LOCAL_SOURCES if kind in source), None)
    commit = None
    if "git" in source:
        url = _field(source, "git", f"{where}: source")
        commit = url.rpartition("#")[2]
        if "#" not in url or not _SHA.match(commit):
            raise RequirementsError(f"{where}: source: git {url!r} names no commit (#<sha>)")
        commit = commit.lower()
    elif not local and not {"registry", "url", "path"} & set(source):
        raise RequirementsError(f"{where}: source: {dict(source)!r} is not a source uv writes")
    version = _version(table, where, required=not local)  # a local project's version may be dynamic
    markers = _field(table, "resolution-markers", where, list, required=False) or []
    if any(not isinstance(m, str) for m in markers):
        raise RequirementsError(f"{where}: resolution-markers: not an array of strings")
    selected = not markers or any(_uv_marker(m, values, f"{where}: resolution-markers") for m in markers)
    if local:
        commit = str(source[local])  # the folder, said in the loose line
    return _Entry(index, name, where, table, version, commit, local, selected)


def _uv_lock(path: Path, data: Mapping[str, Any], values: Mapping[str, str]) -> tuple[list[Pin], list[Loose]]:
    """uv.lock: see the module doc for what counts as installed."""
    lock_version = _field(data, "version", str(path), int)
    if lock_version != 1:
        raise RequirementsError(f"{path}: version: {lock_version}: not a uv.lock version this reader knows (1)")
    _requires_python(path, data, values)
    entries: dict[str, list[_Entry]] = defaultdict(list)
    for index, table in enumerate(_tables(data.get("package", []), str(path), "package"), 1):
        entry = _uv_entry(index, table, path, values)
        entries[entry.name].append(entry)
    members = _field(data.get("manifest", {}), "members", f"{path}: manifest", list, required=False)
    every = [e for group in entries.values() for e in group]
    roots = [e for m in members or [] for e in entries.get(canonicalize_name(str(m)), [])] or [
        e for e in every if e.local and e.commit == "."
    ]
    chosen = _reachable(roots, entries, values) if roots else [e for e in every if e.selected]
    pins: list[Pin] = []
    loose: list[Loose] = []
    for entry in chosen:
        if entry.local:
            loose.append(
                Loose(
                    entry.name,
                    f"{entry.local} {entry.commit}",
                    f"a local project ({entry.local}): no release to look up",
                )
            )
        else:
            pins.append(Pin(entry.name, entry.version or "", entry.commit, f"{path}: {entry.name}"))
    return _one_release_each(pins, loose)


def _reachable(roots: list[_Entry], entries: dict[str, list[_Entry]], values: Mapping[str, str]) -> list[_Entry]:
    """The entries installed for the target: the roots with every extra and dependency group, then each
    dependency whose marker holds (of a forked package, the entry the target's fork holds), with the extras it
    asks for."""
    seen: set[tuple[int, str]] = set()
    found: dict[int, _Entry] = {}
    stack: list[tuple[_Entry, str]] = [(root, "*") for root in roots if root.selected]  # "*": every extra, group
    while stack:
        entry, extra = stack.pop()
        if (entry.index, extra) in seen:
            continue
        seen.add((entry.index, extra))
        found[entry.index] = entry
        edges: list[tuple[str, Any]] = [("dependencies", entry.table.get("dependencies", []))]
        for key in ("optional-dependencies", "dev-dependencies"):
            groups = _field(entry.table, key, entry.where, dict, required=False) or {}
            if key == "optional-dependencies" or extra == "*":
                edges += [(f"{key}: {name}", deps) for name, deps in groups.items() if extra in ("*", name)]
        for key, deps in edges:
            for edge in _tables(deps, entry.where, key):
                where = f"{entry.where}: {key}"
                dep_name = canonicalize_name(_field(edge, "name", where))
                version = _field(edge, "version", where, required=False)
                named = [e for e in entries.get(dep_name, []) if version is None or e.version == version]
                if not named:
                    raise RequirementsError(
                        f"{where}: {dep_name} {version or ''}".rstrip() + ": not a package in the lock"
                    )
                if not _uv_marker(_field(edge, "marker", where, required=False), values, f"{where}: marker"):
                    continue
                extras = [canonicalize_name(str(x)) for x in _field(edge, "extra", where, list, False) or []]
                for target in (e for e in named if e.selected):
                    stack += [(target, x) for x in ("", *extras)]
    return [found[index] for index in sorted(found)]


def _pylock(path: Path, data: Mapping[str, Any], values: Mapping[str, str]) -> tuple[list[Pin], list[Loose]]:
    """pylock.toml (PEP 751): see the module doc for what counts as installed."""
    lock_version = _field(data, "lock-version", str(path))
    if lock_version.split(".")[0] != "1":
        raise RequirementsError(
            f"{path}: lock-version: {lock_version!r}: not a PEP 751 version this reader knows (1.x)"
        )
    _requires_python(path, data, values)
    selected: dict[str, Any] = {
        "extras": frozenset(canonicalize_name(str(x)) for x in _field(data, "extras", str(path), list, False) or []),
        "dependency_groups": frozenset(
            canonicalize_name(str(x)) for x in _field(data, "dependency-groups", str(path), list, False) or []
        ),
    }
    pins: list[Pin] = []
    loose: list[Loose] = []
    for index, table in enumerate(_tables(_field(data, "packages", str(path), list), str(path), "packages"), 1):
        where = f"{path}: packages {index}"
        name = canonicalize_name(_field(table, "name", where))
        where = f"{where} ({name})"
        found = _pylock_package(table, name, where, path)  # every entry checked, whichever target it is for
        marker = _field(table, "marker", where, required=False)
        if marker is not None and not marker_holds(marker, {**values, **selected}, f"{where}: marker", "lock_file"):
            continue
        if isinstance(found, Pin):
            pins.append(found)
        else:
            loose.append(found)
    return _one_release_each(pins, loose)


def _pylock_package(table: Mapping[str, Any], name: str, where: str, path: Path) -> Pin | Loose:
    """One `[[packages]]` entry: a folder is loose, a VCS checkout its commit, an archive or index release its
    version."""
    if "directory" in table:
        directory = _field(table, "directory", where, dict)
        return Loose(name, f"directory {directory.get('path')}", "a local project (directory): no release to look up")
    if "vcs" in table:
        vcs = _field(table, "vcs", where, dict)
        commit = _field(vcs, "commit-id", f"{where}: vcs")
        if not _SHA.match(commit):
            raise RequirementsError(f"{where}: vcs: commit-id: {commit!r} is not a commit")
        return Pin(name, _version(table, where, required=False) or "", commit.lower(), f"{path}: {name}")
    version = _version(table, where, required="archive" not in table)
    if version is None:
        return Loose(name, "archive", "an archive that names no version")
    return Pin(name, version, None, f"{path}: {name}")


def _one_release_each(pins: list[Pin], loose: list[Loose]) -> tuple[list[Pin], list[Loose]]:
    """One pin per distribution: entries that agree on the release (`2.6.0+cpu`, `2.6.0+cu124`) are one pin; two
    releases left for the target (uv's conflicting extras) are loose, never a guess."""
    by_name: dict[str, list[Pin]] = defaultdict(list)
    for pin in pins:
        by_name[pin.distribution].append(pin)
    out: list[Pin] = []
    for name, group in by_name.items():
        releases = {(PinVersion.parse(p.version).public or p.version, p.commit) for p in group}
        if len(releases) == 1:
            out.append(group[0])
        else:
            loose.append(
                Loose(
                    name,
                    " or ".join(sorted({p.text for p in group})),
                    "the lock leaves several releases for this target (conflicting extras or groups)",
                )
            )
    return out, loose
