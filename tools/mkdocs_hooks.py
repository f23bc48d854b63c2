"""mkdocs hooks: the site's home page is README.md itself (one home for what bugmatrix is, its quick start, outcomes,
commands and exit codes), with its links into docs/ made relative to the site; a page's link to README.md (which
GitHub follows in the repository) becomes a link to that home page. The site's `site_url` and `repo_url` are
pyproject.toml's [project.urls] Documentation and Repository (where bugmatrix lives, said once), or where the
workflow that builds the site publishes it (BUGMATRIX_SITE_URL, BUGMATRIX_REPO_URL: .github/workflows/nightly.yml);
with no `site_url` the 404 page links its styles relative to a path that does not exist under GitHub Pages'
sub-path, and renders unstyled."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.structure.files import File, Files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS_LINK = re.compile(r"\]\(docs/")
README_LINK = re.compile(r"\]\(((?:\.\./)+)README\.md")


def readme_as_home(text: str) -> str:
    """README.md's text as the site's index.md: `](docs/x.md)` becomes `](x.md)`."""
    return DOCS_LINK.sub("](", text)


def links_to_home(text: str) -> str:
    """A page's `](../README.md#x)` (one `../` more than the page's depth under docs/) as `](index.md#x)`."""
    return README_LINK.sub(lambda m: "](" + m.group(1)[3:] + "index.md", text)


def site_urls(pyproject: Path, environ: dict[str, str]) -> tuple[str, str]:
    """(site_url, repo_url): the environment's BUGMATRIX_SITE_URL / BUGMATRIX_REPO_URL where set and not empty, else
    `pyproject`'s [project.urls] Documentation / Repository; site_url ends with `/`."""
    urls = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["urls"]
    site = environ.get("BUGMATRIX_SITE_URL") or urls["Documentation"]
    repo = environ.get("BUGMATRIX_REPO_URL") or urls["Repository"]
    return site if site.endswith("/") else site + "/", repo.rstrip("/")


def on_config(config):  # noqa: ANN001, ANN201 - mkdocs' MkDocsConfig
    """`site_url`, `repo_url` and `repo_name` (`owner/name`) from site_urls, unless mkdocs.yml names them."""
    site, repo = site_urls(ROOT / "pyproject.toml", dict(os.environ))
    if not config.site_url:
        config.site_url = site
    if not config.repo_url:
        config.repo_url = repo
        config.repo_name = urlsplit(repo).path.strip("/")
    return config


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - mkdocs' MkDocsConfig
    """Add README.md as the site's index.md (docs/ holds no index of its own)."""
    files.append(File.generated(config, "index.md", content=readme_as_home(README.read_text(encoding="utf-8"))))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - mkdocs' objects
    """Links to README.md lead to the site's home page."""
    return links_to_home(markdown)
