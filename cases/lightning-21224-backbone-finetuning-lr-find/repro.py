"""Lightning-AI/pytorch-lightning#21224: `Trainer.fit` fails with KeyError: 0 after `lr_find` when BackboneFinetuning is used.

https://github.com/Lightning-AI/pytorch-lightning/issues/14674   (the report, 2022, Lightning 1.7)
https://github.com/Lightning-AI/pytorch-lightning/pull/21224     (the fix, first in 2.6.0)

`Tuner.lr_find` saves a temporary checkpoint and restores it when it is done; restoring calls every callback's
`load_state_dict`. `BaseFinetuning.load_state_dict` sets `_restarting = True` and keeps the checkpoint's
`internal_optimizer_metadata`, which is empty: lr_find's checkpoint was written before any `fit` froze or
unfroze anything. The next `trainer.fit` then calls `BaseFinetuning.on_fit_start`, which (up to 2.5.x) indexes
`self._internal_optimizer_metadata[0]` for every optimizer and raises `KeyError: 0`. PR #21224 restores the
param groups only when the metadata holds that optimizer.

    python repro.py [--device cpu|cuda] [--no-lr-find]

(default)      the fix's test: Tuner(trainer).lr_find(model, num_training=5), then trainer.fit(model) with a
               BackboneFinetuning(unfreeze_backbone_at_epoch=1) callback                     (the bug)
--no-lr-find   control: the same fit without lr_find before it

A world of one; `--device` picks the Trainer's accelerator. Exit code: 0 = fit ran and unfroze the backbone,
1 = bug reproduced (the signature is printed first), 125 = cannot test here (no CUDA, more than one rank, or
lr_find cannot restore its own checkpoint under torch.load(weights_only=True), the failure of lightning-20450/-21757).
"""

import argparse
import os
import pickle
import sys
import tempfile
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import BackboneFinetuning
from lightning.pytorch.tuner import Tuner
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "BaseFinetuning.on_fit_start raised KeyError: 0 after lr_find"


class ModelWithBackbone(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
        self.head = torch.nn.Linear(8, 2)
        self.learning_rate = 1e-3

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        return self(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.Adam(filter(lambda p: p.requires_grad, self.parameters()), lr=self.learning_rate)

    def train_dataloader(self):
        torch.manual_seed(0)
        return DataLoader(TensorDataset(torch.randn(64, 32)), batch_size=4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-lr-find", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125
    warnings.filterwarnings("ignore")

    where = f"lightning {L.__version__}, torch {torch.__version__}, lr_find first: {not args.no_lr_find}"
    L.seed_everything(0)
    model = ModelWithBackbone()
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            default_root_dir=root, accelerator="gpu" if args.device == "cuda" else "cpu", devices=1,
            max_epochs=3, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            logger=False, callbacks=[BackboneFinetuning(unfreeze_backbone_at_epoch=1)],
        )
        if not args.no_lr_find:
            try:
                lr_finder = Tuner(trainer).lr_find(model, num_training=5)
            except pickle.UnpicklingError as e:  # weights_only restore refused (lightning-20450, lightning-21757)
                if "Weights only load failed" not in str(e):
                    raise
                print(f"SKIP: lr_find cannot restore its own checkpoint here (torch.load weights_only: "
                      f"lightning-20450), so fit after it cannot be tested ({where})")
                return 125
            assert lr_finder is not None and len(lr_finder.results["lr"]) > 0, f"lr_find found nothing ({where})"
        try:
            trainer.fit(model)
        except KeyError as e:
            if e.args != (0,):
                raise
            print(f"REPRODUCED: {SIGNATURE} ({where})", flush=True)
            return 1
    frozen = [n for n, p in model.backbone.named_parameters() if not p.requires_grad]
    assert trainer.current_epoch == 3, f"fit stopped at epoch {trainer.current_epoch} ({where})"
    assert not frozen, f"the backbone was not unfrozen at epoch 1: {frozen} ({where})"
    print(f"OK: fit ran 3 epochs and unfroze the backbone at epoch 1 ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
