"""OSV advisories as right as `bugmatrix audit` (issue 34, item 6) and the published feed (item 7): every exported
advisory validates against the official OSV JSON schema (vendored, pinned: tests/schemas/README.md); on
environments of our own, a scanner's answer (OSV's matching, written here from the schema's text, not the
harness's) holds audit's affected answer, and each extra is explained by what the advisory says of itself; a fix
an advisory offers is one audit agrees with; osv.dev's layout for offline scanners; the nightly publishes it."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import jsonschema
import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from harness.analysis import audit as audit_module
from harness.analysis.osv import deciding, documents
from harness.cli import main
from harness.model.case import Case, every_case
from harness.model.outcome import Outcome
from harness.model.requirements import Pin, parse_pins
from harness.session.readers import open_reader
from harness.session.record import Record, load, write
from tests.helpers import DAY, RUN, audit_row, osv_docs

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent / "schemas" / "osv-schema.json"
SCHEMA_SHA256 = "7a511902b57297197b37298f6adaa2acb15f22b3f641bb9f547f19dcbe533ba8"  # tests/schemas/README.md


# ------------------------------------------------------------------------------------------------------ schema


def _validator() -> jsonschema.Draft202012Validator:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256, "the vendored schema changed"
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def _invalid(docs: dict[str, dict]) -> list[str]:
    validator = _validator()
    return [
        f"{vuln_id}: {'/'.join(map(str, e.absolute_path))}: {e.message[:160]}"
        for vuln_id, doc in docs.items()
        for e in validator.iter_errors(doc)
    ]


@pytest.fixture(scope="module")
def real() -> dict:
    """The clone's own cases and record: the advisories, the results audit reads, what it knows."""
    cases = every_case(ROOT / "cases")
    results = open_reader(None, False, cases, ROOT / "record").latest()
    docs = documents(results, cases, load(ROOT / "record").releases)
    return {
        "cases": cases,
        "results": results,
        "docs": docs,
        "auditor": audit_module.Auditor(results, cases),
        "known": audit_module.known_packages(results, cases),
    }


def test_every_advisory_validates_against_the_official_osv_schema(
    real: dict,
    world: dict,
    gated: dict,
) -> None:
    """cd5612d: every record failed the current schema on its id (`BUGMATRIX-...`: the schema's id pattern takes a
    known database's prefix or `x_` for a local one)."""
    assert real["docs"] and _invalid(real["docs"]) == []
    for synthetic in (world, gated):
        assert _invalid(osv_docs(synthetic)) == []
    [doc] = [d for d in real["docs"].values() if d["affected"]][:1]
    assert _invalid({"bad": {**doc, "id": "BUGMATRIX-x"}})  # the validator does refuse the old form
    assert _invalid({"bad": {**doc, "modified": "2026-11-27 12:00"}})


# ------------------------------------------------------------------------------------- a scanner, from the schema


def _includes(events: list[dict[str, str]], version: Version) -> bool:
    """The schema's evaluation of one ECOSYSTEM/SEMVER range: events sorted by version ("0" first); an introduced
    at or below the version makes it affected, a fixed or limit at or below it, or a last_affected below it, not."""

    def at(event: dict[str, str]) -> Version:
        return Version("0") if next(iter(event.values())) == "0" else Version(next(iter(event.values())))

    affected = False
    for event in sorted(events, key=at):
        kind = next(iter(event))
        if kind == "introduced" and version >= at(event):
            affected = True
        elif kind in ("fixed", "limit") and version >= at(event) or kind == "last_affected" and version > at(event):
            affected = False
    return affected


def scanner(docs: dict[str, dict], installed: dict[str, str]) -> set[str]:
    """The advisories a scanner reports for `installed` (distribution -> version): an affected entry whose
    package is installed at a version its `versions` list or one of its ranges holds (the local tag dropped)."""
    found = set()
    for vuln_id, doc in docs.items():
        for entry in doc["affected"]:
            name = canonicalize_name(entry["package"]["name"])
            if entry["package"]["ecosystem"] != "PyPI" or name not in installed:
                continue
            version = Version(Version(installed[name]).public)
            if str(version) in entry.get("versions", []) or any(
                _includes(r["events"], version) for r in entry.get("ranges", []) if r["type"] in ("ECOSYSTEM", "SEMVER")
            ):
                found.add(vuln_id)
    return found


