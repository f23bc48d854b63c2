"""LitGPT PR #2225: LoRA's lazily created `_lora_ind` buffer becomes an inference tensor.

Since #770 (litgpt 0.3.1), `LoRAQKVLinear.lora_ind` creates its index tensor lazily, as a
non-persistent buffer on `self.linear.weight.device`, at the first forward pass that
needs it (LoRA on only some of q/k/v, e.g. `--lora_key False`); the lazy creation is
there so that meta-device init + FSDP materialisation work (#1378 / #1385). If that first
pass runs under `torch.inference_mode()` -- `litgpt.generate.base.generate` is decorated
with it, as used by the finetune scripts' `generate_example` -- the cached buffer is an
inference tensor, and every later training step fails in `zero_pad` with
`RuntimeError: Inference tensors cannot be saved for backward`.
PR #2225 (first released in 0.5.13) makes `lora_ind` return a clone of the buffer.

The script builds a tiny LoRA GPT (query and value, not key), generates a few tokens
the way `generate_example` does (set_kv_cache, generate, clear_kv_cache), and then runs
one training step (forward, loss, backward, optimizer step).

    python repro.py [--device cpu|cuda] [--no-grad-first | --all-qkv]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [...]

Not a distributed bug: under torchrun every rank runs the same single-process steps.
Variants: `--no-grad-first` runs the first pass under `torch.no_grad()` instead (as
litgpt's `validate()` does), `--all-qkv` puts LoRA on q, k and v (zero_pad returns early
and never builds the index); neither fails in any version.

Exit 0: the training step works; 1: bug reproduced; 125: cannot test here.
"""
import argparse
import os
import sys

import torch
from litgpt.generate.base import generate
from litgpt.lora import GPT, Config, LoRAQKVLinear, mark_only_lora_as_trainable

SIGNATURE = "Inference tensors cannot be saved for backward"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--no-grad-first", action="store_true",
                       help="first pass under torch.no_grad() instead of generate()'s inference_mode")
    group.add_argument("--all-qkv", action="store_true",
                       help="LoRA on query, key and value (zero_pad returns early)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    rank = int(os.environ.get("RANK", "0"))
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if args.device == "cuda" else torch.device("cpu")

    config = Config(
        n_layer=1, n_embd=16, n_head=4, n_query_groups=4, block_size=16,
        vocab_size=32, padded_vocab_size=32,
        lora_r=2, lora_alpha=4, lora_query=True, lora_key=args.all_qkv, lora_value=True,
    )
    torch.manual_seed(0)
    with device:
        model = GPT(config)
    mark_only_lora_as_trainable(model)
    enable_lora = [m.enable_lora for m in model.modules() if isinstance(m, LoRAQKVLinear)]

    # 1) Like finetune/lora.py's generate_example (or any evaluation before training).
    model.eval()
    prompt = torch.randint(0, config.vocab_size, (4,), device=device)
    if args.no_grad_first:
        with torch.no_grad():
            model(prompt.unsqueeze(0))
    else:
        model.set_kv_cache(batch_size=1, device=device)
        out = generate(model, prompt, max_returned_tokens=8, top_k=1)
        assert out.shape[-1] == 8, out.shape
        model.clear_kv_cache()
    model.train()
    lora_ind = getattr(next(m for m in model.modules() if isinstance(m, LoRAQKVLinear)), "_lora_ind", None)
    ind_state = "absent" if not isinstance(lora_ind, torch.Tensor) else f"is_inference={lora_ind.is_inference()}"

    # 2) A training step.
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    input_ids = torch.randint(0, config.vocab_size, (2, 8), device=device)
    targets = torch.randint(0, config.vocab_size, (2, 8), device=device)
    try:
        logits = model(input_ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        loss.backward()
    except RuntimeError as e:
        if SIGNATURE not in str(e):
            raise
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE} in the training step after generate() "
              f"(enable_lora={enable_lora}, _lora_ind {ind_state}): {e}", flush=True)
        return 1
    optimizer.step()
    assert torch.isfinite(loss)
    print(f"[rank {rank}] OK: training step after the first pass works (enable_lora={enable_lora}, "
          f"_lora_ind {ind_state}, loss {loss.item():.4f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
