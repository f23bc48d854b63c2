"""Compatibility probe: do this torchrec, fbgemm-gpu and torch work together? (bugmatrix compat)

Imports torchrec's sharding stack, then looks up an EmbeddingBagCollection through DistributedModelParallel
(one table-wise sharded table, a 1-rank gloo group on CPU: the sharded path runs fbgemm's kernels) and compares
the pooled result with the unsharded module's (torchrec #2971: which torch goes with which torchrec).

Exit code: 0 works, 1 failed (the line names the stage, `import` or `use`, and the error).
"""

import os
import socket
import sys


def fail(stage, exc):
    text = str(exc).strip().splitlines()
    print(f"COMPAT-PROBE-FAILED {stage}: {type(exc).__name__}: {text[0][:400] if text else ''}", flush=True)
    return 1


def main():
    try:
        import torch
        import torch.distributed as dist
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.model_parallel import DistributedModelParallel
        from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
        from torchrec.distributed.types import ShardingPlan
        from torchrec.modules.embedding_configs import EmbeddingBagConfig
        from torchrec.modules.embedding_modules import EmbeddingBagCollection
        from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    except Exception as exc:
        return fail("import", exc)
    print("COMPAT-PROBE stage: use", flush=True)
    if "RANK" not in os.environ:  # plain `python probe.py`: a world of one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        dist.init_process_group("gloo")
        try:
            torch.manual_seed(0)
            tables = [EmbeddingBagConfig(name="t0", embedding_dim=4, num_embeddings=10, feature_names=["f0"])]
            ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
            kjt = KeyedJaggedTensor.from_lengths_sync(keys=["f0"], values=torch.tensor([1, 2, 3, 7]),
                                                      lengths=torch.tensor([2, 2]))
            expected = ebc(kjt).to_dict()["f0"].detach()
            sharder = EmbeddingBagCollectionSharder()
            plan = ShardingPlan(plan={"": construct_module_sharding_plan(
                ebc, per_param_sharding={"t0": table_wise(rank=0)}, sharder=sharder, local_size=1, world_size=1,
                device_type="cpu")})
            reference = ebc.embedding_bags["t0"].weight.detach().clone()
            model = DistributedModelParallel(ebc, device=torch.device("cpu"), plan=plan, sharders=[sharder])
            with torch.no_grad():  # a table sharded on CPU starts from its own init: give it the reference's
                for key, value in model.state_dict().items():
                    if not key.endswith("t0.weight"):
                        continue
                    if hasattr(value, "local_shards"):  # ShardedTensor
                        target = value.local_shards()[0].tensor
                    elif hasattr(value, "to_local"):  # DTensor over LocalShardsWrapper
                        local = value.to_local()
                        target = local.local_shards()[0] if hasattr(local, "local_shards") else local
                    else:
                        target = value
                    target.copy_(reference)
            out = model(kjt)
            if hasattr(out, "wait"):
                out = out.wait()
            got = out.to_dict()["f0"].detach()
            if got.shape != expected.shape:
                raise AssertionError(f"sharded lookup shape {tuple(got.shape)} != {tuple(expected.shape)}")
            if not torch.allclose(got, expected, atol=1e-5):
                raise AssertionError(f"sharded lookup {got.tolist()} != unsharded {expected.tolist()}")
            dist.barrier()
        finally:
            dist.destroy_process_group()
    except Exception as exc:
        return fail("use", exc)
    print("COMPAT-PROBE works: sharded EmbeddingBagCollection lookup matches the unsharded one", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
