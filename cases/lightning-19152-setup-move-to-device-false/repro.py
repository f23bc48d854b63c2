"""Lightning PR #19152: `Fabric.setup(model, move_to_device=False)` still moves the model.

With `move_to_device=False` Fabric must leave the parameters where they are (the user places
them; e.g. a model that keeps part of its weights on the meta device until they are loaded).
Lightning <= 2.1 nevertheless ended `Fabric.setup()` / `setup_module()` with
`module.to(next(module.parameters()).device)` -- only meant to update the `.device` property --
which moves *every* parameter to the device of the *first* one:
  * first parameter on cpu, a later submodule on meta -> NotImplementedError
    "Cannot copy out of meta tensor; no data!" out of Fabric.setup;
  * first parameter on meta, later ones on cpu -> the real cpu weights are silently replaced
    by meta tensors (the data is gone).
Fixed by PR #19152 (labelled bug; it has no separate issue): Fabric only updates the device
property (`_update_properties`) and moves nothing. First released in lightning 2.1.3 (cherry-picked; 2.2.0 on master).

    python repro.py [--device cpu|cuda] [--order meta-last|meta-first] [--method setup|setup_module]
                    [--materialize-first]

--order meta-last      Sequential(Linear on cpu, Linear on meta)   (the bug: raises)
--order meta-first     Sequential(Linear on meta, Linear on cpu)   (the bug: silent data loss)
--materialize-first    workaround: materialize the meta part (to_empty + reset_parameters) before setup

A world of 1 only: with 2 ranks Fabric wraps the model in DistributedDataParallel, which cannot
take meta parameters in any version. Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import lightning as L
import torch
from torch import nn

SIGNATURE = "move_to_device=False still moved the parameters"
META_ERROR = "Cannot copy out of meta tensor"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--order", choices=["meta-last", "meta-first"], default="meta-last")
    parser.add_argument("--method", choices=["setup", "setup_module"], default="setup")
    parser.add_argument("--materialize-first", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (DistributedDataParallel cannot wrap meta parameters)")
        return 125

    fabric = L.Fabric(accelerator="cuda" if args.device == "cuda" else "cpu", devices=1)
    # the user's own placement: the real weights stay on cpu, the rest is on meta until loaded
    real = nn.Linear(4, 4, device="cpu")
    lazy = nn.Linear(4, 4, device="meta")
    model = nn.Sequential(real, lazy) if args.order == "meta-last" else nn.Sequential(lazy, real)
    weight_before = real.weight.detach().clone()

    if args.materialize_first:
        lazy.to_empty(device="cpu")
        lazy.reset_parameters()

    setup = getattr(fabric, args.method)
    where = f"Fabric.{args.method}(move_to_device=False), {args.order}"
    try:
        fabric_model = setup(model, move_to_device=False)
    except NotImplementedError as e:
        if META_ERROR not in str(e):
            raise
        print(f"REPRODUCED: {SIGNATURE}: NotImplementedError: {META_ERROR} ({where})", flush=True)
        return 1

    expected_lazy = "cpu" if args.materialize_first else "meta"
    placement = f"real weight on {real.weight.device}, lazy weight on {lazy.weight.device}"
    if real.weight.device.type != "cpu" or lazy.weight.device.type != expected_lazy:
        print(f"REPRODUCED: {SIGNATURE}: {placement} ({where})", flush=True)
        return 1
    assert torch.equal(real.weight.detach(), weight_before)
    print(f"OK: parameters left in place: {placement}; fabric_model.device={fabric_model.device} ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
