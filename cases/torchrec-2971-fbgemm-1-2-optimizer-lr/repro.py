"""meta-pytorch/torchrec#2971: torchrec 1.1 cannot shard a table with the fused kernel of fbgemm-gpu 1.2.

https://github.com/meta-pytorch/torchrec/issues/2971 ("Compatibility with PyTorch 2.7.0 and FBGEMM_GPU 1.2.0?",
2025-05-15: torchrec 1.1.0 "fails to run with the latest torch+fbgemm_gpu versions. Is there a branch that could
work?"; the reporter's fix: `emb_module.optimizer_args.learning_rate` -> `emb_module.get_learning_rate()`).

A coupling bug: torchrec 1.1's `EmbeddingFusedOptimizer.__init__` (torchrec/distributed/batched_embedding_kernel.py)
reads the TBE's learning rate as `emb_module.optimizer_args.learning_rate`. FBGEMM PR #3821 (commit 1a9c70ae, first
in fbgemm-gpu 1.2.0) removed `learning_rate` from `OptimizerArgs` (it is a tensor on the module now), so the first
table sharded with the fused compute kernel raises AttributeError. torchrec PR #2832 (commit 0102122b, first in
torchrec 1.2.0) reads it through `emb_module.get_learning_rate()`. torchrec 1.1.0 with fbgemm-gpu 1.1.0 works;
torchrec 1.1.0 with fbgemm-gpu 1.2.0 fails; torchrec 1.2.0 with fbgemm-gpu 1.2.0 works.

The script shards two EmbeddingBagCollection tables table-wise, one on rank 0 and one on the last rank, with
DistributedModelParallel (the fused kernel, EXACT_SGD, learning rate 0.05), runs one forward/backward, and checks
that every rank's fused optimizer holds that learning rate.

    python repro.py [--device cpu|cuda] [--dense-kernel]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--dense-kernel]

--dense-kernel: the workaround, compute kernel "dense" (autograd over a plain tensor; no fused optimizer, so the
learning rate is never read from the TBE; the model's optimizer is the user's own).

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
from torchrec.distributed.types import ShardingPlan
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

SIGNATURE = "torchrec's fused optimizer cannot read this fbgemm's learning rate"
LR = 0.05


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


def shard(device, dense_kernel):
    """DistributedModelParallel over two tables, one on rank 0 and one on the last rank (fused or dense kernel),
    so that every rank builds a kernel of its own."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType

    world = dist.get_world_size()
    tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=8, num_embeddings=32, feature_names=[f"f{i}"])
              for i in range(2)]
    torch.manual_seed(0)
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
    sharder = EmbeddingBagCollectionSharder(fused_params={"optimizer": EmbOptimType.EXACT_SGD, "learning_rate": LR})
    kernel = "dense" if dense_kernel else "fused"
    module_plan = construct_module_sharding_plan(
        ebc, per_param_sharding={"t0": table_wise(rank=0, compute_kernel=kernel),
                                 "t1": table_wise(rank=world - 1, compute_kernel=kernel)}, sharder=sharder,
        local_size=world, world_size=world, device_type=device.type,
    )
    return DistributedModelParallel(ebc, device=device, plan=ShardingPlan(plan={"": module_plan}),
                                    sharders=[sharder])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dense-kernel", action="store_true",
                        help="workaround: compute kernel 'dense' instead of 'fused' (no fused optimizer)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            model = shard(device, args.dense_kernel)
        except AttributeError as e:
            if "learning_rate" not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: AttributeError: {e}", flush=True)
            return 1
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=["f0", "f1"], values=torch.tensor([1, 5, 7, 30, 2, 9]), lengths=torch.tensor([2, 2, 1, 1]),
        ).to(device)
        out = model(kjt)
        if hasattr(out, "wait"):
            out = out.wait()
        out.values().sum().backward()
        if not args.dense_kernel:
            lrs = [g["lr"] for g in model.fused_optimizer.param_groups]
            if not lrs or any(abs(lr - LR) > 1e-6 for lr in lrs):
                raise AssertionError(f"the fused optimizer's learning rates are {lrs}, expected {LR}")
        dist.barrier()
        print(f"[rank {rank}] OK: sharded with the {'dense' if args.dense_kernel else 'fused'} kernel, "
              f"forward/backward ran, learning rate {LR}", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
