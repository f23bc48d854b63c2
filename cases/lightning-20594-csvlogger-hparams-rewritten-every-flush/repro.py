"""Lightning #20594: `CSVLogger` rewrites hparams.yaml at every flush of the metrics, not once per hyper-parameter log.

https://github.com/Lightning-AI/pytorch-lightning/pull/20594

Up to 2.5.0.post0 the pytorch `CSVLogger`'s `ExperimentWriter.save()` wrote hparams.yaml and then the metrics CSV,
and `save()` runs at every flush (`flush_logs_every_n_steps`, and at the end of fit): the same hyper-parameters
are serialised and written again and again, which the PR reports as a significant slowdown. PR #20594 (first in
2.5.1) writes hparams.yaml in `log_hparams` only, when hyper-parameters are logged.

    python repro.py [--device cpu|cuda] [--steps N]

A world of one. A model with `save_hyperparameters()` trained N steps (default 20) with `CSVLogger(...,
flush_logs_every_n_steps=1)` and `log_every_n_steps=1`. The count is the script's own: a `sys.addaudithook` hook
counts every `open` of hparams.yaml for writing during fit. The Trainer logs the hyper-parameters once, so the
right count is 1 (at most 2 is accepted); a count that grows with the steps is the bug. The file's content is
read back and checked in both cases. Exit: 0 correct, 1 bug, 125 cannot test here.
"""

import argparse
import os
import sys
import tempfile

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "CSVLogger rewrote hparams.yaml at every flush"
WRITES = []


def audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        mode = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
        if os.path.basename(path) == "hparams.yaml" and ("w" in mode or "a" in mode or "+" in mode):
            WRITES.append(path)


class Model(L.LightningModule):
    def __init__(self, lr=0.01, hidden=4):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(hidden, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="bugmatrix-20594-")
    logger = CSVLogger(root, name="run", version=0, flush_logs_every_n_steps=1)
    loader = DataLoader(TensorDataset(torch.randn(4 * args.steps, 4), torch.randn(4 * args.steps, 1)), batch_size=4)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_steps=args.steps,
        max_epochs=1,
        logger=logger,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Model(lr=0.01, hidden=4)
    sys.addaudithook(audit)
    trainer.fit(model, loader)
    writes = len(WRITES)

    hparams_file = os.path.join(logger.log_dir, "hparams.yaml")
    with open(hparams_file) as f:
        text = f.read()
    assert "lr: 0.01" in text and "hidden: 4" in text, f"hparams.yaml lacks the hyper-parameters: {text!r}"
    with open(os.path.join(logger.log_dir, "metrics.csv")) as f:
        rows = sum(1 for line in f) - 1
    assert rows == args.steps, f"metrics.csv has {rows} rows, expected one per step ({args.steps})"

    where = (f"{writes} writes of hparams.yaml during a fit of {args.steps} steps with flush_logs_every_n_steps=1 "
             f"(the hyper-parameters were logged once: right count 1); metrics.csv has {rows} rows")
    if writes > 2:
        print(f"REPRODUCED: {SIGNATURE} ({where})", flush=True)
        return 1
    assert writes >= 1, f"hparams.yaml was never written during fit: {where}"
    print(f"OK: hparams.yaml written once per hyper-parameter log ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
