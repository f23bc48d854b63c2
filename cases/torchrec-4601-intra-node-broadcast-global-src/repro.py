"""meta-pytorch/torchrec#4601: a leader-and-broadcast helper on an intra-node group fails on every node but the first.

https://github.com/meta-pytorch/torchrec/pull/4601

`torchrec.distributed.collective_utils.invoke_on_rank_and_broadcast_result(pg, rank, func)` runs `func` on the
member of `pg` whose group rank is `rank` and broadcasts the result to the group; so does
`create_on_rank_and_share_result(pg, rank, creator, ...)`, whose docstring tells callers to pass an intra-node
group from `torchrec.distributed.comm.intra_and_cross_node_pg()`. Both pick the leader with the group-local
`pg.rank()` but pass the same number to `dist.broadcast_object_list(object_list, rank, group=pg)` as `src`, which
torch reads as a *global* rank. On node 0 the intra-node group holds global rank 0 and the two numberings agree;
on every other node the group (e.g. ranks 2 and 3 of a 2 x 2 job) does not hold global rank 0, and torch refuses:
`ValueError: Global rank 0 is not part of group`. Fixed by PR #4601 (pass `group_src=rank`), first released in
torchrec 1.9.0.

The script builds torchrec's own intra-node groups (`intra_and_cross_node_pg`, from LOCAL_WORLD_SIZE), asks the
group-rank-0 member of each node's group for a value (its global rank; with --share a CPU tensor shared through
`create_on_rank_and_share_result`) and checks that every rank receives the value of its own node's leader,
global rank `node * LOCAL_WORLD_SIZE`, computed here from the rank arithmetic, not by torchrec.

    torchrun --nnodes 2 --node_rank N --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint HOST:PORT repro.py
        [--device cpu|cuda] [--share]

--share: the same through `create_on_rank_and_share_result` (torchrec >= 1.6; the helper the fix calls "the more
exposed"), which maps the leader's tensor from /dev/shm on the other ranks of its node.

Under plain `python` or a single node (LOCAL_WORLD_SIZE == WORLD_SIZE) every intra-node group holds global rank 0
and the bug cannot show: the script says so and exits 125.

Exit code: 0 = every rank got its node leader's value, 1 = bug reproduced (the signature is printed first),
125 = cannot test here.
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
from torchrec.distributed import collective_utils
from torchrec.distributed.comm import intra_and_cross_node_pg

SIGNATURE = "Global rank 0 is not part of group"


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


def leader_value(intra_pg, share):
    """Ask the group-rank-0 member of this node's group for a value, the way the helpers' docstrings show."""
    if share:
        shared = collective_utils.create_on_rank_and_share_result(
            intra_pg,
            0,
            creator=lambda: torch.full((4,), 100.0 + dist.get_rank()),
            extractor=lambda t: [t],
            constructor=lambda ts: ts[0],
        )
        value = shared.tolist()
        # The leader keeps its tensor (and so its /dev/shm region) until every rank of its node has mapped it.
        dist.barrier(group=intra_pg)
        return value
    return collective_utils.invoke_on_rank_and_broadcast_result(intra_pg, 0, dist.get_rank)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--share", action="store_true",
                        help="use create_on_rank_and_share_result (a tensor through /dev/shm)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if args.share and not hasattr(collective_utils, "create_on_rank_and_share_result"):
        print("SKIP: this torchrec has no collective_utils.create_on_rank_and_share_result (added in 1.6)")
        return 125
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    if local_size == world_size:
        print(f"SKIP: one node (LOCAL_WORLD_SIZE {local_size} == WORLD_SIZE {world_size}): every intra-node group "
              "holds global rank 0; run with --nnodes 2")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        node = rank // local_size
        leader = node * local_size  # the node's group-rank-0 member, by the rank arithmetic torchrun uses
        expected = [100.0 + leader] * 4 if args.share else leader
        intra_pg, _cross_pg = intra_and_cross_node_pg(device, backend=dist.get_backend())
        print(f"[rank {rank}] GROUP_RANK={os.environ.get('GROUP_RANK')} LOCAL_RANK={os.environ.get('LOCAL_RANK')} "
              f"intra-node group: group rank {intra_pg.rank()} of {intra_pg.size()}, node leader = global rank {leader}",
              flush=True)
        try:
            got = leader_value(intra_pg, args.share)
        except ValueError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE} (node {node}'s intra-node group, leader at group rank 0 = "
                  f"global rank {leader}, was broadcast from global rank 0): {e}", flush=True)
            dist.barrier()
            return 1
        dist.barrier()
        if got != expected:  # not this bug: an error of the script, never "fixed"
            raise AssertionError(f"rank {rank} got {got!r} from its node's leader instead of {expected!r}")
        print(f"[rank {rank}] OK: got {got!r} from node {node}'s leader (global rank {leader}), as expected",
              flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
