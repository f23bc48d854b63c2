"""`bugmatrix audit`: am I affected? The record's answer for one environment's exact versions, launching nothing.

    bugmatrix audit -r requirements.txt [--device cuda] [--json | --format markdown] [--ignore CASE]
    bugmatrix audit -r uv.lock [--python-platform macos] [--python-version 3.12]   # or pylock.toml
    bugmatrix audit torch==2.6.0+cu124 lightning==2.3.3
    bugmatrix audit --python .venv/bin/python             # that interpreter's installed versions
    bugmatrix audit                                       # this interpreter's
    bugmatrix audit --from old.txt --to new.txt           # an upgrade: the bugs it fixes, brings in, keeps
    bugmatrix audit --files requirements.txt uv.lock      # each file on its own (the pre-commit hook)
    bugmatrix audit -r requirements.txt --format sarif    # SARIF 2.1.0 for code scanning (harness/output/sarif.py)

A lockfile (`uv.lock`, `pylock.toml`, `pylock.NAME.toml`; by name, else by content) is read for one target: this
machine, or the platform and Python chosen (harness/model/lockfiles.py says what counts as installed); the answer's
first line names it.

Each bug variant is answered `affected`, `not_affected` (fixed, or its code absent in these versions) or `cannot_say`
(the case cannot test it there: a skip rule's `because: untestable`, outside its `supports:`); see
harness/analysis/audit.py.

Exit codes: 0 no bug applies (for an upgrade: it brings none in), 1 a bug applies (brings one in), 2 input that
cannot be read (an unparsable requirement line, a lockfile field missing or mistyped, an interpreter that does not
exist or does not list its packages within $BUGMATRIX_INSPECT_S seconds, default 30: killed then, with what it
started; an unreadable file): one line naming it, nothing written; 5 nothing checked: the environment pins no
package the record has results for to one version (`torch>=2.5` alone, an empty file), so no answer is given (never
a green "0 bugs"). With --files: 1 if a bug applies to one of the files, else 5 if one of them checks nothing,
else 0. A distribution the record does not know, or a requirement that pins no single version, is listed
as not covered, never an error.
See harness/analysis/audit.py for how each answer and its precision is found.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.commands.context import Context, add_format
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode

AFFECTED, NONE = ExitCode.FAILED, ExitCode.OK


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `audit` and its options."""
    p = sub.add_parser(
        "audit",
        help="am I affected? every recorded bug that applies to an environment's exact "
        "versions (a requirements file, an interpreter, pkg==ver), with its precision; launches nothing",
        parents=[parents["--db"], parents["--record"]],
    )
    p.add_argument("pins", nargs="*", metavar="PKG==VERSION", help="the versions to audit (instead of -r/--python)")
    p.add_argument(
        "-r",
        "--requirement",
        type=Path,
        help="a requirements file (`pip freeze`, `uv pip compile`) or "
        "a lockfile: `uv.lock`, `pylock.toml`, `pylock.NAME.toml` (by name, else by content)",
    )
    p.add_argument(
        "--python",
        help="an interpreter whose installed versions to audit (it gets "
        "$BUGMATRIX_INSPECT_S seconds, default 30, to list them)",
    )
    p.add_argument(
        "--from",
        dest="from_",
        metavar="A",
        help="upgrade view: the set before (a requirements file, a lockfile, an interpreter or pkg==ver,pkg==ver)",
    )
    p.add_argument("--to", metavar="B", help="upgrade view: the set after")
    p.add_argument(
        "--python-platform",
        metavar="PLATFORM",
        help="the platform a lockfile's (or requirement "
        "markers') resolution is read for, as uv names it: linux, macos, windows or a target such as "
        "x86_64-manylinux_2_28 (default: this machine)",
    )
    p.add_argument(
        "--python-version",
        metavar="X.Y",
        help="the Python version a lockfile's resolution is read for (default: this interpreter's)",
    )
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="the device the bugs are asked for (default cpu)"
    )
    p.add_argument("--ignore", action="append", default=[], metavar="CASE", help="leave this case out (repeatable)")
    p.add_argument(
        "--files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="audit each requirements or lock file on "
        "its own (what a pre-commit hook passes): exit 1 if a bug applies to one of them, else 5 if one "
        "checks nothing",
    )
    add_format(
        p,
        ("text", "markdown", "json", "sarif"),
        help="sarif: SARIF 2.1.0 for code scanning, one result per bug that applies, located at the line "
        "of the file that pins it (one environment only)",
    )


