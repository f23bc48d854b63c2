"""bugmatrix in other repositories' CI: the GitHub Action (action.yml) replayed step by step as GitHub runs a
composite action, the pre-commit hook (.pre-commit-hooks.yaml) run for real by pre-commit, and `audit --files`.

The replay reads action.yml, evaluates each step's `if:` and `env:` expressions on the inputs (their defaults, then
what the test gives) and a pull request's context, and runs each `run:` script as GitHub does (`bash --noprofile
--norc -eo pipefail`) in a scratch git repository, with $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY and
$GITHUB_ACTION_PATH; a `uses:` step is not run (setup-uv, upload-sarif): the test sees whether it would run and
with what. bugmatrix is the clone's own (`BUGMATRIX_COMMAND`, which the action honours), on the clone's record:
no network. The linters (zizmor, actionlint, shellcheck) check action.yml in tests/test_github.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
BUGMATRIX = f"{sys.executable} -m harness"
BASE_PINS = "torch==2.9.1\nlitgpt==0.5.12\n"
HEAD_PINS = "torch==2.9.1\nlitgpt==0.5.13\n"


def env_of(tmp: Path) -> dict[str, str]:
    """The environment bugmatrix runs in: the clone's record, no store, git that needs no configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BUGMATRIX_"))}
    env.update(
        BUGMATRIX_RECORD=str(ROOT / "record"),
        BUGMATRIX_DB=str(tmp / "no-store.db"),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.org",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.org",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=env_of(repo.parent), capture_output=True, text=True, check=True
    ).stdout.strip()


def scratch(tmp_path: Path, base: str, head: str, name: str = "requirements.txt") -> tuple[Path, str]:
    """A repository whose base commit pins `base` in `name` and whose head commit pins `head`; (repo, base sha)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / name).write_text(base)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", "base")
    sha = git(repo, "rev-parse", "HEAD")
    (repo / name).write_text(head)
    git(repo, "commit", "-q", "--allow-empty", "-am", "head")
    return repo, sha


# --- GitHub's side: expressions and a composite action's steps ----------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<name>[A-Za-z_][\w.-]*))")


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """A GitHub expression of the kinds action.yml uses: context paths (`inputs.mode`, `steps.audit.outputs.x`,
    `github.event.pull_request.base.sha`; a missing one is ''), 'strings', true, false, ==, !=, &&, ||, !,
    parentheses."""
    python, rest = [], expression.strip()
    while rest:
        match = _TOKEN.match(rest)
        assert match, f"cannot read {rest!r} of {expression!r}"
        rest = rest[match.end() :].strip()
        if match["str"]:
            python.append(repr(match["str"][1:-1].replace("''", "'")))
        elif match["op"]:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(match["op"], match["op"]))
        elif match["name"] in ("true", "false"):
            python.append(str(match["name"] == "true"))
        else:
            value: Any = context
            for part in match["name"].split("."):
                value = value.get(part, "") if isinstance(value, dict) else ""
            python.append(repr(value))
    return eval("".join(python), {"__builtins__": {}})  # noqa: S307 - tokens above: literals and operators only


def yaml_text(value: Any) -> str:
    """A YAML scalar as the string GitHub passes on (`false`, not Python's `False`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def substitute(text: str, context: dict[str, Any]) -> str:
    """`${{ expr }}` inside a value, as GitHub substitutes it."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(evaluate(m[1], context)), text)


@dataclass
class Run:
    """What GitHub keeps of one run of the action: each step's outputs, the summary, the log, the `uses:` steps
    that would run (with their evaluated `with:`), and the exit code of the step that ended it (0: all passed)."""

    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""
    log: str = ""
    used: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    code: int = 0


def replay(repo: Path, base: str, **inputs: str) -> Run:
    """Run action.yml's steps in `repo` on a pull request whose base is `base`, with these inputs."""
    tmp = repo.parent / "runner"
    tmp.mkdir(exist_ok=True)
    context: dict[str, Any] = {
        "inputs": {},
        "steps": {},
        "github": {"action_path": str(ROOT), "event": {"pull_request": {"base": {"sha": base}}}},
    }
    for name, spec in ACTION["inputs"].items():
        context["inputs"][name] = inputs.pop(name, None) or substitute(str(spec.get("default", "")), context)
    assert not inputs, f"action.yml has no input {sorted(inputs)}"
    run, summary = Run(), tmp / "summary.md"
    for number, step in enumerate(ACTION["runs"]["steps"]):
        condition = step.get("if", "true")
        if not evaluate(condition.strip().removeprefix("${{").removesuffix("}}"), context):
            continue
        if "uses" in step:
            run.used.append(
                (
                    step["uses"].split("@")[0],
                    {k: substitute(yaml_text(v), context) for k, v in step.get("with", {}).items()},
                )
            )
            continue
        assert step["shell"] == "bash"
        output = tmp / f"output-{number}"
        output.write_text("")
        env = env_of(repo.parent) | {k: substitute(yaml_text(v), context) for k, v in step.get("env", {}).items()}
        env.update(
            GITHUB_OUTPUT=str(output),
            GITHUB_STEP_SUMMARY=str(summary),
            GITHUB_ACTION_PATH=str(ROOT),
            RUNNER_TEMP=str(tmp),
            BUGMATRIX_COMMAND=BUGMATRIX,
        )
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        run.log += proc.stdout + proc.stderr
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
        if "id" in step:
            run.outputs[step["id"]] = outputs
            context["steps"][step["id"]] = {"outputs": outputs}
        if proc.returncode:
            run.code = proc.returncode
            break
    run.summary = summary.read_text() if summary.is_file() else ""
    return run


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BUGMATRIX.split(), "audit", *args],
        cwd=repo,
        env=env_of(repo.parent),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- diff mode (pull requests) --------------------------------------------------------------------------------