def test_the_scanner_here_reads_ranges_as_the_schema_says() -> None:
    runs = [{"introduced": "0"}, {"fixed": "2.4.0"}, {"introduced": "2.6"}]
    assert [_includes(runs, Version(v)) for v in ("1.0", "2.3.9", "2.4.0", "2.5.2", "2.6.0", "9")] == [
        True,
        True,
        False,
        False,
        True,
        True,
    ]
    last = [{"introduced": "1.1.0"}, {"last_affected": "1.1.0"}]
    assert [_includes(last, Version(v)) for v in ("1.0.9", "1.1.0", "1.1.1")] == [False, True, False]
    docs = {
        "a": {
            "affected": [
                {"package": {"ecosystem": "PyPI", "name": "Pytorch_Lightning"}, "versions": ["1.0"], "ranges": []}
            ]
        }
    }
    assert scanner(docs, {"pytorch-lightning": "1.0+cpu"}) == {"a"}
    assert scanner(docs, {"pytorch-lightning": "1.1"}) == set()


# --------------------------------------------------------------------------------- the export against audit


ENVIRONMENTS = [  # the four, then others of our own (every package a case there needs is pinned)
    "torch==2.2.1",
    "lightning==2.5.2 torch==2.7.0",
    "litgpt==0.5.8 lightning==2.6.5 torch==2.14.1",
    "torchrec==1.2.0 fbgemm-gpu-cpu==1.2.0 torch==2.7.0",
    "lightning==2.3.3 torch==2.6.0",
    "lightning==2.6.6 torch==2.12.0",
    "pytorch-lightning==2.0.9 torch==2.0.1",
    "litgpt==0.5.12 lightning==2.6.6 torch==2.9.1 transformers==4.52.1",
    "litgpt==0.4.13 lightning==2.4.0 torch==2.4.1 transformers==4.44.2",
    "torchrec==1.1.0 fbgemm-gpu-cpu==1.1.0 torch==2.6.0",
    "torchrec==1.9.2 fbgemm-gpu-cpu==1.9.0 torch==2.14.1",
    "torchrec==1.0.0 fbgemm-gpu==1.0.0 torch==2.5.1",
    "torch==2.6.0",
    "torch==2.7.0",
    "torch==2.11.0",
    "torch==2.15.0",
    "torch==2.16.0",
]


def _installed(env: str) -> dict[str, str]:
    return {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in env.split()}


def _audit(data: dict, env: str, device: str) -> tuple[set[tuple[str, str]], set[str]]:
    """Audit's affected (case, variant) at `env` on `device`, and the cases it cannot answer for want of a pin."""
    target = audit_module.target_of(*parse_pins(env.split()), data["known"])
    answers = audit_module.audit(data["results"], data["cases"], target, device, auditor=data["auditor"])
    unpinned = audit_module.unpinned(data["results"], data["cases"], target, device, auditor=data["auditor"])
    wanting = {case for u in unpinned for case in u.why.split("decides ")[1].split(" (pin")[0].split(", ")}
    return {(a.case, a.variant) for a in audit_module.by_kind(answers)["affected"]}, wanting


def _why_extra(doc: dict, installed: dict[str, str], wanting: set[str]) -> str:
    """Why an advisory a scanner reports is not audit's affected answer, as the advisory itself says (else "")."""
    said = doc["database_specific"]
    names = {canonicalize_name(e["package"]["name"]) for e in doc["affected"]}
    if said["device"] != "cpu":
        assert "fbgemm-gpu-cpu" not in names, doc["id"]  # a CUDA advisory never names a CPU-only wheel
        return f"measured on {said['device']} only"
    if said["coupling"]:
        return f"a coupling OSV ORs: {', '.join(said['coupling'])}"
    primary = {"fbgemm-gpu": {"fbgemm-gpu", "fbgemm-gpu-cpu"}, "lightning": {"lightning", "pytorch-lightning"}}.get(
        said["primary"], {said["primary"]}
    )
    if said["listed"] != said["primary"] and not primary & set(installed):
        return f"lists {said['listed']}; the case needs {said['primary']}, not installed"
    if said["case"] in wanting:
        return "audit asks for a pin first (not covered)"
    return ""


