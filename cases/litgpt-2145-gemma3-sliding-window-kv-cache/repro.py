"""Lightning-AI/litgpt#2145: KV-cached decoding ignores Gemma-3's sliding window once a sequence is longer than it.

https://github.com/Lightning-AI/litgpt/issues/2145
https://github.com/Lightning-AI/litgpt/pull/2153   (the fix, first in 0.5.12)

Gemma-3's local layers attend only to the last `sliding_window_size` tokens (1024 in the 4b/12b/27b models, 512 in
1b). Without a KV cache (training, a full forward) litgpt applies the window. With the KV cache (`litgpt generate`,
`chat`, `LLM.generate`), up to 0.5.11 it builds the window's bias from the rows of the step's mask, which are
numbered from 0 in every step: a one-token decoding step at position p >= window never masks anything, so every
local layer attends to the whole cache. Generation drifts once prompt + output pass the window (the PR: Gemma-3
4b/12b/27b "produce gibberish or repetitive text after approximately 800-1000 tokens"). PR #2153 keeps a circular
cache of `sliding_window_size` entries for the local layers.

    python repro.py [--device cpu|cuda] [--within-window]

(default)          a tiny random Gemma-3 (2 local layers, window 4): prefill 2 tokens, decode 10 more one by
                   one with the KV cache; the logits must equal a full forward's over the same 12 tokens   (the bug)
--within-window    control: the same with 4 tokens in all (never past the window)

The model is `Config.from_name("Gemma-3-1b-it", ...)` shrunk (n_layer=2, n_embd=32, window 4, vocab 64): random
weights, seed 0, float32. No process group; a world of one. Exit code: 0 = cached and full logits agree,
1 = bug reproduced (the signature is printed first), 125 = cannot test here (no CUDA, no Gemma-3 in this litgpt,
more than one rank).
"""

import argparse
import os
import sys
from importlib import metadata

import torch

SIGNATURE = "KV-cached decoding differs from the full forward past the sliding window"
WINDOW = 4


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--within-window", action="store_true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a single-device forward, nothing distributed)")
        return 125

    from litgpt import GPT, Config

    n_layer = 2
    try:
        config = Config.from_name(
            "Gemma-3-1b-it", n_layer=n_layer, n_embd=32, n_head=2, n_query_groups=1, head_size=16,
            intermediate_size=64, vocab_size=64, padded_vocab_size=64, block_size=32,
            sliding_window_size=WINDOW, sliding_window_indices=[1] * n_layer, rope_indices=[1] * n_layer,
        )
    except ValueError as e:  # "... is not a supported config name" before Gemma-3 (litgpt < 0.5.8)
        print(f"SKIP: this litgpt has no Gemma-3-1b-it config ({e})")
        return 125

    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GPT(config).to(device).eval()
    total = WINDOW if args.within_window else 12
    prefill = 2
    idx = torch.randint(0, config.vocab_size, (1, total), device=device)
    where = (f"litgpt {metadata.version('litgpt')}, torch {torch.__version__}, window {WINDOW}, "
             f"{total} tokens, {args.device}")

    with torch.no_grad():
        full = model(idx)[0]  # no KV cache: the window is applied
        model.set_kv_cache(batch_size=1, max_seq_length=config.block_size, device=device)
        steps = [model(idx[:, :prefill], input_pos=torch.arange(prefill, device=device))[0]]
        for pos in range(prefill, total):
            steps.append(model(idx[:, pos:pos + 1], input_pos=torch.tensor([pos], device=device))[0])
        cached = torch.cat(steps)

    diff = (cached - full).abs().amax(dim=-1)  # per position
    bad = [p for p in range(total) if diff[p] > 1e-4]
    if bad:
        print(f"REPRODUCED: {SIGNATURE}: max |cached - full| per position {[round(float(d), 4) for d in diff]}, "
              f"first differing position {bad[0]} ({where})", flush=True)
        return 1
    print(f"OK: cached and full logits agree at all {total} positions (max diff {float(diff.max()):.2e}) ({where})",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
