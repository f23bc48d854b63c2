"""Lightning #21396: StochasticWeightAveraging with max_epochs=-1 never averages, silently.

https://github.com/Lightning-AI/pytorch-lightning/pull/21396

StochasticWeightAveraging averages the weights at the start of every epoch from `swa_epoch_start` (1-based) to
`swa_end = max_epochs - 1` and copies the average into the model when training ends. With `max_epochs=-1`
(train until `max_steps` or a stop) `swa_end` is -2: no epoch is ever in the window, nothing is averaged, and
the model keeps its last raw weights; no error, no warning. PR #21396 (first in 2.6.1) treats `max_epochs=-1`
as an open-ended window and copies the average into the model at the end of training.

    python repro.py [--device cpu|cuda] [--max-epochs N]

--max-epochs -1   the bug (the default): train until max_steps
--max-epochs 4    control: the same 4 epochs with a finite max_epochs (the window is epochs 1..3 either way)

A world of one. Linear(4, 1), 4 batches an epoch, max_steps=16 (4 epochs), SWA(swa_epoch_start=2): the average
must be the mean of the weights at the start of epochs 1, 2 and 3 (0-based). The script snapshots the weights
itself at every epoch start (a callback of its own) and compares that mean with the model's weights after fit.
Exit: 0 correct, 1 bug, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, StochasticWeightAveraging
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "the weights after fit are not the SWA average"
SWA_EPOCH_START = 2  # 1-based, as the callback documents: averaging starts at the start of 0-based epoch 1
MAX_STEPS = 16


class Snapshots(Callback):
    """The model's weights at the start of every epoch, taken by the script (the independent side)."""

    def __init__(self):
        self.at_start = {}

    def on_train_epoch_start(self, trainer, pl_module):
        self.at_start[trainer.current_epoch] = flat(pl_module)


def flat(module):
    return torch.cat([p.detach().flatten().cpu().clone() for p in module.parameters()])


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-epochs", type=int, default=-1)
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    snapshots = Snapshots()
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_epochs=args.max_epochs,
        max_steps=MAX_STEPS,
        callbacks=[snapshots, StochasticWeightAveraging(swa_lrs=0.05, swa_epoch_start=SWA_EPOCH_START)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Model()
    trainer.fit(model, loader)

    final = flat(model)
    window = [e for e in sorted(snapshots.at_start) if e >= SWA_EPOCH_START - 1]
    assert window == [1, 2, 3], f"epochs started: {sorted(snapshots.at_start)} (expected 0..3 with max_steps 16)"
    expected = torch.stack([snapshots.at_start[e] for e in window]).mean(0)
    last_raw = snapshots.at_start[window[-1]]
    err = (final - expected).abs().max().item()
    where = (f"max_epochs={args.max_epochs}, max_steps={MAX_STEPS}, {trainer.global_step} steps; the mean of the "
             f"weights at the start of epochs {window} = {[round(v, 5) for v in expected.tolist()]}, the model's "
             f"weights after fit = {[round(v, 5) for v in final.tolist()]} (max |diff| {err:.2e})")
    if err > 1e-5:
        print(f"REPRODUCED: {SIGNATURE}: {where}", flush=True)
        return 1
    assert not torch.allclose(expected, last_raw), "the average equals a raw snapshot: the check cannot tell them apart"
    print(f"OK: the weights after fit are the SWA average: {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
