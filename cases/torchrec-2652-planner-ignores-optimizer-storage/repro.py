"""meta-pytorch/torchrec#2652: the sharding planner's storage estimate leaves out the optimizer state.

https://github.com/meta-pytorch/torchrec/pull/2652

`apply_optimizer_in_backward` records the optimizer of each embedding weight in the tensor attribute
`_optimizer_classes`. The planner's `calculate_shard_storages` (torchrec/distributed/planner/
shard_estimators.py) still read the old attribute `_optimizer_class`, which no longer exists, so it
always estimated the storage of a table as if it had no optimizer state: with Adam a shard needs 3x
its weights (weights + two moments), the plan reserved 1x, and the users of the PR ran out of CUDA
memory. PR #2652 (commit ed715d78, first in torchrec 1.1.0) reads `_optimizer_classes`.

The script enumerates the planner's sharding options for one 1000x64 table (EmbeddingEnumerator with
the default estimators, a world of one, compute device cpu) without an optimizer and after
`apply_optimizer_in_backward(<optimizer>, ...)`, and compares each option's storage (ddr on cpu).

    python repro.py [--device cpu|cuda] [--optimizer adam|rowwise-adagrad]

--optimizer rowwise-adagrad: torchrec's RowWiseAdagrad (one state value per row: 1 + 1/64 of the weights).

The planner runs on the host; no process group is needed (world size 1 under torchrun as well).

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import sys

import torch
import torchrec.optim as trec_optim
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
from torchrec.distributed.planner.types import Topology
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection

SIGNATURE = "planner storage ignores the optimizer state"
ROWS, DIM = 1000, 64


def storages(device_type, optimizer):
    """{(sharding type, kernel): total estimated storage} of the table's sharding options."""
    ebc = EmbeddingBagCollection(
        tables=[EmbeddingBagConfig(name="t", embedding_dim=DIM, num_embeddings=ROWS, feature_names=["f"])],
        device=torch.device("meta"),
    )
    if optimizer == "adam":
        trec_optim.apply_optimizer_in_backward(torch.optim.Adam, ebc.parameters(), {"lr": 0.01})
    elif optimizer == "rowwise-adagrad":
        trec_optim.apply_optimizer_in_backward(trec_optim.RowWiseAdagrad, ebc.parameters(), {"lr": 0.01})
    topology = Topology(world_size=1, compute_device=device_type)
    options = EmbeddingEnumerator(topology=topology, batch_size=128).enumerate(
        module=ebc, sharders=[EmbeddingBagCollectionSharder()]
    )
    out = {}
    for opt in options:
        total = sum(shard.storage.hbm + shard.storage.ddr for shard in opt.shards)
        out[(opt.sharding_type, opt.compute_kernel)] = total
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--optimizer", choices=["adam", "rowwise-adagrad"], default="adam")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    plain = storages(args.device, None)
    with_opt = storages(args.device, args.optimizer)
    multiplier = 2.0 if args.optimizer == "adam" else 1.0 / DIM
    common = sorted(set(plain) & set(with_opt))
    if not common:
        raise AssertionError(f"no sharding option in common: {sorted(plain)} vs {sorted(with_opt)}")
    unchanged = [k for k in common if with_opt[k] == plain[k]]
    if unchanged:
        k = unchanged[0]
        print(
            f"[rank 0] REPRODUCED: {SIGNATURE}: {args.optimizer} adds {multiplier:.3f}x the weights, but the "
            f"estimate for {k[0]}/{k[1]} is {with_opt[k]} bytes with it and {plain[k]} without "
            f"({len(unchanged)} of {len(common)} options unchanged)",
            flush=True,
        )
        return 1
    ratios = {f"{k[0]}/{k[1]}": round(with_opt[k] / plain[k], 3) for k in common}
    print(f"[rank 0] OK: the estimate grows with the {args.optimizer} state: with/without = {ratios}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
