"""pytorch/pytorch#162692: `DTensor.mean()` is wrong when the tensor is sharded unevenly (silent).

https://github.com/pytorch/pytorch/issues/162692 (fix: https://github.com/pytorch/pytorch/pull/163241)

A full reduction `mean()` over a `Shard(0)` DTensor was computed as each rank's local mean, combined
with `Partial("avg")`, which weights every rank equally. With uneven shards (3 rows over 2 ranks: 2 + 1)
the result is silently wrong (6.5 for arange(12).reshape(3, 4) instead of 5.5); a single row over 2
ranks leaves rank 1 an empty shard whose mean is NaN, and the result is NaN. The fix redistributes an
unevenly sharded input to Replicate before the mean.

    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--rows N] [--workaround]

Every rank initialises a process group (gloo on CPU, nccl on CUDA), builds a 1-D device mesh over all
ranks, shards an (N, 4) tensor on dim 0 and compares `dt.mean()` (made whole on every rank) with the
plain tensor's mean. A world of one (plain `python`) shards nothing unevenly, so it cannot test: 125.

--rows N: rows of the tensor (default 3: uneven, wrong value; 1: an empty shard, NaN).
--workaround: the mean as `dt.sum() / dt.numel()` (a sum is combined with Partial("sum"), which is right
for any sharding).

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA; a world of one; torch without DTensor or init_device_mesh; on CPU, a torch whose gloo has no
ReduceOp.AVG, which the mean's Partial("avg") needs).
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "DTensor.mean is wrong for an unevenly sharded tensor"


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


def dtensor_api():
    """(init_device_mesh, distribute_tensor, Shard, Replicate), public or private spelling; None if absent."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        return None
    try:
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    except ImportError:
        try:
            from torch.distributed._tensor import Replicate, Shard, distribute_tensor
        except ImportError:
            return None
    return init_device_mesh, distribute_tensor, Shard, Replicate


def run_check(args, device, rank, world, api):
    init_device_mesh, distribute_tensor, Shard, Replicate = api
    mesh = init_device_mesh(device.type, (world,))
    tensor = torch.arange(args.rows * 4, dtype=torch.float32, device=device).reshape(args.rows, 4)
    truth = tensor.mean()
    dt = distribute_tensor(tensor, mesh, [Shard(0)])
    local_rows = dt.to_local().shape[0]
    try:
        if args.workaround:
            result = dt.sum() / dt.numel()
        else:
            result = dt.mean()
        whole = result.redistribute(mesh, [Replicate()]).to_local()
    except RuntimeError as e:
        if "Cannot use ReduceOp.AVG with Gloo" not in str(e):
            raise
        # Before torch 2.7 gloo had no AVG, so Partial("avg") (the mean's path) cannot run on CPU at all.
        print(
            f"[rank {rank}] SKIP: torch {torch.__version__}: {e} (DTensor.mean cannot run on a gloo/CPU mesh)",
            flush=True,
        )
        return 125
    print(
        f"[rank {rank}] torch {torch.__version__}: {args.rows}x4 over {world} ranks ({local_rows} rows here); "
        f"{'sum/numel' if args.workaround else 'mean()'} = {whole.item()}, expected {truth.item()}",
        flush=True,
    )
    dist.barrier()
    if not torch.allclose(whole, truth):
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: got {whole.item()}, expected {truth.item()}", flush=True)
        return 1
    print(f"[rank {rank}] OK: the mean is {whole.item()}", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=3, help="rows of the (N, 4) tensor sharded on dim 0")
    parser.add_argument("--workaround", action="store_true", help="sum() / numel() instead of mean()")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    api = dtensor_api()
    if api is None:
        print(f"SKIP: torch {torch.__version__} has no DTensor with init_device_mesh (2.2+)")
        return 125
    device = init_dist(args.device)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if world < 2 or args.rows % world == 0:
            print(
                f"[rank {rank}] SKIP: {args.rows} rows over {world} rank(s) is an even sharding: "
                f"run with torchrun --nproc_per_node=2"
            )
            return 125
        return run_check(args, device, rank, world, api)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
