"""Lightning-AI/litgpt PR #2179: sequential generation builds a wrong KV cache for models with a local RoPE base.

https://github.com/Lightning-AI/litgpt/pull/2179

`litgpt generate_sequentially` (litgpt/generate/sequentially.py) places the blocks of a model on the
devices with `sequential(model, root, max_seq_length, devices)` and gives each block a KV cache of
`rope_cache_length=model.cos.size(-1)`. Models with a separate RoPE base for their local (sliding-window)
layers, `rope_local_base_freq` (Gemma-3, first release 0.5.8), keep `cos` as (seq_len, n_elem, 2): the
last dimension is 2, not n_elem, so every key cache is built with room for 2 + head_size - n_elem values
per head. The first forward through the cache fails in `index_copy_` ("must have same slice shapes").
PR #2179 (first release 0.5.13) adds `GPT.rope_cache_length()` (`cos.size(1)`) and uses it there.

The script builds a tiny Gemma-3-like GPT (2 layers: one sliding with local base 1e4, one global with base
1e6, rotary_percentage 1.0 as in Gemma-3; random weights, nothing downloaded), runs it without a cache,
then calls the real `sequential(model, torch.device("cpu"), 16, devices=1)` (upstream runs it on several
GPUs; the cache is built the same way on one CPU device) and prefills 4 tokens through the caches: the
logits must equal the forward without cache.

    python repro.py [--device cpu|cuda] [--rope global|local]

--rope global   control: no `rope_local_base_freq` (a 2-D cos), the same model otherwise

Where this litgpt's Config has no `rope_local_base_freq` (before 0.5.8) the script exits 125. No process
group: a world of 1 only. Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import torch
from litgpt import GPT, Config

SIGNATURE = "sequential placement built a KV cache of the wrong shape"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rope", choices=["local", "global"], default="local")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (one model's forward, nothing distributed)")
        return 125

    fields = dict(n_layer=2, n_head=2, n_embd=16, block_size=32, vocab_size=64, padded_vocab_size=64,
                  rotary_percentage=1.0, rope_base=1000000, sliding_window_size=4, sliding_window_indices=[1, 0])
    if args.rope == "local":
        fields["rope_local_base_freq"] = 10000.0
    try:
        config = Config(**fields)
    except TypeError as e:  # no rope_local_base_freq / sliding_window_indices yet
        print(f"SKIP: this litgpt's Config has no local RoPE base ({e})")
        return 125
    from litgpt.generate.sequentially import sequential

    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GPT(config).to(device).eval()
    idx = torch.randint(0, 64, (1, 4), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.inference_mode():
        expected = model(idx)
        model = sequential(model, device, 16, 1)
        k_shape = tuple(model.transformer.h[0].attn.kv_cache.k.shape)
        where = (f"cos {tuple(model.cos.shape)}, head_size {config.head_size}: block 0's key cache is {k_shape}")
        try:
            got = model(idx, input_pos=torch.arange(4, device=device))
        except RuntimeError as e:
            if "same slice shapes" not in str(e):
                raise
            print(f"\nREPRODUCED: {SIGNATURE}: {where}; prefill: RuntimeError: {e}", flush=True)
            return 1
    err = (got - expected).abs().max().item()
    if err > 1e-4:
        raise AssertionError(f"cached prefill differs from the forward without cache by {err:.3e} ({where})")
    print(f"\nOK: {where}; cached prefill equals the forward without cache (max |diff| {err:.3e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
