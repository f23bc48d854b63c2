"""pytorch/pytorch#138575: `dcp.load` replaces a Stateful object in the caller's state dict.

https://github.com/pytorch/pytorch/pull/138575 (fix; the PR is the public record, with torchtitan's
workaround https://github.com/pytorch/torchtitan/pull/647). Broken by
https://github.com/pytorch/pytorch/pull/127617 ("Updates state dict in state dict loader", for #125096).

`torch.distributed.checkpoint.load(state_dict)` loads a `Stateful` value in place: it calls
`elem.state_dict()`, reads the checkpoint into that dict, then `elem.load_state_dict(...)`. PR #127617
(torch 2.4) added `state_dict[key] = statefull_sd[key]` for every key, Stateful or not, so after the
load the caller's dict no longer holds the Stateful object but the plain dict it returned. A training
loop that keeps that dict for its next checkpoint (torchtitan's CheckpointManager) then saves the
state as it was *at load time*, not the live object's: a run resumed twice is silently wrong. The fix
(#138575) keeps the object for Stateful entries.

This script does exactly that: save a train state (a Stateful whose `step` is a Python int, as in
torchtitan's TrainState) at step 5, load it into a fresh object through a `states` dict, train 3 more
steps, save `states` again, and read the second checkpoint back: it must say step 8.

    python repro.py [--device cpu|cuda] [--workaround]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--workaround]

A world of one (plain `python`, or torchrun with one process) uses DCP's single-process mode, with no
process group: DCP's object collectives (gather_object, broadcast_object_list) need numpy, which a
bare `pip install torch` does not bring, and the bug is in code every world size runs. With 2 or more
ranks every rank initialises a process group (gloo on CPU, nccl on CUDA; numpy needed) and the
checkpoints are written collectively to a temporary folder that rank 0 creates.

--workaround: torchtitan's workaround (#647): remember the Stateful entries before `dcp.load` and
put them back with `states.update(...)` afterwards.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA; torch without `torch.distributed.checkpoint.load` or `Stateful`, before 2.2).
"""

import argparse
import os
import shutil
import socket
import sys
import tempfile

import torch
import torch.distributed as dist

SIGNATURE = "dcp.load replaced the Stateful object in the state_dict"


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


def dcp_api():
    """(dcp module, Stateful) or None where this torch has no Stateful-aware `dcp.load`."""
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.stateful import Stateful
    except ImportError:
        return None
    if not hasattr(dcp, "load") or not hasattr(dcp, "save"):
        return None
    return dcp, Stateful


def shared_tmpdir(rank):
    """A temporary folder made by rank 0, its path broadcast to every rank (one machine)."""
    path = [tempfile.mkdtemp(prefix="bugmatrix-dcp-") if rank == 0 else None]
    if dist.is_initialized():
        dist.broadcast_object_list(path, src=0)
    return path[0]


def barrier():
    """Wait for every rank (nothing to wait for in a world of one without a process group)."""
    if dist.is_initialized():
        dist.barrier()


def run_check(args, device, rank, dcp, Stateful):
    class TrainState(Stateful):
        """torchtitan's TrainState, reduced: the step is a Python int, saved as a tensor."""

        def __init__(self, step=0):
            self.step = step

        def state_dict(self):
            return {"step": torch.tensor(self.step, dtype=torch.int64, device=device)}

        def load_state_dict(self, state_dict):
            self.step = int(state_dict["step"].item())

    root = shared_tmpdir(rank)
    try:
        first, second = os.path.join(root, "step-5"), os.path.join(root, "step-8")
        # The first run: checkpoint at step 5.
        dcp.save({"train_state": TrainState(5)}, storage_writer=dcp.FileSystemWriter(first))
        barrier()

        # The resumed run: the checkpoint manager keeps `states` for every later save.
        train_state = TrainState()
        states = {"train_state": train_state}
        kept = {k: v for k, v in states.items() if isinstance(v, Stateful)}
        dcp.load(states, storage_reader=dcp.FileSystemReader(first))
        if args.workaround:
            states.update(kept)
        if train_state.step != 5:
            raise AssertionError(f"dcp.load did not load the step in place: {train_state.step}")

        train_state.step += 3  # three more training steps
        dcp.save(states, storage_writer=dcp.FileSystemWriter(second))
        barrier()

        check = TrainState()
        dcp.load({"train_state": check}, storage_reader=dcp.FileSystemReader(second))
        entry = type(states["train_state"]).__name__
        print(
            f"[rank {rank}] torch {torch.__version__}: after dcp.load states['train_state'] is a "
            f"{entry}; second checkpoint says step {check.step} (live object: {train_state.step})",
            flush=True,
        )
        barrier()
    finally:
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)

    if check.step != train_state.step:
        print(
            f"[rank {rank}] REPRODUCED: {SIGNATURE}: it now holds a {entry}, so the next save "
            f"wrote step {check.step} instead of {train_state.step}",
            flush=True,
        )
        return 1
    print(
        f"[rank {rank}] OK: the Stateful object stayed in the state dict; the next save wrote step {check.step}",
        flush=True,
    )
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--workaround", action="store_true", help="put the Stateful objects back after dcp.load (torchtitan #647)"
    )
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    api = dcp_api()
    if api is None:
        print(f"SKIP: torch {torch.__version__} has no torch.distributed.checkpoint.load/Stateful (2.2+)")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        # A world of one: DCP's own single-process mode, no process group (its object collectives
        # would need numpy, which a bare torch install does not have). The same `load()` code runs.
        device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
        return run_check(args, device, 0, *api)
    device = init_dist(args.device)
    try:
        return run_check(args, device, dist.get_rank(), *api)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
