"""TorchRec #2827: state_dict_gather loses int64 precision (managed-collision EBC).

`torchrec.inference.state_dict_transform.state_dict_gather(src, dst)` gathers the
sharded state_dict of a DMP model into a full (unsharded) state_dict on rank 0. For
each ShardedTensor it called `src_tensor.gather(out=dst_tensor)` without a dtype, so
ShardedTensor.gather staged the shards in float32. The int64 buffers of a
managed-collision module (MCHManagedCollisionModule._mch_sorted_raw_ids holds raw
feature ids, usually hashes far above 2**24) come back rounded. Fixed by PR #2826
(commit 367a3239, 2025-03-24: `gather(..., dtype=dst_tensor.dtype)`), first released
in torchrec 1.2.0.

The script shards a ManagedCollisionEmbeddingBagCollection row-wise with
DistributedModelParallel, writes known large raw ids (2**40 + 1 + row; not exactly
representable in float32) into the sharded `_mch_sorted_raw_ids` buffer through its
state_dict shards (they alias the module's buffers; this stands in for ids a trained
model has recorded), then gathers the state_dict into an unsharded copy with
state_dict_gather and compares on rank 0.

    python repro.py [--device cpu|cuda] [--small-ids]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--small-ids]

--small-ids: control - raw ids below 2**24 survive the float32 staging, so the
gather is exact in every release.

Exit code: 0 = gathered ids equal the sharded ones, 1 = bug reproduced (rank 0
reports it; the other ranks only send their shards and exit 0), 125 = cannot test.
"""

import argparse
import gc
import os
import socket
import sys

import torch
import torch.distributed as dist
from torchrec.distributed.mc_embeddingbag import ManagedCollisionEmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise
from torchrec.distributed.types import ShardingPlan
from torchrec.inference.state_dict_transform import state_dict_gather
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.modules.mc_embedding_modules import ManagedCollisionEmbeddingBagCollection
from torchrec.modules.mc_modules import (
    DistanceLFU_EvictionPolicy,
    ManagedCollisionCollection,
    MCHManagedCollisionModule,
)

SIGNATURE = "state_dict_gather changed int64 raw ids"
ZCH_SIZE = 16
KEY = "_managed_collision_collection._managed_collision_modules.t1._mch_sorted_raw_ids"


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


def build(device: torch.device, tables) -> ManagedCollisionEmbeddingBagCollection:
    ebc = EmbeddingBagCollection(tables=tables, device=device)
    mcc = ManagedCollisionCollection(
        {
            "t1": MCHManagedCollisionModule(
                zch_size=ZCH_SIZE,
                device=device,
                eviction_policy=DistanceLFU_EvictionPolicy(),
                eviction_interval=1,
            )
        },
        embedding_configs=tables,
    )
    return ManagedCollisionEmbeddingBagCollection(ebc, mcc, return_remapped_features=False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument(
        "--small-ids",
        action="store_true",
        help="control: raw ids < 2**24 (exact in float32)",
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda requested but CUDA is not available")
        return 125

    device = init_dist(args.device)
    try:
        return check(args, device, dist.get_rank(), dist.get_world_size())
    finally:
        dist.destroy_process_group()


def check(args, device, rank, world_size):
    tables = [EmbeddingBagConfig(name="t1", embedding_dim=8, num_embeddings=ZCH_SIZE,
                                 feature_names=["f1"])]
    mc_ebc = build(torch.device("meta"), tables)
    sharder = ManagedCollisionEmbeddingBagCollectionSharder()
    module_plan = construct_module_sharding_plan(
        mc_ebc,
        per_param_sharding={"t1": row_wise()},
        sharder=sharder,
        local_size=world_size,
        world_size=world_size,
        device_type=device.type,
    )
    model = DistributedModelParallel(
        mc_ebc, device=device, plan=ShardingPlan(plan={"": module_plan}), sharders=[sharder]
    )

    base = 1000 if args.small_ids else 2**40 + 1
    expected = torch.arange(ZCH_SIZE, dtype=torch.int64) + base
    src = model.state_dict()
    raw_ids = src[KEY]
    if not hasattr(raw_ids, "local_shards"):
        raise TypeError(f"{KEY} is a {type(raw_ids).__name__}, expected a ShardedTensor")
    with torch.no_grad():
        for shard in raw_ids.local_shards():
            start = shard.metadata.shard_offsets[0]
            shard.tensor.copy_(expected[start:start + shard.tensor.numel()])

    # Unsharded destination on this rank's device: ShardedTensor.gather receives into buffers on the
    # destination's device, and an NCCL gather takes CUDA tensors only (a CPU destination under NCCL
    # fails with "ProcessGroupNCCL::gather: invalid tensor type"); on CPU (gloo) this is the CPU copy.
    dst = build(device, tables).state_dict()
    state_dict_gather(src, dst)

    verdict = 0
    if rank == 0:  # state_dict_gather fills `dst` on rank 0 only
        got = dst[KEY].cpu()
        if not torch.equal(got, expected):
            bad = int((got != expected).sum())
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: {bad}/{ZCH_SIZE} differ, "
                  f"e.g. {expected[:3].tolist()} -> {got[:3].tolist()} "
                  f"(staged through float32)", flush=True)
            verdict = 1
        else:
            print(f"[rank {rank}] FIXED: gathered {got.dtype} raw ids are exact "
                  f"({got[:3].tolist()} ...)", flush=True)
    else:
        print(f"[rank {rank}] sent its shard to rank 0 (only rank 0 receives the gathered "
              f"state_dict and decides)", flush=True)
    # Drop the sharded module and state_dicts before teardown: without this, a rank hung at
    # interpreter exit (after destroy_process_group) in about 1 of 2 two-rank runs (gloo).
    del model, src, dst, raw_ids, mc_ebc
    gc.collect()
    dist.barrier()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
