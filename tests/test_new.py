"""`bugmatrix new`: a draft case from an upstream link, which can only skip until a person writes both files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.analysis.caselint import check_script
from harness.cli import main
from harness.model.case import load_case
from harness.model.scaffold import NOT_WRITTEN, PLACEHOLDER_SIGNATURE, parse_packages, parse_url
from tests.helpers import CASES

ISSUE = "https://github.com/pytorch/pytorch/issues/123456"
LIGHTNING_ISSUE = "https://github.com/Lightning-AI/pytorch-lightning/issues/123456"


@pytest.mark.parametrize(
    ("url", "library", "number", "is_pr", "canonical"),
    [
        (ISSUE, "torch", 123456, False, ISSUE),
        (
            "https://github.com/pytorch/pytorch/pull/121157",
            "torch",
            121157,
            True,
            "https://github.com/pytorch/pytorch/pull/121157",
        ),
        (
            "https://github.com/meta-pytorch/torchrec/issues/3006",
            "torchrec",
            3006,
            False,
            "https://github.com/meta-pytorch/torchrec/issues/3006",
        ),
        (
            "https://github.com/pytorch/torchrec/pull/2484",
            "torchrec",
            2484,
            True,
            "https://github.com/meta-pytorch/torchrec/pull/2484",
        ),
        (
            "https://github.com/pytorch/FBGEMM/issues/77",
            "fbgemm",
            77,
            False,
            "https://github.com/pytorch/FBGEMM/issues/77",
        ),
        (
            "https://github.com/Lightning-AI/pytorch-lightning/issues/20307",
            "lightning",
            20307,
            False,
            "https://github.com/Lightning-AI/pytorch-lightning/issues/20307",
        ),
        (
            "https://github.com/Lightning-AI/lightning/pull/19152/files",
            "lightning",
            19152,
            True,
            "https://github.com/Lightning-AI/pytorch-lightning/pull/19152",
        ),
        (
            "https://github.com/Lightning-AI/litgpt/issues/1378#issuecomment-1",
            "litgpt",
            1378,
            False,
            "https://github.com/Lightning-AI/litgpt/issues/1378",
        ),
        (
            "http://www.github.com/lightning-ai/LitGPT/pull/2225/?x=1",
            "litgpt",
            2225,
            True,
            "https://github.com/Lightning-AI/litgpt/pull/2225",
        ),
    ],
)
def test_parse_url(url: str, library: str, number: int, is_pr: bool, canonical: str) -> None:
    upstream = parse_url(url)
    assert (upstream.library.name, upstream.number, upstream.is_pr, upstream.url) == (library, number, is_pr, canonical)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://github.com/huggingface/transformers/issues/1", "not a library bugmatrix knows"),
        ("https://gitlab.com/pytorch/pytorch/issues/1", "not a GitHub issue or pull request link"),
        ("https://github.com/pytorch/pytorch/discussions/1", "not a GitHub issue or pull request link"),
        ("https://github.com/pytorch/pytorch/issues/abc", "not a GitHub issue or pull request link"),
        ("https://github.com/pytorch/pytorch", "not a GitHub issue or pull request link"),
        ("pytorch/pytorch#1", "not a GitHub issue or pull request link"),
    ],
)
def test_parse_url_refuses_other_links(url: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_url(url)
    assert str(info.value).startswith(f"{url}: ") and why in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("library", "packages"),
    [
        ("torch", ["torch"]),
        ("torchrec", ["torch", "torchrec", "fbgemm-gpu"]),
        ("lightning", ["torch", "lightning"]),
        ("litgpt", ["torch", "litgpt"]),
        ("fbgemm", ["torch", "fbgemm-gpu"]),
    ],
)
def test_default_packages_per_library(library: str, packages: list[str]) -> None:
    urls = {
        "torch": ISSUE,
        "torchrec": "https://github.com/meta-pytorch/torchrec/issues/1",
        "lightning": "https://github.com/Lightning-AI/pytorch-lightning/issues/1",
        "litgpt": "https://github.com/Lightning-AI/litgpt/issues/1",
        "fbgemm": "https://github.com/pytorch/FBGEMM/pull/1",
    }
    upstream = parse_url(urls[library])
    assert upstream.library.name == library
    assert parse_packages(None, upstream.library) == packages
    assert parse_packages("torch, lightning,torch", upstream.library) == ["torch", "lightning"]


def new(cases: Path, *args: str) -> int:
    return main(["--cases-dir", str(cases), "new", *args])


def test_new_writes_both_files_of_a_valid_case(tmp_path: Path, capsys) -> None:
    assert new(tmp_path, "https://github.com/pytorch/torchrec/issues/3006", "--slug", "meta-string-device") == 0
    folder = tmp_path / "torchrec-3006-meta-string-device"
    assert sorted(p.name for p in folder.iterdir()) == ["case.yaml", "repro.py"]
    assert "torchrec-3006-meta-string-device" in capsys.readouterr().out
    case = load_case(folder / "case.yaml")  # valid for the harness: `bugmatrix list` shows it
    spec = case.spec
    assert spec.upstream == ["https://github.com/meta-pytorch/torchrec/issues/3006"] and spec.fixed_by == []
    assert spec.packages == ["torch", "torchrec", "fbgemm-gpu"]
    assert spec.sources == {"torchrec": "https://github.com/meta-pytorch/torchrec"}
    assert spec.signature == PLACEHOLDER_SIGNATURE and spec.title.startswith("TODO")
    assert spec.nproc == [1, 2] and spec.devices == ["cpu", "cuda"]
    # Every rule of every variant expects skip: the draft is "as expected" only while it skips.
    assert {rule.outcome.value for v in spec.variants.values() for rule in v.expect} == {"skip"}
    assert main(["--cases-dir", str(tmp_path), "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in listed["cases"]] == ["torchrec-3006-meta-string-device"] and listed["errors"] == []


def test_the_run_command_new_prints_finds_the_case_where_it_was_written(tmp_path: Path, capsys) -> None:
    """A case written with --cases-dir: the suggested `run` carries it, so that it runs the draft (skip), rather than
    "nothing to run" (exit 5) from the default cases/."""
    import re
    import shlex

    assert new(tmp_path, "https://github.com/pytorch/pytorch/issues/123456", "--slug", "x") == 0
    out = capsys.readouterr().out
    printed = re.search(r"`(bugmatrix [^`]*run torch-123456-x)`", out)
    assert printed and printed.group(1) == f"bugmatrix --cases-dir {tmp_path} run torch-123456-x", out
    assert main([*shlex.split(printed.group(1))[1:], "--device", "cpu", "--no-store"]) == 0  # skips, as expected


def test_new_from_a_pr_lists_it_as_upstream_and_fix(tmp_path: Path) -> None:
    assert (
        new(
            tmp_path,
            "https://github.com/pytorch/pytorch/pull/121157",
            "--slug",
            "assign-requires-grad",
            "--packages",
            "torch",
        )
        == 0
    )
    spec = load_case(tmp_path / "torch-121157-assign-requires-grad" / "case.yaml").spec
    assert spec.upstream == spec.fixed_by == ["https://github.com/pytorch/pytorch/pull/121157"]


def test_new_refuses_to_overwrite(tmp_path: Path, capsys) -> None:
    assert new(tmp_path, ISSUE, "--slug", "some-bug") == 0
    script = tmp_path / "torch-123456-some-bug" / "repro.py"
    script.write_text("# written by a person\n")
    capsys.readouterr()
    assert new(tmp_path, ISSUE, "--slug", "some-bug") == 2
    err = capsys.readouterr().err
    assert "already exists" in err and len(err.strip().splitlines()) == 1
    assert script.read_text() == "# written by a person\n"


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["https://github.com/huggingface/transformers/issues/1", "--slug", "x"], "not a library bugmatrix knows"),
        ([ISSUE, "--slug", "Bad_Slug"], "--slug 'Bad_Slug'"),
        ([ISSUE, "--slug", "ok", "--packages", "torch,"], None),  # a trailing comma is fine
        ([ISSUE, "--slug", "ok2", "--packages", "torch;rm"], "--packages"),
    ],
)
def test_new_usage_errors_are_one_line(tmp_path: Path, capsys, args: list[str], why: str | None) -> None:
    code = new(tmp_path, *args)
    err = capsys.readouterr().err
    if why is None:
        assert code == 0
        return
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("digits", "why"),
    [
        (300, "an issue number of 300 digits"),  # was OSError: File name too long, a traceback
        (5000, "an issue number of 5000 digits"),  # past what int() reads
        (70, "would be 85 characters (at most 80)"),  # a folder the disk takes, but no case id
    ],
)
def test_new_refuses_a_number_no_case_id_holds(tmp_path: Path, capsys, digits: int, why: str) -> None:
    code = new(tmp_path, f"https://github.com/pytorch/pytorch/issues/{'9' * digits}", "--slug", "some-bug")
    err = capsys.readouterr().err
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def draft(tmp_path: Path, slug: str = "draft") -> Path:
    """A fresh draft of the torch issue in tmp/cases; its folder."""
    cases = tmp_path / "cases"
    cases.mkdir(exist_ok=True)
    assert new(cases, ISSUE, "--slug", slug) == 0
    return cases / f"torch-123456-{slug}"


@pytest.mark.parametrize(
    "url",
    [
        ISSUE,
        "https://github.com/meta-pytorch/torchrec/pull/2484",
        "https://github.com/Lightning-AI/litgpt/issues/1",
        LIGHTNING_ISSUE,
    ],
)
def test_the_draft_script_follows_the_canonical_setup(tmp_path: Path, url: str) -> None:
    assert new(tmp_path, url, "--slug", "draft") == 0
    (script,) = tmp_path.glob("*/repro.py")
    assert check_script(script.read_text()) == []


def run_script(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, script.name, "--device", "cpu", *args],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_unfilled_script_exits_125_with_a_todo_line(tmp_path: Path) -> None:
    proc = run_script(draft(tmp_path) / "repro.py")
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert (
        proc.stdout.strip().splitlines()[-1].endswith(f"{NOT_WRITTEN}: set SIGNATURE and write the_call_that_fails()")
    )


def test_the_unfilled_script_skips_before_it_joins_a_process_group(tmp_path: Path) -> None:
    """Rank 1 of 2 with no rank 0 to meet: joining the group would wait (gloo's default timeout is 30 min); the
    draft exits 125 first, so no rank of a 2-rank draft leaves a group its peer is still connecting to."""
    env = {
        **os.environ,
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_unused_port()),
    }
    script = draft(tmp_path) / "repro.py"
    proc = subprocess.run(
        [sys.executable, script.name, "--device", "cpu"],
        cwd=script.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith(f"[rank 1] {NOT_WRITTEN}")


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_lightning_draft_has_no_process_group_of_its_own_and_skips(tmp_path: Path) -> None:
    """The Trainer makes the process group a Lightning case needs: its draft has no init_dist, runs at one rank,
    and exits 125 with the TODO line until it is written."""
    assert new(tmp_path, LIGHTNING_ISSUE, "--slug", "draft") == 0
    (folder,) = tmp_path.glob("lightning-*")
    text = (folder / "repro.py").read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", "`")))
    assert "init_dist(" not in code and "init_process_group(" not in code and "import lightning" in text
    assert "nproc: [1]" in (folder / "case.yaml").read_text()
    proc = run_script(folder / "repro.py")
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert (
        proc.stdout.strip().splitlines()[-1].endswith(f"{NOT_WRITTEN}: set SIGNATURE and write the_call_that_fails()")
    )


def test_a_script_with_only_the_signature_written_is_an_error_not_fixed(tmp_path: Path) -> None:
    script = draft(tmp_path) / "repro.py"
    script.write_text(script.read_text().replace(json.dumps(PLACEHOLDER_SIGNATURE), '"boom"'))
    proc = run_script(script)
    # The NotImplementedError escapes (Python exits 1) and no signature is printed: the harness reads `error`.
    assert proc.returncode == 1 and "NotImplementedError: TODO" in proc.stderr and "REPRODUCED" not in proc.stdout


def bugmatrix_run(tmp_path: Path, capsys, *args: str) -> tuple[int, list[tuple[int, str, str]]]:
    """`bugmatrix run <the draft> --device cpu --no-store --json`: the exit code and (nproc, outcome, expected)."""
    capsys.readouterr()
    code = main(
        [
            "--cases-dir",
            str(tmp_path / "cases"),
            "run",
            "torch-123456",
            "--device",
            "cpu",
            "--no-store",
            "--json",
            "-j",
            "2",
            *args,
        ]
    )
    rows = json.loads(capsys.readouterr().out)["results"]
    return code, sorted((r["nproc"], r["outcome"], r["expected"]) for r in rows)


def test_bugmatrix_run_of_the_draft_only_skips(tmp_path: Path, capsys) -> None:
    """Plain python (nproc 1) and torchrun with 2 ranks: skip, as the draft expects; never fixed."""
    draft(tmp_path)
    code, rows = bugmatrix_run(tmp_path, capsys)
    assert rows == [(1, "skip", "skip"), (2, "skip", "skip")]
    assert code == 0


def test_a_draft_written_in_one_file_only_is_never_fixed_as_expected(tmp_path: Path, capsys) -> None:
    folder = draft(tmp_path)
    script, case_yaml = folder / "repro.py", folder / "case.yaml"
    unfilled_script, unfilled_yaml = script.read_text(), case_yaml.read_text()
    # The script written (it now exits 0), case.yaml left as drafted: fixed where skip is expected, a miss.
    script.write_text(
        unfilled_script.replace(json.dumps(PLACEHOLDER_SIGNATURE), '"boom"').replace(
            'raise NotImplementedError("TODO: write the_call_that_fails()")', "pass"
        )
    )
    assert bugmatrix_run(tmp_path, capsys, "--nproc", "1") == (1, [(1, "fixed", "skip")])
    # case.yaml written (expects fixed), the script left as drafted: skip where fixed is expected, a miss.
    script.write_text(unfilled_script)
    case_yaml.write_text(
        unfilled_yaml.replace("- outcome: skip", "- outcome: fixed").replace("\n        because: untestable", "")
    )  # only a skip rule says why it skips
    assert bugmatrix_run(tmp_path, capsys, "--nproc", "1") == (1, [(1, "skip", "fixed")])


def test_no_committed_case_is_still_a_draft() -> None:
    drafts = [
        p.parent.name
        for p in sorted(CASES.glob("*/repro.py"))
        if NOT_WRITTEN in p.read_text() or PLACEHOLDER_SIGNATURE in (p.parent / "case.yaml").read_text()
    ]
    assert not drafts, f"cases still drafted by `bugmatrix new` (write them first): {', '.join(drafts)}"


def test_new_ends_with_the_command_that_runs_the_draft_and_launches_nothing(tmp_path: Path, capsys) -> None:
    """docs/cases.md and analysis/intake.py said `new` asks you to run the draft at once; it did not, and a draft not
    run leaves the intake "not measured". Its last line now is that command (`new` itself launches nothing)."""
    assert new(tmp_path, "https://github.com/pytorch/pytorch/issues/123456", "--slug", "x") == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("run the draft now: `bugmatrix "), last
    assert f"`bugmatrix --cases-dir {tmp_path} run torch-123456-x`" in last and "not measured" in last
