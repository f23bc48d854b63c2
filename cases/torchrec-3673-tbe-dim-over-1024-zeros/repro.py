"""TorchRec #3673: pooled embeddings come back zero for tables with embedding_dim > 1024 (CUDA).

Upstream: https://github.com/meta-pytorch/torchrec/issues/3673 (rows past a certain sample index came back
partly or entirely zero for embedding_dim > 1024, although FBGEMM allows up to 2048). The cause is in FBGEMM's
TBE v2 forward kernel, which FBGEMM dispatches whenever max_D > 1024: its "small-L" early exit assumed at most 8
warps per row (the 1024-dim case), `table_warp_id >= ceil(B / 32) * 8`, so for D > 1024 (more warps per row)
the warps that own the later bags return before writing their output. Fixed by
https://github.com/pytorch/FBGEMM/pull/5569 ("Fix TBE v2 forward kernel for embedding dim > 1024"), which
computes the bound from max_D.

What the script does: one EmbeddingBagCollection table (embedding_dim 2048 by default), sharded table-wise
on this rank with the FUSED (FBGEMM TBE) kernel by DistributedModelParallel, one forward of a batch of 128
bags with one id each (average pooling factor 1 <= 8: the small-L path), compared with the unsharded module
holding the same weights. Only CUDA runs FBGEMM's GPU kernel; on CPU the script exits 125.

Usage:
    python repro.py [--device cuda] [--embedding-dim N] [--batch-size N]
    torchrun --standalone --nproc_per_node=1 repro.py [--device cuda] [--embedding-dim N]

    --embedding-dim 1024   control: <= 1024 uses the legacy kernel, right in every release

Exit codes: 0 sharded output matches, 1 bug reproduced, 125 cannot test here (no CUDA / --device cpu).
"""
import argparse
import copy
import os
import socket
import sys

import torch
import torch.distributed as dist

SIGNATURE = "TBE pooled output differs from the unsharded EmbeddingBagCollection"


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
    """Give the sharded table the reference's weights (state_dict shards alias the TBE weights)."""
    for key, value in model.state_dict().items():
        full = full_state[key]
        if hasattr(value, "local_shards"):  # ShardedTensor
            pieces = [(s.tensor, s.metadata.shard_offsets) for s in value.local_shards()]
        elif hasattr(value, "to_local"):  # DTensor over LocalShardsWrapper
            local = value.to_local()
            pieces = list(zip(local.local_shards(), local.local_offsets()))
        else:
            pieces = [(value, [0, 0])]
        with torch.no_grad():
            for tensor, (row, col) in pieces:
                rows, cols = tensor.shape
                tensor.copy_(full[row:row + rows, col:col + cols].to(tensor.device, tensor.dtype))


def check(args, device, rank, world_size):
    from torchrec.distributed.embedding_types import EmbeddingComputeKernel
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
    from torchrec.distributed.types import ShardingPlan
    from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    num_rows, dim, batch = 256, args.embedding_dim, args.batch_size
    tables = [EmbeddingBagConfig(name="t0", embedding_dim=dim, num_embeddings=num_rows,
                                 feature_names=["f0"], pooling=PoolingType.SUM)]
    torch.manual_seed(0)  # same weights on every rank
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
    reference = copy.deepcopy(ebc)

    sharder = EmbeddingBagCollectionSharder()
    module_plan = construct_module_sharding_plan(
        ebc,
        per_param_sharding={"t0": table_wise(rank=0, compute_kernel=EmbeddingComputeKernel.FUSED.value)},
        sharder=sharder,
        local_size=world_size,
        world_size=world_size,
        device_type=device.type,
    )
    model = DistributedModelParallel(ebc, device=device, plan=ShardingPlan(plan={"": module_plan}),
                                     sharders=[sharder])
    copy_weights_into_shards(model, reference.state_dict())

    # One id per bag: total_L = B <= 8 * B, so FBGEMM takes the small-L path of the v2 kernel.
    ids = torch.arange(batch) % num_rows
    kjt = KeyedJaggedTensor.from_lengths_sync(keys=["f0"], values=ids, lengths=torch.ones(batch, dtype=torch.long))
    with torch.no_grad():
        expected = reference(kjt).to_dict()["f0"]
        out = model(kjt.to(device))
        if hasattr(out, "wait"):
            out = out.wait()
        got = out.to_dict()["f0"].float().cpu()
    print(f"[rank {rank}] torch {torch.__version__}, embedding_dim {dim}, {batch} bags of one id, "
          f"output {tuple(got.shape)}", flush=True)

    bad = ~torch.isclose(got, expected, atol=1e-5, rtol=1e-4).all(dim=1)
    if bad.any():
        rows = bad.nonzero().flatten().tolist()
        zero_rows = int((got[bad].abs().sum(dim=1) == 0).sum())
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: {len(rows)} of {batch} bags wrong "
              f"(first {rows[0]}, last {rows[-1]}; {zero_rows} of them all zero)", flush=True)
        return 1
    print(f"[rank {rank}] FIXED: all {batch} pooled rows match the unsharded module", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--embedding-dim", type=int, default=2048,
                        help="table width; > 1024 takes FBGEMM's v2 forward kernel (default 2048)")
    parser.add_argument("--batch-size", type=int, default=128, help="bags in the batch (default 128)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if args.device == "cpu":
        print("SKIP: the bug is in FBGEMM's CUDA TBE forward kernel; the CPU kernel is not affected")
        return 125
    device = init_dist(args.device)
    try:
        verdict = check(args, device, dist.get_rank(), dist.get_world_size())
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
