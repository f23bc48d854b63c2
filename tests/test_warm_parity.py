"""Launch parity (issue 36): two sets of results of the same jobs, launched two ways, compared job by job.

`harness.analysis.compare.launch_parity` matches a result with the other side's result of the same job in the same
environment (case, variant, world size, device, digest, versions; never the cell's name), and says what matched,
what is equal, each difference and what one side alone holds; tools/warm_parity.py compares a store with the
committed record through it (the nightly's warm/cold comparison is replayed in tests/test_nightly.py). The stores
here are written through the Store contract, the record by folding one: nothing is launched.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.analysis.compare import CellParity, launch_parity, parity_json
from harness.model.job import run_digest
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.output.parity import parity_markdown
from harness.session.folding import fold_store
from harness.session.record import Record, write
from harness.session.store import ResultStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import warm_parity  # noqa: E402

R, F, SKIP, FLAKY = Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP, Outcome.FLAKY
V = {"torch": "2.5.0", "fakelib": "1.2"}


def res(
    outcome: Outcome,
    *,
    nproc: int = 1,
    versions: dict[str, str] | None = None,
    digest: str = "d1",
    launch: str | None = "warm",
    launched: bool = True,
    tallies: dict[str, int] | None = None,
    reason: str = "",
    started_at: float = 100.0,
    case: str = "fake-1-case",
) -> Result:
    r = Result(
        case=case,
        variant="bug",
        nproc=nproc,
        device="cpu",
        outcome=outcome,
        expected=None,
        reason=reason or f"{outcome.value} here",
        versions=versions or V,
        launched=launched,
        tallies=tallies or {},
        digest=digest,
        started_at=started_at,
    )
    return r.model_copy(update={"extra": {"launch": launch}}) if launch and launched else r


# --- launch_parity ---------------------------------------------------------------------------------------------


def test_jobs_match_by_job_and_environment_not_by_cell() -> None:
    """The record's `default` and a local run's `local` hold the same job when case, variant, world size, device,
    digest and versions agree; another version or another digest is another job (found on one side only)."""
    record = [
        ("default", res(R, launch=None)),
        ("default", res(F, nproc=2, launch=None)),
        ("default", res(F, versions={"torch": "2.4.0", "fakelib": "1.2"}, launch=None)),
    ]
    store = [
        ("local", res(R)),
        ("local", res(R, nproc=2, reason="REPRODUCED warm")),
        ("local", res(R, versions={"torch": "2.5.0", "fakelib": "1.3"})),
        ("local", res(R, digest="d2")),
    ]
    parity = launch_parity(record, store)
    assert (parity.matched, parity.equal) == (2, 1)
    [differs] = parity.differences
    assert (differs.reference_cell, differs.cell, differs.reference.outcome, differs.other.outcome) == (
        "default",
        "local",
        F,
        R,
    )
    assert [r.versions["torch"] for _, r in parity.only_reference] == ["2.4.0"]
    assert [(r.versions["fakelib"], r.digest) for _, r in parity.only_other] == [("1.3", "d1"), ("1.2", "d2")]
    assert parity.cells() == [CellParity("local", 4, {"warm": 4}, {"unrecorded": 2}, 1, 1, 2)]
    compared = parity_json(parity, ("record", "store"))
    assert (compared["matched"], compared["equal"], compared["differ"]) == (2, 1, 1)
    [difference] = compared["differences"]
    assert difference["nproc"] == 2 and difference["versions"] == V
    assert difference["reference"] == {
        "cell": "default",
        "outcome": "fixed",
        "tally": "",
        "reason": "fixed here",
        "launch": "unrecorded",
    }
    assert difference["other"]["reason"] == "REPRODUCED warm" and difference["other"]["launch"] == "warm"
    assert len(compared["only_reference"]) == 1 and len(compared["only_other"]) == 2
    assert json.loads(json.dumps(compared)) == compared


def test_flaky_results_show_their_tallies_and_unlaunched_ones_compare_by_outcome() -> None:
    """A flaky result differs from a decided one, its tally shown; a result that launched nothing (a skip) is
    compared by outcome as well, and counts in no launch mode."""
    cold = [
        ("c", res(R, launch="cold")),
        ("c", res(SKIP, nproc=2, launched=False)),
        ("c", res(SKIP, nproc=4, launched=False)),
    ]
    warm = [
        ("c", res(FLAKY, tallies={"reproduced": 2, "fixed": 1})),
        ("c", res(SKIP, nproc=2, launched=False)),
        ("c", res(F, nproc=4)),
    ]
    parity = launch_parity(cold, warm)
    assert (parity.matched, parity.equal, len(parity.differences)) == (3, 1, 2)
    assert parity.cells() == [CellParity("c", 3, {"warm": 2}, {"cold": 1}, 1, 2, 0)]
    text = parity_markdown(parity, ("cold", "warm"))
    assert "| c | 3 | warm 2 | cold 1 | 1 | 2 | 0 |" in text
    assert "| c | fake-1-case::bug[cpu-1] | reproduced | flaky (reproduced 2/3, fixed 1/3) | reproduced here |" in text
    assert "| c | fake-1-case::bug[cpu-4] | skip | fixed | skip here | fixed here |" in text
    assert parity_json(parity, ("cold", "warm"))["differences"][1]["reference"]["launch"] is None


def test_a_job_held_twice_on_one_side_is_its_newest_result() -> None:
    """Two cells with the same versions hold the same job: the newer result stands for it (one match, no
    leftover)."""
    parity = launch_parity(
        [("a", res(F, started_at=1.0)), ("b", res(R, started_at=2.0))], [("local", res(R, started_at=3.0))]
    )
    assert (parity.matched, parity.equal, parity.only_reference, parity.only_other) == (1, 1, [], [])
    assert parity.pairs[0].reference_cell == "b"


# --- tools/warm_parity.py --------------------------------------------------------------------------------------


def save(path: Path, *results: tuple[str, Result]) -> Path:
    """A store holding one run of these (cell, result)s, written through the Store contract."""
    db = ResultStore(path)
    run = db.begin_run("bugmatrix run", "host")
    for cell, r in results:
        db.save(run, r, cell=cell)
    db.end_run(run)
    return path


@pytest.fixture
def project(tmp_path: Path, make_case) -> Path:  # noqa: ANN001
    """A case, and a record folded from a cold run of it (cell `default`): the case's script as committed
    (current) at world sizes 1 and 2, an older script's result (superseded) at world size 4."""
    case = make_case("print('REPRODUCED')\n")
    digest = run_digest(case, "bug")
    cold = save(
        tmp_path / "cold.db",
        ("default", res(R, digest=digest, launch=None, reason="REPRODUCED: cold")),
        ("default", res(F, nproc=2, digest=digest, launch=None)),
        ("default", res(R, nproc=4, digest="older-script", launch=None)),
    )
    record = Record()
    fold_store(record, ResultStore(cold, readonly=True), [case])
    write(tmp_path / "record", record)
    (tmp_path / "digest").write_text(digest)
    return tmp_path


