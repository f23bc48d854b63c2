"""`dist.all_gather` on gloo fails under `torch.inference_mode()` ("Inplace update to inference tensor outside
InferenceMode"), while nccl and `broadcast` work.

Upstream: https://github.com/pytorch/pytorch/issues/126032 (open; reproduced by a maintainer on torch 2.3.0) and its
older sibling https://github.com/pytorch/pytorch/issues/86830 (closed 2022). The maintainers' diagnosis in both:
ProcessGroupGloo runs the collective in its own worker thread and does not carry the caller's thread-local state
there, so the worker's in-place copy into the output tensors (created as inference tensors) happens outside
inference mode and is refused.

What the script does: joins a gloo (cpu) or nccl (cuda) group; under `torch.inference_mode()` makes the output
list and this rank's input and calls `dist.all_gather`; checks that every rank's slot holds that rank's values.

Usage:
    python repro.py [--device cpu|cuda] [--outputs fresh|aliased] [--mode inference|no-grad]
    torchrun --standalone --nproc_per_node=2 repro.py [...]

Variants:
    --outputs fresh     (default) a new zeros tensor per rank as the output list (#86830's form)
    --outputs aliased   one tensor repeated in the output list, the input being one of them (#126032's own form)
    --mode no-grad      workaround: `torch.no_grad()` instead of `torch.inference_mode()`

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "Inplace update to inference tensor outside InferenceMode"


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


def gather(device, rank, world, outputs, keep):
    """all_gather of rank-valued tensors into `keep` (the tensors stay referenced until teardown); returns the
    gathered values."""
    mine = torch.full((3,), float(rank + 1), device=device)
    if outputs == "fresh":
        out = [torch.zeros(3, device=device) for _ in range(world)]
    else:  # #126032: `data = [torch.ones((3, 3))] * world; obj = data[rank]`
        out = [mine] * world
    keep.extend([mine, *out])
    dist.all_gather(out, mine)
    return [t.tolist() for t in out]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--outputs", choices=["fresh", "aliased"], default="fresh")
    parser.add_argument("--mode", choices=["inference", "no-grad"], default="inference")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125

    device = init_dist(args.device)
    keep = []  # the collective's tensors, alive until the process group is gone
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        print(f"[rank {rank}] torch {torch.__version__}, world {world}, backend {dist.get_backend()}, "
              f"outputs {args.outputs}, mode {args.mode}", flush=True)
        context = torch.inference_mode() if args.mode == "inference" else torch.no_grad()
        try:
            with context:
                got = gather(device, rank, world, args.outputs, keep)
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: dist.all_gather under torch.{args.mode.replace('-', '_')} raised "
                  f"RuntimeError: {str(e).splitlines()[0][:160]}", flush=True)
            verdict = 1
        else:
            want = [[float(r + 1)] * 3 for r in range(world)]
            if args.outputs == "fresh" and got != want:
                print(f"[rank {rank}] WRONG RESULT: gathered {got}, expected {want}", flush=True)
                verdict = 2
            else:
                print(f"[rank {rank}] FIXED: all_gather under {args.mode} gathered {got}", flush=True)
                verdict = 0
        # Every rank reaches teardown together: without this a rank that finished first tore gloo down under the
        # other, which then hung in destroy_process_group after printing its verdict (torch 2.5.1, 2 ranks: 2 of 3
        # launches ran into the 180 s timeout on a busy machine).
        if verdict == 1:
            # The failed all_gather stays queued in gloo as an error, and a gloo barrier re-raises it (torch 2.0.1
            # and 2.1.2, outputs aliased: the rank printed REPRODUCED, then died in dist.barrier with the same
            # RuntimeError). Meet through the rendezvous store instead, as torch-103585 does.
            store = dist.distributed_c10d._get_default_store()
            store.set(f"teardown/{rank}", "1")
            store.wait([f"teardown/{r}" for r in range(world)])
        else:
            dist.barrier()
        return verdict
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
