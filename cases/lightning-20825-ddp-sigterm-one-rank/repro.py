"""Lightning #20825: under DDP a SIGTERM that reaches one rank stops that rank only; its peer is left in a collective.

https://github.com/Lightning-AI/pytorch-lightning/pull/20825

Lightning's SIGTERM handler only sets `trainer.received_sigterm` on the rank that got the signal; that rank raises
SIGTERMException at the end of its current batch and leaves `fit`, while every other rank goes on into the next
batch and waits in the gradient all-reduce for a peer that never comes (on NCCL: a hang until the watchdog; on gloo
until the process-group timeout, or until the stopped rank's process leaves and the peer's connection breaks).
PR #20825 (first in 2.5.2) broadcasts rank 0's `received_sigterm` at the start of every training batch, so every
rank raises SIGTERMException together; its signal handler also broadcasts from rank 0 at once.

    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--signal-in batch-end|training-step]

--signal-in batch-end      rank 0 signals itself in on_train_batch_end of batch 2, between two batches
                           (the default; what the fix handles)
--signal-in training-step  rank 0 signals itself inside training_step of batch 2, as the fix PR's own test does,
                           while rank 1 is already in that batch's gradient all-reduce: the fix's handler then
                           broadcasts while its peer all-reduces

Trainer(strategy=DDPStrategy(timeout=20 s)) on every rank (Lightning reads torchrun's environment and creates the
process group itself); one epoch of 8 batches. During fit SIGTERM gets its default action back, as a worker under
plain torchrun has, so Lightning's own handler is the one that runs (it chains to a handler already installed).
Every rank decides on its own: stopped by SIGTERMException = correct; a collective that failed because its peer
stopped (connection closed by the peer, or the timeout) after the signal's batch = the bug. Exit: 0 correct, 1 bug, 125 cannot test here.
"""

import argparse
import datetime
import os
import signal
import sys

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "was left in a collective after the SIGTERM on rank 0"
PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Timed out waiting", "timed out", "Broken pipe")
SIGNAL_BATCH = 2
PG_TIMEOUT_S = 20


class Model(L.LightningModule):
    def __init__(self, signal_in):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.signal_in = signal_in

    def _maybe_signal(self, where, batch_idx):
        if self.signal_in == where and self.trainer.global_rank == 0 and batch_idx == SIGNAL_BATCH:
            os.kill(os.getpid(), signal.SIGTERM)  # what a scheduler's preemption does to one process

    def training_step(self, batch, batch_idx):
        self._maybe_signal("training-step", batch_idx)
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self._maybe_signal("batch-end", batch_idx)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--signal-in", choices=["batch-end", "training-step"], default="batch-end")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world_size < 2:
        print("SKIP: needs 2 ranks (torchrun --nproc_per_node=2): the signal reaches rank 0, its peer is rank 1")
        return 125

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    strategy = L.pytorch.strategies.DDPStrategy(
        process_group_backend="nccl" if args.device == "cuda" else "gloo",
        timeout=datetime.timedelta(seconds=PG_TIMEOUT_S),
    )
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=world_size,
        strategy=strategy,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        try:
            trainer.fit(Model(args.signal_in), DataLoader(data, batch_size=4))
        except SIGTERMException:
            print(f"[rank {rank}] OK: stopped by SIGTERMException after {trainer.global_step} batches "
                  f"(signal in {args.signal_in} of batch {SIGNAL_BATCH} on rank 0)", flush=True)
            return 0
        except RuntimeError as e:
            if trainer.global_step < SIGNAL_BATCH or not any(text in str(e) for text in PEER_LOST):
                raise  # a collective that failed before the signal is not this bug
            print(f"[rank {rank}] REPRODUCED: rank {rank} {SIGNATURE}: after {trainer.global_step} batches "
                  f"(signal in {args.signal_in} of batch {SIGNAL_BATCH} on rank 0): {str(e).splitlines()[0][:160]}",
                  flush=True)
            return 1
        raise AssertionError(f"rank {rank}: fit ran to its end ({trainer.global_step} batches): "
                             "the SIGTERM on rank 0 was not acted on")
    finally:
        signal.signal(signal.SIGTERM, previous)
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