def _read(args: AuditRequest, known: dict[str, set[str]], spec: str | None = None):  # noqa: ANN202
    """The target named by `spec` (--from/--to), else by -r, --python, the positional pins or this interpreter."""
    from harness.analysis.audit import target_of
    from harness.model.requirements import RequirementsError, parse_pins

    environment, chosen = _environment(args)
    try:
        if spec is not None:
            path = Path(spec)
            if path.is_dir() and (path / "bin" / "python").exists():
                return _installed(path / "bin" / "python", known, spec, chosen)
            if (
                path.is_file()
                and os.access(path, os.X_OK)
                and path.suffix not in (".txt", ".in", ".lock", ".toml")
                and path.name != "uv.lock"
            ):
                return _installed(path, known, spec, chosen)
            if path.is_file() or path.suffix in (".txt", ".in", ".lock", ".toml"):
                return _read_file(path, known, environment, chosen)
            if "==" in spec or " @ " in spec:
                return target_of(*parse_pins([spec], environment=environment.values), known, spec)
            raise UsageError(
                f"{spec}: not a requirements file, a lockfile, an interpreter or pkg==version[,pkg==version]"
            )
        if args.requirement is not None:
            return _read_file(args.requirement, known, environment, chosen)
        if args.pins:
            target = target_of(*parse_pins(args.pins, environment=environment.values), known, " ".join(args.pins))
            target.markers_for = environment.label if chosen else ""
            return target
        python = args.python or sys.executable
        return _installed(python, known, python, chosen)
    except RequirementsError as exc:
        raise UsageError(str(exc)) from None


def _environment(args: AuditRequest):  # noqa: ANN202 - (lockfiles.MarkerEnvironment, chosen)
    """The target markers are evaluated for (this machine, or --python-platform/--python-version), and whether it
    was chosen."""
    from harness.model.lockfiles import marker_environment

    chosen = args.python_platform is not None or args.python_version is not None
    try:
        return marker_environment(args.python_platform, args.python_version), chosen
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _read_file(path: Path, known: dict[str, set[str]], environment, chosen: bool):  # noqa: ANN001, ANN202
    """A requirements file or a lockfile (harness/model/lockfiles.py), its markers evaluated for `environment`; the
    target says which platform and Python that was where it is a lockfile or was chosen."""
    from harness.analysis.audit import target_of
    from harness.model.lockfiles import open_pins
    from harness.model.requirements import RequirementsError

    try:
        pins_file = open_pins(path)
        target = target_of(*pins_file.pins(environment), known, str(path))
    except RequirementsError as exc:
        raise UsageError(str(exc)) from None
    if pins_file.kind or chosen:
        target.markers_for = environment.label
    return target


def _installed(python: str | Path, known: dict[str, set[str]], label: str, chosen: bool):  # noqa: ANN202
    """The target an interpreter's installed distributions make: it is its own platform and Python."""
    from harness.analysis.audit import target_of_environment
    from harness.launch.interpreter import inspect_interpreter

    if chosen:
        raise UsageError(
            f"--python-platform/--python-version choose what a lockfile or requirements file is read "
            f"for; the interpreter {label} has its own"
        )
    return target_of_environment(inspect_interpreter(python), known, label)


