"""segment_sum_csr on CPU refuses int64 (Long) segment offsets (pytorch/FBGEMM#3881).

https://github.com/pytorch/FBGEMM/pull/3881 ("nested dispatching of segment_csr on cpu/gpu", commit 25f2aaab9,
first in FBGEMM v1.2.0; the PR is the report): `segment_sum_csr_cpu` (fbgemm_gpu/src/sparse_ops/
sparse_ops_cpu.cpp) read the CSR offsets with `csr_seg.data_ptr<int>()`, so int64 offsets (the dtype offsets take
once they pass 2^31, and torch's default integer dtype) raised "expected scalar type Int but found Long"; the fix
dispatches the offsets' index type (int32 or int64).

`torch.ops.fbgemm.segment_sum_csr(batch_size, csr_seg, values)` sums, for each segment i, the values
`values[csr_seg[i] * batch_size : csr_seg[i + 1] * batch_size]`. The script sums 10 float values in three segments
(csr_seg [0, 1, 3, 5], batch_size 2) with int64 offsets and compares the sums with those computed here.

    python repro.py [--device cpu|cuda] [--offsets-dtype int64|int32]

--offsets-dtype int32: a control, int32 offsets (summed right in every release).

Only the CPU kernel is under test: --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 2 = wrong sums, 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "expected scalar type Int but found Long"
CSR_SEG = [0, 1, 3, 5]
BATCH_SIZE = 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--offsets-dtype", choices=["int64", "int32"], default="int64",
                        help="dtype of the segment offsets (default int64: the bug)")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    values_list = [float(v) for v in range(1, CSR_SEG[-1] * BATCH_SIZE + 1)]
    values = torch.tensor(values_list, dtype=torch.float)
    csr_seg = torch.tensor(CSR_SEG, dtype=getattr(torch, args.offsets_dtype))
    want = [sum(values_list[CSR_SEG[i] * BATCH_SIZE:CSR_SEG[i + 1] * BATCH_SIZE]) for i in range(len(CSR_SEG) - 1)]
    print(f"torch {torch.__version__}; values {values_list}, csr_seg {CSR_SEG} ({args.offsets_dtype}), "
          f"batch_size {BATCH_SIZE}", flush=True)
    try:
        out = torch.ops.fbgemm.segment_sum_csr(BATCH_SIZE, csr_seg, values)
    except RuntimeError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: segment_sum_csr with {args.offsets_dtype} offsets on CPU: {SIGNATURE} "
              f"({str(e).splitlines()[0]})", flush=True)
        return 1
    got = out.tolist()
    print(f"segment sums {got}, expected {want}")
    if got != want:
        print("WRONG SUMS: the segment sums differ from the expected ones", flush=True)
        return 2
    print(f"FIXED: segment_sum_csr sums with {args.offsets_dtype} offsets on CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
