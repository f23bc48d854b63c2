"""TorchRec #2808: row-wise sharded EmbeddingBagCollection with MEAN and SUM tables.

When a row-wise (RW) sharded EmbeddingBagCollection holds some MEAN-pooled and some
SUM-pooled tables, ShardedEmbeddingBagCollection.input_dist builds the mean-pooling
divisor with `_create_mean_pooling_divisor(lengths=features.lengths(), ...)`, which
sets the lengths of the SUM features to 1 *in place*. When the features need no
permute, that tensor is the caller's KeyedJaggedTensor's own lengths, so the KJT
that is then bucketized and sent through the all-to-all has wrong lengths: the
reporter (torchrec 1.1.0, 2 GPUs) got an error out of the all-to-all; the pooled
output (and the caller's KJT) are wrong in any case. Fixed by PR #2809
(`lengths = lengths.clone()`), first released in torchrec 1.2.0.

The script pins an RW plan for two tables (t_sum: SUM, t_mean: MEAN), runs one
forward of the DMP-wrapped module on a local batch, and compares with the
unsharded EmbeddingBagCollection (same weights) on the same batch. It reports
the bug if the forward raises the error the corrupted lengths cause, if the
caller's KJT lengths were changed by the forward, or if the pooled output
differs from the unsharded one.

    python repro.py [--device cpu|cuda] [--all-mean]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--all-mean]

--all-mean: control - both tables MEAN (no SUM feature to reset, so the
in-place write never happens).

Exit code: 0 = sharded output matches and the input is untouched, 1 = bug
reproduced, 125 = cannot test here.
"""

import argparse
import copy
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, row_wise
from torchrec.distributed.types import ShardingPlan
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

SIGNATURE = "RW EBC with MEAN and SUM tables"
SPLIT_ERROR = "Split sizes doesn't match total dim 0 size"


def free_port():
    """A TCP port that is free now: the OS picks it when we bind to port 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_dist(device_type):
    """Join the process group (gloo on CPU, nccl on CUDA); return this rank's device.

    Under plain `python` (no RANK in the environment) this is a world of one on a free port.
    """
    if "RANK" not in os.environ:  # plain `python repro.py`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in os.environ:
            os.environ["MASTER_PORT"] = str(free_port())
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return device


def copy_weights_into_shards(model, full_state):
    """Give the sharded tables the reference's weights, shard by shard.

    The state_dict entries of the sharded module alias the kernel's storage.
    """
    for key, value in model.state_dict().items():
        full = full_state[key]
        if hasattr(value, "local_shards"):  # ShardedTensor
            pieces = [(s.tensor, s.metadata.shard_offsets) for s in value.local_shards()]
        elif hasattr(value, "to_local"):  # DTensor over LocalShardsWrapper
            local = value.to_local()
            pieces = list(zip(local.local_shards(), local.local_offsets(), strict=True))
        else:
            pieces = [(value, [0, 0])]
        with torch.no_grad():
            for tensor, (row, col) in pieces:
                rows, cols = tensor.shape
                tensor.copy_(full[row:row + rows, col:col + cols])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument(
        "--all-mean",
        action="store_true",
        help="control: make both tables MEAN-pooled (no SUM feature lengths to reset)",
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda requested but CUDA is not available")
        return 125

    device = init_dist(args.device)
    try:
        return check(args, device, dist.get_rank(), dist.get_world_size())
    finally:
        dist.destroy_process_group()


def check(args, device, rank, world_size):
    first_pooling = PoolingType.MEAN if args.all_mean else PoolingType.SUM
    tables = [
        EmbeddingBagConfig(name="t_sum", embedding_dim=4, num_embeddings=16,
                           feature_names=["f_sum"], pooling=first_pooling),
        EmbeddingBagConfig(name="t_mean", embedding_dim=4, num_embeddings=16,
                           feature_names=["f_mean"], pooling=PoolingType.MEAN),
    ]
    torch.manual_seed(0)  # same weights on every rank
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
    reference = copy.deepcopy(ebc)  # unsharded copy with the same weights

    # Pin the plan (both tables row-wise) so the planner plays no part.
    sharder = EmbeddingBagCollectionSharder()
    module_plan = construct_module_sharding_plan(
        ebc,
        per_param_sharding={"t_sum": row_wise(), "t_mean": row_wise()},
        sharder=sharder,
        local_size=world_size,
        world_size=world_size,
        device_type=device.type,
    )
    plan = ShardingPlan(plan={"": module_plan})
    model = DistributedModelParallel(ebc, device=device, plan=plan, sharders=[sharder])
    copy_weights_into_shards(model, reference.state_dict())

    # Local batch of 2, keys in table order (so the features are not permuted).
    # ids span both row-wise shards.
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=["f_sum", "f_mean"],
        values=torch.tensor([1, 9, 3, 12, 14, 2, 5, 8, 15, 0]),
        lengths=torch.tensor([2, 3, 1, 4]),
    )
    lengths_before = kjt.lengths().clone()
    expected = reference(kjt).to_dict()
    kjt_dev = kjt.to(device)
    lengths_before_dev = kjt_dev.lengths().clone()

    try:
        out = model(kjt_dev)
        if hasattr(out, "wait"):
            out = out.wait()
        got = {k: v.cpu() for k, v in out.to_dict().items()}
    except RuntimeError as e:
        # What the corrupted lengths cause in the input all-to-all with 2+ ranks
        # (the reporter's symptom); any other error escapes.
        msg = str(e)
        if SPLIT_ERROR not in msg:
            raise
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: forward failed: "
              f"{type(e).__name__}: {msg.splitlines()[0][:200]}", flush=True)
        traceback.print_exc(limit=-2)
        return 1

    problems = []
    lengths_after = kjt_dev.lengths().cpu()
    if not torch.equal(lengths_after, lengths_before_dev.cpu()):
        problems.append(f"forward changed the input KJT lengths "
                        f"{lengths_before.tolist()} -> {lengths_after.tolist()}")
    for key in ("f_sum", "f_mean"):
        if not torch.allclose(got[key], expected[key].detach(), atol=1e-5):
            diff = (got[key] - expected[key].detach()).abs().max().item()
            problems.append(f"pooled output for {key} differs from unsharded "
                            f"(max abs diff {diff:.4g})")
    if problems:
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: " + "; ".join(problems))
        return 1

    print(f"[rank {rank}] FIXED: RW-sharded output matches the unsharded module and the "
          f"input KJT lengths are unchanged ({lengths_before.tolist()})")
    # Avoids gloo teardown hangs seen with torchrec on CPU.
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
