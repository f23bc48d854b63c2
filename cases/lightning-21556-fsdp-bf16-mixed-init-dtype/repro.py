"""Lightning #21556: with FSDP's "bf16-mixed" precision, `init_module()` creates the parameters in bfloat16.

https://github.com/Lightning-AI/pytorch-lightning/issues/21556

Mixed precision keeps the parameters in float32 and only runs forward/backward under autocast (Lightning's
precision docs; PyTorch's FSDP `MixedPrecision`: "outside forward and backward, the sharded parameters are
kept in full precision"). `FSDPPrecision.module_init_context()` (used by `Fabric.init_module()` and by the
Trainer around `configure_model`) sets the default dtype to `mixed_precision_config.param_dtype`. Up to
2.5.x that was float32 for "bf16-mixed"; PR #21361 (first in lightning 2.6.0) made `param_dtype` bfloat16
for "bf16-mixed" (the dtype FSDP computes in), so from 2.6.0 the model is silently created in bfloat16.
PR #21586 (first in 2.6.4 among the snapshot's tags; 2.6.2/2.6.3 were pulled) uses the precision's own
parameter dtype again (float32 for the mixed precisions).

    python repro.py [--device cpu|cuda] [--trainer-plugin] [--precision bf16-mixed|bf16-true]

(default)              Fabric(accelerator="cpu", plugins=FSDPPrecision("bf16-mixed")); fabric.init_module()
--trainer-plugin       lightning.pytorch's FSDPPrecision("bf16-mixed").module_init_context() (the Trainer's)
--precision bf16-true  control: true half precision, where bfloat16 parameters are right

FSDPStrategy needs a GPU (the connector refuses FSDP on CPU), so on CPU the Fabric runs the FSDP precision
plugin with its single-device strategy; the plugin's context manager is the same code either way (PR
#21586's tests call it directly). The expected dtype is the precision's documented parameter dtype:
float32 for "-mixed", bfloat16 for "-true".
A world of one. Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from torch import nn

SIGNATURE = "parameters created in the wrong dtype"

EXPECTED = {"bf16-mixed": torch.float32, "bf16-true": torch.bfloat16}


def build_with_fabric(args):
    from lightning.fabric import Fabric
    from lightning.fabric.plugins.precision import FSDPPrecision

    fabric = Fabric(
        accelerator="cuda" if args.device == "cuda" else "cpu",
        devices=1,
        plugins=[FSDPPrecision(precision=args.precision)],
    )
    with fabric.init_module():
        return nn.Linear(16, 4), f"Fabric({type(fabric.strategy).__name__}).init_module()"


def build_with_trainer_plugin(args):
    from lightning.pytorch.plugins.precision import FSDPPrecision

    with FSDPPrecision(precision=args.precision).module_init_context():
        return nn.Linear(16, 4), "lightning.pytorch FSDPPrecision.module_init_context()"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--trainer-plugin", action="store_true", help="lightning.pytorch's FSDPPrecision")
    parser.add_argument("--precision", choices=sorted(EXPECTED), default="bf16-mixed")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only")
        return 125
    from lightning.fabric.plugins.precision import FSDPPrecision

    if not hasattr(FSDPPrecision, "module_init_context"):
        print(f"SKIP: lightning {L.__version__}: FSDPPrecision has no module_init_context (added in 2.1)")
        return 125

    torch.manual_seed(0)
    default_before = torch.get_default_dtype()
    model, where = (build_with_trainer_plugin if args.trainer_plugin else build_with_fabric)(args)
    assert torch.get_default_dtype() == default_before, "the context did not restore the default dtype"
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    expected = EXPECTED[args.precision]
    where = f"lightning {L.__version__}, precision={args.precision!r}, {where}"
    if dtypes != [str(expected)]:
        print(f"REPRODUCED: {SIGNATURE}: {', '.join(dtypes)}, expected {expected} ({where})", flush=True)
        return 1
    print(f"OK: parameters in {expected} ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
