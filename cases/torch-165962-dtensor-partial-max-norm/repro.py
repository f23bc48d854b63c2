"""max() and linalg.vector_norm() of a Partial(sum) DTensor reduce each rank's partial values: silently wrong.

Upstream: https://github.com/pytorch/pytorch/pull/165962 ("[DTensor][Op] fix for DTensor ops with Partial
placements", 2025-10-21), and for the norm https://github.com/pytorch/pytorch/pull/159856 ("[dtensor] fix incorrect
norm calculation for Partial DTensors", 2025-08-05, whose description is the norm repro used here). A Partial(sum)
DTensor is a tensor each rank holds one addend of. DTensor's reduction strategy treated max and the vector norm as
"reduction linear" over a pending sum: it reduced every rank's addend locally and summed the results, so
max(a0 + a1) came out as max(a0) + max(a1) and norm(a0 + a1) as norm(a0) + norm(a1). No error is raised. PR
#165962 sets reduction_linear False when the input's Partial reduce op differs from the reduction's, which forces
the partial sum to be reduced first.

What the script does: a 2-rank CPU (gloo) or CUDA (nccl) mesh; rank 0 holds [1, 3] and rank 1 holds [2, 1] as a
Partial(sum) DTensor (`DTensor.from_local`), whose value is [3, 4]; computes `.max()` or
`torch.linalg.vector_norm(...)` and makes it whole, and compares it with the max / norm of [3, 4] computed in plain
Python (4 and 5).

Usage:
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--op max|norm] [--replicate]

    --op max       (default) dt.max(): right 4, the bug gives max(1, 3) + max(2, 1) = 5
    --op norm      torch.linalg.vector_norm(dt): right 5, the bug gives sqrt(10) + sqrt(5) = 5.398...
    --replicate    workaround: redistribute to Replicate() first

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (a world of one; no DTensor API or no sharding
strategy for the op in this torch).
"""
import argparse
import math
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "a reduction of a Partial DTensor reduced each rank's partial values"

LOCAL = {0: [1.0, 3.0], 1: [2.0, 1.0]}  # the addends; their sum is [3, 4]


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
    """(init_device_mesh, DTensor, Partial, Replicate) from the public module or the older private one; None if absent."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        return None
    try:
        from torch.distributed.tensor import DTensor, Partial, Replicate
    except ImportError:
        try:
            from torch.distributed._tensor import DTensor, Replicate
            from torch.distributed._tensor.placement_types import _Partial as Partial
        except ImportError:
            return None
    return init_device_mesh, DTensor, Partial, Replicate


def expected(op):
    """The reduction of the summed addends, in plain Python."""
    full = [LOCAL[0][i] + LOCAL[1][i] for i in range(2)]  # [3, 4]
    if op == "max":
        return max(full)
    return math.sqrt(sum(v * v for v in full))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--op", choices=["max", "norm"], default="max")
    parser.add_argument("--replicate", action="store_true",
                        help="workaround: redistribute the Partial DTensor to Replicate() before reducing")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if world != 2:
            print(f"SKIP: the script's Partial DTensor has two addends; run it with 2 ranks (world {world})")
            return 125
        api = dtensor_api()
        if api is None:
            print(f"SKIP: torch {torch.__version__} has no init_device_mesh / DTensor")
            return 125
        init_device_mesh, DTensor, Partial, Replicate = api
        mesh = init_device_mesh(args.device, (world,))
        dt = DTensor.from_local(torch.tensor(LOCAL[rank], device=device), mesh, [Partial()])
        if args.replicate:
            dt = dt.redistribute(mesh, [Replicate()])
        try:
            out = dt.max() if args.op == "max" else torch.linalg.vector_norm(dt)
        except NotImplementedError as e:
            if "sharding strategy" not in str(e):
                raise
            print(f"SKIP: torch {torch.__version__}: {str(e).splitlines()[0][:160]}")
            return 125
        got = out.full_tensor().item()
        want = expected(args.op)
        print(f"[rank {rank}] torch {torch.__version__}: local {LOCAL[rank]}, Partial(sum) value [3.0, 4.0]; "
              f"{args.op} made whole = {got}, expected {want}; replicate first: {args.replicate}", flush=True)
        dist.barrier()
        if abs(got - want) > 1e-5:
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: {args.op} = {got}, expected {want}", flush=True)
            return 1
        print(f"[rank {rank}] OK: {args.op} of the Partial DTensor = {got}", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
