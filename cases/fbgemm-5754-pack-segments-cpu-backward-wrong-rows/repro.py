"""pack_segments backward on CPU puts the gradient of truncated segments in the wrong rows (FBGEMM, open).

Upstream: https://github.com/pytorch/FBGEMM/pull/5754 (commit b25d23c3, first in FBGEMM v1.8.0) fixed the CUDA
kernel of the same op: with `lengths[i] > max_length` the rows that the forward truncated never got a gradient
and kept uninitialized memory (`at::empty` -> `at::zeros`). The CPU kernel, `pack_segments_backward_cpu` in
fbgemm_gpu/src/sparse_ops/sparse_ops_cpu.cpp, was not touched and is worse: besides allocating with
`at::empty`, it advances its output position by the truncated length (`start += len` with
`len = min(lengths[i], max_length)`) instead of the segment's length, so the gradients of segment i+1 land in
the truncated rows of segment i, and the tail of the gradient is never written.

The script packs a [23, 3] input in segments of lengths 10, 5, 8 with max_length 4 (the example of #5754's
commit message), runs backward with a packed gradient of distinct values and compares the input gradient with
the one computed here: row `start_i + j` gets `grad[i, j]` for `j < min(lengths[i], max_length)`, every other row 0.

    python repro.py [--device cpu|cuda] [--max-length N]

--max-length N: the packed length (default 4, which truncates every segment; 16 truncates none, a control that
is right in every release).

Only the CPU kernel is under test (the CUDA one is pytorch/FBGEMM#5754's): --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "pack_segments backward on CPU wrote the gradient into the wrong rows"
LENGTHS = [10, 5, 8]
COLS = 3


def expected_grad(grad_packed, max_length):
    """The input gradient, computed here from the packed gradient."""
    out = torch.zeros(sum(LENGTHS), COLS, dtype=grad_packed.dtype)
    start = 0
    for i, length in enumerate(LENGTHS):
        kept = min(length, max_length)
        out[start:start + kept] = grad_packed[i, :kept]
        start += length
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-length", type=int, default=4,
                        help="packed length (default 4: every segment is truncated)")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    torch.manual_seed(0)
    data = torch.randn(sum(LENGTHS), COLS, requires_grad=True)
    lengths = torch.tensor(LENGTHS, dtype=torch.int64)
    packed = torch.ops.fbgemm.pack_segments(data, lengths, args.max_length)
    if list(packed.shape) != [len(LENGTHS), args.max_length, COLS]:
        raise AssertionError(f"pack_segments returned shape {list(packed.shape)}")
    grad_packed = torch.arange(1, packed.numel() + 1, dtype=torch.float).reshape(packed.shape)
    packed.backward(grad_packed)
    got = data.grad
    want = expected_grad(grad_packed, args.max_length)
    wrong = [r for r in range(got.shape[0]) if not torch.equal(got[r], want[r])]
    print(f"lengths {LENGTHS}, max_length {args.max_length}: {len(wrong)} of {got.shape[0]} gradient rows wrong "
          f"{wrong}")
    if wrong:
        for r in wrong[:6]:
            print(f"  row {r}: got {got[r].tolist()}, expected {want[r].tolist()}")
        print(f"REPRODUCED: {SIGNATURE}: rows {wrong}", flush=True)
        return 1
    print("OK: every gradient row is the packed gradient's (or 0 where the forward truncated)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
