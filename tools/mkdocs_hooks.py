"""mkdocs hooks: the site's home page is README.md itself (one home for what bugmatrix is, its quick start, outcomes,
commands and exit codes), with its links into docs/ made relative to the site; a page's link to README.md (which
GitHub follows in the repository) becomes a link to that home page."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parent.parent / "README.md"
DOCS_LINK = re.compile(r"\]\(docs/")
README_LINK = re.compile(r"\]\(((?:\.\./)+)README\.md")


def readme_as_home(text: str) -> str:
    """README.md's text as the site's index.md: `](docs/x.md)` becomes `](x.md)`."""
    return DOCS_LINK.sub("](", text)


def links_to_home(text: str) -> str:
    """A page's `](../README.md#x)` (one `../` more than the page's depth under docs/) as `](index.md#x)`."""
    return README_LINK.sub(lambda m: "](" + m.group(1)[3:] + "index.md", text)


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - mkdocs' MkDocsConfig
    """Add README.md as the site's index.md (docs/ holds no index of its own)."""
    files.append(File.generated(config, "index.md", content=readme_as_home(README.read_text(encoding="utf-8"))))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - mkdocs' objects
    """Links to README.md lead to the site's home page."""
    return links_to_home(markdown)
