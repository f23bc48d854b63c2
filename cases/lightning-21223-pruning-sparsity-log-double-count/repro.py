"""Lightning #21223 (issue #13595): `ModelPruning(verbose=1)` logs a wrong total, so a wrong sparsity percentage.

https://github.com/Lightning-AI/pytorch-lightning/issues/13595
https://github.com/Lightning-AI/pytorch-lightning/pull/21223

With `verbose >= 1` the callback logs "Applied `L1Unstructured`. Pruned: a/N (x%) -> b/N (y%)". Up to 2.5.x it
computed N as the sum of `layer.parameters()` over every (layer, name) pair it prunes: a layer pruned in its
weight and its bias (the default `parameter_names`) is counted twice, and a layer's unpruned parameters are
counted too. The zeros are right, the total and the percentage are wrong (the issue: about 10% logged for a 20%
pruning). PR #21223 (first in 2.6.0) sums the sizes of the pruned tensors instead.

    python repro.py [--device cpu|cuda] [--no-bias]

--no-bias   control: a layer without a bias, pruned in its weight only (the old sum is right there)

A world of one. One `nn.Linear(32, 2)` (the issue's BoringModel layer), one epoch of 4 batches, global L1
pruning of 20% at the end of the epoch, pruning made permanent at the end of fit. The right answer is the
script's own: the zeros and sizes of the pruned tensors after fit, counted here. Exit: 0 correct, 1 bug,
125 cannot test here.
"""

import argparse
import logging
import os
import re
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelPruning
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "ModelPruning logged a wrong total of parameters"
LINE = re.compile(r"Pruned: (\d+)/(\d+) \(([\d.]+)%\) -> (\d+)/(\d+) \(([\d.]+)%\)")


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class Model(L.LightningModule):
    def __init__(self, bias):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2, bias=bias)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-bias", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    capture = Capture()
    pruning_log = logging.getLogger("lightning.pytorch.callbacks.pruning")
    pruning_log.addHandler(capture)
    pruning_log.setLevel(logging.INFO)

    torch.manual_seed(0)
    model = Model(bias=not args.no_bias)
    names = ["weight"] if args.no_bias else ["weight", "bias"]
    pruning = ModelPruning(
        "l1_unstructured",
        parameter_names=names,
        amount=0.2,
        use_lottery_ticket_hypothesis=False,
        verbose=1,
    )
    loader = DataLoader(TensorDataset(torch.randn(16, 32), torch.randn(16, 2)), batch_size=4)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        max_epochs=1,
        callbacks=[pruning],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)

    # the right answer: the pruned tensors themselves (pruning is permanent after fit: zeros are in place)
    tensors = [getattr(model.layer, n).detach() for n in names]
    right_zeros = sum(int((t == 0).sum()) for t in tensors)
    right_total = sum(t.numel() for t in tensors)
    summary = [s for s in capture.lines if s.startswith("Applied") and LINE.search(s) and " to `" not in s]
    assert len(summary) == 1, f"expected one summary line from ModelPruning, got {capture.lines!r}"
    m = LINE.search(summary[0])
    logged_zeros, logged_total, logged_pct = int(m.group(4)), int(m.group(5)), float(m.group(6))
    right_pct = 100.0 * right_zeros / right_total
    where = (f"logged {logged_zeros}/{logged_total} ({logged_pct:.2f}%); counted in the pruned tensors "
             f"{right_zeros}/{right_total} ({right_pct:.2f}%) over {names} of Linear(32, 2, bias={not args.no_bias}); "
             f"line: {summary[0]!r}")
    assert logged_zeros == right_zeros, f"the logged zeros differ from the tensors' zeros: {where}"
    if logged_total != right_total or abs(logged_pct - right_pct) > 0.01:
        print(f"REPRODUCED: {SIGNATURE} ({where})", flush=True)
        return 1
    print(f"OK: ModelPruning logged the right sparsity ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
