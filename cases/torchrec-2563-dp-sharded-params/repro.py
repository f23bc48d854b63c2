"""TorchRec #2563: DATA_PARALLEL-sharded table weights behave unlike ordinary parameters.

An EmbeddingCollection is wrapped in DistributedModelParallel with a pinned
DATA_PARALLEL plan. The table weight reached through the module,
`model._dmp_wrapped_module.embeddings[TABLE].weight` (also what `.parameters()`
yields), is a `TableBatchedEmbeddingSlice`, a view into the fused (TBE) storage.

Checks (one per flag; exit 1 = the problem shows, 0 = behaves like a normal parameter):
  --check leaf            the weight is not a leaf tensor (its `_original_tensor` is)
  --check convert         after `model.bfloat16()` an optimizer step over
                          `model.parameters()` no longer changes what the lookup returns
  --check asstrided       the autograd graph of `(weight * 2).sum()` contains AsStridedBackward
  --check state-dict      workaround: the tensor from `state_dict()` is a leaf and aliases
                          the storage the lookup reads (an in-place write reaches the lookup)
  --check config-dtype    workaround: dtype chosen in EmbeddingConfig(data_type=...); an
                          optimizer step over `model.parameters()` reaches the lookup

    python repro.py --device cpu --check leaf
    torchrun --standalone --nproc_per_node=2 repro.py --device cpu --check convert
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
from torchrec import DataType, EmbeddingCollection, EmbeddingConfig, KeyedJaggedTensor
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.sharding_plan import construct_module_sharding_plan, data_parallel
from torchrec.distributed.types import ShardingPlan

TABLE = "product_table"
DTYPES = {"bf16": (torch.bfloat16, DataType.BF16), "fp16": (torch.float16, DataType.FP16)}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--check", required=True,
                   choices=["leaf", "convert", "asstrided", "state-dict", "config-dtype"])
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16",
                   help="low precision for --check convert / config-dtype")
    return p.parse_args()


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


def build_model(device, data_type=DataType.FP32):
    ec = EmbeddingCollection(
        device=torch.device("meta"),
        tables=[EmbeddingConfig(name=TABLE, embedding_dim=4, num_embeddings=4,
                                feature_names=["product"], data_type=data_type)],
    )
    ws = dist.get_world_size()
    plan = ShardingPlan({"": construct_module_sharding_plan(
        ec, per_param_sharding={TABLE: data_parallel()},
        local_size=ws, world_size=ws, device_type=device.type)})
    return DistributedModelParallel(ec, device=device, plan=plan)


def lookup(model, device):
    # one id per bag: DP EmbeddingCollection on CPU returns pooled rows
    kjt = KeyedJaggedTensor.from_lengths_sync(
        keys=["product"], values=torch.tensor([0, 1, 2, 3]), lengths=torch.tensor([1, 1, 1, 1])
    ).to(device)
    out = model(kjt)
    if hasattr(out, "wait"):
        out = out.wait()
    return out["product"].values()


def optimizer_step_changes_lookup(model, device):
    before = lookup(model, device)
    before.float().sum().backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    after = lookup(model, device)
    return not torch.equal(before.detach(), after.detach())


def weight_of(model):
    return model._dmp_wrapped_module.embeddings[TABLE].weight


def main():
    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("cannot test: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        return check(args, device, dist.get_rank())
    finally:
        dist.destroy_process_group()


def check(args, device, rank):
    dtype, data_type = DTYPES[args.dtype]
    verdict, msg = 0, ""

    if args.check == "leaf":
        w = weight_of(build_model(device))
        if not w.is_leaf:
            verdict, msg = 1, (f"DP weight is not a leaf: {type(w).__name__}.is_leaf=False "
                               f"(_original_tensor.is_leaf={w._original_tensor.is_leaf})")
        else:
            msg = f"{type(w).__name__}.is_leaf=True"

    elif args.check == "convert":
        model = build_model(device).to(dtype)  # same as model.bfloat16() for bf16
        w = weight_of(model)
        if not optimizer_step_changes_lookup(model, device):
            verdict, msg = 1, (f"after model.to({dtype}) optimizer step did not reach the embeddings: "
                               f"param {w.dtype} vs kernel storage {w._original_tensor.dtype}")
        else:
            msg = f"after model.to({dtype}) the optimizer step changed the lookup"

    elif args.check == "asstrided":
        w = weight_of(build_model(device))
        names, stack = [], [(w * 2).sum().grad_fn]
        while stack:
            fn = stack.pop()
            if fn is not None:
                names.append(type(fn).__name__)
                stack.extend(f for f, _ in fn.next_functions)
        if any(n.startswith("AsStridedBackward") for n in names):
            verdict, msg = 1, f"AsStridedBackward in grad graph of DP weight: {' -> '.join(names)}"
        else:
            msg = f"grad graph: {' -> '.join(names)}"

    elif args.check == "state-dict":
        model = build_model(device)
        t = model.state_dict()[f"embeddings.{TABLE}.weight"]
        if hasattr(t, "local_shards"):  # older torchrec: a ShardedTensor with one full local shard
            t = t.local_shards()[0].tensor
        before = lookup(model, device)
        with torch.no_grad():
            t.add_(1.0)
        reaches = not torch.equal(before, lookup(model, device))
        if not (t.is_leaf and reaches):
            verdict, msg = 1, f"state_dict tensor: is_leaf={t.is_leaf}, in-place write reaches lookup={reaches}"
        else:
            msg = f"state_dict tensor {type(t).__name__} is a leaf and aliases the lookup storage"

    elif args.check == "config-dtype":
        model = build_model(device, data_type)
        try:
            changed = optimizer_step_changes_lookup(model, device)
        except (NotImplementedError, RuntimeError) as e:  # fbgemm's CPU kernel has no BFloat16
            if "not implemented for" not in str(e):
                raise
            print(f"cannot test: {args.dtype} table on {args.device}: {e}")
            return 125
        w = weight_of(model)
        if not changed:
            verdict, msg = 1, (f"with EmbeddingConfig(data_type={data_type}) optimizer step did not "
                               f"reach the embeddings: param {w.dtype} vs kernel storage {w._original_tensor.dtype}")
        else:
            msg = f"with EmbeddingConfig(data_type={data_type}) the optimizer step changed the lookup"

    print(f"[rank {rank}] {'REPRODUCED' if verdict else 'OK'}: {msg}", flush=True)
    dist.barrier()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