def _check(data: dict, docs: dict[str, dict], env: str) -> list[str]:
    installed = _installed(env)
    found = scanner(docs, installed)
    wrong = []
    for device in ("cpu",) if "fbgemm-gpu-cpu" in installed else ("cpu", "cuda"):  # a CPU wheel: a CPU install
        mine = {vuln_id for vuln_id, d in docs.items() if d["database_specific"]["device"] == device}
        affected, wanting = _audit(data, env, device)
        by_item = {
            (d["database_specific"]["case"], d["database_specific"]["variant"]): vuln_id
            for vuln_id, d in docs.items()
            if vuln_id in mine
        }
        for item in sorted(affected):
            if item in by_item and by_item[item] not in found:
                wrong.append(f"{env} on {device}: audit says {item} applies, the scanner does not")
        for vuln_id in sorted(found & mine):
            doc = docs[vuln_id]
            item = (doc["database_specific"]["case"], doc["database_specific"]["variant"])
            if item not in affected and not _why_extra(doc, installed, wanting):
                wrong.append(
                    f"{env} on {device}: the scanner reports {vuln_id}, audit does not, and nothing "
                    "the advisory says explains it"
                )
        if device == "cpu":  # every advisory audit answers affected on the CPU has one
            wrong += [
                f"{env}: {item} affected and no advisory"
                for item in sorted(affected - set(by_item))
                if not any(d["database_specific"]["case"] == item[0] for d in docs.values())
            ]
    return wrong


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_scanner_holds_audits_affected_answer_and_explains_every_extra(real: dict, env: str) -> None:
    """cd5612d: lightning-21757 (listed as lightning `introduced: 0`) at lightning 2.5.2 + torch 2.7.0, measured
    fixed; torchrec-2895's torch range `[0, 2.7.1)` at torch 2.2.1 alone; torch-143828 (variants OR-ed) at torch
    2.2.1, where audit cannot say; the CUDA-only advisories on a CPU install through fbgemm-gpu-cpu."""
    assert _check(real, real["docs"], env) == []


def test_the_synthetic_records_too(world: dict, gated: dict) -> None:
    for synthetic, envs in (
        (
            world,
            [
                "torch==2.1.2",
                "torch==2.6.0 lightning==2.3.3",
                "torch==2.6.0 lightning==2.5.1",
                "torch==2.5.1 lightning==2.6.6",
                "torchrec==1.0.0 fbgemm-gpu-cpu==1.0.0 torch==2.5.0",
            ],
        ),
        (gated, ["torch==2.0.1", "torch==2.2.1", "torch==2.5.0", "torch==2.6.0", "torch==2.9.5", "torch==2.12.1"]),
    ):
        results = open_reader(None, False, synthetic["cases"], synthetic["root"]).latest()
        data = {
            "cases": synthetic["cases"],
            "results": results,
            "auditor": audit_module.Auditor(results, synthetic["cases"]),
            "known": audit_module.known_packages(results, synthetic["cases"]),
        }
        docs = osv_docs(synthetic)
        for env in envs:
            assert _check(data, docs, env) == []


def test_lightning_21757_is_listed_on_lightning_alone_without_2_4_to_2_5(real: dict) -> None:
    """cd5612d exported lightning-21757 as lightning `introduced: 0` with no torch condition: every lightning was
    flagged, 2.5.2 (measured fixed with torch 2.7.0) too. OSV cannot say `and`: the advisory lists lightning with
    lightning's own range, and names torch's in the coupling."""
    doc = real["docs"]["x_BUGMATRIX-lightning-21757-lr-finder-weights-only"]
    assert {e["package"]["name"] for e in doc["affected"]} == {"lightning", "pytorch-lightning"}
    assert "x_BUGMATRIX-lightning-21757-lr-finder-weights-only" not in scanner(
        real["docs"], _installed("lightning==2.5.2 torch==2.7.0")
    )
    assert "x_BUGMATRIX-lightning-21757-lr-finder-weights-only" in scanner(
        real["docs"], _installed("lightning==2.6.6 torch==2.9.1")
    )
    assert set(doc["database_specific"]["coupling"]) == {"lightning", "torch"}


