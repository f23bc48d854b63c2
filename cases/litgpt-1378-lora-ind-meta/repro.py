"""LitGPT #1378 / #1385: LoRA's `_lora_ind` stays on the meta device under FSDP.

`litgpt finetune lora --devices 2` builds the model on the meta device
(`fabric.init_module(empty_init=True)`), lets FSDP materialise it
(`to_empty()` + `reset_parameters()`), and then runs validation. When LoRA is
applied to only some of q/k/v (e.g. `--lora_key False`), `LoRAQKVLinear.zero_pad`
moves a cached index tensor to the compute device; on litgpt main between
#1374 and #770 that tensor was a plain attribute created under the meta device,
so FSDP never materialised it and the forward fails with
`NotImplementedError: Cannot copy out of meta tensor; no data!`.

This script does the same with plain torch FSDP (Fabric refuses FSDP on CPU):

    python repro.py [--device cpu|cuda] [--all-qkv]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--all-qkv]

Exit 0: forward works; 1: bug reproduced; 125: cannot test here.
"""
import argparse
import os
import socket
import sys
import warnings

import torch
import torch.distributed as dist
from litgpt.lora import GPT, Block, Config, LoRAQKVLinear, mark_only_lora_as_trainable
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

SIGNATURE = "Cannot copy out of meta tensor"
# FSDP warns (at length) that a Block mixes frozen and LoRA parameters; irrelevant here.
warnings.filterwarnings("ignore", message=".*has both parameters with requires_grad")


def free_port():
    """A TCP port that is free now: the OS picks it when we bind to port 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_dist(device_type):
    """Join the process group (gloo on CPU, nccl on CUDA); return this rank's device.

    Under plain `python` (no RANK in the environment) this is a world of one on a free port.
    """
    if "RANK" not in os.environ:  # plain `python repro.py`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in os.environ:
            os.environ["MASTER_PORT"] = str(free_port())
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return device


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--all-qkv", action="store_true",
                        help="LoRA on query, key and value (zero_pad returns early)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125

    device = init_dist(args.device)
    try:
        return check(args, device, dist.get_rank())
    finally:
        dist.destroy_process_group()


def check(args, device, rank):
    config = Config(
        n_layer=1, n_embd=16, n_head=4, n_query_groups=4, block_size=8,
        vocab_size=32, padded_vocab_size=32,
        lora_r=2, lora_alpha=4, lora_query=True, lora_key=args.all_qkv, lora_value=True,
    )

    # Like `fabric.init_module(empty_init=True)` in litgpt/finetune/lora.py with --devices > 1.
    torch.manual_seed(0)
    with torch.device("meta"):
        model = GPT(config)
    mark_only_lora_as_trainable(model)
    enable_lora = [m.enable_lora for m in model.modules() if isinstance(m, LoRAQKVLinear)]

    # Like Fabric's FSDPStrategy.setup_module: FSDP materialises the meta module
    # (module.to_empty(device) + module.reset_parameters()).
    model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=device,
                 use_orig_params=True)

    # Like litgpt's validate(): eval mode, no grad, a forward pass.
    model.eval()
    input_ids = torch.randint(0, config.vocab_size, (2, config.block_size), device=device)
    try:
        with torch.no_grad():
            logits = model(input_ids)
    except NotImplementedError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE} in LoRA forward "
              f"(enable_lora={enable_lora}): {e}", flush=True)
        return 1

    assert logits.shape == (2, config.block_size, config.padded_vocab_size), logits.shape
    assert torch.isfinite(logits).all()
    print(f"[rank {rank}] OK: forward after meta init + FSDP materialisation works "
          f"(enable_lora={enable_lora}, logits on {logits.device})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
