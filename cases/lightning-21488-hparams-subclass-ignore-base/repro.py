"""Lightning #21488: save_hyperparameters(ignore=...) in a subclass does not drop what its base class saved (< 2.6.1).

https://github.com/Lightning-AI/pytorch-lightning/issues/21488
https://github.com/Lightning-AI/pytorch-lightning/pull/21490   (the fix, first in 2.6.1)

A common Lightning base class calls `self.save_hyperparameters()`; a subclass calls it again with
`ignore="arg2"`. Up to 2.6.0 the second call only adds to `hparams` (`_set_hparams` updates the dict the base
class filled), so the ignored `arg2` stays in `model.hparams` and in every checkpoint's `hyper_parameters`.
PR #21490 removes the ignored names from the stored hyper-parameters after each call
(`HyperparametersMixin.remove_ignored_hparams`), so the subclass's ignore rules win.

    python repro.py [--device cpu|cuda] [--only-subclass-saves]

(default)              Base.__init__ calls save_hyperparameters(); Child.__init__ calls
                       save_hyperparameters(ignore="arg2") after super().__init__   (the issue's script: the bug)
--only-subclass-saves  the workaround: the base class does not call save_hyperparameters, only the subclass does

No Trainer is needed: `model.hparams` right after construction shows it (the checkpoint's `hyper_parameters` are
these). `--device` only places the model. A world of one; exit code: 0 = fixed, 1 = bug reproduced (the signature is
printed first), 125 = cannot test here (no CUDA, more than one rank).
"""

import argparse
import os
import sys

import lightning as L
import torch

SIGNATURE = "ignored hyper-parameter is still saved"


def make_classes(base_saves):
    class Base(L.LightningModule):
        def __init__(self, arg1, arg2, arg3):
            super().__init__()
            if base_saves:
                self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 2)

    class Child(Base):
        def __init__(self, arg1, arg2, arg3):
            super().__init__(arg1=arg1, arg2=arg2, arg3=arg3)
            self.save_hyperparameters(ignore="arg2")

    return Child


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only-subclass-saves", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only")
        return 125

    Child = make_classes(base_saves=not args.only_subclass_saves)
    model = Child(arg1=14, arg2=90, arg3=50).to(args.device)
    hparams = dict(model.hparams)
    where = f"lightning {L.__version__}, base saves: {not args.only_subclass_saves}"
    assert hparams.get("arg1") == 14 and hparams.get("arg3") == 50, f"hparams: {hparams} ({where})"
    if "arg2" in hparams:
        print(f"REPRODUCED: {SIGNATURE}: save_hyperparameters(ignore='arg2') in the subclass, yet hparams = "
              f"{hparams} ({where})", flush=True)
        return 1
    print(f"OK: hparams = {hparams}, arg2 ignored ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
