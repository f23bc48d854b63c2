"""pytorch/pytorch#133415: get_optimizer_state_dict refuses a plain SGD optimizer in the middle of training (2.4).

https://github.com/pytorch/pytorch/issues/133415 ("Init Optim State in Checkpointing Does not Apply to Stateless
Optimizers", 2024-08), fixed by https://github.com/pytorch/pytorch/pull/135535 ("[DCP] Fixes the stateless optimizer
issue of distributed state_dict"), cherry-picked for 2.5 as https://github.com/pytorch/pytorch/pull/136000.

`torch.distributed.checkpoint.state_dict.get_optimizer_state_dict` (and `set_optimizer_state_dict`) first call
`_init_optim_state(optim)`: an optimizer whose `state` is empty is taken as "not stepped yet", and is stepped once
with zero gradients, which it refuses when gradients are present ("state_dict can only be used if the optimizer
states are initialized ..."). Up to torch 2.3, SGD stored a `momentum_buffer: None` entry per parameter even with
momentum 0, so after a step its state was not empty. torch 2.4's SGD stores nothing when momentum is 0, so a plain
SGD optimizer looks "never stepped" forever, and saving a checkpoint in the usual loop (zero_grad at the top of the
step, so the gradients are still there after `step()`) raises. torch 2.5 tells a stateless optimizer from an
unstepped one.

The script trains nn.Linear(4, 4) with SGD(lr=0.1) for one step, then round-trips the optimizer through
get_optimizer_state_dict / set_optimizer_state_dict and checks the weights did not move. The RuntimeError above is
the bug; a round trip that works is the fix.

    python repro.py [--device cpu|cuda] [--momentum | --grads-to-none]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--momentum | --grads-to-none]

--momentum: control, SGD(momentum=0.9) keeps a momentum buffer per parameter: the round trip works in every release.
--grads-to-none: the workaround, `optimizer.zero_grad(set_to_none=True)` before taking the state dict (the
  "fake" initialising step then runs on zero gradients and, with no weight decay, leaves the weights alone).

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on CUDA) and runs
the same check on its own.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

SIGNATURE = "state_dict can only be used if the optimizer states are initialized"


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


def the_call_that_fails(device, dsd, momentum, grads_to_none):
    """One SGD step in the usual loop, then the optimizer state dict round trip; return the weights' drift."""
    torch.manual_seed(0)
    model = nn.Linear(4, 4).to(device)
    optim = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    optim.zero_grad()
    model(torch.randn(2, 4, device=device)).sum().backward()
    optim.step()  # the gradients stay until the next step's zero_grad, as in every training loop
    before = [p.detach().clone() for p in model.parameters()]
    if grads_to_none:
        optim.zero_grad(set_to_none=True)
    osd = dsd.get_optimizer_state_dict(model, optim)
    dsd.set_optimizer_state_dict(model, optim, optim_state_dict=osd)
    return max((a - p.detach()).abs().max().item() for a, p in zip(before, model.parameters()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--momentum", action="store_true",
                      help="control: SGD(momentum=0.9), an optimizer with per-parameter state")
    mode.add_argument("--grads-to-none", action="store_true",
                      help="workaround: zero_grad(set_to_none=True) before taking the state dict")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    try:
        import torch.distributed.checkpoint.state_dict as dsd
    except ImportError as e:  # before 2.2 the module does not exist; 2.2's DTensor import needs numpy
        print(f"SKIP: torch.distributed.checkpoint.state_dict cannot be imported here: {e}")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            drift = the_call_that_fails(device, dsd, 0.9 if args.momentum else 0.0, args.grads_to_none)
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: get_optimizer_state_dict refused SGD(momentum=0) "
                  f"after a step with the gradients still set", flush=True)
            dist.barrier()
            return 1
        if drift != 0.0:
            raise AssertionError(f"the state dict round trip moved the weights by {drift}")
        what = "SGD(momentum=0.9)" if args.momentum else "SGD(momentum=0)"
        how = " after zero_grad(set_to_none=True)" if args.grads_to_none else ""
        print(f"[rank {rank}] OK: the optimizer state dict round trip of {what}{how} works, "
              f"weights unchanged", flush=True)
        dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