def test_diff_mode_says_what_audit_from_to_says_and_passes_an_upgrade_that_brings_nothing_in(tmp_path: Path) -> None:
    """Base pins torch 2.9.1 + litgpt 0.5.12, the change bumps litgpt to 0.5.13: fixes 11, brings in 0 on the
    committed record (as at the 93-case catalogue), and passes; the summary is `audit --from --to --format markdown`."""
    repo, base = scratch(tmp_path, BASE_PINS, HEAD_PINS)
    run = replay(repo, base, mode="diff")
    assert run.code == 0, run.log
    assert run.outputs["audit"]["exit-code"] == "0"
    (tmp_path / "a.txt").write_text(BASE_PINS)
    direct = cli(repo, "--from", str(tmp_path / "a.txt"), "--to", "requirements.txt", "--format", "markdown")
    assert direct.returncode == 0, direct.stderr
    table = direct.stdout.rsplit("\n", 2)[0]  # the last line names the base file, which is a temporary one here
    assert table in run.summary
    assert re.search(r"-> requirements\.txt on cpu: fixes 11, brings in 0, keeps 14$", run.summary.strip())
    assert run.summary.count("fixed by the upgrade") == 11
    assert run.summary.startswith(f"### bugmatrix: `requirements.txt` at {base[:12]} -> this change (cpu)")
    assert run.used == [("astral-sh/setup-uv", {"enable-cache": "false"})]  # no SARIF upload in diff mode


def test_diff_mode_fails_on_a_change_that_brings_bugs_in_naming_them(tmp_path: Path) -> None:
    repo, base = scratch(tmp_path, HEAD_PINS, BASE_PINS)  # litgpt 0.5.13 -> 0.5.12
    run = replay(repo, base, mode="diff")
    assert run.code == 1 and run.outputs["audit"]["exit-code"] == "1", run.log
    brought = re.findall(r"^\| (litgpt-[^|]+) \|[^\n]*\| BROUGHT IN by the upgrade \|$", run.summary, re.M)
    assert len(brought) == 11 and "litgpt-2258-qwen3-prompt-none-system (bug)" in brought
    assert "fixes 0, brings in 11" in run.summary
    assert "::error title=bugmatrix::this change to requirements.txt brings in a recorded bug" in run.log


