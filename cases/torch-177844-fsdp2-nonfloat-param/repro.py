"""FSDP2 `fully_shard` crashes on a module that holds a non-floating-point parameter.

Upstream: https://github.com/pytorch/pytorch/issues/177844 (also reported as #185239).
`FSDPParam._init_sharded_param` built the sharded parameter as
`nn.Parameter(self.to_sharded_dtensor(...))` and only afterwards called
`requires_grad_(param.requires_grad)`. `nn.Parameter` defaults to requires_grad=True, so for an
integer tensor (e.g. uint8 quantisation codes, held with requires_grad=False) `fully_shard` raised

    RuntimeError: only Tensors of floating point dtype can require gradients

Fixed by https://github.com/pytorch/pytorch/pull/178075 ("[FSDP2] support non-float parameters"),
which passes requires_grad= at construction and keeps non-float params out of the reduce-scatter.

What the script does: builds a small module with a Linear and a uint8 `nn.Parameter(...,
requires_grad=False)`, applies `fully_shard` on a 1-D CPU (gloo) / CUDA (nccl) device mesh, then runs one
forward pass and checks the output against the unsharded module and that the uint8 parameter
round-trips through `full_tensor()`.

Usage:
    python repro.py [--device cpu|cuda] [--as-buffer]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--as-buffer]

Variants:
    (default)     the uint8 tensor is an nn.Parameter(requires_grad=False)  -> the bug
    --as-buffer   workaround: register the uint8 tensor as a buffer; FSDP2 shards parameters only,
                  so the buffer stays a plain replicated tensor and fully_shard succeeds

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (no FSDP2, or FSDP2 without CPU
support: torch < 2.7 with --device cpu).
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

SIGNATURE = "only Tensors of floating point dtype can require gradients"


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


def torch_version():
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def get_fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
        return fully_shard
    except ImportError:
        pass
    try:
        from torch.distributed._composable.fsdp import fully_shard  # torch 2.4 / 2.5
        return fully_shard
    except ImportError:
        return None


class Quantised(nn.Module):
    def __init__(self, as_buffer: bool):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        codes = torch.arange(32, dtype=torch.uint8).reshape(8, 4)
        if as_buffer:
            self.register_buffer("codes", codes)
        else:
            self.codes = nn.Parameter(codes, requires_grad=False)

    def forward(self, x):
        return self.lin(x) + self.codes.float().sum(dim=1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--as-buffer", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    fully_shard = get_fully_shard()
    if fully_shard is None:
        print(f"SKIP: torch {torch.__version__} has no FSDP2 fully_shard")
        return 125
    if args.device == "cpu" and torch_version() < (2, 7):
        # FSDP2 before 2.7 cannot run a forward on CPU: 2.4 creates torch.cuda.Stream
        # unconditionally, 2.5 raises "FSDP requires CUDA for streams", 2.6 fails with
        # "'Stream' object has no attribute 'record_event'" (measured).
        print(f"SKIP: FSDP2 on CPU/gloo needs torch >= 2.7 (have {torch.__version__})")
        return 125
    from torch.distributed.device_mesh import init_device_mesh

    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        world = dist.get_world_size()
        mesh = init_device_mesh(args.device, (world,))
        torch.manual_seed(0)
        model = Quantised(args.as_buffer).to(device)
        reference = Quantised(args.as_buffer).to(device)
        reference.load_state_dict(model.state_dict())
        print(f"[rank {rank}] torch {torch.__version__}, world {world}, "
              f"codes is {'a buffer' if args.as_buffer else 'an nn.Parameter(requires_grad=False)'}",
              flush=True)

        try:
            fully_shard(model, mesh=mesh)
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: fully_shard raised RuntimeError: {e}", flush=True)
            verdict = 1
        else:
            x = torch.randn(4, 8, device=device)
            with torch.no_grad():
                out = model(x)
                ref = reference(x)
            codes = model.codes
            if hasattr(codes, "full_tensor"):
                codes = codes.full_tensor()
            ok = (codes.dtype == torch.uint8 and torch.equal(codes.cpu(), reference.codes.cpu())
                  and torch.allclose(out, ref))
            if ok:
                print(f"[rank {rank}] FIXED: fully_shard accepted the uint8 tensor "
                      f"({type(model.codes).__name__}); forward matches the unsharded module", flush=True)
                verdict = 0
            else:
                print(f"[rank {rank}] WRONG RESULT after fully_shard: codes dtype {codes.dtype}, "
                      f"max |out-ref| {(out - ref).abs().max().item()}", flush=True)
                verdict = 2
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
