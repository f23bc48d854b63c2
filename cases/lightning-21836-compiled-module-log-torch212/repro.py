"""Lightning #21836: a torch.compile'd LightningModule that calls self.log() in training_step fails on torch >= 2.12.

https://github.com/Lightning-AI/pytorch-lightning/issues/21836
https://github.com/Lightning-AI/pytorch-lightning/pull/21837   (the fix: `@torch.compiler.disable` on LightningModule.log)
https://github.com/pytorch/pytorch/issues/190171               (the Dynamo side)

`Trainer.fit(torch.compile(model))` rebinds the module's step methods to Dynamo-wrapped ones
(`lightning.pytorch.utilities.compile.from_compiled`). Inside `self.log()`, Lightning calls
`is_param_in_hook_signature(self.training_step, "dataloader_iter")`, i.e. `inspect.getfullargspec` on that bound
method. Up to torch 2.11 Dynamo graph-broke on `inspect` and ran it eagerly; torch 2.12 traces into it and fails:
`torch._dynamo.exc.InternalTorchDynamoError: AttributeError: 'method' object has no attribute '__dict__'`. So the
same Lightning release works with torch 2.11 and fails with torch 2.12. PR #21837 (merged 2026-07-16, in no
release up to 2.6.6) decorates `LightningModule.log` with `torch.compiler.disable`.

    python repro.py [--device cpu|cuda] [--backend eager|inductor] [--workaround-disable-log]

(default)                 torch.compile(model, backend="eager"), self.log("loss", loss) in training_step,
                          Trainer(fast_dev_run=True).fit (Lightning's own test_trainer_compiled_model_that_logs)
                          (the bug: it is in Dynamo's tracing, before any backend; eager skips inductor's C++
                          build, minutes on a loaded 2-core machine)
--backend inductor        the same with torch.compile's default backend, as in the issue
--workaround-disable-log  the same with the model's `log` wrapped in torch.compiler.disable (what PR #21837 does
                          inside Lightning), done in the user's subclass

A world of one: the Trainer runs on one device and creates no process group, so this script has no
`init_dist`. Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA, more than one rank).
"""

import argparse
import importlib
import os
import sys

import lightning as L
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

SIGNATURE = "'method' object has no attribute '__dict__'"


def compiler_disable(fn):
    """torch.compiler.disable (torch >= 2.1), torch._dynamo.disable before it."""
    compiler = getattr(torch, "compiler", None)
    disable = getattr(compiler, "disable", None) if compiler is not None else None
    if disable is None:
        disable = importlib.import_module("torch._dynamo").disable
    return disable(fn)


class LoggingModel(BoringModel):
    def training_step(self, batch, batch_idx):
        loss = self(batch).sum()
        self.log("loss", loss)
        return loss


class LoggingModelLogDisabled(LoggingModel):
    log = compiler_disable(L.LightningModule.log)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--backend", choices=["eager", "inductor"], default="eager")
    parser.add_argument("--workaround-disable-log", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125
    dynamo = importlib.import_module("torch._dynamo")
    if hasattr(dynamo, "is_dynamo_supported") and not dynamo.is_dynamo_supported():
        print(f"SKIP: torch {torch.__version__} has no torch.compile on Python {sys.version.split()[0]}")
        return 125

    model = LoggingModelLogDisabled() if args.workaround_disable_log else LoggingModel()
    compiled = torch.compile(model, backend=args.backend)
    trainer = L.Trainer(accelerator="gpu" if args.device == "cuda" else "cpu", devices=1, fast_dev_run=True,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                        logger=False)
    where = f"lightning {L.__version__}, torch {torch.__version__}, backend {args.backend}"
    try:
        trainer.fit(compiled)
    except RuntimeError as e:  # torch._dynamo.exc.InternalTorchDynamoError is a RuntimeError
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: {SIGNATURE} ({type(e).__name__} from self.log in the compiled training_step; {where})",
              flush=True)
        return 1
    metrics = set(trainer.callback_metrics)
    assert metrics == {"loss"}, f"callback_metrics after the fit: {sorted(metrics)}"
    print(f"OK: the compiled module logged 'loss' ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
