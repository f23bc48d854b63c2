"""The audit checked against measurement: build an environment from pins the way the harness builds a cell, run the
whole catalogue in it, and compare each of `bugmatrix audit`'s answers there (from the committed record) with what
the run measured. docs/audit.md ("Checked against measurement") holds the last results.

    uv run python tools/audit_check.py torch==2.2.1
    uv run python tools/audit_check.py lightning==2.5.2 torch==2.7.0 -j 2 --root .bugmatrix/audit-check

The environment is `compat.probe_cell`'s cell for the pins (exactly these pins on CPU, matrix.yaml's index,
companions and the fbgemm-gpu -> fbgemm-gpu-cpu override; what it does not pin resolves as of the newest pinned
upload), built by `EnvCache` under --envs. Then `bugmatrix run --python ENV/bin/python --db ROOT/<cell>.db` (the
cases whose packages are not installed are not launched; the scratch store makes a re-run resume) and `bugmatrix
audit --python ENV/bin/python --json` against the record alone (an empty store under --root, whatever
$BUGMATRIX_DB says).

Per case x bug variant the audit's answer (affected / not_affected fixed|absent / cannot_say, with its basis) meets
the run's verdict there (reproduced, fixed, `skip`: the case cannot run, or none):

    agree          affected & reproduced; not_affected fixed & fixed; not_affected absent & skip (or fixed)
    contradict     affected where the run measured fixed or skip; not_affected where it reproduced; an answer that
                   names no precision
    could not say  the audit answered cannot_say (what the run measured is shown)
    not measured   the run gave no verdict to compare (error, timeout, not launched), or skip against `fixed`

Exit codes: 0 no contradiction, 1 a contradiction (each one listed), 2 bad pins or an environment that cannot be
built (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.compat import probe_cell
from harness.analysis.transitions import FIXED, REPRODUCED, cell_status
from harness.matrix.basics import MatrixError, default_envs
from harness.matrix.envcache import EnvCache
from harness.matrix.expand import load_matrix
from harness.matrix.resolve import resolve_cell
from harness.model.common import logical_name
from harness.model.exitcode import ExitCode
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.store import ResultStore

SKIP, NONE = "skip", "none"  # the run's other verdicts: the case cannot run here; no verdict (error, not launched)
AGREE, CONTRADICT, CANNOT_SAY, NOT_MEASURED = "agree", "contradict", "could not say", "not measured"


@dataclass(frozen=True)
class Row:
    """One case x bug variant: the audit's answer, the run's verdict and what they make."""

    case: str
    variant: str
    answer: str  # affected | not_affected fixed | not_affected absent | cannot_say
    basis: str  # exact | interpolated | extrapolated | rules ("" when the answer does not say)
    precision: str
    measured: str  # reproduced | fixed | skip | none
    reason: str  # the run's reason for a skip or no verdict
    verdict: str  # agree | contradict | could not say | not measured


def parse_pins(texts: list[str]) -> dict[str, str]:
    """`torch==2.2.1` ... -> logical package -> version; raises ValueError naming a bad one."""
    pins = {}
    for text in texts:
        name, sep, version = text.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{text!r}: not PKG==VERSION")
        pins[logical_name(name.strip())] = version.strip()
    return pins


def measured(results: list[Result]) -> tuple[str, str]:
    """The run's verdict for one case x variant over its world sizes, and the reason where it is skip or none: a
    job not launched (its packages are not installed) is no verdict; every launched one skipped is `skip`."""
    launched = [r for r in results if r.launched]
    if not launched:
        return NONE, "; ".join(sorted({r.reason for r in results}))[:160] or "not run"
    if all(r.outcome is Outcome.SKIP for r in launched):
        return SKIP, "; ".join(sorted({r.reason for r in launched}))[:160]
    status = cell_status(launched)
    if status in (REPRODUCED, FIXED):
        return status, ""
    return NONE, ", ".join(sorted({r.outcome.value for r in launched}))


def classify(answer: dict, kind: str, verdict: str) -> str:
    """agree / contradict / could not say / not measured for one audit entry of `kind` against the run's verdict."""
    if not answer.get("precision"):
        return CONTRADICT  # every answer names its precision
    if kind == "cannot_say":
        return CANNOT_SAY
    if kind == "affected":
        return AGREE if verdict == REPRODUCED else CONTRADICT if verdict in (FIXED, SKIP) else NOT_MEASURED
    if verdict == REPRODUCED:
        return CONTRADICT
    if answer.get("why") == "absent":
        return AGREE if verdict in (SKIP, FIXED) else NOT_MEASURED
    return AGREE if verdict == FIXED else NOT_MEASURED


