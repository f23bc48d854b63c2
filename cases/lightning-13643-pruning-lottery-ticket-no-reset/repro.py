"""Lightning #21191 (issue #13643): `ModelPruning` with the lottery ticket hypothesis does not reset the kept weights.

https://github.com/Lightning-AI/pytorch-lightning/issues/13643
https://github.com/Lightning-AI/pytorch-lightning/pull/21191

With `use_lottery_ticket_hypothesis` the callback must, after pruning, reset the weights that were kept to their
values at the start of training (the "winning ticket" m * theta_0). Up to 2.5.x `_copy_param` wrote the original
values into `module.weight`, which after `torch.nn.utils.prune` is no longer the parameter but a tensor that the
forward pre-hook recomputes from `weight_orig * weight_mask`: the reset is lost at the next forward or at
`prune.remove`, and the model keeps its trained weights, silently. PR #21191 (first in 2.6.0) copies into
`weight_orig` when it exists.

    python repro.py [--device cpu|cuda]

A world of one. `nn.Linear(32, 2, bias=False)` trained one epoch of 4 batches (SGD, lr 0.1); at the end of that
epoch the callback prunes 50% of the weight (L1) and applies the lottery ticket hypothesis; pruning is made
permanent at the end of fit. The right answer is the script's own: its copy of the weight taken before fit,
times the mask (the weight's zeros after fit). Exit: 0 correct, 1 bug, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelPruning
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "the kept weights were not reset to their initial values"


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2, bias=False)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125

    torch.manual_seed(0)
    model = Model()
    initial = model.layer.weight.detach().clone()
    pruning = ModelPruning(
        "l1_unstructured",
        parameters_to_prune=[(model.layer, "weight")],
        amount=0.5,
        use_global_unstructured=False,
        use_lottery_ticket_hypothesis=True,
        make_pruning_permanent=True,
        verbose=0,
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

    final = model.layer.weight.detach().cpu()
    kept = final != 0
    pruned = int((~kept).sum())
    assert pruned == final.numel() // 2, f"expected half of the {final.numel()} weights pruned, got {pruned}"
    ticket = initial * kept  # the right answer: m * theta_0
    reset = int(torch.isclose(final[kept], initial[kept], atol=1e-7, rtol=0).sum())
    max_diff = float((final - ticket).abs().max())
    where = (f"{reset} of {int(kept.sum())} kept weights equal their value before fit, max |weight - mask * initial|"
             f" = {max_diff:.3g} ({pruned} of {final.numel()} pruned)")
    if reset < int(kept.sum()):
        print(f"REPRODUCED: {SIGNATURE} ({where})", flush=True)
        return 1
    print(f"OK: the kept weights are the winning ticket mask * initial ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