@dataclass(frozen=True)
class AuditRequest:
    """What `audit` is asked: the environment (pins, -r, --python, --files, or --from/--to for an upgrade), the
    target it is read for, the device, the cases left out, the format, and where the record is."""

    pins: tuple[str, ...]
    requirement: Path | None
    python: str | None
    from_: str | None
    to: str | None
    python_platform: str | None
    python_version: str | None
    device: str
    ignore: tuple[str, ...]
    files: tuple[Path, ...]
    format: str
    cases_dir: Path
    db: Path
    db_given: bool
    record: Path

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AuditRequest:
        """The request `args` make; options that cannot go together are refused in one line (exit 2)."""
        request = cls(
            tuple(args.pins),
            args.requirement,
            args.python,
            args.from_,
            args.to,
            args.python_platform,
            args.python_version,
            args.device,
            tuple(args.ignore),
            tuple(args.files or ()),
            args.format,
            args.cases_dir,
            args.db,
            args.db_given,
            args.record,
        )
        request.validate()
        return request

    @property
    def upgrade(self) -> bool:
        """Whether this is the upgrade view (--from/--to)."""
        return self.from_ is not None or self.to is not None

    def validate(self) -> None:
        """Refuse options that cannot go together, or a missing --cases-dir, with a `UsageError`."""
        given = [bool(self.requirement), bool(self.python), bool(self.pins), bool(self.files)]
        if sum(given) > 1 or (self.upgrade and any(given)):
            raise UsageError("give one of -r, --files, --python, PKG==VERSION arguments, or --from A --to B")
        if self.upgrade and (self.from_ is None or self.to is None):
            raise UsageError("an upgrade view needs both --from A and --to B")
        if self.format == "sarif" and self.upgrade:
            raise UsageError("--format sarif answers one environment, not an upgrade view (--from/--to)")
        if self.format in ("json", "sarif") and len(self.files) > 1:
            raise UsageError(
                f"--format {self.format} answers one environment: give one file (-r FILE), not --files with "
                f"{len(self.files)}"
            )
        if not self.cases_dir.is_dir():
            raise UsageError(f"--cases-dir {self.cases_dir}: no such folder")


@dataclass
class _Record:
    """What every answer reads: the cases, the store, its current results, the auditor, the known packages."""

    cases: list
    store: Any
    results: list
    auditor: Any
    known: dict[str, set[str]]

    @classmethod
    def open(cls, request: AuditRequest) -> _Record:
        """The record (and local store) the request names, read once."""
        from harness.analysis import audit
        from harness.model.case import every_case
        from harness.session.readers import open_reader

        cases = every_case(request.cases_dir)
        store = open_reader(request.db, request.db_given, cases, request.record, judge=False)  # outcomes only
        results = store.latest()
        return cls(cases, store, results, audit.Auditor(results, cases), audit.known_packages(results, cases))

    def answers(self, target, request: AuditRequest) -> list:  # noqa: ANN001 - analysis.audit.Target
        """The answers for `target`."""
        from harness.analysis import audit

        return audit.audit(self.results, self.cases, target, request.device, list(request.ignore), self.auditor)

    def add_unpinned(self, target, request: AuditRequest) -> None:  # noqa: ANN001 - analysis.audit.Target
        """Add to `target`'s not-covered list the packages deciding its cases that it does not pin."""
        from harness.analysis import audit

        target.not_covered += audit.unpinned(
            self.results, self.cases, target, request.device, list(request.ignore), self.auditor
        )


def run(args: argparse.Namespace) -> ExitCode:
    """Answer the audit (or the upgrade view) and print it; the exit code says whether a bug applies."""
    from harness.session.record import gc_paused

    request = AuditRequest.from_args(args)
    with gc_paused():  # the record's results and the answers are acyclic: the collector would only slow it down
        return execute(request, Context(args))


def execute(request: AuditRequest, ctx: Context) -> ExitCode:
    """Answer `request` through `ctx`'s printer: each environment (or the upgrade view) in turn."""
    record = _Record.open(request)
    if request.upgrade:
        return _upgrade(request, ctx, record)
    if request.files:
        targets = [_read_file(f, record.known, *_environment(request)) for f in request.files]
    else:
        targets = [_read(request, record.known)]
    codes = [_answer(request, ctx, record, target) for target in targets]
    return AFFECTED if AFFECTED in codes else ExitCode.NOTHING_RAN if ExitCode.NOTHING_RAN in codes else NONE


