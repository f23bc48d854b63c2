"""Multiplying a Partial(sum) DTensor by a Python number reuses the first number: every later product is wrong.

Upstream: https://github.com/pytorch/pytorch/issues/153603 (2025-05-15, "module: correctness (silent)"; the same
symptom as the older #147180, `-5 * dt == 2 * dt`). After a reduction (`dx.sum()`, `dx.mean()`) the DTensor is
Partial(sum); `dy * 2` after `dy * 1` returned the result of `dy * 1` again: the sharding propagation cache, whose key
leaves out scalar arguments, handed back a cached output sharding whose redistributed arguments still carried the
first number, and the local multiplication ran with it. Multiplying by a tensor was right.

What the script does: a 2-rank CPU (gloo) or CUDA (nccl) mesh; rank r holds [r + 1.] as Shard(0)
(`DTensor.from_local`), `dy = dx.sum()` (Partial(sum), value 3); then for m in 1, 2, 3 computes
`(dy * m).full_tensor()` and compares it with 3 * m computed in plain Python.

Usage:
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--operand number|tensor]

    --operand number   (default) the bug: `dy * m`, a Python number
    --operand tensor   workaround: `dy * torch.tensor(float(m))`, a 0-dim tensor

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (a world of one; DTensor not importable here).
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "a Partial DTensor times a number reused an earlier number"


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
    """(init_device_mesh, DTensor, Shard), public module or the older private one; or the ImportError's text."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as e:
        return str(e)
    try:
        from torch.distributed.tensor import DTensor, Shard
    except ImportError:
        try:
            from torch.distributed._tensor import DTensor, Shard
        except ImportError as e:  # e.g. torch 2.2's DTensor imports numpy
            return str(e)
    return init_device_mesh, DTensor, Shard


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--operand", choices=["number", "tensor"], default="number",
                        help="multiply by a Python number (the bug) or by a 0-dim tensor")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if world < 2:
            print("SKIP: a world of one has no partial sum (the reduction's result is whole)")
            return 125
        api = dtensor_api()
        if isinstance(api, str):
            print(f"SKIP: torch {torch.__version__}: DTensor cannot be imported here: {api}")
            return 125
        init_device_mesh, DTensor, Shard = api
        mesh = init_device_mesh(args.device, (world,))
        dx = DTensor.from_local(torch.tensor([rank + 1.0], device=device), mesh, [Shard(0)])
        dy = dx.sum()
        total = float(sum(r + 1 for r in range(world)))  # 3.0 with 2 ranks, in plain Python
        got, want = [], []
        for m in (1, 2, 3):
            operand = m if args.operand == "number" else torch.tensor(float(m), device=device)
            got.append((dy * operand).full_tensor().item())
            want.append(total * m)
        print(f"[rank {rank}] torch {torch.__version__}, world {world}: dx.sum() placements {dy.placements}; "
              f"(dx.sum() * m).full_tensor() for m = 1, 2, 3 ({args.operand}): {got}, expected {want}", flush=True)
        dist.barrier()
        if got != want:
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: got {got}, expected {want}", flush=True)
            return 1
        print(f"[rank {rank}] OK: products {got}", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
