"""pytorch/pytorch#164257: set_optimizer_state_dict raises a bare KeyError for a parameter with no saved state.

https://github.com/pytorch/pytorch/issues/164257, fixed by https://github.com/pytorch/pytorch/pull/165228
("fixes keyerror when loading parameter with unsaved optimizer state").

A checkpoint's optimizer state holds only the parameters that were stepped: a parameter that got no gradient
before the save (a layer unused so far, frozen, or added to the model later) has no entry. Loading it with
`torch.distributed.checkpoint.state_dict.set_optimizer_state_dict` into an optimizer whose every parameter
requires grad went through `_split_optim_state_dict`, which looked each trainable parameter's FQN up in the saved
state unconditionally: `KeyError: '1.weight'`, whatever `StateDictOptions(strict=...)` said. After the fix, a
missing entry is skipped under `strict=False` (the parameter starts with fresh optimizer state) and is a clear
`RuntimeError: Missing optimizer state for parameter '1.weight' in checkpoint ...` under `strict=True`.

The script builds nn.Sequential(Linear(2, 2), Linear(2, 2)) (no biases) with Adam, steps it once with a loss that
uses only the first layer (so `1.weight` has no Adam state), takes `get_optimizer_state_dict`, and loads it into a
fresh model and optimizer with `set_optimizer_state_dict`. The KeyError is the bug.

    python repro.py [--device cpu|cuda] [--strict]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--strict]

(default) StateDictOptions(strict=False): fixed = the load works, `0.weight`'s Adam state is restored and
  `1.weight` has none.
--strict: StateDictOptions(strict=True) (the DSD default): fixed = the clear "Missing optimizer state" error
  naming the parameter; the bare KeyError is the bug.

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

SIGNATURE = "KeyError: '1.weight'"
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


def saved_optimizer_state(device, dsd):
    """One Adam step through the first layer only; return the DSD optimizer state dict (no entry for 1.weight)."""
    torch.manual_seed(0)
    model, optim = make(device)
    model[0](torch.randn(4, 2, device=device)).sum().backward()
    optim.step()
    osd = dsd.get_optimizer_state_dict(model, optim)
    if "1.weight" in osd["state"] or "0.weight" not in osd["state"]:
        raise AssertionError(f"unexpected saved state keys: {sorted(osd['state'])}")
    return osd


def the_call_that_fails(device, dsd, strict):
    """Load the saved optimizer state into a fresh model and optimizer; return the loaded optimizer."""
    osd = saved_optimizer_state(device, dsd)
    torch.manual_seed(1)
    model, optim = make(device)
    dsd.set_optimizer_state_dict(model, optim, optim_state_dict=osd,
                                 options=dsd.StateDictOptions(strict=strict))
    return model, optim, osd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--strict", action="store_true",
                        help="StateDictOptions(strict=True): fixed = the clear 'Missing optimizer state' error")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    try:
        import torch.distributed.checkpoint.state_dict as dsd
    except ImportError as e:  # before 2.2 the module does not exist; 2.2's DTensor import needs numpy
        print(f"SKIP: torch.distributed.checkpoint.state_dict cannot be imported here: {e}")
        return 125
    if "strict" not in getattr(dsd.StateDictOptions, "__dataclass_fields__", {}):
        print("SKIP: StateDictOptions has no `strict` option in this torch")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            model, optim, osd = the_call_that_fails(device, dsd, args.strict)
        except KeyError as e:
            if f"KeyError: {e}" != SIGNATURE:
                raise
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: set_optimizer_state_dict(strict={args.strict}) "
                  f"looked up a parameter the checkpoint holds no optimizer state for", flush=True)
            dist.barrier()
            return 1
        except RuntimeError as e:
            if not args.strict or STRICT_ERROR not in str(e):
                raise
            print(f"[rank {rank}] OK: strict=True refuses with the clear error: {STRICT_ERROR} ...", flush=True)
            dist.barrier()
            return 0
        if args.strict:
            raise AssertionError("strict=True loaded a state dict that lacks a trainable parameter's state")
        state = optim.state
        w0, w1 = model[0].weight, model[1].weight
        if w1 in state and len(state[w1]) != 0:
            raise AssertionError(f"1.weight got optimizer state it never had: {sorted(state[w1])}")
        saved = osd["state"]["0.weight"]["exp_avg"]
        if not torch.equal(state[w0]["exp_avg"], saved):
            raise AssertionError("0.weight's exp_avg was not restored from the checkpoint")
        print(f"[rank {rank}] OK: strict=False loads the checkpoint: 0.weight's Adam state restored, "
              f"1.weight starts fresh", flush=True)
        dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