def test_diff_mode_exits_5_when_the_pair_covers_nothing(tmp_path: Path) -> None:
    repo, base = scratch(tmp_path, "numpy==2.0.0\n", "numpy==2.1.0\n")
    run = replay(repo, base, mode="diff")
    assert run.code == 5 and run.outputs["audit"]["exit-code"] == "5", run.log
    assert "nothing checked" in run.log and "**Nothing checked**" in run.summary


def test_diff_mode_on_a_new_file_brings_in_every_bug_that_applies(tmp_path: Path) -> None:
    repo, base = scratch(tmp_path, "", "")
    (repo / "deps").mkdir()
    (repo / "deps" / "requirements-gpu.txt").write_text(BASE_PINS)
    git(repo, "add", "deps")
    git(repo, "commit", "-q", "-m", "new file")
    run = replay(repo, base, mode="diff", requirements="deps/requirements-gpu.txt")
    assert run.code == 1, run.log
    assert "New in this change" in run.summary and "**25 bug(s) apply**" in run.summary


def test_diff_mode_refuses_no_base_and_an_unknown_mode(tmp_path: Path) -> None:
    repo, _ = scratch(tmp_path, BASE_PINS, HEAD_PINS)
    run = replay(repo, "", mode="diff")  # not a pull request: the default base is empty
    assert run.code == 2 and "mode diff needs a base commit" in run.log
    run = replay(repo, "", mode="fill")
    assert run.code == 2 and "mode must be diff or full, not 'fill'" in run.log


def test_the_inputs_reach_the_script_only_through_env() -> None:
    """zizmor's template-injection rule, checked on the file: no `${{` inside a `run:` script."""
    scripts = [s["run"] for s in ACTION["runs"]["steps"] if "run" in s]
    assert scripts and all("${{" not in script for script in scripts)
    env = next(s["env"] for s in ACTION["runs"]["steps"] if "run" in s)
    assert {v.strip("${} ").removeprefix("inputs.") for v in env.values()} == set(ACTION["inputs"])


# --- full mode (schedules) ------------------------------------------------------------------------------------


def test_full_mode_writes_the_summary_and_uploads_sarif_that_audit_wrote(tmp_path: Path) -> None:
    """The job summary is `audit --format markdown`; the SARIF goes to upload-sarif; a schedule that finds bugs
    reports them and passes (the exit-code output says 1, for those who gate on it)."""
    repo, _ = scratch(tmp_path, BASE_PINS, BASE_PINS + "numpy==2.0.0\n")
    run = replay(repo, "", mode="full")
    assert run.code == 0, run.log
    assert run.outputs["audit"]["exit-code"] == "1"
    direct = cli(repo, "-r", "requirements.txt", "--format", "markdown")
    assert direct.stdout in run.summary and "**25 bug(s) apply**" in run.summary
    sarif = Path(run.outputs["audit"]["sarif"])
    assert run.used[1] == ("github/codeql-action/upload-sarif", {"sarif_file": str(sarif), "category": "bugmatrix"})
    doc = json.loads(sarif.read_text())
    assert len(doc["runs"][0]["results"]) == 25
    assert doc == json.loads(cli(repo, "-r", "requirements.txt", "--format", "sarif").stdout)


def test_full_mode_fails_when_nothing_is_checked_and_uploads_nothing(tmp_path: Path) -> None:
    repo, _ = scratch(tmp_path, "numpy==2.0.0\n", "numpy==2.0.0\n")
    run = replay(repo, "", mode="full")
    assert run.code == 5 and "sarif" not in run.outputs["audit"]
    assert [name for name, _ in run.used] == ["astral-sh/setup-uv"]


# --- audit --files and the pre-commit hook ------------------------------------------------------------------


