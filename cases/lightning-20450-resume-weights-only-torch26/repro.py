"""Lightning #20450: with torch >= 2.6, Lightning <= 2.3 cannot load its own checkpoints.

Lightning up to 2.3.x loads checkpoints with `torch.load(f, map_location=...)` and no `weights_only`
(lightning/fabric/utilities/cloud_io.py `_load`). torch 2.6 flipped torch.load's default to
`weights_only=True` (pytorch/pytorch#137602), so `Trainer.fit(ckpt_path=...)` and
`LightningModule.load_from_checkpoint` fail on a checkpoint whose hyper-parameters hold an object outside
torch's allowlist (here an `nn.MSELoss` passed to `__init__`):
    _pickle.UnpicklingError: Weights only load failed ...
The same Lightning with torch <= 2.5 works; Lightning 2.4.0 passes `weights_only=False` (PR #20010) and
works with torch 2.6. A coupling bug: neither release alone is wrong.

    python repro.py [--device cpu|cuda] [--load fit|load_from_checkpoint] [--force-no-weights-only-env]

--load fit                    Trainer.fit(model, ckpt_path=<saved>)            (the issue)
--load load_from_checkpoint   Model.load_from_checkpoint(<saved>)
--force-no-weights-only-env   workaround: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (torch >= 2.6 then defaults
                              to weights_only=False where the caller passes nothing; older torch ignores it)

A world of one (Trainer on one device). Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import pickle
import sys
import tempfile

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "Weights only load failed"


class Model(L.LightningModule):
    def __init__(self, loss=None, lr=0.01):
        super().__init__()
        self.save_hyperparameters()
        self.loss = loss if loss is not None else nn.MSELoss()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return self.loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def make_trainer(args, root, max_epochs):
    return L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        default_root_dir=root,
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--load", choices=["fit", "load_from_checkpoint"], default="fit")
    parser.add_argument("--force-no-weights-only-env", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (Trainer on one device)")
        return 125
    if args.force_no_weights_only_env:
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"

    torch.manual_seed(0)
    x = torch.randn(16, 4)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4)
    extra = ", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" if args.force_no_weights_only_env else ""
    where = f"{args.load}{extra}; lightning {L.__version__}, torch {torch.__version__}"
    with tempfile.TemporaryDirectory() as root:
        trainer = make_trainer(args, root, max_epochs=1)
        trainer.fit(Model(loss=nn.MSELoss()), data)
        saved = os.path.join(root, "saved.ckpt")
        trainer.save_checkpoint(saved)

        try:
            if args.load == "fit":
                trainer = make_trainer(args, root, max_epochs=2)
                trainer.fit(Model(loss=nn.MSELoss()), data, ckpt_path=saved)
                done = f"resumed to global_step {trainer.global_step}"
                assert trainer.global_step == 8, done
            else:
                loaded = Model.load_from_checkpoint(saved)
                done = f"loaded, hparams {sorted(loaded.hparams)}"
                assert isinstance(loaded.hparams.loss, nn.MSELoss), done
        except pickle.UnpicklingError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"REPRODUCED: UnpicklingError: {SIGNATURE} ({where})", flush=True)
            return 1

    print(f"OK: {done} ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
