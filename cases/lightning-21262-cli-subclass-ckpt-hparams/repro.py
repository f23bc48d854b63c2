"""Lightning #21262: LightningCLI in subclass mode cannot resume from `--ckpt_path` (2.5.5, 2.5.6).

https://github.com/Lightning-AI/pytorch-lightning/issues/21262

Lightning 2.5.5 (PR #21116, "Fix LightningCLI not using ckpt_path hyperparameters to instantiate classes")
made `LightningCLI` read the `hyper_parameters` of the checkpoint given by `--ckpt_path` and parse them back
into the config (`LightningCLI._parse_ckpt_path`). In subclass mode (`subclass_mode_model=True`, the mode a
config with `model: class_path: ...` uses) the CLI saves the model's class as the hyper-parameter
`_class_path`; 2.5.5 hands `{"_class_path": ..., <init args>}` to the parser, which rejects the unknown key,
prints "Parsing of ckpt_path hyperparameters failed!" and exits (SystemExit): a checkpoint the CLI wrote
itself cannot be resumed or predicted from. PR #21246 (first in 2.6.0; 2.5.6 does not have it) turns
`_class_path` back into `class_path` + `dict_kwargs`. Before 2.5.5 the CLI did not read the hyper-parameters.

    python repro.py [--device cpu|cuda] [--no-subclass-mode]

(default)           LightningCLI(BaseModel, subclass_mode_model=True): fit `--model=SubModel`, then fit
                    again with `--ckpt_path=<its checkpoint>` (the issue's resume)          (the bug)
--no-subclass-mode  control: LightningCLI(SubModel) (no class_path in the hyper-parameters)

Mirrors the test of PR #21246 (test_lightning_cli_ckpt_path_argument_hparams_subclass_mode), with the
resume of the issue. Needs jsonargparse[signatures] (lightning's `pytorch-extra`), as LightningCLI does.
A world of one (the Trainer on one device). Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import contextlib
import glob
import io
import os
import sys
import tempfile

import torch
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.demos.boring_classes import BoringModel

SIGNATURE = "Parsing of ckpt_path hyperparameters failed"


class BaseModel(BoringModel):
    """The base class the CLI is given in subclass mode (as the PR's BoringCkptPathModel)."""

    def __init__(self, out_dim: int = 2, hidden_dim: int = 2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.hidden_dim = hidden_dim
        self.layer = torch.nn.Linear(32, out_dim)


class SubModel(BaseModel):
    """The class the config names (as the PR's BoringCkptPathSubclass)."""

    def __init__(self, extra: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.extra = extra


def cli(args, subclass_mode, argv):
    """Run LightningCLI on `argv` (its own `args=`, sys.argv untouched); return the CLI object."""
    if subclass_mode:
        return LightningCLI(BaseModel, subclass_mode_model=True, args=argv, save_config_callback=None)
    return LightningCLI(SubModel, args=argv, save_config_callback=None)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-subclass-mode", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (Trainer on one device)")
        return 125
    subclass_mode = not args.no_subclass_mode
    model_args = ["--model=SubModel"] if subclass_mode else []
    model_args += ["--model.out_dim=4", "--model.extra=false"]

    with tempfile.TemporaryDirectory() as root:
        trainer_args = [
            f"--trainer.accelerator={'gpu' if args.device == 'cuda' else 'cpu'}", "--trainer.devices=1",
            f"--trainer.default_root_dir={root}", "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=0", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", "--trainer.logger=false",
        ]
        cli(args, subclass_mode, ["fit", *model_args, *trainer_args, "--trainer.max_epochs=1"])
        saved = sorted(glob.glob(os.path.join(root, "**", "*.ckpt"), recursive=True))
        assert saved, f"the first fit wrote no checkpoint under {root}"
        where = f"fit --ckpt_path={os.path.basename(saved[0])}, subclass_mode_model={subclass_mode}"

        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                resumed = cli(args, subclass_mode,
                              ["fit", *model_args, *trainer_args, "--trainer.max_epochs=2", f"--ckpt_path={saved[0]}"])
        except SystemExit as e:
            if SIGNATURE not in err.getvalue():
                sys.stderr.write(err.getvalue())
                raise
            last = [line for line in err.getvalue().splitlines() if line.strip()][-1]
            print(f"REPRODUCED: {SIGNATURE} (SystemExit {e.code}; {last.strip()}) ({where})", flush=True)
            return 1
        sys.stderr.write(err.getvalue())

    model = resumed.model
    assert type(model).__name__ == "SubModel", f"resumed with {type(model).__name__}, not SubModel"
    assert model.layer.out_features == 4 and model.extra is False, f"resumed model: {model.hparams}"
    assert resumed.trainer.current_epoch == 2, f"the resumed fit stopped at epoch {resumed.trainer.current_epoch}"
    print(f"OK: resumed SubModel(out_dim=4, extra=False) to epoch 2 ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
