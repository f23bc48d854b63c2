"""Expected outcomes follow the first matching rule over installed versions, git commits, world size, device."""

from __future__ import annotations

from harness.launch.interpreter import Environment, Installed
from harness.model.case_schema import Variant
from harness.model.expectations import expected_outcome
from harness.model.outcome import Outcome


def env(**packages: str) -> Environment:
    installed = {}
    for name, spec in packages.items():
        version, _, commit = spec.partition("@")
        dist = name.replace("_", "-")
        installed[dist] = Installed(name=dist, version=version, commit=commit or None)
    return Environment(python="python", python_version="3.11", packages=installed)


VARIANT = Variant.model_validate(
    {
        "expect": [
            {"when": {"litgpt": {"git": ["abc1234"]}}, "outcome": "reproduced"},
            {"when": {"torchrec": ">=1.0,<1.4", "nproc": [2]}, "outcome": "reproduced"},
            {"when": {"fbgemm-gpu": "<1.1", "device": "cuda"}, "outcome": "skip"},
            {"when": {"torch": "<=2.14.1"}, "outcome": "error"},
            {"outcome": "fixed"},
        ]
    }
)


def test_first_matching_rule_wins() -> None:
    assert expected_outcome(VARIANT, env(torchrec="1.3.0"), 2, "cpu") is Outcome.REPRODUCED
    assert expected_outcome(VARIANT, env(torchrec="1.3.0"), 1, "cpu") is Outcome.FIXED
    assert expected_outcome(VARIANT, env(torchrec="1.4.0"), 2, "cpu") is Outcome.FIXED


def test_git_commit_prefix() -> None:
    assert expected_outcome(VARIANT, env(litgpt="0.3.1.dev0@abc1234def"), 1, "cpu") is Outcome.REPRODUCED
    assert expected_outcome(VARIANT, env(litgpt="0.3.1.dev0@fff1234def"), 1, "cpu") is Outcome.FIXED
    assert expected_outcome(VARIANT, env(litgpt="0.3.1"), 1, "cpu") is Outcome.FIXED  # a release has no commit


def test_alias_and_device() -> None:
    assert expected_outcome(VARIANT, env(fbgemm_gpu_cpu="1.0.0"), 1, "cuda") is Outcome.SKIP
    assert expected_outcome(VARIANT, env(fbgemm_gpu_cpu="1.0.0"), 1, "cpu") is Outcome.FIXED


def test_local_version_tag_does_not_hide_the_release() -> None:
    assert expected_outcome(VARIANT, env(torch="2.14.1+cu130"), 1, "cpu") is Outcome.ERROR
    assert expected_outcome(VARIANT, env(torch="2.15.0"), 1, "cpu") is Outcome.FIXED


def test_missing_package_fails_its_condition() -> None:
    assert expected_outcome(VARIANT, env(), 2, "cpu") is Outcome.FIXED


def test_rules_compare_by_version_order_so_a_dev_build_is_before_its_release() -> None:
    """A git install of litgpt's main before 0.4.0 says 0.4.0.dev0, and a nightly says 2.10.0.dev20250801: both come
    before their release, so `<0.4.0` holds for them. PEP 440 leaves them out of `<0.4.0` (and out of `>=0.4.0`,
    by order), which sent them to the catch-all rule (litgpt-2155 expected `fixed` where it measured `skip`)."""
    variant = Variant.model_validate(
        {
            "expect": [
                {"when": {"litgpt": "<0.4.0"}, "outcome": "skip"},
                {"when": {"litgpt": ">=0.4.0,<0.5.12"}, "outcome": "reproduced"},
                {"when": {"torch": "<2.10"}, "outcome": "reproduced"},
                {"when": {"lightning": ">2.0.9,<2.1"}, "outcome": "error"},
                {"outcome": "fixed"},
            ]
        }
    )
    assert expected_outcome(variant, env(litgpt="0.4.0.dev0@60140755d7"), 1, "cpu") is Outcome.SKIP
    assert expected_outcome(variant, env(litgpt="0.4.0rc1"), 1, "cpu") is Outcome.SKIP
    assert expected_outcome(variant, env(litgpt="0.4.0"), 1, "cpu") is Outcome.REPRODUCED
    assert expected_outcome(variant, env(litgpt="0.5.12.dev0"), 1, "cpu") is Outcome.REPRODUCED
    assert expected_outcome(variant, env(litgpt="0.5.12"), 1, "cpu") is Outcome.FIXED
    assert expected_outcome(variant, env(torch="2.10.0.dev20250801+cpu"), 1, "cpu") is Outcome.REPRODUCED
    assert expected_outcome(variant, env(torch="2.10.0"), 1, "cpu") is Outcome.FIXED
    assert expected_outcome(variant, env(lightning="2.0.9.post0"), 1, "cpu") is Outcome.ERROR  # after 2.0.9
    assert expected_outcome(variant, env(lightning="2.0.9"), 1, "cpu") is Outcome.FIXED
