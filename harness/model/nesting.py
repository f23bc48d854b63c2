"""How deep a YAML or JSON text nests, found before a parser that would crash or overflow on it.

libyaml's C composer (the fast loader of every case.yaml and matrix.yaml) recurses once per level of nesting on the C
stack: a 100 KB file nested 50,000 deep (`[[[[...]]]]`, `- - - - ...`) kills the process with SIGSEGV, no message.
Python's `json` raises RecursionError (a traceback) somewhat below 1,000 levels. Nothing the harness reads nests
more than a few levels, so a text nested more than `MAX_NESTING` deep is refused with one line naming where.

Both checks cost little beside the parse they guard: the YAML one counts with `str.count` and one regular expression
and only where that bound says "maybe" walks libyaml's event stream (iterative, flat in the C stack); the JSON one is
a regular expression over the text's strings and brackets.
"""

from __future__ import annotations

import re
from functools import lru_cache

import yaml

MAX_NESTING = 100  # levels of collections inside collections; the harness's own files nest fewer than 10
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', re.DOTALL)


def yaml_too_deep(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line (from 1) where the YAML `text` first nests more than `limit` collections deep, else None.

    Only a text that may nest that deep (`_may_nest`: matrix.yaml and a few cases with many inline lists, ~0.1 ms
    each) is measured, by libyaml's event stream, which does not recurse; it stops at the first level too many. A
    text libyaml cannot parse before that gives None here: the load that follows says what is wrong with it."""
    if not _may_nest(text, limit):
        return None
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_LOADER):  # noqa: S506 - parsing only, nothing is constructed
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > limit:
                    assert event.start_mark is not None  # the parser marks every event it emits
                    return event.start_mark.line + 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return None
    return None


def _may_nest(text: str, limit: int) -> bool:
    """False when `text` cannot nest more than `limit` deep, by an upper bound that costs ~5 us per KB.

    Flow collections nest at most as deep as the text has `[` and `{`. Block collections nest at most 2 * (L + 1) + 1
    deep, L being the longest run of indentation and block indicators (`- `, `? `, `: `) that starts a line: each
    nested block collection starts further right than its parent, except a sequence that is a mapping's value, which
    may share its key's column (then its entries start further right); a collection that starts further right than
    any such run (after an anchor or a tag) can hold no other block collection. A text with a line break other than
    a newline (CR, NEL, LS, PS: libyaml honours them all) is rare enough to leave to the exact count."""
    run = (limit - text.count("[") - text.count("{") - 3) // 2 + 1  # a leading run this long may nest too deep
    if run <= 0 or any(other in text for other in _OTHER_BREAKS):
        return True
    return _leading_run(run).search("\n" + text) is not None


_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")


@lru_cache(maxsize=8)
def _leading_run(length: int) -> re.Pattern[str]:
    """A line that starts with `length` characters of indentation and block indicators (or more; a byte-order mark
    counted as one of them)."""
    return re.compile("\n[ \t?:\\-\ufeff]{" + str(length) + "}")


def json_too_deep(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON `text` nests more than `limit` arrays and objects deep (brackets inside strings are not
    counted; a text that is not JSON is measured as far as it goes)."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
