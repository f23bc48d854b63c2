"""Lightning #18727: after EarlyStopping stopped `fit`, a second `trainer.fit` on the same Trainer trains nothing.

https://github.com/Lightning-AI/pytorch-lightning/issues/18727

EarlyStopping stops training by setting `trainer.should_stop = True`. Up to 2.5.0 nothing reset that flag when
`fit` was called again on the same Trainer, so the fit loop of the second call saw `should_stop` already set and
returned at once: no batch was trained, no error, no warning (the issue: resuming with `ckpt_path` in the same
program after an early stop did not continue training). PR #19177 (first in 2.5.1) sets `should_stop = False` at
the start of every `fit`.

    python repro.py [--device cpu|cuda] [--reset-should-stop]

--reset-should-stop   workaround: set `trainer.should_stop = False` by hand before the second fit

A world of one. First fit: max_epochs=5 with EarlyStopping(stopping_threshold) that is met at the end of the
first epoch, so it stops after epoch 0 (4 batches). Second fit of the same model on the same Trainer: the loop
is at epoch 1 of 5, so it must train at least one more epoch (EarlyStopping stops it again at that epoch's end:
4 batches). The script counts the batches each fit ran in training_step itself. Exit: 0 correct, 1 bug, 125
cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "the second fit on the same Trainer trained 0 batches"
BATCHES_PER_EPOCH = 4


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.batches = 0  # training batches this model ran, counted here (not read from the Trainer)

    def training_step(self, batch, batch_idx):
        self.batches += 1
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reset-should-stop", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    stop = EarlyStopping(monitor="train_loss", stopping_threshold=1e9, check_on_train_epoch_end=True)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_epochs=5,
        callbacks=[stop],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Model()
    trainer.fit(model, loader)
    first = model.batches
    assert first == BATCHES_PER_EPOCH and trainer.should_stop, (
        f"the first fit should stop after one epoch: {first} batches, should_stop={trainer.should_stop}")
    epoch_after_first = trainer.current_epoch

    if args.reset_should_stop:
        trainer.should_stop = False
    model.batches = 0
    trainer.fit(model, loader)  # the loop is at epoch 1 of max_epochs=5: it has epochs left to train
    second = model.batches
    where = (f"first fit {first} batches, current_epoch {epoch_after_first} of max_epochs 5; second fit {second} batches "
             f"(expected {BATCHES_PER_EPOCH}: one more epoch), reset by hand: {args.reset_should_stop}")
    if second == 0:
        print(f"REPRODUCED: {SIGNATURE} ({where})", flush=True)
        return 1
    assert second == BATCHES_PER_EPOCH, where
    print(f"OK: the second fit trained ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
