"""meta-pytorch/torchrec#3679: global gradient clipping crashes on a host without CUDA.

https://github.com/meta-pytorch/torchrec/pull/3679 (the fix; broken by https://github.com/meta-pytorch/torchrec/pull/3318)

`GradientClippingOptimizer(clipping=NORM, enable_global_grad_clip=True, param_to_pgs=...)` clips the
gradients of sharded parameters through `clip_grad_norm_` -> `_compute_total_norm`. PR #3318 (commit
caebdb1b, first in torchrec 1.4.0) started that function with `torch.tensor(0.0, pin_memory=True)`;
pinning host memory needs a CUDA context, so on a machine without a GPU the first `step()` raises
and CPU training with global clipping cannot run. PR #3679 (commit 3c73ade3, first in torchrec 1.5.0)
drops the pin. torchrec 1.3.0 computed the norm without it (works); 1.0.0 has no `param_to_pgs`
(exit 125).

The script wraps one parameter per rank (marked as sharded over the world group) in a
`KeyedOptimizerWrapper` + `GradientClippingOptimizer` and calls `step()` once; on success it checks the
gradient was clipped to the global norm.

    python repro.py [--device cpu|cuda] [--local-clip]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--local-clip]

--local-clip: the workaround, `enable_global_grad_clip=False` (local clipping through
torch.nn.utils.clip_grad_norm_; the same result when every parameter is replicated).

The bug needs a host where CUDA is not available: with CUDA present (any --device) the script exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import inspect
import os
import re
import socket
import sys
import traceback

import torch
import torch.distributed as dist
from torchrec.optim.clipping import GradientClipping, GradientClippingOptimizer
from torchrec.optim.keyed import KeyedOptimizerWrapper

SIGNATURE = "global gradient clipping failed on a host without CUDA"
# What torch says when pin_memory=True is asked for without a CUDA context (any of these wordings).
NO_CUDA = re.compile(r"NVIDIA driver|accelerator|pin_memory|pinned memory|CUDA", re.IGNORECASE)
MAX_NORM = 1.0


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


def clip_once(device, local_clip):
    """One clipping step; returns (grad after clipping, global grad norm before)."""
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(4, 4, device=device))
    p.grad = torch.randn(4, 4, device=device) * 10.0  # same on every rank: global norm = sqrt(world) * local
    world = dist.get_world_size()
    global_norm = float(p.grad.norm()) * (world ** 0.5 if not local_clip else 1.0)
    opt = KeyedOptimizerWrapper({"w": p}, lambda ps: torch.optim.SGD(ps, lr=0.0))
    kwargs = dict(clipping=GradientClipping.NORM, max_gradient=MAX_NORM)
    if not local_clip:
        kwargs.update(enable_global_grad_clip=True, param_to_pgs={p: [dist.group.WORLD]})
    clip = GradientClippingOptimizer(opt, **kwargs)
    clip.step()
    return p.grad.detach().cpu(), global_norm


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--local-clip", action="store_true",
                        help="workaround: enable_global_grad_clip=False (local clipping)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if torch.cuda.is_available():
        print("SKIP: the bug needs a host without CUDA (pin_memory works wherever CUDA is available)")
        return 125
    params = inspect.signature(GradientClippingOptimizer.__init__).parameters
    if not args.local_clip and "param_to_pgs" not in params:
        print("SKIP: this torchrec's GradientClippingOptimizer has no enable_global_grad_clip/param_to_pgs")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            grad, norm_before = clip_once(device, args.local_clip)
        except RuntimeError as e:
            frames = [f.name for f in traceback.extract_tb(e.__traceback__)]
            if not NO_CUDA.search(str(e)) or "_compute_total_norm" not in frames:
                raise
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: RuntimeError: {first}", flush=True)
            return 1
        scale = MAX_NORM / (norm_before + 1e-6)
        local_norm_after = float(grad.norm())
        world = dist.get_world_size() if not args.local_clip else 1
        global_after = local_norm_after * world ** 0.5
        if not (scale < 1.0 and abs(global_after - MAX_NORM) < 1e-3):
            raise AssertionError(
                f"clipping step ran but the global grad norm is {global_after:.6f}, expected {MAX_NORM}"
            )
        dist.barrier()
        print(f"[rank {rank}] OK: clipped the global grad norm {norm_before:.3f} -> {global_after:.4f} on CPU", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
