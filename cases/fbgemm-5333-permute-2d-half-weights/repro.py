"""permute_2D_sparse_data on CPU refuses float16 weights (pytorch/FBGEMM#5333).

https://github.com/pytorch/FBGEMM/pull/5333 ("Enable Half support for permute_2D_indices_weights_kernel_3",
commit 8082f0bc7, first in FBGEMM v1.6.0; the PR is the record): `permute_2D_sparse_data_cpu`
(fbgemm_gpu/src/sparse_ops/sparse_ops_cpu.cpp), the CPU kernel behind torchrec's KeyedJaggedTensor.permute,
dispatched the weights' dtype with FBGEMM_DISPATCH_FLOAT_AND_DOUBLE (FLOAT_ONLY before v1.4.0), so float16 weights
raised `"permute_2D_indices_weights_kernel_3" not implemented for 'Half'`; the fix dispatches float, half and
double.

The script permutes three tables of a batch of 2 (lengths [[2, 1], [1, 0], [1, 2]], permute [2, 0, 1]) with
per-index weights and compares the permuted lengths, indices and weights with those computed here.

    python repro.py [--device cpu|cuda] [--dtype float16|float64|float32]

--dtype float64: the weights in float64 (refused the same way before FBGEMM v1.4.0, which dispatched float only);
--dtype float32: a control, permuted right in every release.

Only the CPU kernel is under test: --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 2 = wrong values, 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "permute_2D_indices_weights_kernel_3\" not implemented for"
# per table, per sample of the batch: the bag's indices
TABLES = [[[10, 11], [12]], [[20], []], [[30], [31, 32]]]
PERMUTE = [2, 0, 1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float16", "float64", "float32"], default="float16",
                        help="the weights' dtype (default float16: the bug)")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    dtype = getattr(torch, args.dtype)
    flat = [i for table in TABLES for bag in table for i in bag]
    lengths = torch.tensor([[len(bag) for bag in table] for table in TABLES], dtype=torch.int64)
    indices = torch.tensor(flat, dtype=torch.int64)
    weights = torch.tensor([0.5 + i for i in flat], dtype=dtype)  # exact in float16 too
    permute = torch.tensor(PERMUTE, dtype=torch.int32)
    want_lengths = [[len(bag) for bag in TABLES[p]] for p in PERMUTE]
    want_indices = [i for p in PERMUTE for bag in TABLES[p] for i in bag]
    want_weights = [0.5 + i for i in want_indices]
    print(f"torch {torch.__version__}; lengths {lengths.tolist()}, indices {flat}, {args.dtype} weights, "
          f"permute {PERMUTE}", flush=True)
    try:
        out_lengths, out_indices, out_weights = torch.ops.fbgemm.permute_2D_sparse_data(
            permute, lengths, indices, weights, None)
    except RuntimeError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: permute_2D_sparse_data with {args.dtype} weights on CPU: "
              f"{str(e).splitlines()[0]}", flush=True)
        return 1
    got = (out_lengths.tolist(), out_indices.tolist(), out_weights.tolist(), out_weights.dtype)
    want = (want_lengths, want_indices, want_weights, dtype)
    print(f"permuted: lengths {got[0]}, indices {got[1]}, weights {got[2]} ({got[3]})")
    print(f"expected: lengths {want[0]}, indices {want[1]}, weights {want[2]} ({want[3]})")
    if got != want:
        print("WRONG VALUES: the permuted data differ from the expected ones", flush=True)
        return 2
    print(f"FIXED: permute_2D_sparse_data permutes {args.dtype} weights on CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
