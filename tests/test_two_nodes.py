"""Two nodes on one machine (`nnodes: 2`): two torchrun agents, a c10d rendezvous on loopback, ranks by global rank,
per-node and per-rank verdicts, a hang on one node that kills both agents, and the names and rows of such a job
(one node, the default, leaves every name, digest and row as it was)."""

from __future__ import annotations

import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.launch import torchrun
from harness.launch.classify import classify
from harness.launch.execute import skip_result
from harness.launch.interpreter import Environment
from harness.model.job import fingerprint, run_digest
from harness.model.outcome import Outcome, RankState, RankStatus, combine
from harness.session.pipeline import LocalEnvironment, Session
from harness.session.plan import Selection, plan_local
from harness.session.record import from_row, to_row
from harness.session.store import ResultStore
from tests.helpers import MakeCase, leftovers, run_one

pytest_plugins = ["pytester"]

FIXED = {"bug": {"expect": [{"outcome": "fixed"}]}}

# What a node-level bug gets wrong: rank vs local rank vs node (GROUP_RANK), and a collective across the nodes.
NODES = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
seen = {k: int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
print(seen)
assert seen["WORLD_SIZE"] == 4 and seen["LOCAL_WORLD_SIZE"] == 2, seen
assert seen["RANK"] == dist.get_rank() == seen["GROUP_RANK"] * 2 + seen["LOCAL_RANK"], seen
total = torch.tensor([float(dist.get_rank())])
dist.all_reduce(total)              # 0 + 1 + 2 + 3, across both nodes
assert total.item() == 6.0, total
dist.destroy_process_group()
"""


def test_two_nodes_of_two_ranks_see_their_ranks_local_ranks_and_nodes(
    make_case: MakeCase, env: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launches: list
) -> None:
    """A 2 x 2 launch: every rank has its global RANK, its LOCAL_RANK on its node and its node's GROUP_RANK, and an
    all_reduce spans both nodes. Asked to launch warm, it launches cold (one warm parent forks one node)."""
    monkeypatch.setenv("BUGMATRIX_LAUNCH_MODE", "warm")
    result = run_one(make_case, env, NODES, nproc=[2], nnodes=2, variants=FIXED)
    assert result.outcome is Outcome.FIXED, result.reason + "\n" + result.log_excerpt
    assert [r.rank for r in result.ranks] == [0, 1, 2, 3]
    assert result.nnodes == 2 and result.extra == {"launch": "cold", "nnodes": 2}
    assert result.item_id == "fake-1-case::bug[cpu-2x2]"
    [launched] = launches
    assert launched.nnodes == 2 and launched.mode == "cold"
    assert {rank: (rec.node, rec.local_rank) for rank, rec in launched.ranks.items()} == {
        0: (0, 0),
        1: (0, 1),
        2: (1, 0),
        3: (1, 1),
    }
    assert "--nnodes=2" in launched.command and "--rdzv_backend=c10d" in launched.command
    assert "--- torchrun node 0 ---" in launched.agent_log and "--- torchrun node 1 ---" in launched.agent_log
    assert leftovers(str(tmp_path)) == []


def test_one_nodes_failing_rank_is_named_and_the_other_node_is_collateral(tmp_path: Path) -> None:
    """Rank 3 (node 1) raises; every other rank, waiting for it in a barrier, is stopped or fails after it: the
    launch's error names rank 3, node 1's verdict is its error and node 0's is collateral. The warm path refuses
    two nodes and says so."""
    script = tmp_path / "repro.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch.distributed as dist
            dist.init_process_group("gloo")
            if dist.get_rank() == 3:
                raise RuntimeError("node 1 broke")
            dist.barrier()
            """
        )
    )
    launched = torchrun.launch(sys.executable, script, [], 2, 60, signature="FAKE-BUG-SIGNATURE", mode="warm", nnodes=2)
    assert launched.mode == "cold" and "2 nodes launches cold" in launched.warm_refused
    outcome, reason, ranks = classify(launched, "FAKE-BUG-SIGNATURE")
    assert outcome is Outcome.ERROR
    assert reason.startswith("rank 3: uncaught RuntimeError: node 1 broke"), reason
    node_of = {rank: rec.node for rank, rec in launched.ranks.items()}
    assert node_of == {0: 0, 1: 0, 2: 1, 3: 1}
    assert "node 1 (ranks 2, 3): error (rank 3)" in reason, reason
    assert "node 0 (ranks 0, 1): collateral (rank 3 of node 1 failed first)" in reason, reason
    states = {s.rank: s for s in ranks}
    assert states[3].state is RankState.ERROR and "node 1 broke" in states[3].detail
    for rank in (0, 1, 2):  # stopped by an agent or the harness, or failed after rank 3 (its connection closed)
        peer = states[rank]
        assert peer.state is RankState.TERMINATED or (
            peer.state is RankState.ERROR and (peer.finished_at or 0) >= (states[3].finished_at or 0)
        ), (rank, peer)
    assert leftovers(str(tmp_path)) == []


