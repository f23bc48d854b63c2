"""pytorch/FBGEMM#4586: the dense TBE on CPU pools its output although pooling_mode is NONE.

https://github.com/pytorch/FBGEMM/issues/4586 (open; reported on fbgemm-gpu 1.1.0, 2025-07-28: "CPU's output is
pooled though pooling_mode is None. GPU's output is normal. there are some version solve the problem?")

`DenseTableBatchedEmbeddingBagsCodegen(..., pooling_mode=PoolingMode.NONE, use_cpu=True)` goes through
`torch.ops.fbgemm.dense_embedding_codegen_lookup_function`, whose CPU kernel
(`split_embedding_codegen_forward_cpu`) only distinguishes SUM from MEAN: with NONE it still sums each bag and
returns a [B, total_D] tensor instead of one row per index ([num_indices, D]). The split (non-dense) TBE with
`ComputeDevice.CPU` handles NONE and returns the rows: that is the workaround.

The script builds two tables of 10 x 4 rows, looks up 5 indices in 4 bags (batch 2, lengths 2, 1, 1, 1) with
pooling NONE and compares the output with the table rows the indices name.

    python repro.py [--device cpu|cuda] [--split]

--split: the workaround, SplitTableBatchedEmbeddingBagsCodegen on CPU (EmbeddingLocation.HOST, ComputeDevice.CPU).

Only the CPU kernel is under test: --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "dense TBE on CPU pooled the output of pooling_mode NONE"
TABLES = 2
ROWS, DIM = 10, 4
INDICES = [1, 2, 3, 4, 5]  # bags (table-major): t0 = [1, 2], [3]; t1 = [4], [5]
OFFSETS = [0, 2, 3, 4, 5]


def lookup(split):
    """(the TBE's output, the rows it should return) for pooling NONE on CPU."""
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        ComputeDevice,
        DenseTableBatchedEmbeddingBagsCodegen,
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    torch.manual_seed(0)
    if split:
        specs = [(ROWS, DIM, EmbeddingLocation.HOST, ComputeDevice.CPU)] * TABLES
        tbe = SplitTableBatchedEmbeddingBagsCodegen(specs, pooling_mode=PoolingMode.NONE)
    else:
        tbe = DenseTableBatchedEmbeddingBagsCodegen([(ROWS, DIM)] * TABLES, pooling_mode=PoolingMode.NONE,
                                                    use_cpu=True)
    indices = torch.tensor(INDICES, dtype=torch.long)
    offsets = torch.tensor(OFFSETS, dtype=torch.long)
    out = tbe(indices, offsets).detach()
    weights = [w.detach() for w in tbe.split_embedding_weights()]
    bags_per_table = (len(OFFSETS) - 1) // TABLES
    rows = []
    for t in range(TABLES):
        start, end = OFFSETS[t * bags_per_table], OFFSETS[(t + 1) * bags_per_table]
        rows.append(weights[t][indices[start:end]])
    return out, torch.cat(rows)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--split", action="store_true",
                        help="workaround: the split TBE with ComputeDevice.CPU instead of the dense TBE")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    out, expected = lookup(args.split)
    if out.shape != expected.shape:
        print(f"REPRODUCED: {SIGNATURE}: output shape {list(out.shape)}, expected {list(expected.shape)} "
              f"(one row per index)", flush=True)
        return 1
    if not torch.allclose(out, expected):
        raise AssertionError(f"pooling NONE returned the right shape but other values:\n{out}\nexpected\n{expected}")
    print(f"OK: pooling NONE on CPU returned the {len(INDICES)} looked-up rows, shape {list(out.shape)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
