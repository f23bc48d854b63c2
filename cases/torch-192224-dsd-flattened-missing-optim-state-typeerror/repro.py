"""pytorch/pytorch#192224: the flattened optimizer state dict path turns a missing parameter state into a TypeError.

https://github.com/pytorch/pytorch/issues/192224 (2026-08-05, open when read 2026-11-27; proposed fix
https://github.com/pytorch/pytorch/pull/192239, open and unmerged).

A checkpoint's optimizer state holds only the parameters that were stepped. Loaded through
`torch.distributed.checkpoint.state_dict.set_optimizer_state_dict` with the default (nested) format, a trainable
parameter with no saved state is skipped under `strict=False` and is a clear "Missing optimizer state for
parameter ..." RuntimeError under `strict=True` (PR #165228, torch 2.10; see case torch-164257). With
`StateDictOptions(flatten_optimizer_state_dict=True)` the same checkpoint goes through `_unflatten_optim_state_dict`,
which rebuilds the missing parameter's state as empty dicts (`{"step": {}, "exp_avg": {}, ...}`), and
`Optimizer.load_state_dict` then fails on them: `TypeError: float() argument must be a string or a real number,
not 'dict'`, whatever `strict` says. Before torch 2.10 the same load failed one step earlier, with a bare
`KeyError: 'state.1.weight.step'` from `_unflatten_optim_state_dict` (measured on 2.9.1); both are the bug here.

The script builds nn.Sequential(Linear(2, 2), Linear(2, 2)) (no biases) with Adam, steps it once with a loss that
uses only the first layer (so `1.weight` has no Adam state), takes `get_optimizer_state_dict` in the flattened
format, and loads it into a fresh model and optimizer with `set_optimizer_state_dict`, flattened too.

    python repro.py [--device cpu|cuda] [--no-strict | --all-stepped]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--no-strict | --all-stepped]

(default) strict=True (the DSD default): fixed = the clear "Missing optimizer state for parameter '1.weight'"
  error; the TypeError is the bug.
--no-strict: strict=False: fixed = the load works, `0.weight`'s Adam state restored, `1.weight` without state.
--all-stepped: control, the loss uses both layers, so every parameter has saved state: the flattened round trip
  must work (it does in every release measured), showing the failure is the missing state, not the format.

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

SIGNATURE = "float() argument must be a string or a real number, not 'dict'"
OLD_SIGNATURE = "KeyError: 'state.1.weight."  # the same failure before torch 2.10 (see the docstring)
STRICT_ERROR = "Missing optimizer state for parameter '1.weight'"


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


def make(device):
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)).to(device)
    return model, torch.optim.Adam(model.parameters(), lr=0.1)


def saved_optimizer_state(device, dsd, all_stepped):
    """One Adam step (through the first layer only, unless all_stepped); return the flattened DSD optimizer state."""
    torch.manual_seed(0)
    model, optim = make(device)
    x = torch.randn(4, 2, device=device)
    (model(x) if all_stepped else model[0](x)).sum().backward()
    optim.step()
    osd = dsd.get_optimizer_state_dict(model, optim,
                                       options=dsd.StateDictOptions(flatten_optimizer_state_dict=True))
    keys = sorted(k for k in osd if k.startswith("state."))
    if any(k.startswith("state.1.weight.") for k in keys) != all_stepped or not any(
            k.startswith("state.0.weight.") for k in keys):
        raise AssertionError(f"unexpected flattened state keys: {keys}")
    return osd


def the_call_that_fails(device, dsd, strict, all_stepped):
    """Load the saved flattened optimizer state into a fresh model and optimizer; return them and the state."""
    osd = saved_optimizer_state(device, dsd, all_stepped)
    torch.manual_seed(1)
    model, optim = make(device)
    dsd.set_optimizer_state_dict(model, optim, optim_state_dict=osd,
                                 options=dsd.StateDictOptions(flatten_optimizer_state_dict=True, strict=strict))
    return model, optim, osd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--no-strict", action="store_true",
                      help="StateDictOptions(strict=False): fixed = the load works and 1.weight starts fresh")
    mode.add_argument("--all-stepped", action="store_true",
                      help="control: every parameter has saved state; the flattened round trip must work")
    args = parser.parse_args()
    strict = not args.no_strict

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    try:
        import torch.distributed.checkpoint.state_dict as dsd
    except ImportError as e:  # before 2.2 the module does not exist; 2.2's DTensor import needs numpy
        print(f"SKIP: torch.distributed.checkpoint.state_dict cannot be imported here: {e}")
        return 125
    fields = getattr(dsd.StateDictOptions, "__dataclass_fields__", {})
    if "flatten_optimizer_state_dict" not in fields or "strict" not in fields:
        print("SKIP: StateDictOptions has no `flatten_optimizer_state_dict` option in this torch")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            model, optim, osd = the_call_that_fails(device, dsd, strict, args.all_stepped)
        except TypeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: TypeError: {SIGNATURE}: flattened set_optimizer_state_dict"
                  f"(strict={strict}) rebuilt 1.weight's missing state as empty dicts", flush=True)
            dist.barrier()
            return 1
        except KeyError as e:
            if not f"KeyError: {e}".startswith(OLD_SIGNATURE):
                raise
            print(f"[rank {rank}] REPRODUCED: KeyError: {e}: flattened set_optimizer_state_dict(strict={strict}) "
                  f"looked up 1.weight's missing state", flush=True)
            dist.barrier()
            return 1
        except RuntimeError as e:
            if not strict or args.all_stepped or STRICT_ERROR not in str(e):
                raise
            print(f"[rank {rank}] OK: strict=True refuses with the clear error: {STRICT_ERROR} ...", flush=True)
            dist.barrier()
            return 0
        if strict and not args.all_stepped:
            raise AssertionError("strict=True loaded a state dict that lacks a trainable parameter's state")
        state = optim.state
        w0, w1 = model[0].weight, model[1].weight
        if not args.all_stepped and w1 in state and len(state[w1]) != 0:
            raise AssertionError(f"1.weight got optimizer state it never had: {sorted(state[w1])}")
        for name, w in [("0.weight", w0)] + ([("1.weight", w1)] if args.all_stepped else []):
            if not torch.equal(state[w]["exp_avg"], osd[f"state.{name}.exp_avg"]):
                raise AssertionError(f"{name}'s exp_avg was not restored from the checkpoint")
        what = ("every parameter's Adam state restored" if args.all_stepped
                else "0.weight's Adam state restored, 1.weight starts fresh")
        print(f"[rank {rank}] OK: the flattened load (strict={strict}) works: {what}", flush=True)
        dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
