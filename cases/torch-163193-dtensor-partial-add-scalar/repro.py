"""Adding a Python number to a Partial(sum) DTensor adds it once per rank: the result is silently wrong.

Upstream: https://github.com/pytorch/pytorch/issues/163193 (2025-09-17; the older report #149768 is the same bug).
`dt.sum()` of a sharded DTensor is a Partial(sum) DTensor (each rank holds its local sum). For `partial + 10` the
sharding propagation kept the output Partial(sum) and added the number to every rank's local value, so the number
is counted once per rank when the partial is reduced: with 2 ranks, sum(0..9) + 10 comes out as 65 instead of 55.
Adding a 0-dim tensor instead (it becomes a Replicate DTensor, divided across ranks before the add) was right.
Fix: https://github.com/pytorch/pytorch/pull/167813 ("[DTensor][Partial] fixing adding scalar to Partial"): for add
and sub with a number argument, a Partial(sum) input is redistributed (reduced) first.

What the script does: a 2-rank CPU (gloo) or CUDA (nccl) mesh; `torch.arange(10.).reshape(10, 1)` distributed
Shard(0); `s = dt.sum()` (Partial(sum)); then `(s + 10).full_tensor()` and compares it with sum(range(10)) + 10
computed in plain Python.

Usage:
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--operand number|tensor]

    --operand number   (default) the bug: `s + 10`, a Python number
    --operand tensor   workaround: `s + torch.tensor(10.)`, a 0-dim tensor

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (a world of one has nothing to count twice; no
DTensor API in this torch).
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "a number added to a Partial DTensor was counted once per rank"


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
    """(init_device_mesh, distribute_tensor, Shard), from the public module or the older private one; None if absent."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        return None
    try:
        from torch.distributed.tensor import Shard, distribute_tensor
    except ImportError:
        try:
            from torch.distributed._tensor import Shard, distribute_tensor
        except ImportError:
            return None
    return init_device_mesh, distribute_tensor, Shard


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--operand", choices=["number", "tensor"], default="number",
                        help="what to add to the Partial DTensor: a Python number (the bug) or a 0-dim tensor")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if world < 2:
            print("SKIP: a world of one holds the whole sum: a number added per rank is added once")
            return 125
        api = dtensor_api()
        if api is None:
            print(f"SKIP: torch {torch.__version__} has no init_device_mesh / distribute_tensor")
            return 125
        init_device_mesh, distribute_tensor, Shard = api
        mesh = init_device_mesh(args.device, (world,))
        full = torch.arange(10, dtype=torch.float32).reshape(10, 1)
        dt = distribute_tensor(full.to(device), mesh, [Shard(0)])
        s = dt.sum()
        operand = 10 if args.operand == "number" else torch.tensor(10.0, device=device)
        got = (s + operand).full_tensor().item()
        want = float(sum(range(10)) + 10)  # 55.0, in plain Python
        print(f"[rank {rank}] torch {torch.__version__}, world {world}: dt.sum() placements {s.placements}; "
              f"(dt.sum() + {args.operand} 10).full_tensor() = {got}, expected {want}", flush=True)
        dist.barrier()
        if got != want:
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: got {got}, expected {want} "
                  f"(the bug gives {want + 10 * (world - 1)})", flush=True)
            return 1
        print(f"[rank {rank}] OK: partial sum + 10 = {got}", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
