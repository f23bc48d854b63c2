"""TorchRec PR #2484: the sharding planner fails when the default device is "meta".

EmbeddingOffloadScaleupProposer (the planner's cache scale-up search for
FUSED_UVM_CACHING tables) draws its search points with
`LuusJaakolaSearch.uniform()`, which called `torch.rand(1, generator=self.gen).item()`.
`torch.rand` follows the default device, so when the planner runs while the
default device is "meta" (`with torch.device("meta"):`, or
`torch.set_default_device("meta")`, the usual way of building a large model
without allocating it) the random number is a meta tensor and `.item()` raises
    RuntimeError: Tensor.item() cannot be called on meta tensors
Fixed by PR #2484 (commit db9ee39b, 2024-10-29: `torch.rand(..., device="cpu")`),
first released in torchrec 1.1.0.

The script builds an EmbeddingBagCollection under `with torch.device("meta"):` and,
still inside the context, asks EmbeddingShardingPlanner (with
EmbeddingOffloadScaleupProposer, tables constrained to FUSED_UVM_CACHING) for a
plan for a 2-GPU topology. Planning is pure computation: it runs on a CPU-only
host too, and every rank plans on its own (no collective).

    python repro.py [--device cpu|cuda] [--plan-outside-meta]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--plan-outside-meta]

--plan-outside-meta: workaround - build the module under the meta context but call
planner.plan() after leaving it.

Exit code: 0 = the planner returned a plan, 1 = bug reproduced, 125 = cannot test here.
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
from torchrec.distributed.planner.proposers import EmbeddingOffloadScaleupProposer
from torchrec.distributed.types import CacheParams, ShardingType
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection

SIGNATURE = "Tensor.item() cannot be called on meta tensors"


def free_port():
    """A TCP port that is free now: the OS picks it when we bind to port 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_dist(device_type):
    """Join the process group (gloo on CPU, nccl on CUDA); return this rank's device.

    Under plain `python` (no RANK in the environment) this is a world of one on a free port.
    """
    if "RANK" not in os.environ:  # plain `python repro.py`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in os.environ:
            os.environ["MASTER_PORT"] = str(free_port())
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return device


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument(
        "--plan-outside-meta",
        action="store_true",
        help="workaround: leave the meta default-device context before planner.plan()",
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda requested but CUDA is not available")
        return 125

    init_dist(args.device)
    try:
        return check(args, dist.get_rank())
    finally:
        dist.destroy_process_group()


def check(args, rank):
    names = ["t0", "t1", "t2"]
    tables = [
        EmbeddingBagConfig(name=n, embedding_dim=64, num_embeddings=1_000_000,
                           feature_names=[f"f_{n}"])
        for n in names
    ]
    # Cached (UVM caching) tables, so the planner's cache scale-up search runs.
    constraints = {
        n: ParameterConstraints(
            sharding_types=[ShardingType.TABLE_WISE.value],
            compute_kernels=[EmbeddingComputeKernel.FUSED_UVM_CACHING.value],
            cache_params=CacheParams(load_factor=0.1),
        )
        for n in names
    }
    # Plan for two GPUs with 1 GiB HBM each (pure computation; no GPU is used).
    topology = Topology(world_size=2, compute_device="cuda",
                        hbm_cap=1024 ** 3, ddr_cap=64 * 1024 ** 3)
    proposer = EmbeddingOffloadScaleupProposer()
    planner = EmbeddingShardingPlanner(
        topology=topology,
        constraints=constraints,
        proposer=proposer,
    )

    with torch.device("meta"):
        ebc = EmbeddingBagCollection(tables=tables)
        if not args.plan_outside_meta:
            try:
                plan = planner.plan(ebc, [EmbeddingBagCollectionSharder()])
            except RuntimeError as e:
                if SIGNATURE not in str(e):
                    raise
                print(f"[rank {rank}] REPRODUCED: planner.plan() under torch.device('meta') "
                      f"failed: {type(e).__name__}: {SIGNATURE}")
                return 1
    if args.plan_outside_meta:
        plan = planner.plan(ebc, [EmbeddingBagCollectionSharder()])

    if proposer.search is None:  # the LuusJaakolaSearch never started: nothing was tested
        print("SKIP: the planner never started the cache scale-up search")
        return 125
    weight_device = ebc.embedding_bags["t0"].weight.device
    ranks = {
        name: ps.ranks for name, ps in plan.plan[""].items()  # module path "" = ebc
    }
    print(f"[rank {rank}] FIXED: planner returned a plan (weights on {weight_device}); "
          f"ranks {ranks}")
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
