"""Evaluating a variant's `expect` rules against an environment (or the versions a result recorded), a world size
and a device."""

from __future__ import annotations

from functools import lru_cache

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from harness.model.case_schema import DEVICE, NPROC, GitCondition, Rule, Variant
from harness.model.environment import Environment, Installed
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import PinVersion


def rule_holds(rule: Rule, env: Environment, nproc: int, device: str) -> bool:
    """True when every condition of `rule.when` holds; a package that is not installed fails its condition."""
    for key, cond in rule.when.items():
        if key == NPROC:
            if nproc not in cond:
                return False
        elif key == DEVICE:
            if device != cond:
                return False
        else:
            installed = env.get(key)
            if installed is None:
                return False
            if isinstance(cond, GitCondition):
                commit = installed.commit or ""
                if not any(commit.startswith(sha) for sha in cond.git):
                    return False
            else:
                version = PinVersion.parse(installed.version).public
                # A local build tag (2.14.1+cu130) must not hide a release from '<=2.14.1'.
                if version is None or not version_matches(version, str(cond)):
                    return False
    return True


@lru_cache(maxsize=16384)
def version_matches(version: Version, specifier: str) -> bool:
    """True when `version` is in `specifier` by version order, pre-releases included: `<0.4.0` holds for 0.4.0.dev0
    (a git install of 0.4.0's development, a nightly build), which is before 0.4.0. PEP 440's exclusions are an
    installer's policy (do not pick a pre-release or post-release by accident) and would leave such a build to no
    rule but the last; `>2.0.9` likewise holds for 2.0.9.post0."""
    for spec in SpecifierSet(specifier):
        if spec.operator in ("<", ">") and not spec.version.endswith(".*"):
            bound = Version(spec.version)
            if not (version < bound if spec.operator == "<" else version > bound):
                return False
        elif not spec.contains(version, prereleases=True):
            return False
    return True


def expected_outcome(variant: Variant, env: Environment, nproc: int, device: str) -> Outcome:
    """The outcome of the first rule of `variant.expect` that holds (the last rule always holds)."""
    for rule in variant.expect:
        if rule_holds(rule, env, nproc, device):
            return rule.outcome
    return variant.expect[-1].outcome


def environment_of(result: Result) -> Environment:
    """The installed packages a result recorded (`version` or `version @ commit`), as the rule evaluator sees an
    environment."""
    packages: dict[str, Installed] = {}
    for name, text in result.versions.items():
        version = PinVersion.parse(text)
        packages[canonicalize_name(name)] = Installed(
            name=name, version=version.release_text, commit=version.commit or None
        )
    return Environment(python="", python_version=result.python, packages=packages)


def expects_nothing(result: Result) -> bool:
    """True for an `infra` result: nothing was measured, so no rule's outcome is expected of it (`expected` None)."""
    return result.outcome is Outcome.INFRA


def expected_for(variant: Variant, result: Result) -> Result:
    """`result` judged by `variant`'s current rules: a result reused from an earlier run keeps what it observed, and
    its `expected` follows the rules as they are now, whatever it recorded (a row imported from the record recorded
    none); None for an `infra`."""
    expected = (
        None
        if expects_nothing(result)
        else expected_outcome(variant, environment_of(result), result.nproc, result.device)
    )
    return result if expected == result.expected else result.model_copy(update={"expected": expected})
