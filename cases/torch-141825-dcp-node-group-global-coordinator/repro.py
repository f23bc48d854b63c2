"""pytorch/pytorch#141825: dcp.load / dcp.save with a per-node process group fail on every node but the first.

https://github.com/pytorch/pytorch/issues/141825

`torch.distributed.checkpoint` wraps its `process_group` in `_DistWrapper(group, ..., coordinator_rank=0)`, which
picks the coordinator with the group rank (`dist.get_rank(group) == coordinator_rank`) but passed the same number
as `dst`/`src` to `dist.gather_object`, `dist.scatter_object_list` and `dist.broadcast_object_list`, which read it
as a *global* rank. On node 0 the intra-node group holds global rank 0 and the two numberings agree; on node 1
(global ranks 2 and 3 of a 2 x 2 job) the group does not hold global rank 0 and torch refuses
(`ValueError: Global rank 0 is not part of group`; torch 2.5 fails one step earlier, on the group's coordinator:
"Argument ``gather_list`` must NOT be specified on non-destination ranks"). PR #147675 (first in torch 2.7.0) maps
the coordinator to its global rank for gather_object / scatter_object_list, which is all `dcp.load` uses; the
broadcast that ends `dcp.save` kept the group rank until torch 2.8.0.

The script builds one group per node (from LOCAL_WORLD_SIZE), and:
  default (load): writes a checkpoint from the whole world (each node's ranks hold their node's tensor), then each
      node loads its own tensor with `dcp.load(..., process_group=<node group>)`;
  --save: each node saves its tensor to a checkpoint of its own with `dcp.save(..., process_group=<node group>)`
      and loads it back with the same group.
Every rank checks the loaded tensor against the values this script computes for its node (never read back from
torch), and prints them. Node 0's ranks always pass; the verdict is node 1's.

    torchrun --nnodes 2 --node_rank N --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint HOST:PORT repro.py
        [--device cpu|cuda] [--save]

Under plain `python` or a single node (LOCAL_WORLD_SIZE == WORLD_SIZE) every node group holds global rank 0 and
the bug cannot show: the script says so and exits 125.

Exit code: 0 = every rank loaded its node's values, 1 = bug reproduced (the signature is printed first),
125 = cannot test here.
"""

import argparse
import os
import re
import shutil
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

SIGNATURE = r"Global rank 0 is not part of group|gather_list`` must NOT be specified on non-destination ranks"


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


def node_values(node):
    """The tensor node `node` saves: known here, independently of torch.distributed.checkpoint."""
    return torch.tensor([float(10 * (node + 1) + i) for i in range(6)])


def node_groups(local_size, world_size):
    """One group per node ([0, 1], [2, 3]); every rank creates every group, as new_group requires."""
    groups = []
    for first in range(0, world_size, local_size):
        groups.append(dist.new_group(list(range(first, first + local_size))))
    return groups


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--save", action="store_true",
                        help="dcp.save with the node group (default: dcp.load with the node group)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    if local_size == world_size:
        print(f"SKIP: one node (LOCAL_WORLD_SIZE {local_size} == WORLD_SIZE {world_size}): every node group holds "
              "global rank 0; run with torchrun --nnodes 2")
        return 125
    device = init_dist(args.device)
    rank = dist.get_rank()
    node = rank // local_size
    leader = node * local_size  # the node group's group-rank-0 member, by torchrun's rank arithmetic
    # One folder for the launch (both nodes share this machine's /tmp): rank 0 makes it and tells the world.
    shared = [tempfile.mkdtemp(prefix="torch-141825-") if rank == 0 else None]
    dist.broadcast_object_list(shared, src=0)
    root = shared[0]

    my_group = node_groups(local_size, world_size)[node]
    expected = node_values(node)
    key = f"node{node}.w"
    print(f"[rank {rank}] GROUP_RANK={os.environ.get('GROUP_RANK')} LOCAL_RANK={os.environ.get('LOCAL_RANK')} "
          f"node group: group rank {my_group.rank()} of {my_group.size()}, coordinator = group rank 0 = global "
          f"rank {leader}", flush=True)
    step = "dcp.save"
    try:
        if args.save:
            path = os.path.join(root, f"node{node}")
            dcp.save({key: expected.to(device)}, checkpoint_id=path, process_group=my_group)
        else:
            # The whole world writes one checkpoint (the default group: every coordinator is global rank 0).
            path = os.path.join(root, "world")
            dcp.save({key: expected.to(device)}, checkpoint_id=path)
        step = "dcp.load"
        loaded = {key: torch.zeros(6, device=device)}
        dcp.load(loaded, checkpoint_id=path, process_group=my_group)
    except ValueError as e:
        if not re.search(SIGNATURE, str(e)):
            raise
        print(f"[rank {rank}] REPRODUCED: {re.search(SIGNATURE, str(e)).group(0)} ({step} with node {node}'s group, "
              f"coordinator group rank 0 = global rank {leader}, used as global rank 0): {e}", flush=True)
        return 1  # no barrier: the node's other rank may be blocked in the group's collective
    got = loaded[key].cpu()
    print(f"[rank {rank}] loaded {key} = {got.tolist()}, expected {expected.tolist()}", flush=True)
    dist.barrier()
    if rank == 0:
        shutil.rmtree(root, ignore_errors=True)
    dist.destroy_process_group()
    if not torch.equal(got, expected):  # not this bug: an error of the script, never "fixed"
        raise AssertionError(f"rank {rank} loaded {got.tolist()} instead of {expected.tolist()}")
    print(f"[rank {rank}] OK: node {node}'s group saved and loaded its values", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
