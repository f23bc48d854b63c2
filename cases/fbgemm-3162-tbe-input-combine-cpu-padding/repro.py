"""pytorch/FBGEMM#3162: tbe_input_combine on CPU puts an indices tensor's padding inside the last bag of its table.

https://github.com/pytorch/FBGEMM/pull/3162 ("Fix CPU tbe_input_combine to support cases that value tensors have
padding", commit 37607590, first in FBGEMM v1.1.0; the PR is the report).

`torch.ops.fbgemm.tbe_input_combine(indices_list, offsets_list, per_sample_weights, include_last_offsets)` merges
the inputs of several tables into one indices tensor and one offsets tensor. With `include_last_offsets` each
table's offsets end with the end of its last bag, which may be smaller than the indices tensor (padding after
the last bag). The CPU kernel before the fix copied every element of each indices tensor, padding included, and
started the next table at `indices.numel()`: the table's own last offset was dropped, so its last bag ran on
over the padding. The fix (only when every include_last_offsets is True and some tensor is padded) trims the
padding out of the combined indices and uses the last offset as the table's end.

The script combines two tables: table 0 has bags [1, 2] and [3] followed by two padding entries (offsets [0, 2, 3],
5 indices), table 1 has bags [4] and [5]. It reads the bags back from the combined indices/offsets and compares
them with the bags computed here from the inputs.

    python repro.py [--device cpu|cuda] [--no-padding]

--no-padding: a control, table 0 without padding (right in every release).

Only the CPU kernel is under test: --device cuda exits 125.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "tbe_input_combine put padding into a bag"
# (bags, padding) per table; include_last_offsets is True for every table
TABLES = [([[1, 2], [3]], [0, 0]), ([[4], [5]], [])]


def table_inputs(padded):
    """indices_list, offsets_list (with the last offset) and the expected bags, computed here."""
    indices_list, offsets_list, expected = [], [], []
    for bags, padding in TABLES:
        flat, offsets = [], [0]
        for bag in bags:
            flat.extend(bag)
            offsets.append(len(flat))
        if padded:
            flat = flat + padding
        indices_list.append(torch.tensor(flat, dtype=torch.long))
        offsets_list.append(torch.tensor(offsets, dtype=torch.long))
        expected.extend(bags)
    return indices_list, offsets_list, expected


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-padding", action="store_true",
                        help="control: no padding after the last bag of table 0")
    args = parser.parse_args()

    if args.device == "cuda":
        print("SKIP: the bug is in the CPU kernel; --device cuda is not under test")
        return 125
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    indices_list, offsets_list, expected = table_inputs(padded=not args.no_padding)
    weights = [torch.tensor([], dtype=torch.float) for _ in indices_list]
    include_last = torch.tensor([True] * len(indices_list), dtype=torch.bool)
    indices, offsets, _ = torch.ops.fbgemm.tbe_input_combine(indices_list, offsets_list, weights, include_last)
    ind, off = indices.tolist(), offsets.tolist()
    got = [ind[off[k]:off[k + 1]] for k in range(len(off) - 1)]
    print(f"inputs: indices {[t.tolist() for t in indices_list]}, offsets {[t.tolist() for t in offsets_list]}")
    print(f"combined: indices {ind}, offsets {off}")
    print(f"bags read back: {got}; expected: {expected}")
    if got != expected:
        print(f"REPRODUCED: {SIGNATURE}: bags {got}, expected {expected}", flush=True)
        return 1
    print(f"OK: the combined inputs hold the {len(expected)} bags of the tables", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
