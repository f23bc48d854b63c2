"""permute_1D_sparse_data on CPU refuses float64 weights (pytorch/FBGEMM#4969).

https://github.com/pytorch/FBGEMM/pull/4969 ("fix sparse_permute_1d kernel to support double dtype", commit
c2b6d0102, first in FBGEMM v1.4.0; the PR is the report): "Feature score collection will generate a weight tensor
with fp64 dtype". `permute_1D_sparse_data_cpu` (fbgemm_gpu/src/sparse_ops/sparse_ops_cpu.cpp) dispatched the
weights' dtype with FBGEMM_DISPATCH_FLOAT_ONLY, so float64 weights raised "... not implemented for 'Double'";
the fix dispatches FLOAT_AND_DOUBLE (and the same in permute_sparse_features_cpu).

The script permutes three features' lengths, indices and per-index weights (permute [2, 0, 1]) with the weights in
float64 and compares the permuted lengths, indices and weights with those computed here.

    python repro.py [--device cpu|cuda] [--dtype float64|float32]

--dtype float32: a control, float weights (permuted right in every release).

Only the CPU kernel is under test: --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 2 = wrong values, 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "not implemented for 'Double'"
# per feature: the bags' indices (one bag per feature here, lengths = len)
FEATURES = [[10, 11], [20], [30, 31, 32]]
PERMUTE = [2, 0, 1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                        help="the weights' dtype (default float64: the bug)")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    dtype = getattr(torch, args.dtype)
    flat = [i for f in FEATURES for i in f]
    lengths = torch.tensor([len(f) for f in FEATURES], dtype=torch.int64)
    indices = torch.tensor(flat, dtype=torch.int64)
    weights = torch.tensor([0.5 + i for i in flat], dtype=dtype)
    permute = torch.tensor(PERMUTE, dtype=torch.int32)
    want_lengths = [len(FEATURES[p]) for p in PERMUTE]
    want_indices = [i for p in PERMUTE for i in FEATURES[p]]
    want_weights = [0.5 + i for i in want_indices]
    print(f"torch {torch.__version__}; lengths {lengths.tolist()}, indices {flat}, {args.dtype} weights, "
          f"permute {PERMUTE}", flush=True)
    try:
        out_lengths, out_indices, out_weights = torch.ops.fbgemm.permute_1D_sparse_data(
            permute, lengths, indices, weights, None)
    except RuntimeError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: permute_1D_sparse_data with {args.dtype} weights on CPU: {SIGNATURE} "
              f"({str(e).splitlines()[0]})", flush=True)
        return 1
    got = (out_lengths.tolist(), out_indices.tolist(), out_weights.tolist(), out_weights.dtype)
    want = (want_lengths, want_indices, want_weights, dtype)
    print(f"permuted: lengths {got[0]}, indices {got[1]}, weights {got[2]} ({got[3]})")
    print(f"expected: lengths {want[0]}, indices {want[1]}, weights {want[2]} ({want[3]})")
    if got != want:
        print("WRONG VALUES: the permuted data differ from the expected ones", flush=True)
        return 2
    print(f"FIXED: permute_1D_sparse_data permutes {args.dtype} weights on CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
