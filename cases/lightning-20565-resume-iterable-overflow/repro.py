"""Lightning #20565: resuming `Trainer.fit` with a val loader that has no length raises OverflowError.

Lightning 2.5.0 (PR #20379, "Ensure restarting from checkpoints leads to consistent internal counters")
made the training epoch loop, when it restarts at a step where validation is due, fast-forward the
validation loop's counters: `_EvaluationLoop.increment_progress_to_evaluation_end()` runs
`int(max(self.max_batches))`. For a dataloader without `__len__` (an IterableDataset) and no integer
`limit_val_batches`, `max_batches` is `[inf]`, and `int(inf)` raises
    OverflowError: cannot convert float infinity to integer
so a checkpoint written at the end of an epoch's training batches cannot be resumed. Lightning 2.4 has
no fast-forward (works); PR #20624 (first in 2.5.1) returns early for an infinite length.

    python repro.py [--device cpu|cuda] [--limit-val-batches N]

(default)              val loader over an IterableDataset, limit_val_batches left at 1.0   (the bug)
--limit-val-batches N  workaround: an integer limit gives the val loop a finite length

Mirrors the test of PR #20624 (test_load_with_inf_data_loader): fit 2 epochs of 2 batches with a
checkpoint every training step, then a new Trainer resumes from `epoch=1-step=4.ckpt` up to 4 epochs.
A world of one (Trainer on one device); under torchrun Lightning reads the torchelastic environment.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import glob
import os
import sys
import tempfile

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

SIGNATURE = "cannot convert float infinity to integer"


class RandomIterable(IterableDataset):
    """10 random vectors of size 32, with no __len__ (as lightning's RandomIterableDataset)."""

    def __init__(self, size=32, count=10):
        self.data = torch.randn(count, size, generator=torch.Generator().manual_seed(0))

    def __iter__(self):
        return iter(self.data)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(32, 2)
        self.dataset = RandomIterable()

    def training_step(self, batch, batch_idx):
        return self.layer(batch).sum()

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.layer(batch).sum())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(self.dataset)

    def val_dataloader(self):
        return DataLoader(self.dataset)


def make_trainer(args, root, max_epochs):
    kwargs = dict(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        default_root_dir=root,
        max_epochs=max_epochs,
        limit_train_batches=2,
        check_val_every_n_epoch=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=root, save_last=True, every_n_train_steps=1)],
    )
    if args.limit_val_batches is not None:
        kwargs["limit_val_batches"] = args.limit_val_batches
    return L.Trainer(**kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--limit-val-batches", type=int, default=None)
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (Trainer on one device)")
        return 125

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        make_trainer(args, root, max_epochs=2).fit(Model())
        saved = sorted(glob.glob(os.path.join(root, "epoch=1-step=4*.ckpt")))
        assert saved, f"no epoch=1-step=4 checkpoint in {sorted(os.listdir(root))}"
        where = f"Trainer.fit(ckpt_path={os.path.basename(saved[0])}), limit_val_batches={args.limit_val_batches}"

        trainer = make_trainer(args, root, max_epochs=4)
        try:
            trainer.fit(Model(), ckpt_path=saved[0])
        except OverflowError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"REPRODUCED: OverflowError: {SIGNATURE} ({where})", flush=True)
            return 1
        # the step count after a resume is not what is tested: before 2.5.0 (PR #20379) it could differ by one
        done = f"epoch {trainer.current_epoch}, global_step {trainer.global_step}"

    assert trainer.current_epoch == 4, f"resumed run stopped early: {done}"
    print(f"OK: resumed and trained to the end ({done}) ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
