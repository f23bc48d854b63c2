"""meta-pytorch/torchrec#2952: a pytree round trip of a variable-batch KeyedJaggedTensor loses its batch layout.

https://github.com/meta-pytorch/torchrec/pull/2952 (and the follow-up https://github.com/meta-pytorch/torchrec/pull/3299)

KeyedJaggedTensor registers itself with torch.utils._pytree (what torch.export, FX and `tree_map` use).
Up to torchrec 1.3, `_kjt_flatten` emits only `_values, _weights, _lengths, _offsets` and
`_kjt_unflatten` calls `KeyedJaggedTensor(keys, *leaves)`: `stride_per_key_per_rank` (and
`inverse_indices`) are dropped, so a variable-batch ("VBE") KJT comes back as a fixed-stride KJT whose
lengths are re-split evenly across keys: keys get the wrong number of samples and the wrong values.
PR #2952 (commit 5553cb09, reverted, relanded as fa3eff7f) adds both fields to the flattened leaves,
with #3299 (7f6e7fbf) fixing the unflatten; both first in torchrec 1.4.0.

    python repro.py [--device cpu|cuda] [--fixed-stride]

--fixed-stride: control, a KJT with the same stride for every key, which every release round-trips.

The check needs no process group (world size 1 under torchrun as well).

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch
import torch.utils._pytree as pytree
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

SIGNATURE = "pytree round trip lost the KJT's variable batch"


def build(device, fixed_stride):
    """Key `a` with 2 samples and key `b` with 4 (VBE), or 3 and 3 (--fixed-stride)."""
    values = torch.arange(8.0, device=device)
    if fixed_stride:
        offsets = torch.tensor([0, 2, 2, 3, 4, 5, 8], dtype=torch.int32, device=device)
        return KeyedJaggedTensor(keys=["a", "b"], values=values, offsets=offsets)
    offsets = torch.tensor([0, 2, 2, 3, 4, 5, 8], dtype=torch.int32, device=device)
    return KeyedJaggedTensor(keys=["a", "b"], values=values, offsets=offsets, stride_per_key_per_rank=[[2], [4]])


def layout(kjt):
    """Per key: (number of samples, lengths, values) as plain lists."""
    out = {}
    for key, jt in kjt.to_dict().items():
        out[key] = (int(jt.lengths().numel()), jt.lengths().tolist(), jt.values().tolist())
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--fixed-stride", action="store_true", help="control: no variable batch")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = torch.device(args.device)
    kjt0 = build(device, args.fixed_stride)
    before = layout(kjt0)
    leaves, spec = pytree.tree_flatten(kjt0)
    kjt1 = pytree.tree_unflatten(leaves, spec)
    if not isinstance(kjt1, KeyedJaggedTensor):
        raise TypeError(f"tree_unflatten returned {type(kjt1).__name__}, not a KeyedJaggedTensor")
    after = layout(kjt1)
    vbe_before, vbe_after = kjt0.variable_stride_per_key(), kjt1.variable_stride_per_key()
    if after != before or vbe_after != vbe_before:
        print(
            f"[rank 0] REPRODUCED: {SIGNATURE}: variable_stride_per_key {vbe_before} -> {vbe_after}; "
            f"per key (samples, lengths, values) {before} -> {after}",
            flush=True,
        )
        return 1
    print(f"[rank 0] OK: pytree round trip kept the KJT (variable_stride_per_key={vbe_after}, {after})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
