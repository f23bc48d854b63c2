"""Loading a YAML file into a pydantic model, with every problem reported as one line: `<file>: <field>: <problem>`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from harness.model.nesting import MAX_NESTING, yaml_too_deep

M = TypeVar("M", bound=BaseModel)
# libyaml's safe loader where built in: ~10x faster; it recurses on the C stack: a text is measured first (nesting)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Parts of pydantic's error locations that name union members (the type a value was tried as), not fields. They
# are matched whole: a package whose name merely starts with one (`structlog`, `strawberry`) is a field.
_UNION_TAGS = frozenset({"str", "int", "list[int]", "GitPin", "GitCondition"})
# Mappings whose keys are names the user chose (packages, variants): a key there is a field even if it is "str".
_KEYED = frozenset(
    {
        "when",
        "pins",
        "axes",
        "supports",
        "sources",
        "device_packages",
        "imports",
        "indexes",
        "variants",
        "include",
        "exclude",
        "runners",
    }
)


def load_model(path: Path, model: type[M], error: type[Exception]) -> M:
    """Parse `path` as YAML and validate it as `model`; raise `error("<path>: <field>: <problem>")` otherwise (a text
    nested more than `MAX_NESTING` deep too: libyaml's loader would crash the process on a deep enough one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start})") from None
    deep = yaml_too_deep(text)
    if deep is not None:
        raise error(f"{path}: line {deep}: nested more than {MAX_NESTING} levels deep")
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "document"
        raise error(f"{path}: {where}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: (top level): must be a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{path}: {one_line(exc)}") from None


def one_line(exc: ValidationError) -> str:
    """`<field>: <problem>` for the first error, with a count of the others."""
    err = exc.errors()[0]
    field = _field_path(err["loc"]) or "(top level)"
    message = str(err["msg"]).removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{field}: {message}{more}".replace("\n", " ")


def _field_path(loc: tuple[Any, ...]) -> str:
    """The dotted field path of an error location, without pydantic's validator and union-member parts."""
    kept = []
    for i, part in enumerate(loc):
        text = str(part)
        after_key = i > 0 and str(loc[i - 1]) in _KEYED
        if text.startswith("function-") or (text in _UNION_TAGS and not after_key):
            continue
        kept.append(_shown(part))
    return ".".join(kept)


def _shown(part: Any) -> str:
    """A field name as written, quoted when it would not be visible or readable as one (blank, spaces, dots)."""
    text = str(part)
    return text if text and text.strip() == text and "." not in text and ":" not in text else repr(text)
