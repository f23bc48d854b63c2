"""Lightning #21757: `Tuner.lr_find` cannot restore its own checkpoint (lightning >= 2.6 with torch >= 2.6).

`lr_find` saves a temporary checkpoint, runs its range test, then restores the model and optimizer from that
checkpoint (`trainer._checkpoint_connector.restore(ckpt_path)`). Up to 2.5.x Lightning loaded checkpoints
with `weights_only=False` (cloud_io._load's default since PR #20010). PR #21072 (first in 2.6.0, "Expose
`weights_only` for loading checkpoints") made the default `None` for local files, i.e. torch's own default,
which is `True` from torch 2.6. `lr_find` gave no way to pass it, so a model whose hyper-parameters hold any
object outside torch's allowlist (here an `nn.MSELoss` passed to `__init__`, as in the issue) fails with
    _pickle.UnpicklingError: Weights only load failed ...
PR #21758 (merged after 2.6.5; in no release up to 2.6.6) adds `lr_find(..., weights_only=None)`: the default
still fails, `weights_only=False` restores. With torch < 2.6 the default is False and every version works (coupling).

    python repro.py [--device cpu|cuda] [--hparams module|plain] [--weights-only-false]
                    [--force-no-weights-only-env]

--hparams module        __init__(loss=nn.MSELoss()) + save_hyperparameters()     (the bug)
--hparams plain         save_hyperparameters(ignore=["loss"]): only plain values    (workaround)
--weights-only-false    Tuner.lr_find(..., weights_only=False), the parameter PR #21758 added
                        (exit 125 where lr_find has no such parameter)
--force-no-weights-only-env   workaround: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (torch >= 2.6 then defaults
                        to weights_only=False where the caller passes nothing)

A world of one (Trainer on one device). Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import inspect
import os
import pickle
import shutil
import sys
import tempfile

import lightning as L
import torch
from lightning.pytorch.tuner import Tuner
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "Weights only load failed"


class Model(L.LightningModule):
    def __init__(self, loss=None, lr=0.01, keep="module"):
        super().__init__()
        self.save_hyperparameters(ignore=["loss"] if keep == "plain" else None)
        self.loss = loss if loss is not None else nn.MSELoss()
        self.lr = lr
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--hparams", choices=["module", "plain"], default="module")
    parser.add_argument("--weights-only-false", action="store_true")
    parser.add_argument("--force-no-weights-only-env", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (Trainer on one device)")
        return 125
    kwargs = {}
    if args.weights_only_false:
        if "weights_only" not in inspect.signature(Tuner.lr_find).parameters:
            print(f"SKIP: Tuner.lr_find has no weights_only parameter in lightning {L.__version__}")
            return 125
        kwargs["weights_only"] = False
    if args.force_no_weights_only_env:
        # torch >= 2.6: weights_only=False wherever the caller passed nothing (Lightning passes None); older
        # torch ignores the variable (and defaults to False anyway)
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4)
    model = Model(loss=nn.MSELoss(), keep=args.hparams)
    root = tempfile.mkdtemp()  # lr_find writes its checkpoint there (and leaves it when the restore fails)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        default_root_dir=root,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    extra = ", weights_only=False" if kwargs else ""
    extra += ", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" if args.force_no_weights_only_env else ""
    where = (
        f"Tuner.lr_find, hparams {sorted(model.hparams)}{extra}; lightning {L.__version__}, torch {torch.__version__}"
    )
    try:
        finder = Tuner(trainer).lr_find(model, train_dataloaders=data, num_training=5, **kwargs)
    except pickle.UnpicklingError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: UnpicklingError: {SIGNATURE} ({where})", flush=True)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)

    assert finder is not None and len(finder.results["lr"]) > 0, "lr_find returned no results"
    print(f"OK: lr_find restored its checkpoint, suggestion {finder.suggestion()} ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
