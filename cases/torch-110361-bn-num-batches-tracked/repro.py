"""PyTorch #110361: BatchNorm's num_batches_tracked is reset when the state dict lacks it.

BatchNorm's `_load_from_state_dict` keeps old checkpoints (state-dict version < 2, or a state
dict without `_metadata`, e.g. a plain dict or an OrderedDict built by hand) loadable by
putting a `num_batches_tracked` entry into the state dict when it is missing. Up to torch 2.1
that entry was always a new `torch.tensor(0)`, so loading a partial state dict with
strict=False silently reset the module's counter to 0 (issue #110361, reported on 2.0.1).
PR #110850 (first released in torch 2.2.0) uses the module's own `num_batches_tracked`
instead. That in turn left a meta-device counter on meta when loading into a module built
under `torch.device("meta")` with `assign=True`; PR #115285 (also in 2.2.0) falls back to
`torch.tensor(0)` for a meta counter. Both are checked here.

    python repro.py [--device cpu|cuda] [--check keep-count|meta-assign|with-metadata]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--check ...]

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same single-process check on its own.

Checks:
  keep-count     the issue: a BatchNorm1d that has seen 3 batches loads a plain dict holding
                 only its weight, with strict=False; num_batches_tracked must stay 3
  meta-assign    deferred init: BatchNorm1d built on meta loads a plain dict without
                 num_batches_tracked with assign=True, strict=False; the counter must not be
                 left on meta (torch >= 2.1: needs the `assign` argument)
  with-metadata  workaround for keep-count: give the partial dict the `_metadata` of
                 module.state_dict() (version 2), so the backward-compatibility path is skipped

Exit code: 0 = correct, 1 = bug reproduced, 125 = cannot test here.
"""

import argparse
import inspect
import os
import socket
import sys
from collections import OrderedDict

import torch
import torch.distributed as dist
import torch.nn as nn

SIGNATURE = "num_batches_tracked wrong after load_state_dict"


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--device", choices=["cpu", "cuda"],
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument(
        "--check", choices=["keep-count", "meta-assign", "with-metadata"], default="keep-count",
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda requested but CUDA is not available")
        return 125
    if args.check == "meta-assign" and (
        "assign" not in inspect.signature(nn.Module.load_state_dict).parameters
    ):
        print(f"SKIP: torch {torch.__version__} has no load_state_dict(assign=...) (added in 2.1)")
        return 125

    device = init_dist(args.device)
    try:
        return check(args, device, dist.get_rank())
    finally:
        dist.destroy_process_group()


def check(args, device, rank):
    torch.manual_seed(0)
    if args.check in ("keep-count", "with-metadata"):
        bn = nn.BatchNorm1d(3).to(device)
        bn.train()
        for _ in range(3):
            bn(torch.randn(8, 3, device=device))
        before = int(bn.num_batches_tracked)
        partial = OrderedDict(weight=torch.ones(3, device=device))   # no _metadata
        if args.check == "with-metadata":
            partial._metadata = bn.state_dict()._metadata           # version 2
        result = bn.load_state_dict(partial, strict=False)
        after = bn.num_batches_tracked
        print(f"[rank {rank}] torch {torch.__version__}, check {args.check}: "
              f"num_batches_tracked {before} -> {int(after)} (missing keys {result.missing_keys})")
        ok = int(after) == before
        detail = f"reset from {before} to {int(after)}"
    else:
        with torch.device("meta"):
            bn = nn.BatchNorm1d(3)
        src = {k: v for k, v in nn.BatchNorm1d(3).to(device).state_dict().items()
               if k != "num_batches_tracked"}                         # plain dict, no _metadata
        bn.load_state_dict(src, strict=False, assign=True)
        placement = {name: str(t.device) for name, t in bn.state_dict().items()}
        print(f"[rank {rank}] torch {torch.__version__}, check {args.check}: {placement}")
        after = bn.num_batches_tracked
        ok = not after.is_meta
        detail = f"left on {after.device} (weight on {bn.weight.device})"

    if ok:
        print(f"[rank {rank}] FIXED: num_batches_tracked is right")
        verdict = 0
    else:
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: {detail}")
        verdict = 1

    dist.barrier()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
