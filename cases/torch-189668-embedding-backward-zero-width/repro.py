"""PyTorch #189668: the backward of F.embedding with a zero-width weight reads address 0 on CUDA.

Upstream: https://github.com/pytorch/pytorch/issues/189668. For `weight` of shape (10, 0),
`embedding_dense_backward_cuda` still launches `embedding_backward_feature_kernel` over the empty gradient,
whose data pointer is null; compute-sanitizer reports "Invalid __global__ read of size 4 bytes ... Address 0x0".
The CPU backward returns an empty (10, 0) gradient. Proposed fix: https://github.com/pytorch/pytorch/pull/189714
(return the zero-sized gradient before any launch when there are no rows or no columns).

What the script does: F.embedding(idx, weight(10, 0)) on CUDA, `.sum().backward()`, synchronize, and checks
that the weight's gradient is a (10, 0) tensor. A fault shows as the CUDA error "an illegal memory access was
encountered" (the context is unusable afterwards, so nothing else runs on the GPU).

Usage:
    python repro.py [--device cuda] [--dim N]

    --dim 4   control: a (10, 4) weight, the ordinary path

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (no CUDA, --device cpu).
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

SIGNATURE = "an illegal memory access was encountered"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dim", type=int, default=0, help="embedding width (default 0: the bug)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if args.device == "cpu":
        print("SKIP: the bug is in embedding_dense_backward_cuda; the CPU backward returns an empty gradient")
        return 125
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device())
    print(f"torch {torch.__version__}, GPU {torch.cuda.get_device_name()}, weight (10, {args.dim})", flush=True)

    weight = torch.zeros(10, args.dim, device=device, requires_grad=True)
    idx = torch.zeros(3, dtype=torch.long, device=device)
    try:
        out = F.embedding(idx, weight)
        out.sum().backward()
        torch.cuda.synchronize()
    except RuntimeError as e:  # torch.AcceleratorError (newer torch) is a RuntimeError too
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: embedding backward with weight (10, {args.dim}): {SIGNATURE}", flush=True)
        return 1
    grad = weight.grad
    if grad is not None and tuple(grad.shape) == (10, args.dim) and bool((grad.cpu() == (idx.cpu() == torch.arange(
            10)[:, None]).sum(1, keepdim=True).float().expand(10, args.dim)).all()):
        print(f"FIXED: backward returned a {tuple(grad.shape)} gradient, no fault", flush=True)
        return 0
    print(f"WRONG GRADIENT: {None if grad is None else tuple(grad.shape)}", flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