def test_each_variant_is_its_own_advisory_and_a_fix_offered_is_one_audit_agrees_with(real: dict) -> None:
    """cd5612d OR-ed torch-143828's variants into one range, `fixed 2.7.0, introduced 2.7.1`: a torch user below
    2.7 was offered 2.7.0, where the empty-group-first variant reproduces (measured). The case is split by
    variant; every `fixed` an advisory holds is a version where audit says that variant is not affected."""
    docs = real["docs"]
    first = docs["x_BUGMATRIX-torch-143828-dsd-empty-param-group"]
    second = docs["x_BUGMATRIX-torch-143828-dsd-empty-param-group.bug-empty-group-first"]
    assert (first["database_specific"]["variant"], second["database_specific"]["variant"]) == (
        "bug",
        "bug-empty-group-first",
    )
    assert first["related"] == [second["id"]] and second["related"] == [first["id"]]
    at_270 = scanner(docs, {"torch": "2.7.0"})
    assert second["id"] in at_270 and first["id"] not in at_270
    checked = 0
    by_id = {c.id: c for c in real["cases"]}
    for doc in docs.values():
        said = doc["database_specific"]
        if said["coupling"] or not doc["affected"]:
            continue
        case, entry = by_id[said["case"]], doc["affected"][0]
        cells = real["auditor"].cells(case.id, said["variant"], said["device"])
        newest = {
            p: max(
                (c.versions[p] for c in cells if p in c.versions and " @ " not in c.versions[p]),
                key=Version,
                default="0",
            )
            for p in deciding(real["auditor"], case, said["variant"], said["device"])
        }
        for fixed in {e["fixed"] for r in entry["ranges"] for e in r["events"] if "fixed" in e}:
            pins = {p: Pin(p, fixed if p == said["listed"] else v) for p, v in newest.items()}
            answer = real["auditor"].answer(case, said["variant"], audit_module.Target(pins), said["device"])
            assert not answer.affected, (doc["id"], fixed, answer.precision)
            checked += 1
    assert checked > 40


def test_a_package_is_listed_only_where_it_decides_and_a_cuda_advisory_names_no_cpu_wheel(real: dict) -> None:
    """cd5612d: torchrec-2895 carried a torch range `[0, 2.7.1)` although no torch version decides it, and the
    CUDA-only advisories named fbgemm-gpu-cpu (a CPU install matched them)."""
    docs = real["docs"]
    gauc = docs["x_BUGMATRIX-torchrec-2895-gauc-ignores-weights"]
    assert {e["package"]["name"] for e in gauc["affected"]} == {"torchrec"}
    assert [r["events"] for r in gauc["affected"][0]["ranges"]] == [[{"introduced": "1.1.0"}, {"fixed": "1.2.0"}]]
    for doc in docs.values():
        said = doc["database_specific"]
        case = next(c for c in real["cases"] if c.id == said["case"])
        assert said["listed"] is None or said["listed"] in deciding(
            real["auditor"], case, said["variant"], said["device"]
        ), doc["id"]
        for entry in doc["affected"]:
            assert entry["database_specific"]["device"] == said["device"]
            if said["device"] == "cuda":
                assert entry["package"]["name"] != "fbgemm-gpu-cpu", doc["id"]
    cuda = [d for d in docs.values() if d["database_specific"]["device"] == "cuda" and d["affected"]]
    assert cuda and all("Only measured on cuda" in d["details"] for d in cuda)
    assert not scanner({d["id"]: d for d in cuda}, {"fbgemm-gpu-cpu": "1.2.0"})


