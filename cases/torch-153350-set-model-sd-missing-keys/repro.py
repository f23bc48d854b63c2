"""pytorch/pytorch#153350: `set_model_state_dict(full_state_dict=True, strict=False)` reports no missing keys.

https://github.com/pytorch/pytorch/issues/153350 (proposed fix: https://github.com/pytorch/pytorch/pull/153351,
not merged)

`torch.distributed.checkpoint.state_dict.set_model_state_dict(model, sd, options=StateDictOptions(
full_state_dict=True, strict=False))` is meant to load what `sd` has and report the rest in
`missing_keys`, like `Module.load_state_dict(strict=False)`. Since the full-state-dict path distributes
the given tensors into the model's own (`_distribute_state_dict`), `_load_model_state_dict` then writes
*every* model entry back into the caller's `sd` (`state_dict[fqn] = local_state`), so a key the caller
left out is filled with the model's current value: `missing_keys` is always empty, and the caller's
dict gains the keys it did not have. A partial load (fine-tuning a new head) silently loses the list of
what was not loaded. torch 2.3 reported it; the default (`full_state_dict=False`) path still does.

    python repro.py [--device cpu|cuda] [--sharded]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--sharded]

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same check on its own: an `nn.Linear(10, 5)`, its state dict without "bias",
loaded with strict=False: "bias" must be in `missing_keys`.

--sharded: the same load with `full_state_dict=False` (the default), which still reports the key: the
workaround for a model that is not sharded, where both paths load the same tensors.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA; torch without torch.distributed.checkpoint.state_dict or its full_state_dict option).
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

SIGNATURE = "set_model_state_dict lost the missing keys"


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


def dsd_api():
    """(set_model_state_dict, StateDictOptions) where they exist with `full_state_dict` and `strict`; else None."""
    try:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    except ImportError:
        return None
    fields = getattr(StateDictOptions, "__dataclass_fields__", {})
    if "full_state_dict" not in fields or "strict" not in fields:
        return None
    return set_model_state_dict, StateDictOptions


def run_check(args, device, rank, set_model_state_dict, StateDictOptions):
    torch.manual_seed(0)
    model = nn.Linear(10, 5).to(device)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    del sd["bias"]  # a partial checkpoint: no bias
    options = StateDictOptions(full_state_dict=not args.sharded, strict=False)
    result = set_model_state_dict(model, sd, options=options)
    missing = sorted(result.missing_keys)
    print(
        f"[rank {rank}] torch {torch.__version__}: full_state_dict={not args.sharded}, strict=False, "
        f"no 'bias' given: missing_keys={missing}, unexpected_keys={sorted(result.unexpected_keys)}; "
        f"caller's dict now has {sorted(sd)}",
        flush=True,
    )
    dist.barrier()
    if "bias" not in missing:
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: 'bias' was not given but missing_keys={missing}", flush=True)
        return 1
    print(f"[rank {rank}] OK: missing_keys={missing}", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--sharded",
        action="store_true",
        help="full_state_dict=False (the default path), the workaround for an unsharded model",
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    api = dsd_api()
    if api is None:
        print(f"SKIP: torch {torch.__version__} has no set_model_state_dict with full_state_dict/strict (2.2+)")
        return 125
    device = init_dist(args.device)
    try:
        return run_check(args, device, dist.get_rank(), *api)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
