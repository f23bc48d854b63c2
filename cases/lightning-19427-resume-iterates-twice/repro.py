"""Lightning #19427: resuming Trainer.fit from a checkpoint calls iter() on the train dataloader twice.

https://github.com/Lightning-AI/pytorch-lightning/issues/19427

When `Trainer.fit(ckpt_path=...)` resumes at an epoch > 0, `_FitLoop.setup_data()` creates the train
dataloader's iterator and `_TrainingEpochLoop.on_run_start()` creates it again (it only skipped that for
`restarting`, which is reset before the epoch runs). Each `iter()` of a DataLoader calls the dataset's
`__iter__` (and starts its workers) again: an IterableDataset reading from a queue, a stream or a file
handle loses the elements the first, discarded iterator took (the issue: a queue-backed dataset loses
batches and the run hangs waiting for them). PR #20775 (first in 2.5.3) skips the second `iter()` while
resuming (`_Loop.is_resuming`).

    python repro.py [--device cpu|cuda] [--no-resume]

(default)    fit 1 epoch over an IterableDataset that counts its __iter__ calls, then a new Trainer resumes
             from the end-of-epoch checkpoint for 1 more epoch: that epoch must iterate the dataset once
--no-resume  control: a plain fit of 2 epochs (each epoch iterates the dataset once)

Mirrors the test of PR #20775 (tests_pytorch/loops/test_double_iter_in_iterable_dataset.py) without its
queue: the count of `__iter__` calls is the direct observable. A world of one (the Trainer on one device).
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import glob
import os
import sys
import tempfile

import lightning as L
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from torch.utils.data import DataLoader, IterableDataset

SIGNATURE = "an epoch iterated the train dataset more than once"


class CountingIterable(IterableDataset):
    """4 random vectors of size 32; counts how often __iter__ is called."""

    def __init__(self):
        self.data = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
        self.iters = 0

    def __iter__(self):
        self.iters += 1
        return iter(self.data)


def make_trainer(accelerator, root, max_epochs):
    return L.Trainer(
        accelerator=accelerator, devices=1, default_root_dir=root, max_epochs=max_epochs,
        limit_val_batches=0, logger=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=root, save_last=True)],
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-resume", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125
    accelerator = "gpu" if args.device == "cuda" else "cpu"

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        if args.no_resume:
            data = CountingIterable()
            make_trainer(accelerator, root, max_epochs=2).fit(BoringModel(), DataLoader(data, batch_size=2))
            expected, where = 2, "fit 2 epochs, no resume"
        else:
            make_trainer(accelerator, root, max_epochs=1).fit(BoringModel(), DataLoader(CountingIterable(),
                                                                                         batch_size=2))
            saved = sorted(glob.glob(os.path.join(root, "epoch=0*.ckpt")))
            assert saved, f"no epoch=0 checkpoint in {sorted(os.listdir(root))}"
            data = CountingIterable()
            trainer = make_trainer(accelerator, root, max_epochs=2)
            trainer.fit(BoringModel(), DataLoader(data, batch_size=2), ckpt_path=saved[0])
            assert trainer.current_epoch == 2, f"the resumed fit stopped at epoch {trainer.current_epoch}"
            expected, where = 1, f"resumed from {os.path.basename(saved[0])} for 1 epoch"

    if data.iters > expected:
        print(f"REPRODUCED: {SIGNATURE}: __iter__ called {data.iters} times, expected {expected} ({where})",
              flush=True)
        return 1
    assert data.iters == expected, f"__iter__ called {data.iters} times, expected {expected} ({where})"
    print(f"OK: __iter__ called {data.iters} time(s) ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
