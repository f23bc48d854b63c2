"""Lightning #21454: under DDP a custom sampler's `set_epoch` is never called (DistributedSamplerWrapper).

https://github.com/Lightning-AI/pytorch-lightning/issues/21454

With a distributed strategy the Trainer replaces a custom (not Sequential/Random, not DistributedSampler)
sampler by `DistributedSamplerWrapper(sampler)`, and at the start of every epoch calls `set_epoch(epoch)` on
the dataloader's sampler, which is now the wrapper. Up to 2.6.0 the wrapper only set its own epoch: the
user's sampler never learns the epoch, so a sampler that shuffles (or schedules a curriculum) by epoch
yields the same order every epoch, silently. PR #21456 (first in 2.6.1) forwards `set_epoch` to the wrapped
sampler.

    python repro.py [--device cpu|cuda] [--sampler epoch-sampler|distributed-subclass]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--sampler ...]

--sampler epoch-sampler         a plain Sampler with set_epoch (wrapped by Lightning)       (the bug)
--sampler distributed-subclass  workaround: the same sampler as a DistributedSampler subclass, which
                                Lightning uses as it is (no wrapper) and calls set_epoch on

Trainer(strategy="ddp") on every rank of the world (1 under plain python; under torchrun Lightning reads
the torchelastic environment and initialises the process group itself); fit 3 epochs, then every rank
checks which epochs its own sampler was told. Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset

SIGNATURE = "the wrapped sampler's set_epoch was never called"
EPOCHS = 3


class EpochSampler(Sampler):
    """A sampler whose order depends on the epoch it was told (as a user's shuffling/curriculum sampler)."""

    def __init__(self, n):
        self.n = n
        self.epoch = 0
        self.told = []  # every epoch set_epoch received

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.told.append(epoch)

    def __iter__(self):
        g = torch.Generator().manual_seed(1000 + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self):
        return self.n


class EpochDistributedSampler(DistributedSampler):
    """The workaround: the same epoch-dependent sampler written as a DistributedSampler subclass."""

    def __init__(self, dataset):
        super().__init__(dataset, shuffle=True, seed=1000)
        self.told = []

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.told.append(epoch)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sampler", choices=["epoch-sampler", "distributed-subclass"], default="epoch-sampler")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    sampler = EpochSampler(len(data)) if args.sampler == "epoch-sampler" else None
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    if sampler is None:  # a DistributedSampler needs the process group's world: built inside fit (setup hook)
        loader = None

    class Data(L.LightningDataModule):
        def train_dataloader(self):
            if loader is not None:
                return loader
            self.sampler = EpochDistributedSampler(data)
            return DataLoader(data, batch_size=4, sampler=self.sampler)

    datamodule = Data()
    backend = "nccl" if args.device == "cuda" else "gloo"
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=world_size,
        strategy=L.pytorch.strategies.DDPStrategy(process_group_backend=backend),
        max_epochs=EPOCHS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    try:
        trainer.fit(Model(), datamodule=datamodule)
        used = getattr(trainer.train_dataloader, "sampler", None)
        inner = sampler if sampler is not None else datamodule.sampler
        told = inner.told
        where = f"{args.sampler}, Trainer sampler {type(used).__name__}, world size {world_size}"
        if not any(e > 0 for e in told):
            print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: after {EPOCHS} epochs it was told epochs {told} "
                  f"(every epoch drew the same order) ({where})", flush=True)
            verdict = 1
        else:
            assert sorted(set(told)) == list(range(EPOCHS)), f"told epochs {told}"
            print(f"[rank {rank}] OK: the sampler was told epochs {sorted(set(told))} ({where})", flush=True)
            verdict = 0
        dist.barrier()  # every rank has its verdict before any rank leaves the group
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    return verdict


if __name__ == "__main__":
    sys.exit(main())
