"""What a case's `evidence` says it saw, held against the record: the version/outcome pairs it states in a small
phrase grammar, each checked against the record's current results (`bugmatrix check-case`).

    claims(text) -> [Claim]                          # every pair the text states, in order
    contradicted(case, latest) -> ["...", ...]       # latest: store.latest() (cell, Result) pairs

The grammar (cases/README.md, "`evidence`"): a claim is one of these phrases, anywhere in the text,

    PACKAGE VERSION OUTCOME           torch 2.7.1 reproduced       torchrec 1.1.0 fixed
    OUTCOME in PACKAGE VERSION        fixed in torch 2.10.0        reproduced in lightning 2.5.0

optionally preceded by a variant in backticks and a colon (`` `empty-shard`: torch 2.8.0 reproduced ``). PACKAGE is
one of the case's packages (or a distribution of one: `fbgemm-gpu-cpu`), VERSION a release (PEP 440), OUTCOME
`reproduced` or `fixed`. Anything else the text says is prose and checked by nobody.

A claim is contradicted when the record holds current results of the case at that version of the package (its local
build tag ignored) for the claim's variant, or without one for the case's bug variants (neither a workaround nor a
`control-...`), and they hold verdicts of which none is the claimed outcome. Results that are no verdict (skip,
error, timeout, infra) and versions the record does not hold contradict nothing: the evidence may state what
upstream says of a release that was never run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.model.case import Case
from harness.model.common import logical_name
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import PinVersion

OUTCOMES = (Outcome.REPRODUCED.value, Outcome.FIXED.value)
CONTROL = "control-"  # the naming convention of a variant that never had the bug (cases/README.md)
_PACKAGE = r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]"
_VERSION = r"\d+(?:\.\d+)+(?:(?:a|b|rc|\.post|\.dev)\d+)*"
_VARIANT = r"(?:`(?P<variant>[a-z0-9][a-z0-9-]*)`:?\s+)?"
_WORDS = "|".join(OUTCOMES)
CLAIM = re.compile(
    rf"{_VARIANT}(?:(?P<p1>{_PACKAGE})\s+(?P<v1>{_VERSION})\s+(?P<o1>{_WORDS})(?![\w-])"
    rf"|(?P<o2>{_WORDS})\s+in\s+(?P<p2>{_PACKAGE})\s+(?P<v2>{_VERSION})(?![\w-]|\.\w))"
)


@dataclass(frozen=True)
class Claim:
    """One version/outcome pair the evidence states: `variant` None means the case's bug variants."""

    variant: str | None
    package: str
    version: str
    outcome: str
    text: str  # the phrase as written

    def __str__(self) -> str:
        return self.text


def claims(text: str, packages: Iterable[str] | None = None) -> list[Claim]:
    """The claims of `text` in order; with `packages`, only those naming one of them (or one of their
    distributions), so that a phrase such as "Python 3.11 fixed" is not taken for one."""
    known = {logical_name(p) for p in packages} if packages is not None else None
    found = []
    for m in CLAIM.finditer(text):
        package, version, outcome = (m["p1"], m["v1"], m["o1"]) if m["p1"] else (m["p2"], m["v2"], m["o2"])
        if known is not None and logical_name(package) not in known:
            continue
        found.append(Claim(m["variant"], logical_name(package), version, outcome, " ".join(m.group(0).split())))
    return found


def _bug_variants(case: Case) -> set[str]:
    """The variants a claim without a variant speaks of: neither a workaround nor a control."""
    return {n for n, v in case.spec.variants.items() if not v.workaround and not n.startswith(CONTROL)}


def _at(result: Result, package: str, version: str) -> bool:
    """Whether `result` measured `package` (a logical name) at `version`, a local build tag ignored."""
    want = PinVersion.parse(version).public_release
    return any(
        logical_name(dist) == package and PinVersion.parse(have).public_release == want
        for dist, have in result.versions.items()
    )


def contradicted(case: Case, latest: Iterable[tuple[str, Result]]) -> list[str]:
    """One line per claim of `case`'s evidence that its current results contradict (see the module doc), naming the
    claim, the verdicts held there and the cells; a claim naming a variant the case lacks is a line too."""
    results = [(cell, r) for cell, r in latest if r.case == case.id]
    problems = []
    for claim in claims(case.spec.evidence, case.spec.recorded_packages):
        if claim.variant is not None and claim.variant not in case.spec.variants:
            problems.append(f"evidence: '{claim}' names variant {claim.variant}, which the case does not have")
            continue
        variants = {claim.variant} if claim.variant else _bug_variants(case)
        there = [
            (cell, r)
            for cell, r in results
            if r.variant in variants and r.outcome.value in OUTCOMES and _at(r, claim.package, claim.version)
        ]
        seen = {r.outcome.value for _, r in there}
        if seen and claim.outcome not in seen:
            cells = ", ".join(sorted({f"{r.variant} in {cell} ({r.device})" for cell, r in there}))
            problems.append(
                f"evidence: says '{claim}' but the record's current results at {claim.package} {claim.version} are "
                f"{' and '.join(sorted(seen))} ({cells}): correct the evidence, or measure again"
            )
    return problems
