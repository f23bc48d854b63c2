"""Compatibility probe: does this lightning work with this torch? (bugmatrix compat)

Imports lightning, then runs Trainer.fit for one optimizer step of a tiny module on CPU and checks that the
weights moved.

Exit code: 0 works, 1 failed (the line names the stage, `import` or `use`, and the error).
"""

import sys


def fail(stage, exc):
    text = str(exc).strip().splitlines()
    print(f"COMPAT-PROBE-FAILED {stage}: {type(exc).__name__}: {text[0][:400] if text else ''}", flush=True)
    return 1


def main():
    try:
        import lightning as L
        import torch
        from torch.utils.data import DataLoader, TensorDataset
    except Exception as exc:
        return fail("import", exc)
    print("COMPAT-PROBE stage: use", flush=True)

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    try:
        torch.manual_seed(0)
        model = Tiny()
        before = model.layer.weight.detach().clone()
        data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=8)
        trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=1, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(model, data)
        if trainer.global_step != 1:
            raise AssertionError(f"global_step {trainer.global_step} after max_steps=1")
        if torch.equal(before, model.layer.weight.detach()):
            raise AssertionError("the optimizer step did not change the weights")
    except Exception as exc:
        return fail("use", exc)
    print("COMPAT-PROBE works: one Trainer.fit step on CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