def parity_of(project: Path, capsys: pytest.CaptureFixture[str], db: Path, fmt: str) -> tuple[int, str, str]:
    argv = ["--db", str(db), "--record", str(project / "record"), "--cases-dir", str(project / "cases")]
    rc = warm_parity.main([*argv, "--format", fmt])
    said = capsys.readouterr()
    return rc, said.out, said.err


def test_the_tool_compares_a_store_with_the_record(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Per cell of the store: jobs, launches by mode, equal, differ, unmatched; then every difference with both
    outcomes and reasons; exit 1 on a difference, 0 without. The record is read as its readers read it: the
    superseded result (an older script) matches nothing."""
    digest = (project / "digest").read_text()
    same = save(
        project / "same.db",
        ("local", res(R, digest=digest, reason="REPRODUCED: warm")),
        ("local", res(F, nproc=2, digest=digest)),
        ("local", res(R, nproc=4, digest=digest)),  # the current script at 4: the record holds no such result
        ("local", res(SKIP, nproc=8, digest=digest, launched=False)),
    )
    rc, out, err = parity_of(project, capsys, same, "markdown")
    assert (rc, err) == (0, "")
    assert "| local | 4 | warm 3 | unrecorded 2 | 2 | 0 | 2 |" in out
    assert "No difference: 2 of 2 matched job(s) equal." in out and "2 job(s) of store not in record." in out

    differs = save(
        project / "differs.db",
        ("local", res(F, digest=digest, reason="FIXED: warm")),
        ("local", res(F, nproc=2, digest=digest, launch="cold")),
    )
    rc, out, _ = parity_of(project, capsys, differs, "markdown")
    assert rc == 1
    assert "| local | 2 | cold 1, warm 1 | unrecorded 2 | 1 | 1 | 0 |" in out
    assert "| local | fake-1-case::bug[cpu-1] | reproduced | fixed | REPRODUCED: cold | FIXED: warm |" in out
    rc, out, _ = parity_of(project, capsys, differs, "json")
    compared = json.loads(out)
    assert rc == 1 and (compared["reference"], compared["other"], compared["differ"]) == ("record", "store", 1)
    assert compared["cells"] == [
        {
            "cell": "local",
            "jobs": 2,
            "launches": {"cold": 1, "warm": 1},
            "reference_launches": {"unrecorded": 2},
            "equal": 1,
            "differ": 1,
            "unmatched": 0,
        }
    ]
    rc, out, _ = parity_of(project, capsys, differs, "table")
    assert rc == 1 and "1 difference(s)" in out and "FIXED: warm" in out
    assert out.rstrip().endswith("2 job(s) matched, 1 equal, 1 differ")


def test_bad_input_is_one_line_naming_the_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = project / "garbage.db"
    garbage.write_text("not a store")
    store = save(project / "ok.db")
    good = {"--db": str(store), "--record": str(project / "record"), "--cases-dir": str(project / "cases")}
    for bad, named in [
        ({"--db": str(project / "missing.db")}, "missing.db: no such results store (--db)"),
        ({"--db": str(garbage)}, f"{garbage}: not a bugmatrix results store"),
        ({"--record": str(project / "nowhere")}, "nowhere: no such record folder (--record)"),
        ({"--cases-dir": str(project / "nocases")}, "nocases: no such folder (--cases-dir)"),
        ({}, "runs.jsonl"),  # a record file that does not parse (written below)
    ]:
        if not bad:
            (project / "record" / "runs.jsonl").write_text("{not json\n")
        rc = warm_parity.main([word for option, value in (good | bad).items() for word in (option, value)])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("warm_parity: ") and named in err and err.count("\n") == 1, err
