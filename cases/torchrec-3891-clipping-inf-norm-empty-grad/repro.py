"""meta-pytorch/torchrec#3891: GradientClippingOptimizer with the infinity norm fails on a parameter with an empty gradient.

https://github.com/meta-pytorch/torchrec/pull/3891 (sibling for the sharded path: https://github.com/meta-pytorch/torchrec/pull/3809;
torch side: https://github.com/pytorch/pytorch/pull/173238)

When no parameter is sharded, `GradientClippingOptimizer.step()` (clipping=NORM) hands every parameter
to `torch.nn.utils.clip_grad_norm_`, including one whose gradient has no elements (a zero-row table,
an empty parameter). With `norm_type="inf"` torch computes a max over each gradient, which has no
identity for an empty tensor: on CPU `linalg.vector_norm` has always refused it, and pytorch#173238
(Jan 2026) made the CUDA `_foreach_norm` kernel refuse it too, which is how torchrec noticed. PR #3891
(commit 2cc9d9c1, first in torchrec 1.7.0) leaves parameters without a gradient or with an empty one
out of the call.

    python repro.py [--device cpu|cuda] [--skip-empty] [--norm inf|2]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--skip-empty] [--norm inf|2]

--skip-empty: the workaround, the zero-size parameter is not given to the optimizer.
--norm 2: control, the 2-norm of an empty tensor is 0, so nothing fails in any release.

Every rank (a world of one under plain `python`) runs the same check on its own parameters.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
from torchrec.optim.clipping import GradientClipping, GradientClippingOptimizer
from torchrec.optim.keyed import KeyedOptimizerWrapper

SIGNATURE = "clipping with the infinity norm failed on an empty gradient"
TORCH_TEXT = "infinity norm on an empty tensor|inf norm on an empty tensor"
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


def clip_once(device, norm_type, skip_empty):
    """One step of a NORM-clipping optimizer over a dense weight and a zero-row table; returns the weight's grad."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 4, device=device))
    table = torch.nn.Parameter(torch.empty(0, 4, device=device))
    w.grad = torch.full((3, 4), 5.0, device=device)
    table.grad = torch.empty(0, 4, device=device)
    params = {"w": w} if skip_empty else {"w": w, "table": table}
    opt = KeyedOptimizerWrapper(params, lambda ps: torch.optim.SGD(ps, lr=0.0))
    clip = GradientClippingOptimizer(opt, clipping=GradientClipping.NORM, max_gradient=MAX_NORM, norm_type=norm_type)
    clip.step()
    return w.grad.detach().cpu()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--skip-empty", action="store_true", help="workaround: leave the zero-size parameter out of the optimizer"
    )
    parser.add_argument("--norm", choices=["inf", "2"], default="inf", help="norm_type (2: control)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        norm_type = "inf" if args.norm == "inf" else 2.0
        try:
            grad = clip_once(device, norm_type, args.skip_empty)
        except RuntimeError as e:
            frames = [f.name for f in traceback.extract_tb(e.__traceback__)]
            if "clip_grad_norm_" not in frames or not any(t in str(e) for t in TORCH_TEXT.split("|")):
                raise
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: RuntimeError: {str(e).strip().splitlines()[0]}", flush=True)
            return 1
        expected = MAX_NORM if args.norm == "inf" else MAX_NORM / (12**0.5)
        if not torch.allclose(grad, torch.full((3, 4), expected), atol=1e-4):
            raise AssertionError(
                f"clipping ran but the gradient is {grad.flatten()[:4].tolist()}..., "
                f"expected every entry {expected:.4f}"
            )
        dist.barrier()
        print(
            f"[rank {rank}] OK: {args.norm}-norm clipping brought every gradient entry from 5.0 to {expected:.4f}",
            flush=True,
        )
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
