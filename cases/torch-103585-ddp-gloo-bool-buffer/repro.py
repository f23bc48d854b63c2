"""DistributedDataParallel on gloo fails for a module with a torch.bool buffer ("Invalid scalar type").

Upstream: https://github.com/pytorch/pytorch/issues/103585 ("DDP+Gloo+torch.bool weight matrix";
GPT-J / GPT-2 keep their causal mask as a bool buffer named `bias`), same root cause as
https://github.com/pytorch/pytorch/issues/89197 (bool collectives on gloo).
DDP's constructor broadcasts every parameter and buffer from rank 0 (`_sync_module_states` ->
`dist._broadcast_coalesced`). ProcessGroupGloo dispatched on dtype with `GENERATE_ALL_TYPES`, which had no
case for Bool, so the broadcast raised `RuntimeError: Invalid scalar type`.
Fixed by https://github.com/pytorch/pytorch/pull/105354 "[C10d] Handle bool tensors in gloo. Fixes #103585."
(merged 2023-07-18), first released in torch 2.1.0.

What the script does: builds a Linear plus a lower-triangular mask buffer (bool, or uint8 for the
workaround), made deliberately different on every rank but 0; wraps it in DDP (gloo on CPU, nccl on
CUDA); checks that the buffer now equals rank 0's mask on every rank.

Usage:
    python repro.py [--device cpu|cuda] [--mask-dtype bool|uint8]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--mask-dtype bool|uint8]

Variants:
    --mask-dtype bool    (default) the bug: DDP(...) raises RuntimeError: Invalid scalar type on gloo
    --mask-dtype uint8   workaround from the thread: keep the mask as uint8 and compare with != 0

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

SIGNATURE = "Invalid scalar type"


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


class KeepBroadcastTensors:
    """Calls dist._broadcast_coalesced unchanged, but holds the tensors it was given until the group is destroyed.

    DDP's constructor passes detached views of the module's parameters and buffers, then drops them. On torch 2.0.1
    gloo's worker thread can drop the failed broadcast's work item (which still references them) after the main
    thread has entered destroy_process_group: freeing a tensor's Python object then needs the GIL, which the main
    thread holds while it joins that very worker in ~ProcessGroupGloo -- a deadlock (py-spy stacks of both threads;
    6 of 16 launches under load, 0 of 42 with the tensors held). Holding them changes no code path, only lifetimes.
    """

    def __init__(self) -> None:
        self.held: list[list[torch.Tensor]] = []
        self.original = dist._broadcast_coalesced

    def __call__(self, process_group, tensors, *args, **kwargs):
        self.held.append(list(tensors))
        return self.original(process_group, tensors, *args, **kwargs)


class MaskedLinear(nn.Module):
    def __init__(self, dtype: torch.dtype, rank: int):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        mask = torch.tril(torch.ones(4, 4)) if rank == 0 else torch.triu(torch.ones(4, 4))
        self.register_buffer("mask", mask.to(dtype))

    def forward(self, x):
        w = self.lin.weight.masked_fill(self.mask == 0, 0.0)
        return nn.functional.linear(x, w, self.lin.bias)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--mask-dtype", choices=["bool", "uint8"], default="bool")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125

    device = init_dist(args.device)
    keep = dist._broadcast_coalesced = KeepBroadcastTensors()
    try:
        rank = dist.get_rank()
        world = dist.get_world_size()
        device_ids = [device.index] if device.type == "cuda" else None
        dtype = torch.bool if args.mask_dtype == "bool" else torch.uint8
        torch.manual_seed(0)
        model = MaskedLinear(dtype, rank).to(device)
        expected_mask = torch.tril(torch.ones(4, 4)).to(dtype)
        print(f"[rank {rank}] torch {torch.__version__}, world {world}, backend "
              f"{dist.get_backend()}, mask buffer dtype {model.mask.dtype}", flush=True)
        try:
            nn.parallel.DistributedDataParallel(model, device_ids=device_ids)  # broadcasts rank 0's buffers
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: DistributedDataParallel(...) raised RuntimeError: "
                  f"{str(e).splitlines()[0]}", flush=True)
            verdict = 1
        else:
            # (no forward pass here: DDP.forward imports torch._dynamo, which needs `packaging`,
            # absent from a bare torch 2.1 install; the bug is in the constructor's broadcast)
            synced = torch.equal(model.mask.cpu(), expected_mask)
            if synced:
                print(f"[rank {rank}] FIXED: DDP wrapped the module; the {model.mask.dtype} buffer "
                      f"was broadcast from rank 0", flush=True)
                verdict = 0
            else:
                print(f"[rank {rank}] WRONG RESULT: the {model.mask.dtype} buffer differs from "
                      f"rank 0's after DDP init", flush=True)
                verdict = 2
        if verdict == 1:
            # The failed broadcast is still queued in gloo as an error: a gloo barrier now re-raises it on a rank
            # whose worker has not retired it yet and enters the real collective on one whose worker has, so the
            # ranks disagree ("Connection closed by peer" at 2 ranks). Meet through the rendezvous store instead.
            store = dist.distributed_c10d._get_default_store()
            store.set(f"teardown/{rank}", "1")
            store.wait([f"teardown/{r}" for r in range(world)])
        else:
            dist.barrier()
    finally:
        dist.destroy_process_group()
        dist._broadcast_coalesced = keep.original
        keep.held.clear()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
