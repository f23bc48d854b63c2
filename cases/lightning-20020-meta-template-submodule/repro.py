"""Lightning #20020: a meta-device "template" model kept as a submodule breaks Trainer.fit.

A LightningModule holds an ensemble's stacked parameters and runs them through
torch.vmap(torch.func.functional_call(template, ...)), where `template` is a copy of one
member moved to the meta device (it only provides the structure, never data).

When the template is a registered submodule, Lightning moves the whole LightningModule to
the root device (Strategy.model_to_device -> module.to(device)) and back at teardown
(module.cpu()); both fail with
    NotImplementedError: Cannot copy out of meta tensor; no data!

    python repro.py [--device cpu|cuda] [--template submodule|list|on-demand]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--template ...]

--template submodule   self.template = <meta module>           (the bug)
--template list        self._template = [<meta module>]        (workaround: not a registered submodule)
--template on-demand   built inside `with torch.device("meta"):` whenever needed (workaround)

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import copy
import os
import sys
import traceback

import lightning as L
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SIGNATURE = "Cannot copy out of meta tensor; no data!"


def raised_in(exc):
    """The Lightning strategy method that the exception came through."""
    names = [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
    return next((n for n in ("model_to_device", "teardown") if n in names), "?")


def make_member():
    return nn.Linear(4, 1)


class Ensemble(L.LightningModule):
    def __init__(self, template_mode, members=3):
        super().__init__()
        self.template_mode = template_mode
        params, _ = torch.func.stack_module_state([make_member() for _ in range(members)])
        self.params = nn.ParameterDict({k: nn.Parameter(v) for k, v in params.items()})
        template = copy.deepcopy(make_member()).to("meta")  # as in the issue
        if template_mode == "submodule":
            self.template = template  # registered submodule -> moved by Lightning
        elif template_mode == "list":
            self._template = [template]  # hidden from nn.Module's registry
        # "on-demand": nothing stored

    def get_template(self):
        if self.template_mode == "submodule":
            return self.template
        if self.template_mode == "list":
            return self._template[0]
        with torch.device("meta"):
            return make_member()

    def forward(self, x):
        template = self.get_template()

        def call(p, x):
            return torch.func.functional_call(template, p, (x,))

        return torch.vmap(call, in_dims=(0, None))(dict(self.params), x)  # (members, batch, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y.expand(len(self.params["weight"]), -1, -1))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--template", choices=["submodule", "list", "on-demand"], default="submodule")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125

    # Under torchrun, Lightning detects the torchelastic environment, uses the ranks it was given and
    # initialises the process group itself (gloo on CPU, nccl on CUDA); it spawns no processes.
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world_size > 1:
        backend = "nccl" if args.device == "cuda" else "gloo"
        strategy = L.pytorch.strategies.DDPStrategy(process_group_backend=backend)
    else:
        strategy = "auto"

    torch.manual_seed(0)
    x = torch.randn(16, 4)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4)
    model = Ensemble(args.template)
    trainer = L.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=world_size,
        strategy=strategy,
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )

    try:
        trainer.fit(model, data)
    except NotImplementedError as e:
        if SIGNATURE not in str(e):
            raise
        sites = [raised_in(e)]
        if isinstance(e.__context__, NotImplementedError) and SIGNATURE in str(e.__context__):
            sites.insert(0, raised_in(e.__context__))  # first raised in setup, then again in teardown
        print(
            f"[rank {rank}] REPRODUCED: NotImplementedError: {SIGNATURE} "
            f"(Trainer.fit, template as {args.template}; raised in Strategy.{' then '.join(sites)})",
            flush=True,
        )
        return 1
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()

    assert trainer.global_step == 2, trainer.global_step
    assert model.get_template().weight.is_meta
    print(
        f"[rank {rank}] OK: Trainer.fit ran {trainer.global_step} steps, template stays on meta "
        f"(template as {args.template})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