def test_a_hang_on_one_node_times_out_with_every_nodes_stacks_and_kills_both_agents(
    make_case: MakeCase, env: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launches: list
) -> None:
    """Rank 3 (node 1) never joins the barrier: the launch times out, every rank's stacks are taken, each node's
    verdict says which of its ranks hung, and neither agent nor any rank outlives the launch."""
    script = """
    import time, torch.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 3:
        time.sleep(3600)      # never joins
    dist.barrier()            # every other rank, on both nodes, waits forever
    """
    result = run_one(make_case, env, script, nproc=[2], nnodes=2, timeout=15)
    assert result.outcome is Outcome.TIMEOUT, result.reason
    assert "node 1 (ranks 2, 3): timed out (hung: rank 2, 3)" in result.reason, result.reason
    assert "node 0 (ranks 0, 1): timed out (hung: rank 0, 1)" in result.reason, result.reason
    for rank in range(4):
        assert f"--- rank {rank} ---" in result.stacks
    assert 'repro.py", line 5' in result.stacks or "repro.py:5" in result.stacks  # rank 3's sleep
    [launched] = launches
    assert launched.timed_out and launched.nnodes == 2
    assert leftovers(str(tmp_path)) == []  # both agents' sessions and every rank were killed


CASE = """
title: fake
upstream: [https://example.invalid/1]
packages: [torch]
nproc: [2]
{nodes}
timeout: 60
signature: FAKE-SIG
variants:
  bug:
    expect: [{{outcome: reproduced}}]
"""


def test_a_two_node_job_has_its_own_name_digest_and_row_and_one_node_keeps_its_own(
    make_case: MakeCase, tmp_path: Path
) -> None:
    """`nnodes: 2` names the job `[cpu-2x2]`, enters its digest and fingerprint, and its results' rows and store
    rows carry `nnodes: 2`; a case with `nnodes: 1` and one without the field are the same job, named, digested
    and recorded as before (no `nnodes` anywhere)."""
    script = "print('ok')\n"
    plain = make_case(script, case_id="fake-1-plain", nproc=[2])
    one = make_case(script, case_id="fake-1-one", nproc=[2], nnodes=1)
    two = make_case(script, case_id="fake-1-two", nproc=[2], nnodes=2)
    [plain_job] = plan_local([plain], Selection(devices=("cpu",)))
    [one_job] = plan_local([one], Selection(devices=("cpu",)))
    [two_job] = plan_local([two], Selection(devices=("cpu",)))
    assert plain_job.id == "fake-1-plain::bug[cpu-2]" and one_job.id == "fake-1-one::bug[cpu-2]"
    assert two_job.id == "fake-1-two::bug[cpu-2x2]"
    assert (plain_job.nnodes, plain_job.world_size, two_job.nnodes, two_job.world_size) == (1, 2, 2, 4)
    # the same script in three folders: one node, said or not, digests alike; two nodes do not
    assert run_digest(plain, "bug") == run_digest(one, "bug") != run_digest(two, "bug")
    assert fingerprint(plain_job, "pins") == fingerprint(one_job, "pins") != fingerprint(two_job, "pins")

    store = ResultStore(tmp_path / "results.db")
    run = store.begin_run("test", "machine")
    for job in (one_job, two_job):
        result = skip_result(job, "not run")
        row = to_row(run, "local", result, "machine")
        assert ("nnodes" in row) is (job.nnodes > 1) and row.get("nnodes", 1) == job.nnodes
        _, _, back = from_row(row)
        assert back.item_id == job.id
        store.save(run, result)
    assert sorted(r.item_id for _, r in store.latest(run)) == ["fake-1-one::bug[cpu-2]", "fake-1-two::bug[cpu-2x2]"]


