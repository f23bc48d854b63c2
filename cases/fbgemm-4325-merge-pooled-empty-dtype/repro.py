"""pytorch/FBGEMM#4325: merge_pooled_embeddings on CPU returns float32 when every pooled embedding is empty.

https://github.com/pytorch/FBGEMM/pull/4325 ("fix output dtype issue in merge_pooled_embeddings when input tensors
are all empty", commit 95195085, first in FBGEMM v1.3.0; the PR is the report).

`torch.ops.fbgemm.merge_pooled_embeddings(pooled_embeddings, uncat_dim_size, target_device, cat_dim)` concatenates
the pooled embeddings of several tables along `cat_dim`. Its CPU kernel allocates the output with
`at::empty({n})` (no options, so float32) when the inputs hold no element at all (`n == 0`), and with the inputs'
options otherwise; `cat_out` then casts into that float32 tensor. So an empty batch of half-precision embeddings
comes back float32 while a non-empty one stays float16. The fix keeps the inputs' options unless the list itself
is empty.

The script merges two float16 pooled embeddings of a batch of 0 rows (shapes [0, 4] and [0, 8]) and compares the
output's dtype and shape with the inputs' dtype and the concatenated shape computed here.

    python repro.py [--device cpu|cuda] [--batch-size N]

--batch-size N: rows per pooled embedding (default 0, the bug; a control with 2 rows is right in every release).

Only the CPU kernel is under test: --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "merge_pooled_embeddings changed the dtype"
DIMS = [4, 8]
DTYPE = torch.float16


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=0,
                        help="rows of each pooled embedding (default 0: an empty batch)")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    torch.manual_seed(0)
    pooled = [torch.randn(args.batch_size, d).to(DTYPE) for d in DIMS]
    out = torch.ops.fbgemm.merge_pooled_embeddings(pooled, args.batch_size, torch.device("cpu"), 1)
    expected_shape = [args.batch_size, sum(DIMS)]
    print(f"inputs: {[(list(t.shape), str(t.dtype)) for t in pooled]}")
    print(f"output: shape {list(out.shape)}, dtype {out.dtype}; expected shape {expected_shape}, dtype {DTYPE}")
    if list(out.shape) != expected_shape:
        raise AssertionError(f"merge_pooled_embeddings returned shape {list(out.shape)}, expected {expected_shape}")
    if out.dtype != DTYPE:
        print(f"REPRODUCED: {SIGNATURE}: {DTYPE} inputs gave a {out.dtype} output", flush=True)
        return 1
    expected = torch.cat([t.float() for t in pooled], dim=1).to(DTYPE)
    if not torch.equal(out, expected):
        raise AssertionError(f"merge_pooled_embeddings returned other values:\n{out}\nexpected\n{expected}")
    print(f"OK: the merged output keeps the inputs' dtype {DTYPE}, shape {list(out.shape)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