def compare(audit: dict, results: list[Result]) -> list[Row]:
    """Every bug variant the audit answered, against the run's results (`audit --json`'s document)."""
    by_item: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for result in results:
        by_item[(result.case, result.variant)].append(result)
    rows = []
    for kind in ("affected", "not_affected", "cannot_say"):
        for answer in audit.get(kind, []):
            verdict, reason = measured(by_item.get((answer["case"], answer["variant"]), []))
            label = f"{kind} {answer['why']}" if kind == "not_affected" else kind
            rows.append(
                Row(
                    answer["case"],
                    answer["variant"],
                    label,
                    answer.get("basis", ""),
                    answer.get("precision", ""),
                    verdict,
                    reason,
                    classify(answer, kind, verdict),
                )
            )
    return sorted(rows, key=lambda r: (r.case, r.variant))


def build(pins: dict[str, str], matrix: Path, envs: Path) -> tuple[str, Path]:
    """The cell's name and its environment's interpreter, built (or reused) as the harness builds a cell."""
    loaded = load_matrix(matrix)
    cell = probe_cell(loaded, pins)
    status = EnvCache(envs).build(resolve_cell(loaded, cell))
    if not status.ok or status.python is None:
        raise MatrixError(f"{cell.name}: the environment cannot be built: {status.error}")
    return cell.name, Path(status.python)


def bugmatrix(*args: str, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.CompletedProcess:
    """`bugmatrix ARGS` with this interpreter (stdout captured, or written to `log`)."""
    command = [sys.executable, "-m", "harness", *args]
    if log is None:
        return subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    with log.open("w") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=env, check=False)


def report(rows: list[Row], out: list[str], every: bool = False) -> dict[str, int]:
    """The table of every row that is not `agree` (`every`: all of them), then the counts (returned too) and the
    same by the answers' basis."""
    counts = Counter(r.verdict for r in rows)
    for row in rows:
        if every or row.verdict != AGREE:
            out.append(
                f"{row.verdict.upper():13}  {row.case} ({row.variant}): audit {row.answer} [{row.basis or '?'}: "
                f"{row.precision}]; run {row.measured}" + (f" ({row.reason})" if row.reason else "")
            )
    tally = {key: counts.get(key, 0) for key in (AGREE, CONTRADICT, CANNOT_SAY, NOT_MEASURED)}
    out.append(f"{len(rows)} answers: " + ", ".join(f"{key} {n}" for key, n in tally.items()))
    bases = Counter(f"{r.basis or '?'} {r.verdict}" for r in rows)
    out.append("by basis: " + ", ".join(f"{key} {n}" for key, n in sorted(bases.items())))
    return tally


def main(argv: list[str] | None = None) -> int:
    """Build, run, audit, compare (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("pins", nargs="+", metavar="PKG==VERSION")
    p.add_argument("--matrix", type=Path, default=Path("matrix.yaml"), help="indexes, companions (matrix.yaml)")
    p.add_argument("--envs", type=Path, default=default_envs(), help="environments folder (.bugmatrix/envs)")
    p.add_argument("--root", type=Path, default=Path(".bugmatrix/audit-check"), help="scratch stores and logs")
    p.add_argument("-j", "--jobs", default="2", help="cores the run uses")
    p.add_argument("--all", action="store_true", help="list the agreeing answers too")
    args = p.parse_args(argv)
    try:
        pins = parse_pins(args.pins)
        started = time.monotonic()
        name, python = build(pins, args.matrix, args.envs)
    except (ValueError, MatrixError) as exc:
        print(f"audit_check: {exc}", file=sys.stderr)
        return ExitCode.USAGE_ERROR
    built = time.monotonic()
    args.root.mkdir(parents=True, exist_ok=True)
    db = args.root / f"{name}.db"
    bugmatrix("run", "--python", str(python), "--db", str(db), "-j", args.jobs, log=args.root / f"{name}.run.log")
    ran = time.monotonic()
    empty = args.root / "empty.db"  # the audit reads the record alone
    ResultStore(empty)
    env = {k: v for k, v in os.environ.items() if k != "BUGMATRIX_DB"}
    audited = bugmatrix("audit", "--python", str(python), "--json", "--db", str(empty), env=env)
    if audited.returncode not in (ExitCode.OK, ExitCode.FAILED):
        print(f"audit_check: bugmatrix audit exited {audited.returncode}: {audited.stderr.strip()}", file=sys.stderr)
        return ExitCode.USAGE_ERROR
    results = [r for _, r in ResultStore(db, readonly=True).latest() if r.device == "cpu"]
    rows = compare(json.loads(audited.stdout), results)
    out = [f"{name}: {python}"]
    tally = report(rows, out, every=args.all)
    out.append(f"build {built - started:.0f} s, run {ran - built:.0f} s; store {db}")
    print("\n".join(out))
    return ExitCode.FAILED if tally[CONTRADICT] else ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
