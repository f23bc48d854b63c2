"""A package's version as a result records it: parsed once, ordered one way, shown one way.

The record writes a version as text in one of four forms, and `PinVersion.parse` reads each (`str()` gives back the
very text, so a record read and written again is byte-identical):

- a release, `2.6.0`; a local build keeps its tag (`2.11.0+cu130`) and `public` drops it (`2.11.0`);
- a git install, `0.4.0.dev0 @ <sha>`: the version its build says and the commit it was built from;
- a pinned commit never installed, `git:<sha>` (its environment could not be made: no version yet);
- anything else a distribution reported that is not a PEP 440 version: kept as text, no release.

The one order (`PinVersion.key`, used by `<`): versions with no release (`git:<sha>`, text that is not a version)
first, then by release (PEP 440 order: `2.6.0` < `2.6.0+cu124` < `2.6.1`); at one release the release itself before
the commits built at it (`0.4.0.dev0` < `0.4.0.dev0 @ <sha>`, commits by their sha: a version string says nothing of
history, see analysis/transitions.py), and last the text (`2.6` before `2.6.0`), so that two versions are equal in
the order only when their text is. A reader that wants local builds of one release counted as that release (audit:
a `2.6.0+cu124` cell measured what a `2.6.0` pin asks) compares `public_at()`, the same version without the tag.

A release's plain text (an index's listing, a matrix pin, `--old`/`--new`, a specifier's bound, a wheel's version)
is parsed by `parse_release` (raises `InvalidVersion`, a one-line `ValueError`) or `parse_release_or_none`: no
module outside `model/` calls `packaging.version.Version(...)` on text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

from packaging.version import InvalidVersion, Version

AT = " @ "  # between a git install's version and its commit: `0.4.0.dev0 @ <sha>`
GIT_PIN = "git:"  # before the commit of a pin whose environment could not be made: `git:<sha>`
ZERO = Version("0")

Kind = Literal["release", "release-at-commit", "commit", "other"]
RELEASE: Kind = "release"  # `2.6.0`, `2.11.0+cu130`
AT_COMMIT: Kind = "release-at-commit"  # `0.4.0.dev0 @ <sha>`
COMMIT: Kind = "commit"  # `git:<sha>`
OTHER: Kind = "other"  # not a PEP 440 version


@dataclass(frozen=True, eq=False)
class PinVersion:
    """One recorded version: its text, its release (None for `git:<sha>` or text that is not a version) and the
    commit it was built from ("" for a release). Compare and sort with `==`, `<` (see the module docstring)."""

    text: str
    release: Version | None
    commit: str
    kind: Kind

    @staticmethod
    def parse(text: str) -> PinVersion:
        """The version `text` records (any text: one that is not a version is kept as `other`)."""
        return parse_version(text)

    @staticmethod
    def of(release: str, commit: str | None = None) -> PinVersion:
        """The version a result records for `release` installed (from `commit`, when given)."""
        return parse_version(f"{release}{AT}{commit}" if commit else release)

    @property
    def release_text(self) -> str:
        """The version part as written (`0.4.0.dev0` of `0.4.0.dev0 @ <sha>`; "" for `git:<sha>`; the whole text of
        one that is not a version)."""
        if self.kind == COMMIT:
            return ""
        return self.text.partition(AT)[0]

    @cached_property
    def public(self) -> Version | None:
        """The release without its local build tag (`2.11.0` of `2.11.0+cu130`); None without a release."""
        if self.release is None or self.release.local is None:
            return self.release  # as written: `2.5` stays `2.5` (a cache keyed by Version would give `2.5.0`)
        return Version(self.release.public)

    @property
    def public_release(self) -> Version | None:
        """`public` of a release alone: None for a git install (`X @ sha`), a commit pin or text not a version."""
        return self.public if self.kind == RELEASE else None

    def public_at(self) -> PinVersion:
        """This version with its release's local build tag dropped (itself when it has none)."""
        if self.release is None or self.release.local is None:
            return self
        return PinVersion.of(str(self.public), self.commit or None)

    def short(self, digits: int = 12) -> str:
        """How a person reads it: the commit cut to `digits` hex digits (`0.4.0.dev0 @ 47806045a376`,
        `git:47806045a376`), a release as written."""
        if self.kind == COMMIT:
            return f"{GIT_PIN}{self.commit[:digits]}"
        return f"{self.release_text}{AT}{self.commit[:digits]}" if self.commit else self.text

    @cached_property
    def key(self) -> tuple[int, Version, int, str, str]:
        """The one order (module docstring) as a tuple."""
        return (
            0 if self.release is None else 1,
            self.release or ZERO,
            1 if self.commit else 0,
            self.commit,
            self.text,
        )

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"PinVersion({self.text!r})"

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return self.text == other.text if isinstance(other, PinVersion) else NotImplemented

    def __lt__(self, other: object) -> bool:
        return self.key < other.key if isinstance(other, PinVersion) else NotImplemented

    def __le__(self, other: object) -> bool:
        return self.key <= other.key if isinstance(other, PinVersion) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self.key > other.key if isinstance(other, PinVersion) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self.key >= other.key if isinstance(other, PinVersion) else NotImplemented


@lru_cache(maxsize=16384)  # a record holds few distinct versions; readers parse them again for every axis
def parse_version(text: str) -> PinVersion:
    """`PinVersion.parse`: the one parse of a recorded version's text."""
    if text.startswith(GIT_PIN):
        return PinVersion(text, None, text.removeprefix(GIT_PIN), COMMIT)
    release, _, commit = text.partition(AT)
    try:
        return PinVersion(text, Version(release), commit, AT_COMMIT if commit else RELEASE)
    except InvalidVersion:
        return PinVersion(text, None, commit, OTHER)


@lru_cache(maxsize=16384)
def parse_release(text: str) -> Version:
    """The release plain `text` names (`2.6.0`, `2.11.0+cu130`: an index's listing, a matrix pin, a command-line
    version, a specifier's bound): the one parse of a release's text outside a recorded version. Raises
    `InvalidVersion` (a `ValueError`, one line: `Invalid version: '2.x'`) when it is not a PEP 440 version."""
    return Version(text)


def parse_release_or_none(text: str) -> Version | None:
    """`parse_release(text)`, or None when `text` is not a PEP 440 version."""
    try:
        return parse_release(text)
    except InvalidVersion:
        return None


def version_key(text: str) -> tuple[int, Version, int, str, str]:
    """The sort key of a recorded version's text: `sorted(texts, key=version_key)`."""
    return parse_version(text).key


def short(text: str, digits: int = 12) -> str:
    """`PinVersion.short` of a recorded version's text: `0.4.0.dev0 @ 47806045a376`, `git:47806045a376`."""
    return parse_version(text).short(digits)
