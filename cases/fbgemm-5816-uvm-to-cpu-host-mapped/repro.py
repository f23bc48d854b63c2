"""FBGEMM #5816: uvm_to_cpu fails on a host-mapped UVM tensor ("Expected tcontext != nullptr").

`torch.ops.fbgemm.new_host_mapped_tensor` (and `new_unified_tensor(..., is_host_mapped=True)`, what TorchRec's
inference TBE uses with `uvm_host_mapped=True`) makes a CUDA tensor backed by pinned, mapped host memory. Its
`uvm_to_cpu` (and `uvm_to_device`, `cuda_mem_advise`) cast the storage's context to the *managed*-memory context
unconditionally; for a host-mapped tensor that cast gives nullptr and the op raises
`Expected tcontext != nullptr`. Fixed by https://github.com/pytorch/FBGEMM/pull/5816 (a host-mapped branch that
returns a CPU view of the same memory), first released in fbgemm-gpu 1.8.0.

What the script does: allocates a 4x3 float tensor with the chosen allocator on the GPU, calls `uvm_to_cpu`, and
checks the CPU view shares the memory (a write through it is seen on the GPU tensor).

Usage:
    python repro.py [--device cuda] [--alloc host-mapped|managed]

    --alloc managed   control: a managed (cudaMallocManaged) tensor, the path uvm_to_cpu always handled

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (no CUDA, --device cpu, no fbgemm_gpu CUDA op).
"""
import argparse
import os
import sys

import torch

SIGNATURE = "Expected tcontext != nullptr"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--alloc", choices=["host-mapped", "managed"], default="host-mapped",
                        help="how the UVM tensor is allocated (default host-mapped: the bug)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if args.device == "cpu":
        print("SKIP: UVM tensors (host-mapped or managed) exist only on CUDA; uvm_to_cpu_cuda is the code PR "
              "#5816 fixed")
        return 125
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device())
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm.*)
    for op in ("new_host_mapped_tensor", "new_managed_tensor", "uvm_to_cpu"):
        if not hasattr(torch.ops.fbgemm, op):
            print(f"SKIP: this fbgemm_gpu has no {op} op")
            return 125

    prototype = torch.empty(0, device=device, dtype=torch.float)
    make = torch.ops.fbgemm.new_host_mapped_tensor if args.alloc == "host-mapped" \
        else torch.ops.fbgemm.new_managed_tensor
    uvm = make(prototype, [4, 3])
    uvm.fill_(1.0)
    torch.cuda.synchronize()
    print(f"torch {torch.__version__}, {args.alloc} UVM tensor {tuple(uvm.shape)} on {uvm.device}", flush=True)
    try:
        view = torch.ops.fbgemm.uvm_to_cpu(uvm)
    except RuntimeError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: uvm_to_cpu on a {args.alloc} tensor: {SIGNATURE}", flush=True)
        return 1
    if view.device.type != "cpu" or tuple(view.shape) != (4, 3):
        print(f"WRONG VIEW: uvm_to_cpu gave a {tuple(view.shape)} tensor on {view.device}", flush=True)
        return 2
    view.fill_(7.0)  # a view of the same memory: the GPU tensor must see the write
    torch.cuda.synchronize()
    if not bool((uvm.cpu() == 7.0).all()):
        print("WRONG VIEW: a write through uvm_to_cpu's result is not seen on the GPU tensor (a copy?)", flush=True)
        return 2
    print(f"FIXED: uvm_to_cpu on a {args.alloc} tensor gives a CPU view of the same memory", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
