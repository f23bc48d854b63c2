"""Lightning #21244 (2.6.0): ModelCheckpoint(save_last=True) stops refreshing last.ckpt when the monitored metric
does not improve, so last.ckpt holds the best epoch, not the last one.

https://github.com/Lightning-AI/pytorch-lightning/pull/21244
https://github.com/openclimatefix/pvnet/issues/542   (downstream: "save_last does not actually save the last checkpoint")
https://github.com/allenai/rslearn/pull/533          (downstream: "Fix last.ckpt checkpointing bug due to save_last
                                                       behavior change")

PR #21244 ("Fix `last.ckpt` only being saved when another checkpoint has been created", first in 2.6.0) wraps
ModelCheckpoint's `_save_last_checkpoint` call in `on_train_epoch_end`/`on_validation_end` in
`if self._last_global_step_saved == trainer.global_step or (save_last == "link" and ...)`: last.ckpt is written
only at a step where a top-k checkpoint was written too. With `monitor=..., save_top_k=1, save_last=True` and a
metric that stops improving, up to 2.5.6 last.ckpt was rewritten at every validation (the state to resume from);
from 2.6.0 it stays the copy of the best epoch, and a resume from it silently repeats the epochs since. No
release up to 2.6.6 changes it back.

    python repro.py [--device cpu|cuda] [--workaround-second-callback]

(default)                      ModelCheckpoint(monitor="val_metric", mode="min", save_top_k=1, save_last=True),
                               3 epochs, the metric best at epoch 0; reads the epoch stored in last.ckpt (the bug)
--workaround-second-callback   the same, plus a second ModelCheckpoint(monitor=None, save_top_k=1) in its own
                               folder (the downstream projects' workaround); reads the epoch of its file

A world of one: the Trainer runs on one device and creates no process group, so this script has no
`init_dist`. Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA, more than one rank).
"""

import argparse
import glob
import os
import sys
import tempfile

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

SIGNATURE = "last.ckpt is stale"
EPOCHS = 3


class WorseningModel(BoringModel):
    """BoringModel whose validation metric is best at epoch 0 and worse at every epoch after it."""

    def validation_step(self, batch, batch_idx):
        out = super().validation_step(batch, batch_idx)
        self.log("val_metric", float(self.current_epoch))
        return out


def epoch_of(path):
    """The epoch a checkpoint file holds (`epoch` of the dict Lightning wrote)."""
    return torch.load(path, map_location="cpu", weights_only=False)["epoch"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workaround-second-callback", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    with tempfile.TemporaryDirectory() as root:
        best_and_last = ModelCheckpoint(dirpath=os.path.join(root, "ckpt"), monitor="val_metric", mode="min",
                                        save_top_k=1, save_last=True)
        callbacks = [best_and_last]
        latest_dir = os.path.join(root, "latest")
        if args.workaround_second_callback:
            callbacks.append(ModelCheckpoint(dirpath=latest_dir, monitor=None, save_top_k=1))
        trainer = L.Trainer(accelerator="gpu" if args.device == "cuda" else "cpu", devices=1, max_epochs=EPOCHS,
                            limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0, callbacks=callbacks,
                            logger=False, enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(WorseningModel())

        last = EPOCHS - 1
        best = os.path.basename(best_and_last.best_model_path)
        if args.workaround_second_callback:
            found = sorted(glob.glob(os.path.join(latest_dir, "*.ckpt")))
            assert len(found) == 1, f"the second ModelCheckpoint left {found}"
            what, path = f"the second callback's {os.path.basename(found[0])}", found[0]
        else:
            what, path = "last.ckpt", os.path.join(root, "ckpt", "last.ckpt")
            assert os.path.isfile(path), f"no last.ckpt under {root}/ckpt: {os.listdir(os.path.join(root, 'ckpt'))}"
        epoch = epoch_of(path)
        where = f"lightning {L.__version__}, torch {torch.__version__}, best {best}"
        if epoch != last:
            print(f"REPRODUCED: {SIGNATURE}: {what} holds epoch {epoch}, not the last epoch {last} ({where})",
                  flush=True)
            return 1
    print(f"OK: {what} holds the last epoch {last} ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
