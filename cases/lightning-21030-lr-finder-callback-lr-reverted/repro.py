"""Lightning #21030: the LearningRateFinder callback reports a learning rate that training never uses.

https://github.com/Lightning-AI/pytorch-lightning/issues/21030

With `LearningRateFinder(update_attr=True)` as a Trainer callback, the search runs in `on_fit_start`, after
the optimizer was created. Up to lightning 2.5.3 `_lr_find` set the suggested lr on the module's `lr`
attribute and logged "Learning rate set to ..." and only then restored the checkpoint it took before the
search, which loads the optimizer's state back, with its original lr: training silently goes on with the
initial learning rate (here 1e-5). PR #21068 (first in lightning 2.5.4) applies the suggestion after the
restore, to the attribute and to the optimizer's param groups.

    python repro.py [--device cpu|cuda] [--tuner]

(default)   LearningRateFinder(update_attr=True) as a callback of Trainer.fit   (the bug)
--tuner     workaround: Tuner(trainer).lr_find(model) before fit (the optimizer is created after it)

The script records the optimizer's lr in every training step of the real run (the steps after the
search) and compares it with the suggestion the finder reports (`lr_finder.suggestion()`), which must
also differ from the initial lr.
A world of one (Trainer on one device). Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import math
import os
import sys
import tempfile

import lightning as L
import torch
from lightning.pytorch.callbacks import LearningRateFinder
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "the learning rate the finder set is not the one training used"

INIT_LR = 1e-5
SEARCH_STEPS = 30
BATCHES = 40


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.lr = INIT_LR  # the attribute LearningRateFinder(update_attr=True) sets
        self.layer = nn.Linear(8, 1)
        self.step_lrs = []

    def training_step(self, batch, batch_idx):
        self.step_lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(BATCHES * 4, 8, generator=g)
        y = x @ torch.randn(8, 1, generator=g) + 0.1 * torch.randn(BATCHES * 4, 1, generator=g)
        return DataLoader(TensorDataset(x, y), batch_size=4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tuner", action="store_true", help="workaround: Tuner.lr_find before fit")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    with tempfile.TemporaryDirectory() as root:  # the finder saves and removes a checkpoint there
        return run(args, root)


def run(args, root):
    torch.manual_seed(0)
    finder_kwargs = dict(min_lr=1e-6, max_lr=1.0, early_stop_threshold=None)
    callbacks = [] if args.tuner else [LearningRateFinder(update_attr=True, num_training_steps=SEARCH_STEPS, **finder_kwargs)]
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_epochs=1,
        default_root_dir=root,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    model = Model()
    if args.tuner:
        from lightning.pytorch.tuner import Tuner

        lr_finder = Tuner(trainer).lr_find(model, update_attr=True, num_training=SEARCH_STEPS, **finder_kwargs)
        searched = 0  # the search ran before fit: every step recorded below is the real run's
        model.step_lrs.clear()
    else:
        lr_finder = None
        searched = SEARCH_STEPS
    trainer.fit(model)
    if lr_finder is None:
        lr_finder = callbacks[0].optimal_lr

    suggestion = lr_finder.suggestion()
    assert suggestion is not None, "the finder made no suggestion"
    assert not math.isclose(suggestion, INIT_LR), f"the suggestion {suggestion:g} is the initial lr"
    # how many batches the real run trains after the callback's search differs between releases: not tested
    used = model.step_lrs[searched:]  # the real run, after the search
    assert used, f"no training step after the search ({len(model.step_lrs)} recorded)"
    assert len(set(used)) == 1, f"the lr changed during the real run: {sorted(set(used))}"
    used_lr = used[0]
    where = (
        f"lightning {L.__version__}, {'Tuner.lr_find before fit' if args.tuner else 'LearningRateFinder callback'}"
        f", module attribute lr={model.lr:g}"
    )
    if not math.isclose(used_lr, suggestion, rel_tol=1e-9):
        print(
            f"REPRODUCED: {SIGNATURE}: suggestion {suggestion:g}, training ran at lr {used_lr:g} "
            f"(initial {INIT_LR:g}) ({where})",
            flush=True,
        )
        return 1
    print(f"OK: training ran at the suggested lr {used_lr:g} (initial {INIT_LR:g}) ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