def test_audit_files_answers_each_file_on_its_own(tmp_path: Path) -> None:
    """Exit 1 if a bug applies to one file, else 5 if one checks nothing, else 0; --json takes one file."""
    for name, text in {"clean.txt": "litgpt==0.5.13\n", "bad.txt": BASE_PINS, "none.txt": "numpy==2\n"}.items():
        (tmp_path / name).write_text(text)
    both = cli(tmp_path, "--files", "clean.txt", "bad.txt")
    assert both.returncode == 1, both.stderr
    assert "0 bug(s) apply to clean.txt" in both.stdout and "25 bug(s) apply to bad.txt" in both.stdout
    assert cli(tmp_path, "--files", "clean.txt").returncode == 0
    nothing = cli(tmp_path, "--files", "clean.txt", "none.txt")
    assert nothing.returncode == 5 and "nothing checked: none.txt" in nothing.stderr
    assert cli(tmp_path, "--files", "bad.txt", "none.txt").returncode == 1
    refused = cli(tmp_path, "--files", "clean.txt", "bad.txt", "--json")
    assert refused.returncode == 2 and "give one file (-r FILE), not --files with 2" in refused.stderr
    missing = cli(tmp_path, "--files", "clean.txt", "gone.txt")
    assert missing.returncode == 2 and "gone.txt" in missing.stderr and missing.stderr.count("\n") == 1


def test_the_pre_commit_hook_fails_a_commit_that_pins_a_bug_and_passes_a_clean_one(tmp_path: Path) -> None:
    """pre-commit runs .pre-commit-hooks.yaml's entry for real, installed as the repository's git hook. Its
    `language: python` would install bugmatrix from an index into a fresh virtualenv, which a test cannot do
    offline; so the scratch repository declares the same hook (its entry, its `files`, pass_filenames) as a
    `repo: local` hook with `language: system`, its entry's `bugmatrix` being this clone's."""
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "bugmatrix-audit" and hook["language"] == "python" and hook["pass_filenames"] is True
    assert hook["entry"].startswith("bugmatrix ")
    local = {**hook, "language": "system", "entry": hook["entry"].replace("bugmatrix", BUGMATRIX, 1)}
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]}))
    env = env_of(tmp_path) | {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    pre_commit = [sys.executable, "-m", "pre_commit"]
    subprocess.run([*pre_commit, "install"], cwd=repo, env=env, check=True, capture_output=True, timeout=120)

    def commit(path: str, text: str) -> subprocess.CompletedProcess[str]:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        git(repo, "add", "-A")
        return subprocess.run(
            ["git", "commit", "-q", "-m", path],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    clean = commit("requirements.txt", "litgpt==0.5.13\n")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert re.search(r"bugmatrix audit\.+Passed", clean.stdout + clean.stderr)
    affected = commit("services/api/requirements-prod.txt", BASE_PINS)
    assert affected.returncode == 1, affected.stdout + affected.stderr
    said = affected.stdout + affected.stderr
    assert re.search(r"bugmatrix audit\.+Failed", said) and "exit code: 1" in said
    assert "AFFECTED  litgpt-2258-qwen3-prompt-none-system (bug)" in said
    assert git(repo, "log", "--format=%s") == "requirements.txt"  # the affected commit was refused
    shutil.rmtree(repo / "services")  # what the author does next: unstage and remove it
    untouched = commit("README.md", "no requirements here\n")  # `files` does not match: the hook is skipped
    assert untouched.returncode == 0 and re.search(
        r"bugmatrix audit\.+\(no files to check\)Skipped", untouched.stdout + untouched.stderr
    )


@pytest.mark.parametrize(
    "path, matched",
    [
        ("requirements.txt", True),
        ("deps/requirements-dev.txt", True),
        ("uv.lock", True),
        ("sub/uv.lock", True),
        ("pylock.toml", True),
        ("pylock.gpu.toml", True),
        ("requirements.in", False),
        ("myrequirements.txt", False),
        ("pyproject.toml", False),
        ("uv.lock.bak", False),
    ],
)
def test_the_hook_matches_requirements_and_lock_files(path: str, matched: bool) -> None:
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert bool(re.search(hook["files"], path)) is matched
