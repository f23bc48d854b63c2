"""Every case folder follows cases/README.md, as `bugmatrix check-case` checks it (harness/commands/check_case.py).

The scripts are parsed with `ast`, never imported or run (the cases themselves run as pytest items elsewhere). The
rules are the command's; here they are applied to every case under cases/, with the gaps known today listed exactly
in KNOWN_UNRUN, and the checker itself is shown catching each broken rule.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.commands.check_case import case_problems, check_flags_run, check_script

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"
CASE_DIRS = sorted(p.parent for p in CASES.glob("*/repro.py"))


def readme_snippet() -> str:
    """The canonical snippet: the first ```python block of cases/README.md."""
    text = (CASES / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "cases/README.md has no ```python block"
    return match.group(1)


def test_every_case_folder_is_a_case():
    """Every folder under cases/ holds a case.yaml and its repro.py, and each one validates: none is skipped over."""
    folders = sorted(p for p in CASES.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    assert folders and folders == CASE_DIRS == sorted(p.parent for p in CASES.glob("*/case.yaml"))
    assert [p for d in CASE_DIRS for p in case_problems(d) if "case.yaml" in p.split(":", 1)[0]] == []


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=lambda p: p.name)
def test_the_readme_cases_table_has_a_row_for_the_case(case_dir: Path):
    """The README's cases table (`bugmatrix report --format cases`) lists every case: a new case is not done
    until its measured row is there."""
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")]
    assert any(line.startswith(f"| `{case_dir.name}` ") for line in rows), f"README's cases table lacks {case_dir.name}"


# Documented paths that no variant runs yet, each still to be given a measured variant (or dropped from the
# script). The list must be exact: a new gap fails, and so does an entry whose gap a variant has closed.
KNOWN_UNRUN = {
    "lightning-20450-resume-weights-only-torch26": ["`--load load_from_checkpoint`"],
    "litgpt-2201-lora-ind-head-size": ["`--n-query-groups 1`"],
}


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=lambda p: p.name)
def test_the_case_passes_check_case(case_dir: Path):
    """`bugmatrix check-case` finds nothing in the case but its known gaps: the canonical set-up is followed and
    every flag the script documents is run by a variant."""
    problems = case_problems(case_dir)
    known = KNOWN_UNRUN.get(case_dir.name, [])
    new = [p for p in problems if not any(k in p for k in known)]
    closed = [k for k in known if not any(k in p for p in problems)]
    assert not new, "\n  ".join(["", *new])
    assert not closed, f"cases/{case_dir.name}: now run by a variant, drop from KNOWN_UNRUN: {closed}"


def test_known_unrun_names_existing_cases():
    assert set(KNOWN_UNRUN) <= {p.name for p in CASE_DIRS}


FLAGS = """
import argparse
DTYPES = {"bf16": 1, "fp16": 2}
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--hparams", choices=["module", "plain"], default="module")
    p.add_argument("--check", required=True, choices=["a", "b"])
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--heads", type=int, choices=[1, 2], default=2)
    p.add_argument("--workaround", action="store_true")
    p.add_argument("--static-graph", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--rows", type=int, default=3)
"""


def test_flag_check_reports_each_unrun_path():
    problems = "\n".join(check_flags_run(FLAGS, [["--check", "a"]]))
    for missing in (
        "`--hparams plain`",
        "`--check b`",
        "`--dtype fp16`",
        "`--heads 1`",
        "`--workaround`",
        "`--no-static-graph`",
    ):
        assert missing in problems
    for exempt in ("--device", "--rows", "`--check a`", "`--hparams module`", "`--dtype bf16`", "`--heads 2`"):
        assert exempt not in problems


def test_flag_check_passes_when_every_path_runs():
    variants = [
        ["--check", "a", "--hparams=plain"],
        ["--check", "b", "--dtype", "fp16", "--heads", "1"],
        ["--check", "a", "--workaround", "--no-static-graph"],
    ]
    assert check_flags_run(FLAGS, variants) == []


def test_readme_snippet_follows_its_own_rules():
    assert check_script(readme_snippet()) == []


BAD = '''
import argparse
import os
import sys

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    print("REPRODUCED: something")
    sys.exit(1)


if __name__ == "__main__":
    main()
'''


def test_checker_catches_a_fixed_port_and_sys_exit_in_main(tmp_path: Path):
    script = tmp_path / "repro.py"
    script.write_text(BAD)
    problems = check_script(script.read_text())
    joined = "\n".join(problems)
    assert "fixed port '29517' for MASTER_PORT" in joined
    assert "sys.exit() inside main" in joined
    assert "must end with" in joined  # `main()` instead of `sys.exit(main())`
    assert "fall off its end" in joined


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import harness\n", "imports harness"),
        ("from harness.cases import Case\n", "imports from harness"),
        ("import os\nos.environ.setdefault('MASTER_PORT', 29500)\n", "fixed port 29500"),
        ("import os\nport = os.environ.get('MASTER_PORT', '29518')\n", "fixed port '29518'"),
        ("def main():\n    import os\n    os._exit(0)\n", "os._exit() inside main"),
        ("def main():\n    return\n", "bare return in main"),
        ("def main():\n    raise SystemExit(1)\n", "raise SystemExit inside main"),
        ("def f():\n    match x:\n        case 1:\n            pass\n", "Python 3.8's grammar"),
        ("p.add_argument('--device', choices=['cpu', 'gpu'], default='cpu')\n", "choices ['cpu', 'cuda']"),
        ("import torch.distributed as dist\ndist.init_process_group('gloo')\n", "no free_port() helper"),
    ],
)
def test_checker_reports(source: str, expected: str):
    assert expected in "\n".join(check_script(source))


CASE_YAML = """
title: a case
upstream: [https://github.com/pytorch/pytorch/issues/1]
packages: [torch]
signature: "the text the bug prints"
variants:
  bug:
    expect: [{outcome: reproduced}]
"""


def write_case(root: Path, name: str, script: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "case.yaml").write_text(CASE_YAML)
    (folder / "repro.py").write_text(script)
    return folder


def test_check_case_command_names_each_problem_and_exits_by_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bugmatrix check-case` as an author runs it: 0 on a canonical case, 1 with one line per problem naming the
    file, 2 for a pattern matching no folder, 5 for an empty folder; --cases-dir before or after the command."""
    cases = tmp_path / "cases"
    write_case(cases, "torch-1-good", readme_snippet())
    flagged = readme_snippet().replace("    # ... the case's own variant options",
                                       '    parser.add_argument("--workaround", action="store_true")')
    write_case(cases, "torch-2-unrun-flag", flagged)
    write_case(cases, "torch-3-bad", BAD)
    (cases / "torch-4-invalid").mkdir()
    (cases / "torch-4-invalid" / "case.yaml").write_text("title: t\n")

    assert main(["check-case", "good", "--cases-dir", str(cases)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["--cases-dir", str(cases), "check-case"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{cases}/torch-2-unrun-flag/repro.py: line" in lines[0] and "`--workaround` is defined but no variant" \
        in lines[0] and len([x for x in lines if "torch-2-" in x]) == 1
    bad = [x for x in lines if x.startswith(f"{cases}/torch-3-bad/repro.py: ")]
    assert any("fixed port '29517'" in x for x in bad) and any("sys.exit() inside main" in x for x in bad)
    assert [x for x in lines if "torch-4-invalid" in x] and all("torch-1-good" not in x for x in lines)
    assert main(["check-case", "nosuchcase", "--cases-dir", str(cases)]) == 2
    assert "nosuchcase: no case folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["check-case", "--cases-dir", str(tmp_path / "empty")]) == 5
