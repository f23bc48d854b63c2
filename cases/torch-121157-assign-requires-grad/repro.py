"""PyTorch #121157: load_state_dict(assign=True) does not keep the module's requires_grad.

`Module.load_state_dict(..., assign=True)` (new in torch 2.1) is the deferred-init way to load
a checkpoint into a model built under `torch.device("meta")`: the tensors of the state dict
are assigned instead of copied. Until the fix (pytorch/pytorch PR #121157, first released in
torch 2.3.0), a plain tensor from the state dict was wrapped as `nn.Parameter(tensor)`, whose
default is requires_grad=True, and a Parameter from a `keep_vars=True` state dict was assigned
as it was. Either way the module's own `requires_grad` was lost:
  - a frozen parameter (requires_grad=False) came back trainable (check "frozen");
  - a trainable parameter loaded from a state dict of frozen Parameters came back frozen
    (check "keep-vars").
Since the fix, the parameter keeps the module's requires_grad in both cases.

The script builds a small model on the meta device, freezes (or not) part of it, loads a
state dict with assign=True, and compares every parameter's requires_grad with the module's.

    python repro.py [--device cpu|cuda] [--check frozen|keep-vars|freeze-after-load]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--check ...]

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same single-process check on its own.

Checks:
  frozen            the bug: frozen backbone built on meta, loaded from model.state_dict()
  keep-vars         the bug, other direction: trainable model, state_dict(keep_vars=True) of a
                    frozen copy
  freeze-after-load the workaround: load with assign=True first, then requires_grad_(False)

Exit code: 0 = requires_grad preserved, 1 = bug reproduced, 125 = cannot test here
(no CUDA, or torch older than 2.1 without the `assign` argument).
"""

import argparse
import inspect
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

SIGNATURE = "requires_grad not preserved by load_state_dict(assign=True)"


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


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.backbone(x)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--device", choices=["cpu", "cuda"],
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument(
        "--check", choices=["frozen", "keep-vars", "freeze-after-load"], default="frozen",
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda requested but CUDA is not available")
        return 125
    if "assign" not in inspect.signature(nn.Module.load_state_dict).parameters:
        print(f"SKIP: torch {torch.__version__} has no load_state_dict(assign=...) (added in 2.1)")
        return 125

    device = init_dist(args.device)
    try:
        return check(args, device, dist.get_rank())
    finally:
        dist.destroy_process_group()


def check(args, device, rank):
    # The checkpoint: a trained model on the real device.
    torch.manual_seed(0)
    source = Net().to(device)
    if args.check == "keep-vars":
        # A checkpoint taken from a frozen copy, keeping the Parameter objects.
        source.requires_grad_(False)
        state_dict = source.state_dict(keep_vars=True)
    else:
        state_dict = source.state_dict()

    # Deferred init: build on meta, then load by assignment.
    with torch.device("meta"):
        model = Net()
    if args.check == "frozen":
        model.backbone.requires_grad_(False)          # fine-tune only the head
    expected = {name: p.requires_grad for name, p in model.named_parameters()}
    if args.check == "freeze-after-load":
        expected["backbone.weight"] = expected["backbone.bias"] = False

    model.load_state_dict(state_dict, assign=True)
    if args.check == "freeze-after-load":
        model.backbone.requires_grad_(False)

    got = {name: p.requires_grad for name, p in model.named_parameters()}
    devices = sorted({str(p.device) for p in model.parameters()})
    print(f"[rank {rank}] torch {torch.__version__}, check {args.check}: params on {devices}")
    print(f"[rank {rank}] module requires_grad before load: {expected}")
    print(f"[rank {rank}] requires_grad after load:         {got}")
    if "meta" in devices:
        raise AssertionError("load_state_dict(assign=True) left parameters on meta")

    wrong = sorted(name for name in expected if got[name] != expected[name])
    if wrong:
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: {', '.join(wrong)} "
              f"flipped to requires_grad={got[wrong[0]]}")
        verdict = 1
    else:
        print(f"[rank {rank}] FIXED: every parameter kept the module's requires_grad")
        verdict = 0

    dist.barrier()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