@pytest.fixture
def regression(tmp_path: Path, make_case, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: ANN001
    """torch-6-regress: measured fixed at 2.1.0 and 2.2.0, reproduced at 2.5.0 and 2.6.0; the releases between,
    2.3.0 and 2.4.0, listed and not run; the rules put the regression at 2.3."""
    monkeypatch.chdir(tmp_path)
    case = make_case(
        "print('r')\n",
        case_id="torch-6-regress",
        upstream=["https://example.invalid/torch/issues/6"],
        variants={"bug": {"expect": [{"when": {"torch": "<2.3"}, "outcome": "fixed"}, {"outcome": "reproduced"}]}},
    )
    F, R = Outcome.FIXED, Outcome.REPRODUCED
    rows = [
        audit_row(case, "bug", f"torch-{v}", {"torch": v}, o, DAY + i)
        for i, (v, o) in enumerate([("2.1.0", F), ("2.2.0", F), ("2.5.0", R), ("2.6.0", R)])
    ]
    releases = {"torch": {f"2.{m}.0": {"date": f"2025-0{m}-01T00:00:00Z"} for m in range(1, 7)}}
    root = tmp_path / "rec"
    write(
        root,
        Record(
            rows=rows,
            runs={RUN: {"started": "2026-12-01T00:00:00Z", "machine": "m-test", "command": "test"}},
            releases=releases,
        ),
    )
    return {"root": root, "cases": [case], "cases_dir": case.folder.parent, "tmp": tmp_path}


def test_the_releases_not_run_between_a_regressions_sides_are_answered_as_audit_answers_them(regression: dict) -> None:
    """cd5612d wrote the regression at the first release measured reproducing (`introduced: 2.5.0`), so 2.3.0 and
    2.4.0 were not reported although its text said the releases not run were reported affected. The range is
    audit's answer there: the rules put the boundary at 2.3 (not measured), and the precision says so."""
    docs = osv_docs(regression)
    [entry] = docs["x_BUGMATRIX-torch-6-regress"]["affected"]
    assert [r["events"] for r in entry["ranges"]] == [[{"introduced": "2.3.0"}]]
    assert "from the case's rules (not measured)" in entry["database_specific"]["precision"][0]
    results = open_reader(None, False, regression["cases"], regression["root"]).latest()
    data = {
        "cases": regression["cases"],
        "results": results,
        "auditor": audit_module.Auditor(results, regression["cases"]),
        "known": audit_module.known_packages(results, regression["cases"]),
    }
    for v in ("2.2.0", "2.3.0", "2.4.0", "2.5.0", "2.7.0"):
        assert _check(data, docs, f"torch=={v}") == []
        assert (("torch-6-regress", "bug") in _audit(data, f"torch=={v}", "cpu")[0]) == (v != "2.2.0")


# -------------------------------------------------------------------------------------------- the feed (item 7)


def test_export_zip_writes_osv_devs_layout_for_offline_scanners(
    world: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`osv export --zip ROOT`: ROOT/PyPI/all.zip holds one `<id>.json` per advisory (what osv-scanner's offline
    mode reads as <cache>/osv-scanner/PyPI/all.zip), each valid; ROOT/PyPI/modified_id.csv and ROOT/modified_id.csv
    index them newest first; the same record gives the same bytes."""
    root = tmp_path / "cache" / "osv-scanner"
    args = ["--cases-dir", str(world["cases_dir"]), "osv", "export", "--zip", str(root), "--record", str(world["root"])]
    assert main(args) == 0
    first = (root / "PyPI" / "all.zip").read_bytes()
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        members = {name: json.loads(archive.read(name)) for name in archive.namelist()}
    docs = osv_docs(world)
    assert members == {f"{vuln_id}.json": doc for vuln_id, doc in docs.items()}
    assert _invalid({n: d for n, d in members.items()}) == []
    lines = (root / "PyPI" / "modified_id.csv").read_text().splitlines()
    assert sorted(lines, reverse=True) == lines and {line.split(",")[1] for line in lines} == set(docs)
    assert all(line.split(",")[0] == docs[line.split(",")[1]]["modified"] for line in lines)
    assert (root / "modified_id.csv").read_text().splitlines() == [line.replace(",", ",PyPI/") for line in lines]
    assert {p.name for p in (root / "PyPI").glob("*.json")} == {f"{i}.json" for i in docs}
    assert main(args) == 0 and (root / "PyPI" / "all.zip").read_bytes() == first
    capsys.readouterr()
    assert main(["--cases-dir", str(world["cases_dir"]), "osv", "export", "--record", str(world["root"])]) == 2
    assert "give DIR, --zip ROOT, or both" in capsys.readouterr().err


def test_the_nightly_feed_step_writes_the_feed_beside_the_site_dated(
    world: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    site = tmp_path / "site"
    base = [
        "--cases-dir",
        str(world["cases_dir"]),
        "nightly",
        "feed",
        "--record",
        str(world["root"]),
        "--site",
        str(site),
    ]
    assert main([*base, "--date", "2026-11-28"]) == 0
    assert (site / "osv" / "PyPI" / "all.zip").read_bytes() == (
        site / "osv" / "2026-11-28" / "PyPI" / "all.zip"
    ).read_bytes()
    capsys.readouterr()
    assert main([*base, "--date", "2026-1-1"]) == 2
    assert "--date '2026-1-1': not a date (YYYY-MM-DD)" in capsys.readouterr().err


def test_the_schema_is_vendored_with_its_source_named() -> None:
    readme = (SCHEMA.parent / "README.md").read_text()
    assert SCHEMA.name in readme and SCHEMA_SHA256 in readme and "ossf/osv-schema" in readme


def test_every_case_has_an_advisory_and_its_first_bug_variant_the_case_id(real: dict) -> None:
    cases: list[Case] = real["cases"]
    ids = set(real["docs"])
    recorded = {r.case for _, r in real["results"]}
    for case in cases:
        if case.id in recorded:
            assert f"x_BUGMATRIX-{case.id}" in ids, case.id


# ------------------------------------------------------------------- audit, whose answers the ranges project


@pytest.fixture
def crossing(tmp_path: Path, make_case, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: ANN001
    """torch-7-cross: the rules put a fix boundary at 2.5 (`torch <2.5: fixed`), measured reproducing at 2.6.0 and
    2.7.0 only. torch-8-wrong: the same measurements, but its rules say fixed from 2.6 (they disagree with them)."""
    monkeypatch.chdir(tmp_path)
    cross = make_case(
        "print('c')\n",
        case_id="torch-7-cross",
        upstream=["https://example.invalid/torch/issues/7"],
        variants={"bug": {"expect": [{"when": {"torch": "<2.5"}, "outcome": "fixed"}, {"outcome": "reproduced"}]}},
    )
    wrong = make_case(
        "print('w')\n",
        case_id="torch-8-wrong",
        upstream=["https://example.invalid/torch/issues/8"],
        variants={"bug": {"expect": [{"when": {"torch": ">=2.6"}, "outcome": "fixed"}, {"outcome": "reproduced"}]}},
    )
    rows = [
        audit_row(case, "bug", f"torch-{v}", {"torch": v}, Outcome.REPRODUCED, DAY + i)
        for case in (cross, wrong)
        for i, v in enumerate(["2.6.0", "2.7.0"])
    ]
    root = tmp_path / "rec"
    write(
        root, Record(rows=rows, runs={RUN: {"started": "2026-12-01T00:00:00Z", "machine": "m-test", "command": "test"}})
    )
    return {"root": root, "cases": [cross, wrong], "cases_dir": cross.folder.parent, "tmp": tmp_path}


def test_audit_never_extrapolates_across_a_boundary_the_rules_put_between(crossing: dict) -> None:
    """cd5612d: torch 2.3.0 was AFFECTED by torch-7-cross, extrapolated from 2.6.0 (before the oldest measured
    release) across the rules' boundary at 2.5, where they agree with the measurement at 2.6.0 (in the real record:
    lightning-21757 at lightning 2.5.1 + torch 2.9.1, read from lightning 2.6.0 though the rules put lightning 2.4 to
    2.6 fixed; so every lightning was in its OSV range). Where the rules disagree with the measurement itself
    (torch-8-wrong), the measurement is extrapolated as before."""
    results = open_reader(None, False, crossing["cases"], crossing["root"]).latest()
    known = audit_module.known_packages(results, crossing["cases"])
    answers = {
        a.case: a
        for a in audit_module.audit(
            results, crossing["cases"], audit_module.target_of(*parse_pins(["torch==2.3.0"]), known)
        )
    }
    cross, wrong = answers["torch-7-cross"], answers["torch-8-wrong"]
    assert (cross.status, cross.basis, cross.kind) == ("fixed", "rules", "not_affected")
    assert "across a boundary the case's rules put between" in cross.precision
    assert (wrong.status, wrong.basis) == ("reproduced", "extrapolated")
    docs = osv_docs(crossing)
    assert [r["events"] for r in docs["x_BUGMATRIX-torch-7-cross"]["affected"][0]["ranges"]] == [
        [{"introduced": "2.5"}]
    ]


@pytest.mark.parametrize("fixed_runs", [40, 1], ids=["fixed-with-the-clean-runs-it-needs", "one-clean-run"])
def test_a_flaky_range_states_its_rate_and_the_confidence_of_its_fix(make_case, fixed_runs: int) -> None:  # noqa: ANN001
    from tests.helpers import flaky_results

    case = make_case("print('x')\n", case_id="torch-4-flaky", variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    releases = {"torch": {v: {} for v in ("2.6.0", "2.7.0", "2.7.1", "2.8.0")}}
    [doc] = documents(flaky_results(case, fixed_runs), [case], releases).values()
    [affected] = doc["affected"]
    [events] = [r["events"] for r in affected["ranges"]]
    [precision] = affected["database_specific"]["precision"]
    assert events[0] == {"introduced": "2.7.0"} and "flaky: 9/24 reproduced" in precision, (events, precision)
    if fixed_runs == 40:
        assert events[1] == {"fixed": "2.8.0"}
        assert "fixed in 2.8.0 (2.7.1: 8/24 reproduced; 2.8.0: 0/40; confidence 0.9" in precision, precision
    else:  # a version with too few clean runs is never called fixed: the range ends at the last flaky release
        assert events[1] == {"last_affected": "2.7.1"}, events
        assert "2.8.0: not called fixed, could not decide between 2.7.1 and 2.8.0" in precision, precision
