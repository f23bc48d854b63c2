"""Lightning-AI/litgpt#2182: a KV-cache prefill longer than the sliding window breaks causality.

https://github.com/Lightning-AI/litgpt/issues/2182 (closed by PR #2215)

PR #2153 (first release 0.5.12, the fix of #2145) sized a sliding-window layer's KV cache to the window
and made it a ring buffer: position p is written to slot p % window. A prefill of T > window tokens
(`model(idx, input_pos=arange(T))`, what `generate()` does with a prompt longer than the window, e.g.
Gemma-3's 512/1024) overwrites the early slots with later positions, while the mask is the global causal
mask cut to the cache length: query 0 attends to the slot that now holds position 8, a future token. No
error, wrong logits. Before 0.5.12 the cache held every position (no ring); PR #2215
(first release 0.5.13) refuses such a prefill with a ValueError ("use chunked prefill").

The script builds a tiny GPT (1 layer, every layer sliding, window 4, random weights, nothing downloaded),
sets its KV cache and prefills T tokens twice: with a prompt and with the same prompt whose LAST token is
changed. Causal attention means the logits at every earlier position must not move; they are also compared
with the model's forward without a KV cache (which builds its sliding-window mask from positions).
The ValueError of 0.5.13 counts as correct: the library refuses instead of computing a wrong value.

    python repro.py [--device cpu|cuda] [--tokens T]

--tokens 4 (the window itself) is the control: the ring never wraps.
Where this litgpt's KVCache has no sliding-window ring buffer (before 0.5.12) the script exits 125: the
older full-length cache has no ring to wrap (its own sliding-window problems are litgpt-2145's). No process
group: a world of 1 only. Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import inspect
import os
import sys

import torch
from litgpt import GPT, Config
from litgpt.model import KVCache

SIGNATURE = "the KV-cache prefill is not causal"
WINDOW = 4


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=10, help="prefill length (the window is 4)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (one model's forward, nothing distributed)")
        return 125

    if "is_sliding_window" not in inspect.signature(KVCache.__init__).parameters:
        # Before 0.5.12 a sliding-window layer's cache holds every position: no ring buffer to wrap.
        print("SKIP: this litgpt's KVCache has no sliding-window ring buffer (PR #2153, 0.5.12)")
        return 125
    config = Config(n_layer=1, n_head=2, n_embd=16, block_size=32, vocab_size=64, padded_vocab_size=64,
                    sliding_window_size=WINDOW)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GPT(config).to(device).eval()
    T = args.tokens
    idx = torch.randint(0, 64, (1, T), generator=torch.Generator().manual_seed(1)).to(device)
    idx_changed = idx.clone()
    idx_changed[0, -1] = (idx[0, -1] + 7) % 64

    with torch.no_grad():
        no_cache = model(idx)[0]
        model.max_seq_length = 16
        outs = []
        for x in (idx, idx_changed):
            model.set_kv_cache(batch_size=1, device=device)
            try:
                outs.append(model(x, input_pos=torch.arange(T, device=device))[0])
            except ValueError as e:
                if "exceeds the sliding window size" not in str(e):
                    raise
                print(f"OK: a prefill of {T} tokens > window {WINDOW} is refused: ValueError: {e}", flush=True)
                return 0
    cached, cached_changed = outs
    # Changing token T-1 may move only the logits at position T-1.
    moved = (cached[:-1] - cached_changed[:-1]).abs().amax(dim=-1)
    vs_no_cache = (cached - no_cache).abs().amax(dim=-1)
    what = (f"prefill of {T} tokens, window {WINDOW}: changing the last token moves the logits at earlier "
            f"positions by up to {moved.max().item():.3e} (per position {[round(v, 4) for v in moved.tolist()]}); "
            f"KV-cache prefill vs forward without cache: max |diff| {vs_no_cache.max().item():.3e}")
    if moved.max().item() > 1e-5 or vs_no_cache.max().item() > 1e-4:
        print(f"REPRODUCED: {SIGNATURE}: {what}", flush=True)
        return 1
    print(f"OK: {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
