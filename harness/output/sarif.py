"""`bugmatrix audit --format sarif`: the answer for one environment as SARIF 2.1.0, for code scanning
(github/codeql-action/upload-sarif). Validated against the OASIS schema in tests/test_sarif.py.

One run; its tool's rules are every case x variant the audit answered (id `case/variant`, the bug's title, its
upstream link); one result per `affected` answer, `error` where it reproduces, `warning` where it is mixed (it
reproduces in some of the cells at these pins), its message naming the bug, its precision and the release it is
fixed in, its location the line that pins the case's package in the file audited (`Pin.where`, `<file>:<line>`),
relative to the repository the command runs in (%SRCROOT%). Pins given as arguments or read from an interpreter
have no file: their results have no location.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.analysis.audit import Answer, Target
from harness.analysis.transitions import MIXED

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
_WHERE = re.compile(r"^(?P<file>.+):(?P<line>[0-9]+)$")


def _driver(rules: list[dict]) -> dict:
    """bugmatrix as SARIF's `tool.driver`: its installed version and its home, the `Homepage` of its metadata's
    project URLs (pyproject.toml's [project.urls], the one place that says where bugmatrix lives)."""
    driver: dict = {"name": "bugmatrix", "rules": rules}
    try:
        meta = metadata.metadata("bugmatrix")
        driver["version"] = meta["Version"]
        urls = dict(u.partition(",")[::2] for u in meta.get_all("Project-URL") or [])
        home = next((u.strip() for label, u in urls.items() if label.strip().lower() == "homepage"), None)
        if home:
            driver["informationUri"] = home
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
        pass
    return driver


def source_root(start: Path) -> Path:
    """The repository `start` is in (the first folder upwards holding `.git`), else `start`: SARIF's %SRCROOT%."""
    start = start.resolve()
    return next((folder for folder in [start, *start.parents] if (folder / ".git").exists()), start)


def _location(where: str, root: Path) -> dict | None:
    """`<file>:<line>` as a SARIF location: the file relative to `root` (%SRCROOT%) where it lies inside it, else
    an absolute file URI; None where the pin has no file line (an argument, an interpreter)."""
    match = _WHERE.match(where)
    if not match:
        return None
    path = Path(match["file"])
    absolute = path if path.is_absolute() else Path.cwd() / path
    try:
        artifact = {"uri": quote(absolute.resolve().relative_to(root).as_posix()), "uriBaseId": SRCROOT}
    except ValueError:
        artifact = {"uri": absolute.resolve().as_uri()}
    return {"physicalLocation": {"artifactLocation": artifact, "region": {"startLine": int(match["line"])}}}


def _message(a: Answer) -> str:
    fixed = f"fixed in {a.fixed_in}" if a.fixed_in else "no release measured fixed after it"
    text = f"{a.case} ({a.variant}) applies: {a.title} [{a.status}: {a.precision}; {fixed}]"
    if a.workarounds:
        text += f"; workarounds measured fixed here: {', '.join(a.workarounds)}"
    return f"{text}. Upstream: {a.upstream}. Reproduce: {a.reproduce}"


def to_sarif(
    kinds: dict[str, list[Answer]], target: Target, device: str, primary: dict[str, str], root: Path | None = None
) -> str:
    """The audit as a SARIF 2.1.0 log (module doc). `kinds`: `audit.by_kind`; `primary`: case id -> the logical
    package whose pin locates its results (falling back to any pin with a file line); `root`: %SRCROOT% (default:
    the repository the current folder is in)."""
    root = root or source_root(Path.cwd())
    answered = sorted((a for kind in kinds.values() for a in kind), key=lambda a: (a.case, a.variant))
    index: dict[str, int] = {}
    rules: list[dict[str, Any]] = []
    for a in answered:
        rule_id = f"{a.case}/{a.variant}"
        if rule_id in index:
            continue
        index[rule_id] = len(rules)
        rules.append(
            {
                "id": rule_id,
                "shortDescription": {"text": a.title},
                "helpUri": a.upstream,
                "defaultConfiguration": {"level": "error"},
            }
        )
    files = [where for where in (p.where for p in target.pins.values()) if _WHERE.match(where)]
    results = []
    for a in kinds["affected"]:
        rule_id = f"{a.case}/{a.variant}"
        pin = target.pins.get(primary.get(a.case, ""))
        location = _location(pin.where if pin else "", root) or (_location(files[0], root) if files else None)
        result: dict = {
            "ruleId": rule_id,
            "ruleIndex": index[rule_id],
            "level": "warning" if a.status == MIXED else "error",
            "message": {"text": _message(a)},
            "properties": {
                "outcome": a.status,
                "precision": a.precision,
                "basis": a.basis,
                "fixed_in": a.fixed_in,
                "workarounds": a.workarounds,
                "versions": a.versions,
                "reproduce": a.reproduce,
            },
        }
        if location:
            result["locations"] = [location]
        results.append(result)
    run = {
        "tool": {"driver": _driver(rules)},
        "originalUriBaseIds": {SRCROOT: {"uri": root.as_uri() + "/"}},
        "results": results,
        "properties": {
            "device": device,
            "checked": {name: pin.text for name, pin in sorted(target.pins.items())},
            "not_covered": [u.to_json() for u in target.not_covered],
        },
    }
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)