def test_pytest_items_of_a_two_node_case_say_so(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]')
    for name, nodes in (("fake-1-one", ""), ("fake-2-two", "nnodes: 2")):
        case = pytester.path / "cases" / name
        case.mkdir(parents=True)
        case.joinpath("case.yaml").write_text(CASE.format(nodes=nodes))
        case.joinpath("repro.py").write_text("print('ok')\n")
    result = pytester.runpytest("cases", "--collect-only", "-q", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["cases/fake-1-one/case.yaml::bug?cpu-2?", "cases/fake-2-two/case.yaml::bug?cpu-2x2?"])


@pytest.mark.parametrize(("value", "problem"), [(0, "greater than or equal to 1"), ("two", "valid integer")])
def test_a_bad_nnodes_is_one_line_naming_the_file_and_field(make_case: MakeCase, value: object, problem: str) -> None:
    from harness.model.case_schema import CaseError

    with pytest.raises(CaseError, match=rf"case\.yaml: nnodes: .*{problem}") as caught:
        make_case("print('ok')\n", nnodes=value)
    assert "\n" not in str(caught.value)


def test_an_error_names_the_first_rank_to_fail_not_the_lowest() -> None:
    """Across nodes the lowest rank is often a peer that lost its connection after the real failure: the reason
    names the rank that failed first (by when it recorded its verdict); one without a verdict time comes last."""
    ranks = [
        RankStatus(rank=0, state=RankState.ERROR, detail="Connection closed by peer", finished_at=12.0),
        RankStatus(rank=1, state=RankState.ERROR, detail="died without a verdict", finished_at=None),
        RankStatus(rank=3, state=RankState.ERROR, detail="uncaught RuntimeError: node 1 broke", finished_at=10.0),
    ]
    assert combine(ranks, timed_out=False) == (Outcome.ERROR, "rank 3: uncaught RuntimeError: node 1 broke")


def test_a_rendezvous_port_taken_before_node_0_binds_it_is_retried(
    make_case: MakeCase, env: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launches: list
) -> None:
    """The port is free when the harness picks it, but another process takes it before node 0's agent binds it:
    node 0 fails "address already in use" before any rank started, and the launch is tried again on a new port."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    reserve = torchrun.reserve_port
    calls: list[int] = []

    class Taken:
        """What the harness holds for the first launch: the taken port (closing it frees nothing)."""

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", taken.getsockname()[1])

        def close(self) -> None:
            pass

    def first_one_taken() -> Any:
        calls.append(1)
        return Taken() if len(calls) == 1 else reserve()

    monkeypatch.setattr(torchrun, "reserve_port", first_one_taken)
    try:
        result = run_one(make_case, env, "print('ok')\n", nproc=[1], nnodes=2, variants=FIXED)
    finally:
        taken.close()
    assert result.outcome is Outcome.FIXED, result.reason + "\n" + result.log_excerpt
    [launched] = launches
    assert launched.attempts == 2
    assert leftovers(str(tmp_path)) == []


def test_a_two_node_cuda_job_needs_a_gpu_per_rank_on_every_node(
    make_case: MakeCase, env: Environment, one_gpu: Path
) -> None:
    """Each node pins `cuda:LOCAL_RANK` on GPUs of its own: 2 nodes of 1 rank need 2 GPUs. On a one-GPU machine the
    job is a skip saying so, decided before any launch, and named as the two-node job it is."""
    case = make_case("print('ok')\n", nproc=[1], nnodes=2, devices=["cuda"], variants=FIXED)
    [job] = plan_local([case], Selection(devices=("cuda",)))
    result = Session(LocalEnvironment(env)).run_job(job)
    assert result.outcome is Outcome.SKIP and not result.launched
    assert "world size 2 needs 2 GPUs" in result.reason and "this machine has 1" in result.reason, result.reason
    assert result.item_id == "fake-1-case::bug[cuda-2x1]"
