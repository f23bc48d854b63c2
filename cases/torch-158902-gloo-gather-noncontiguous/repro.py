"""`dist.gather` on gloo silently gathers the wrong elements of a non-contiguous input tensor.

Upstream: https://github.com/pytorch/pytorch/issues/158902 (2025-07). ProcessGroupGloo's `AsyncGatherWork` handed
gloo the input's storage as if it were contiguous, so a strided input (a column of a matrix) was gathered as its first
`numel` elements of storage: `t[:, 0]` of [[0, 1], [2, 3]] arrives at the destination as [0, 1] instead of [0, 2]. No
error is raised. Fix: https://github.com/pytorch/pytorch/pull/158903 ("Fix a bug of distributed 'gather' with
uncontiguous tensors on the Gloo backend", merged 2025-07-30), which makes the input contiguous first.

What the script does: joins a gloo (cpu) or nccl (cuda) group; every rank builds its input as column 0 of a
(3, 2) matrix whose values encode the rank, so the input is [100*r, 100*r + 2, 100*r + 4] with stride 2; then, with
each rank in turn as the destination, calls `dist.gather` and checks the gathered list against those values,
computed in plain Python. Every rank is a destination once, so every rank reaches its own verdict.

Usage:
    python repro.py [--device cpu|cuda] [--contiguous]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--contiguous]

    --contiguous   workaround: pass `t.contiguous()` to dist.gather

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "dist.gather returned the wrong values for a non-contiguous input"


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


def expected_values(rank):
    """Column 0 of the (3, 2) matrix 100*rank + [[0, 1], [2, 3], [4, 5]], in plain Python."""
    return [float(100 * rank + 2 * i) for i in range(3)]


def gather_everywhere(device, rank, world, contiguous, keep):
    """dist.gather to each rank in turn; return what this rank received as destination."""
    matrix = (torch.arange(6, dtype=torch.float32) + 100 * rank).reshape(3, 2).to(device)
    mine = matrix[:, 0]  # stride 2: not contiguous
    if contiguous:
        mine = mine.contiguous()
    keep.extend([matrix, mine])
    received = None
    for dst in range(world):
        out = [torch.zeros(3, device=device) for _ in range(world)] if rank == dst else None
        if out is not None:
            keep.extend(out)
        dist.gather(mine, out, dst=dst)
        if rank == dst:
            received = [t.cpu().tolist() for t in out]
    return mine.is_contiguous(), received


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--contiguous", action="store_true",
                        help="workaround: make the input contiguous before dist.gather")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    keep = []  # the collectives' tensors, alive until the process group is gone
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        print(f"[rank {rank}] torch {torch.__version__}, world {world}, backend {dist.get_backend()}, "
              f"contiguous input {args.contiguous}", flush=True)
        is_contiguous, got = gather_everywhere(device, rank, world, args.contiguous, keep)
        want = [expected_values(r) for r in range(world)]
        print(f"[rank {rank}] input contiguous: {is_contiguous}; gathered {got}; expected {want}", flush=True)
        dist.barrier()
        if got != want:
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: got {got}, expected {want}", flush=True)
            return 1
        print(f"[rank {rank}] OK: dist.gather returned the input's values {got}", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
