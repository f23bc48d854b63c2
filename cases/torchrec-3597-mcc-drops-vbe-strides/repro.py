"""meta-pytorch/torchrec#3597: ManagedCollisionCollection drops a variable-batch KJT's strides and inverse indices.

https://github.com/meta-pytorch/torchrec/pull/3597 ("Fix perserving strides, inverse_indices in
ManagedCollisionCollection", commit a546e784, 2025-12-08: "MCC should only change the values attribute of the
KJT, while perserving all other attributes. This conversion did not perserve key attributes of KJT such as
`inverse_indices`, and `stride`. that are essential to work with VBE.")

`ManagedCollisionCollection.forward` remaps each table's ids and returns a new KeyedJaggedTensor. For a
variable-batch (VBE) input, where each key has its own batch size (`stride_per_key`) and `inverse_indices` map the
rows back to the full batch:

- torchrec 1.0.0 built the output with `KeyedJaggedTensor.from_jt_dict` (`ComputeJTDictToKJT`): the per-key strides
  survive, the inverse indices are dropped;
- torchrec 1.1.0 (PR #2378, "trec mc_modules optimization", commit e4650fc2, first in v1.1.0) builds it from the
  concatenated values and the lengths only: the per-key strides are lost too, and the output claims one uniform
  batch size, with no error;
- PR #3597 passes `stride`, `stride_per_key`, `stride_per_key_per_rank` and `inverse_indices` on; first released
  in torchrec 1.5.0.

The script feeds an MCC of two tables (MCHManagedCollisionModule, zch size 10, CPU) a VBE KJT: key f0 with batch
size 2, key f1 with batch size 1, inverse indices [[0, 1, 1], [0, 0, 0]], and compares the output's attributes with
the input's (the values are remapped; nothing else may change).

    python repro.py [--device cpu|cuda] [--inverse-indices]

Default: the per-key batch sizes (stride_per_key) must stay [2, 1] (lost in 1.1.0 to 1.4.0: a regression).
--inverse-indices: the inverse indices must stay (lost in every release before 1.5.0).

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch

SIGNATURE = "ManagedCollisionCollection dropped the VBE KJT's"
KEYS = ["f0", "f1"]
VALUES = [11, 12, 13, 14, 15]
LENGTHS = [1, 2, 2]                     # f0: 2 samples (1 and 2 ids); f1: 1 sample (2 ids)
STRIDE_PER_KEY = [2, 1]
INVERSE_INDICES = [[0, 1, 1], [0, 0, 0]]  # full batch of 3 -> each key's rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--inverse-indices", action="store_true",
                        help="check the inverse indices instead of the per-key batch sizes")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.mc_modules import (
        DistanceLFU_EvictionPolicy,
        ManagedCollisionCollection,
        MCHManagedCollisionModule,
    )
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    device = torch.device(args.device)
    tables = [EmbeddingBagConfig(name="t_" + k, embedding_dim=4, num_embeddings=10, feature_names=[k])
              for k in KEYS]
    mcc = ManagedCollisionCollection(
        managed_collision_modules={
            t.name: MCHManagedCollisionModule(zch_size=10, device=device, input_hash_size=1000,
                                              eviction_policy=DistanceLFU_EvictionPolicy(), eviction_interval=1)
            for t in tables
        },
        embedding_configs=tables,
    )
    features = KeyedJaggedTensor(
        keys=KEYS,
        values=torch.tensor(VALUES, device=device),
        lengths=torch.tensor(LENGTHS, device=device),
        stride_per_key_per_rank=[[s] for s in STRIDE_PER_KEY],
        inverse_indices=(KEYS, torch.tensor(INVERSE_INDICES, device=device)),
    )
    assert features.stride_per_key() == STRIDE_PER_KEY and features.variable_stride_per_key()
    out = mcc(features)
    out_inverse = out.inverse_indices_or_none()
    print(f"input: keys {KEYS}, lengths {LENGTHS}, stride_per_key {STRIDE_PER_KEY}, inverse indices "
          f"{INVERSE_INDICES}; MCC output: keys {out.keys()}, lengths {out.lengths().tolist()}, stride_per_key "
          f"{out.stride_per_key()}, inverse indices {None if out_inverse is None else out_inverse[1].tolist()}",
          flush=True)
    assert out.keys() == KEYS and out.lengths().tolist() == LENGTHS, "MCC changed the keys or the lengths"
    if args.inverse_indices:
        if out_inverse is None or out_inverse[1].tolist() != INVERSE_INDICES:
            print(f"REPRODUCED: {SIGNATURE} inverse indices: got "
                  f"{None if out_inverse is None else out_inverse[1].tolist()}, expected {INVERSE_INDICES}",
                  flush=True)
            return 1
        print(f"OK: the inverse indices are kept ({INVERSE_INDICES})", flush=True)
        return 0
    if out.stride_per_key() != STRIDE_PER_KEY or not out.variable_stride_per_key():
        print(f"REPRODUCED: {SIGNATURE} per-key batch sizes: stride_per_key {out.stride_per_key()}, "
              f"expected {STRIDE_PER_KEY}", flush=True)
        return 1
    print(f"OK: stride_per_key {out.stride_per_key()} kept", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