def _answer(request: AuditRequest, ctx: Context, record: _Record, target) -> ExitCode:  # noqa: ANN001
    """Print the answer for one environment; its exit code."""
    from harness.analysis import audit
    from harness.output import audit as view

    answers = record.answers(target, request)
    record.add_unpinned(target, request)
    kinds = audit.by_kind(answers)
    fmt, printer = request.format, ctx.printer
    if fmt == "json":
        printer.answer(view.to_json(kinds, target.not_covered))
    elif fmt == "sarif":
        from harness.model.common import logical_name, primary_package
        from harness.output.sarif import to_sarif

        primary = {c.id: logical_name(primary_package(c.spec.packages)) for c in record.cases}
        printer.answer(to_sarif(kinds, target, request.device, primary))
    else:
        printer.answer(_checked(target, request, ctx, markdown=fmt == "markdown"))
        if fmt == "markdown":
            printer.answer(view.to_markdown(kinds, target.not_covered, target.label, request.device), end="")
        else:
            text = view.to_text(kinds, target.not_covered, target.label, request.device, len(answers))
            printer.answer(text, end="")
    # cannot_say never fails a gate: only a bug that applies; a workaround answered alone checks no bug
    answered = any(kinds.values())
    if not target.pins or not answered:
        return _nothing_checked(ctx, [target], answered)
    return AFFECTED if kinds["affected"] else NONE


def _upgrade(request: AuditRequest, ctx: Context, record: _Record) -> ExitCode:
    """The upgrade view (--from A --to B): the bugs it fixes, brings in and keeps."""
    from harness.analysis import audit
    from harness.analysis.compat import measured
    from harness.analysis.compat import upgrade as pairings_of
    from harness.output import audit as view

    before, after = _read(request, record.known, request.from_), _read(request, record.known, request.to)
    if not before.pins and not after.pins:
        return _nothing_checked(ctx, [before, after])
    answers_before, answers_after = record.answers(before, request), record.answers(after, request)
    if not any(audit.by_kind(answers_before + answers_after).values()):  # no bug variant answered on either side
        for side in (before, after):
            record.add_unpinned(side, request)
        return _nothing_checked(ctx, [before, after], answered=False)
    changes = audit.compare(answers_before, answers_after)
    pairings = pairings_of(measured(record.store), before.public(), after.public(), [])
    rows = view.upgrade_rows(changes, pairings)
    if request.format == "json":
        ctx.printer.answer(view.upgrade_json(changes, rows, {"from": before.not_covered, "to": after.not_covered}))
    else:
        ctx.printer.answer(view.upgrade_text(rows, markdown=request.format == "markdown"), end="")
        brought = sum(c.kind == "brings" for c in changes)
        fixed = sum(c.kind == "fixes" for c in changes)
        markers_for = before.markers_for or after.markers_for
        resolved = f" (read for {markers_for})" if markers_for else ""
        ctx.printer.answer(
            f"\n{before.label} -> {after.label}{resolved} on {request.device}: fixes {fixed}, brings in {brought}, "
            f"keeps {sum(c.kind == 'keeps' for c in changes)}"
        )
    return AFFECTED if any(c.kind == "brings" for c in changes) else NONE


def _checked(target, request: AuditRequest, ctx: Context, markdown: bool) -> str:  # noqa: ANN001 - audit.Target
    """The first line of every answer: what was checked (the pins the record knows), against which record, on
    which device -- so that a green answer on nothing cannot pass for a clean bill."""
    pins = ", ".join(f"{name}=={pin.text}" for name, pin in sorted(target.pins.items())) or "no package it knows"
    resolved = f" in {target.label} for {target.markers_for}" if target.markers_for else ""
    line = f"checked {pins}{resolved} against {ctx.sources()} on {request.device}"
    return f"_{line}_\n" if markdown else line + "\n"


def _nothing_checked(ctx: Context, targets: list, answered: bool = True) -> ExitCode:
    """Exit 5 (nothing ran) with one line: the environment pins no package the record has results for, or none
    to one version (`torch>=2.5`), or its pins answer no case (`litgpt==0.5.12` alone: torch decides every litgpt
    case and is not pinned): no answer is given, and none may read as "not affected"."""
    labels = " and ".join(t.label or "this environment" for t in targets)
    uncovered = sorted({f"{u.package} {u.version}".strip() for t in targets for u in t.not_covered})[:5]
    pinned = any(t.pins for t in targets)
    why = (
        "its pins answer no recorded case: what decides them is not pinned"
        if pinned and not answered
        else "pins no package the record has results for to one version"
    )
    ctx.printer.note(
        f"bugmatrix audit: nothing checked: {labels} {why}"
        + (f" (not covered: {', '.join(uncovered)})" if uncovered else "")
    )
    return ExitCode.NOTHING_RAN


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as `bugmatrix audit ...`")
