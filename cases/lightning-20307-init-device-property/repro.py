"""Lightning #20307: a LightningModule built under a device context reports `.device == cpu`.

`Trainer.init_module()` / `Fabric.init_module()` create the parameters directly on the target
device by entering that device as a context manager (`with self.root_device: ...`, i.e. torch's
`with torch.device(...)`). The parameters land on that device, but the module's `device`
property (Lightning's `_DeviceDtypeModuleMixin`) was hard-coded to `torch.device("cpu")` in
`__init__`, so `model.device` is wrong until something calls `model.to(...)`. Code that places
tensors with `self.device` then puts them on the wrong device.
Fixed by PR #21164 (lightning 2.6.0): `_device` is taken from `torch.get_default_device()`
(torch >= 2.3). That function follows the `torch.device` context manager only from torch 2.8 on,
so lightning 2.6 with an older torch still reports cpu (measured with torch 2.4.0).

    python repro.py [--device cpu|cuda] [--init meta-context|trainer] [--to-after]
    torchrun --standalone --nproc_per_node=2 repro.py [...]   (every rank checks on its own)

--init meta-context   `with torch.device("meta"): model = LitModel()` -- the mechanism that
                      init_module uses, on the one non-CPU device a CPU-only machine has
                      (the fix's own unit test does the same with `with dst_device:`)
--init trainer        `with Trainer(...).init_module(): model = LitModel()` (the issue's code);
                      needs --device cuda: on CPU the target device is cpu, so there is nothing
                      to see (exit 125)
--to-after            workaround from the thread: call `model.to(<device>)` after construction

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from torch import nn

SIGNATURE = "LightningModule.device does not match the device its parameters were created on"


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))

    def training_step(self, batch, batch_idx):
        return self.encoder(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--init", choices=["meta-context", "trainer"], default="meta-context")
    parser.add_argument("--to-after", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    rank = int(os.environ.get("RANK", "0"))

    if args.init == "meta-context":
        target = torch.device("meta")
        with target:
            model = LitModel()
    else:
        if args.device == "cpu":
            print("SKIP: --init trainer needs an accelerator other than the CPU (the CPU is the default device)")
            return 125
        # one device per process; under torchrun each rank takes its own GPU
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        trainer = L.Trainer(accelerator="gpu", devices=[local_rank], logger=False)
        if not hasattr(trainer, "init_module"):
            print(f"SKIP: Trainer.init_module does not exist in lightning {L.__version__} (added in 2.1)")
            return 125
        target = trainer.strategy.root_device
        with trainer.init_module():
            model = LitModel()

    if args.to_after:
        model = model.to(target)

    param_device = next(model.parameters()).device
    assert param_device.type == target.type, f"parameters on {param_device}, expected {target}"
    where = f"--init {args.init}{' --to-after' if args.to_after else ''}"
    if model.device != param_device:
        print(
            f"[rank {rank}] REPRODUCED: {SIGNATURE}: model.device={model.device}, "
            f"parameters on {param_device} ({where})",
            flush=True,
        )
        return 1
    print(f"[rank {rank}] OK: model.device={model.device} matches its parameters ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
