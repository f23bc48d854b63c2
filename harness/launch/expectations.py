"""Evaluating a variant's `expect` rules against an environment, a world size and a device."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.launch.interpreter import Environment
from harness.model.case_schema import DEVICE, NPROC, GitCondition, Rule, Variant
from harness.model.outcome import Outcome


def rule_holds(rule: Rule, env: Environment, nproc: int, device: str) -> bool:
    """True when every condition of `rule.when` holds; a package that is not installed fails its condition."""
    for key, cond in rule.when.items():
        if key == NPROC:
            if nproc not in cond:  # type: ignore[operator]
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
                try:
                    version = Version(installed.version)
                except InvalidVersion:
                    return False
                # A local build tag (2.14.1+cu130) must not hide a release from '<=2.14.1'.
                if not SpecifierSet(str(cond)).contains(Version(version.public), prereleases=True):
                    return False
    return True


def expected_outcome(variant: Variant, env: Environment, nproc: int, device: str) -> Outcome:
    """The outcome of the first rule of `variant.expect` that holds (the last rule always holds)."""
    for rule in variant.expect:
        if rule_holds(rule, env, nproc, device):
            return rule.outcome
    return variant.expect[-1].outcome
