"""pytorch/pytorch#143828: set_optimizer_state_dict drops the hyperparameters of a param group with no parameters.

https://github.com/pytorch/pytorch/issues/143828 ("[DCP] Distributed checkpoint `set_optimizer_state_dict` cause
optimizer step error when optimizer contains empty param group", 2024-12), fixed by
https://github.com/pytorch/pytorch/pull/147730 ("[DSD] Fixes issue when there is a PG without parameters",
merged 2025-02-25).

`set_optimizer_state_dict` rebuilds the optimizer's param groups from the saved ones by matching parameter names
(FQNs). A group with no parameters matches no name, so before the fix it came back as `{"params": []}` alone: its
`lr`, `betas`, ... were gone and the next `AdamW.step()` raised `KeyError: 'betas'`. The fix maps the empty group
to the saved empty group, but it records the mapping under the variable left over from the loop that searched
for it (`loaded_param_group`, the *last* saved group), not under the empty group it found: the fix works when the
empty group is the last group and still fails when it is any other (read in the installed torch 2.14.1,
`torch/distributed/checkpoint/state_dict.py: _split_optim_state_dict`).

The script builds AdamW over nn.Linear fc / fc1 with three groups, one of them empty (lr 0.2), steps once, round-
trips the optimizer through get_optimizer_state_dict / set_optimizer_state_dict into a fresh AdamW and steps again.
An empty group without `betas` or with another `lr` than saved is the bug; a step that runs with every group as
saved is the fix.

    python repro.py [--device cpu|cuda] [--empty-group-first | --no-empty-group]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--empty-group-first | --no-empty-group]

(default) the empty group is the last one: the layout the fix handles.
--empty-group-first: the empty group comes first (groups: empty, fc, fc1): the layout the fix still misses.
--no-empty-group: control, the same two non-empty groups and no empty one: works in every release.

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

SIGNATURE = "set_optimizer_state_dict left the empty param group without its hyperparameters"


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


def groups(model, layout):
    fc = {"params": list(model.fc.parameters())}
    fc1 = {"params": list(model.fc1.parameters()), "lr": 0.3}
    empty = {"params": [], "lr": 0.2}
    if layout == "none":
        return [fc, fc1]
    if layout == "first":
        return [empty, fc, fc1]
    return [fc, fc1, empty]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fc1 = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc1(self.fc(x))


def the_call_that_fails(device, dsd, layout):
    """Step, round-trip the optimizer state dict into a fresh AdamW, step again; return the restored groups."""
    torch.manual_seed(0)
    model = Net().to(device)
    optim = torch.optim.AdamW(groups(model, layout), lr=0.1)
    model(torch.randn(2, 4, device=device)).sum().backward()
    optim.step()
    optim.zero_grad(set_to_none=True)
    osd = dsd.get_optimizer_state_dict(model, optim)
    saved = [{k: v for k, v in g.items() if k != "params"} for g in optim.param_groups]
    fresh = torch.optim.AdamW(groups(model, layout), lr=0.1)
    dsd.set_optimizer_state_dict(model, fresh, optim_state_dict=osd)
    model(torch.randn(2, 4, device=device)).sum().backward()
    try:
        fresh.step()
    except KeyError as e:
        lost = [i for i, g in enumerate(fresh.param_groups) if "betas" not in g]
        raise RuntimeError(f"{SIGNATURE}: step() raised KeyError {e}; groups without betas: {lost}") from e
    for i, (want, got) in enumerate(zip(saved, fresh.param_groups)):
        if got.get("lr") != want["lr"]:
            raise RuntimeError(f"{SIGNATURE}: group {i} came back with lr {got.get('lr')}, saved {want['lr']}")
    return [(len(g["params"]), g["lr"]) for g in fresh.param_groups]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    layout = parser.add_mutually_exclusive_group()
    layout.add_argument("--empty-group-first", action="store_true",
                        help="the empty param group comes first (the layout the fix still misses)")
    layout.add_argument("--no-empty-group", action="store_true",
                        help="control: no empty param group")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    try:
        import torch.distributed.checkpoint.state_dict as dsd
    except ImportError as e:  # before 2.2 the module does not exist; 2.2's DTensor import needs numpy
        print(f"SKIP: torch.distributed.checkpoint.state_dict cannot be imported here: {e}")
        return 125
    where = "none" if args.no_empty_group else ("first" if args.empty_group_first else "last")
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            restored = the_call_that_fails(device, dsd, where)
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: {str(e)[:300]}", flush=True)
            dist.barrier()
            return 1
        print(f"[rank {rank}] OK: empty group {where}: every group restored as saved "
              f"((params, lr) per group: {restored}) and step() runs", flush=True)
        dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
