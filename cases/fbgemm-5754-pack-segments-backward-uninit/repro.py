"""FBGEMM #5754: pack_segments backward on CUDA leaves the gradient of truncated rows uninitialized.

`torch.ops.fbgemm.pack_segments(t_in, lengths, max_length)` keeps at most max_length rows of each segment.
Its CUDA backward allocated the input gradient with `at::empty` and wrote only the kept rows, so the rows the
forward truncated (segment length > max_length) got whatever the allocator handed back instead of 0: garbage,
or NaN, flowing upstream. Fixed by https://github.com/pytorch/FBGEMM/pull/5754 (`at::empty` -> `at::zeros`),
first released in fbgemm-gpu 1.8.0.

What the script does: poisons PyTorch's CUDA caching allocator with freed NaN-filled blocks of the gradient's
size (so an uninitialized buffer is NaN, not a lucky 0), packs three segments of lengths 10, 5, 8 with
max_length 4, runs backward with a gradient of ones, and checks that the truncated rows' gradient is exactly 0.

Usage:
    python repro.py [--device cuda] [--max-length N]

    --max-length 16   control: no segment is truncated, so no row is left unwritten

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (no CUDA, --device cpu, no fbgemm_gpu CUDA op).
"""
import argparse
import os
import sys

import torch

SIGNATURE = "pack_segments backward left truncated rows non-zero"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-length", type=int, default=4, help="rows kept per segment (default 4)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if args.device == "cpu":
        print("SKIP: this case tests pack_segments_backward_cuda, the code PR #5754 fixed; the CPU backward is "
              "other code")
        return 125
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device())
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm.*)
    if not hasattr(torch.ops.fbgemm, "pack_segments"):
        print("SKIP: this fbgemm_gpu has no pack_segments op")
        return 125

    lengths_list, cols = [10, 5, 8], 8
    total = sum(lengths_list)
    lengths = torch.tensor(lengths_list, dtype=torch.int32, device=device)
    torch.manual_seed(0)
    t_in = torch.randn(total, cols, device=device, requires_grad=True)

    # Freed NaN blocks of the gradient's size: an at::empty of that size gets one of them back.
    poison = [torch.full((total, cols), float("nan"), device=device) for _ in range(64)]
    torch.cuda.synchronize()
    del poison

    out = torch.ops.fbgemm.pack_segments(t_in, lengths, max_length=args.max_length)
    out.backward(torch.ones_like(out))
    torch.cuda.synchronize()
    grad = t_in.grad.cpu()

    expected = torch.zeros(total, cols)
    start = 0
    for n in lengths_list:
        expected[start:start + min(n, args.max_length)] = 1.0
        start += n
    truncated = (expected == 0).all(dim=1)
    print(f"torch {torch.__version__}, segments {lengths_list}, max_length {args.max_length}, "
          f"output {tuple(out.shape)}, {int(truncated.sum())} truncated rows", flush=True)
    if torch.equal(grad, expected):
        print("FIXED: kept rows get gradient 1, truncated rows get exactly 0", flush=True)
        return 0
    if truncated.any() and not torch.equal(grad[truncated], expected[truncated]) \
            and torch.equal(grad[~truncated], expected[~truncated]):
        bad = grad[truncated]
        print(f"REPRODUCED: {SIGNATURE}: {int((bad != 0).any(dim=1).sum())} of {int(truncated.sum())} "
              f"truncated rows non-zero ({int(bad.isnan().any(dim=1).sum())} NaN)", flush=True)
        return 1
    print(f"WRONG GRADIENT elsewhere (not this bug): max |grad - expected| on kept rows "
          f"{(grad[~truncated] - expected[~truncated]).abs().max().item()}", flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
