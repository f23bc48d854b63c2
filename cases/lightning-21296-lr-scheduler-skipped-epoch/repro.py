"""Lightning #21296: an epoch-interval LR scheduler is not stepped when `on_train_batch_start` returns -1.

https://github.com/Lightning-AI/pytorch-lightning/issues/21296

Returning -1 from `LightningModule.on_train_batch_start` skips the rest of the training epoch (documented).
Up to lightning 2.5.x the training epoch loop raised StopIteration at once, before the batch was marked as
the last one, so `_num_ready_batches_reached()` stayed False and neither the epoch loop nor the fit loop's
`on_advance_end` stepped the epoch-interval schedulers: the learning rate silently stays at its initial
value for the whole run. PR #21307 (first in lightning 2.6.0) marks the skipped batch as the last one and
steps the schedulers before stopping the epoch.

    python repro.py [--device cpu|cuda] [--no-skip]

(default)   on_train_batch_start returns -1 at batch 5 of 10, every epoch   (the bug)
--no-skip   control: the hook never returns -1 (all 10 batches run)

SGD(lr=0.1) with StepLR(step_size=1, gamma=0.1), interval "epoch", 3 epochs. The expected learning rate
is computed here from the number of epochs the Trainer finished: 0.1 * 0.1 ** epochs (PyTorch's StepLR
rule); the script compares it with the optimizer's lr after `fit`.
A world of one (Trainer on one device). Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import math
import os
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIGNATURE = "epoch LR scheduler was not stepped"

INIT_LR = 0.1
GAMMA = 0.1
SKIP_AT = 5
BATCHES = 10
EPOCHS = 3


class RandomDataset(Dataset):
    def __init__(self, size=32, length=BATCHES):
        self.data = torch.randn(length, size, generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


class Model(L.LightningModule):
    def __init__(self, skip):
        super().__init__()
        self.layer = nn.Linear(32, 2)
        self.skip = skip
        self.trained_batches = 0

    def on_train_batch_start(self, batch, batch_idx):
        if self.skip and batch_idx == SKIP_AT:
            return -1  # skip the rest of this epoch
        return None

    def training_step(self, batch, batch_idx):
        self.trained_batches += 1
        return self.layer(batch).sum()

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=INIT_LR)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}

    def train_dataloader(self):
        return DataLoader(RandomDataset(), batch_size=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-skip", action="store_true", help="control: never return -1 from on_train_batch_start")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    torch.manual_seed(0)
    model = Model(skip=not args.no_skip)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_epochs=EPOCHS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)

    epochs = trainer.current_epoch
    assert epochs == EPOCHS, f"the Trainer finished {epochs} epochs, not {EPOCHS}"
    per_epoch = SKIP_AT if not args.no_skip else BATCHES
    assert model.trained_batches == EPOCHS * per_epoch, f"{model.trained_batches} training steps ran"
    expected = INIT_LR * GAMMA**epochs  # StepLR(step_size=1): one decay per finished epoch
    got = trainer.optimizers[0].param_groups[0]["lr"]
    skipped = "" if args.no_skip else f", on_train_batch_start returned -1 at batch {SKIP_AT}"
    where = f"lightning {L.__version__}, {epochs} epochs of {per_epoch} batches{skipped}"
    if not math.isclose(got, expected, rel_tol=1e-9):
        print(f"REPRODUCED: {SIGNATURE}: lr {got:g} after fit, expected {expected:g} ({where})", flush=True)
        return 1
    print(f"OK: lr {got:g} after fit, expected {expected:g} ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
