"""Releases of a package on a package index (PEP 503 simple pages), with their upload times.

Reads the same pages uv reads: `<index>/<name>/` with `data-upload-time` (PEP 700) and `data-yanked` on each file
link; `file://` indexes (a folder of `<name>/index.html`) work the same way, which is what the hermetic tests use.
Results are cached per (index, name) in memory for the life of the process. `files` gives each file (its URL, for
reading a wheel's commit; its name, for platform tags) where `releases` gives versions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from harness.matrix.basics import PYPI, IndexLookupError

# What uv asks for; some indexes only add upload times (PEP 700) for clients that ask this way.
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


@dataclass(frozen=True)
class Release:
    """One version of a package: when its newest file was uploaded, and whether every file is yanked."""

    version: Version
    uploaded: datetime | None
    yanked: bool


@dataclass(frozen=True)
class IndexFile:
    """One file of a release on the index: its name, where to get it, when it was uploaded, whether yanked."""

    filename: str
    url: str
    version: Version
    uploaded: datetime | None
    yanked: bool


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[str, str | None, bool, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        a = dict(attrs)
        href = a.get("href") or ""
        filename = unquote(urlparse(href).path.rsplit("/", 1)[-1])
        self.files.append((filename, a.get("data-upload-time"), "data-yanked" in a, href))


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        if filename.endswith((".tar.gz", ".zip")):
            return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None
    return None


def _page_url(index: str, name: str) -> str:
    return f"{index.rstrip('/')}/{canonicalize_name(name)}/"


def _fetch(index: str, name: str) -> str:
    url = _page_url(index, name)
    if url.startswith("file://"):
        path = Path(urlparse(url).path) / "index.html"
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise IndexLookupError(f"{name}: not on the index {index} ({exc.strerror})") from None
    import urllib.error  # here, not at the top: a reader of the record never asks an index
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": _ACCEPT, "User-Agent": "bugmatrix"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        raise IndexLookupError(f"{name}: not on the index {index} (HTTP {exc.code})") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise IndexLookupError(f"{name}: cannot reach the index {index} ({exc})") from None


@lru_cache(maxsize=512)
def files(name: str, index: str = PYPI) -> tuple[IndexFile, ...]:
    """Every wheel and sdist of `name` on `index`, in page order; raises `IndexLookupError` when it cannot tell."""
    page = _fetch(index, name)
    if page.lstrip().startswith("{"):  # PEP 691 JSON
        links = [
            (f["filename"], f.get("upload-time"), bool(f.get("yanked")), f.get("url", ""))
            for f in json.loads(page)["files"]
        ]
    else:
        parser = _Links()
        parser.feed(page)
        links = parser.files
    out = []
    for filename, uploaded, yanked, href in links:
        version = _version_of(filename)
        if version is None:
            continue
        when = datetime.fromisoformat(re.sub(r"Z$", "+00:00", uploaded)) if uploaded else None
        out.append(IndexFile(filename, urljoin(_page_url(index, name), href), version, when, yanked))
    return tuple(out)


@lru_cache(maxsize=512)
def releases(name: str, index: str = PYPI) -> tuple[Release, ...]:
    """Every release of `name` on `index`, oldest first; raises `IndexLookupError` when it cannot tell (a record's
    snapshot of it: `Chronology.releases_of`, harness/matrix/chronology.py)."""
    by_version: dict[Version, list[tuple[datetime | None, bool]]] = {}
    for f in files(name, index):
        by_version.setdefault(f.version, []).append((f.uploaded, f.yanked))
    out = []
    for version, its in sorted(by_version.items()):
        times = [t for t, _ in its if t is not None]
        out.append(Release(version, max(times) if times else None, all(y for _, y in its)))
    return tuple(out)
