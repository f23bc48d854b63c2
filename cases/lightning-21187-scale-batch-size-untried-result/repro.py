"""Lightning #21187: `Tuner.scale_batch_size` stopped by `max_trials` returns a batch size it never tried.

https://github.com/Lightning-AI/pytorch-lightning/pull/21187

When every trial succeeds until `max_trials` runs out, the batch-size finder is meant to return the last size that
ran. Up to 2.5.x the power mode (the default) doubled the size after its last successful trial and returned
that doubled, untried size (2 -> 4 -> 8 tried, 16 returned). Nothing is logged as wrong: the model is left with the
untried batch size. PR #21187 (first in 2.6.0) returns the last successful size. (The PR also changes the
binary-search mode, which ran `max_trials + 1` trials; 2.6.0 also added a `margin` to that mode's result, so this
script checks the power mode only.)

    python repro.py [--device cpu|cuda]

A world of one. A model whose `batch_size` attribute drives its own train loader (64 samples), `init_val=2`,
`max_trials=3`, `steps_per_trial=1`; nothing fails, so no trial stops the search. The right answer is the script's
own: it records the batch size of every batch its `training_step` sees; the result must be the largest size a
trial ran, after at most 3 trials. Exit: 0 correct, 1 bug, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from lightning.pytorch.tuner import Tuner
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "scale_batch_size returned a batch size no trial ran"
MAX_TRIALS = 3


class Model(L.LightningModule):
    def __init__(self, batch_size=2):
        super().__init__()
        self.batch_size = batch_size
        self.layer = torch.nn.Linear(4, 1)
        self.seen = []  # the batch size of every training batch, recorded here

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.seen.append(int(x.shape[0]))
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g))
        return DataLoader(data, batch_size=self.batch_size)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    torch.manual_seed(0)
    model = Model(batch_size=2)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    result = Tuner(trainer).scale_batch_size(
        model, mode="power", steps_per_trial=1, init_val=2, max_trials=MAX_TRIALS
    )
    tried = sorted(set(model.seen))
    trials = len(model.seen)  # steps_per_trial=1: one training batch per trial
    where = (f"mode=power, init_val=2, max_trials={MAX_TRIALS}: batch sizes the trials ran {model.seen} "
             f"({trials} trials), returned {result}, model.batch_size {model.batch_size}")
    assert tried, f"no trial ran: {where}"
    if result not in tried or trials > MAX_TRIALS:
        print(f"REPRODUCED: {SIGNATURE} ({where})", flush=True)
        return 1
    assert result == max(tried), f"the result is not the largest successful size: {where}"
    print(f"OK: scale_batch_size returned the largest size a trial ran ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
