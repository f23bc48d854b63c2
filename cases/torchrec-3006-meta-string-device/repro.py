"""TorchRec #3006: EmbeddingCollection(device="meta") breaks DistributedModelParallel.

ShardedEmbeddingCollection.__init__ skips copying the unsharded weights only when
`module.device != torch.device("meta")` is False. EmbeddingCollection stores the
`device` argument as given, and the string "meta" never equals torch.device("meta"),
so DMP tries to load_state_dict() out of meta tensors:
    Cannot copy out of meta tensor; no data!

    python repro.py [--device cpu|cuda] [--device-object]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--device-object]

Exit code: 0 = DMP wraps the meta-device EmbeddingCollection, 1 = bug reproduced,
125 = cannot test here.
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
from torchrec.distributed.embedding import EmbeddingCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise
from torchrec.distributed.types import ShardingPlan
from torchrec.modules.embedding_configs import EmbeddingConfig
from torchrec.modules.embedding_modules import EmbeddingCollection

SIGNATURE = "Cannot copy out of meta tensor"
HELD = []  # collective work kept alive until the process group is destroyed (see the end of `check`)


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
        "--device-object",
        action="store_true",
        help='workaround: pass device=torch.device("meta") instead of the string "meta"',
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
        HELD.clear()  # the last references, dropped here by the main thread once gloo's worker is gone


def check(args, device, rank, world_size):
    tables = [
        EmbeddingConfig(name="t1", embedding_dim=8, num_embeddings=100, feature_names=["f1"])
    ]
    meta = torch.device("meta") if args.device_object else "meta"
    ec = EmbeddingCollection(tables=tables, device=meta)
    print(f"[rank {rank}] EmbeddingCollection(device={meta!r}); weight on "
          f"{ec.embeddings['t1'].weight.device}")

    # Pin the plan (t1 row-wise: a shard on every rank) so the planner plays no part.
    sharder = EmbeddingCollectionSharder()
    module_plan = construct_module_sharding_plan(
        ec,
        per_param_sharding={"t1": row_wise()},
        sharder=sharder,
        local_size=world_size,
        world_size=world_size,
        device_type=device.type,
    )
    plan = ShardingPlan(plan={"": module_plan})

    try:
        model = DistributedModelParallel(ec, device=device, plan=plan, sharders=[sharder])
    except (RuntimeError, NotImplementedError) as e:
        if SIGNATURE not in str(e):
            raise
        print(f"[rank {rank}] REPRODUCED: DistributedModelParallel failed: "
              f"{type(e).__name__}: {SIGNATURE}; no data!")
        return 1

    shapes = {k: tuple(v.size()) for k, v in model.state_dict().items()}
    print(f"[rank {rank}] FIXED: DistributedModelParallel wrapped the meta EmbeddingCollection; "
          f"state_dict {shapes}")
    # Without this barrier, a rank hung at exit about 1 run in 4 (torch 2.6.0, gloo, 2 ranks). The barrier's work
    # is held until after destroy_process_group: it holds the earlier collectives' work (state_dict's all-gathers),
    # and if gloo's worker thread dropped the last reference it would free their tensors' Python objects, which
    # needs the GIL that the main thread holds while it joins that worker in ~ProcessGroupGloo: a deadlock (py-spy,
    # torch 2.7.1 + torchrec 1.2.0, 2 ranks; the same as torch-103585's teardown hang).
    work = dist.barrier(async_op=True)
    work.wait()
    HELD.append(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
