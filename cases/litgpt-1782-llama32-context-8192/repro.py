"""Lightning-AI/litgpt PR #1782: the Llama 3.2 configs cap the context at 8192 tokens (the models take 131072).

https://github.com/Lightning-AI/litgpt/pull/1782 (after PR #1779)

Llama-3.2-1B and -3B (first release 0.4.13) were added with `block_size=8192`, the context of Llama 3;
their Hugging Face config.json says `"max_position_embeddings": 131072` (Llama 3.1/3.2 extend the context
with the llama3 RoPE scaling that litgpt's configs do carry). `block_size` is litgpt's maximum sequence
length: a model built from the config refuses `max_seq_length` above 8192 ("Cannot attend to ..., block size
is only 8192"), so generation, chat, finetuning and evaluation of these models are capped at 8192 tokens
of their 131072. PR #1782 (first release 0.5.1) sets `block_size=131072`. (The litgpt 0.5.5 wheel on PyPI,
unlike the v0.5.5 tag, has `block_size=1024` for Llama-3.2-1B: wrong again in that one release.)

The script takes `Config.from_name("Llama-3.2-1B", n_layer=1, n_embd=32, ...)` (sizes shrunk, the context
fields as litgpt's config has them; random weights, nothing downloaded), compares `block_size` with the
model's max_position_embeddings 131072, and asks the model built from it for a 16384-token context.

    python repro.py [--device cpu|cuda] [--model Llama-3.2-1B|Llama-3-8B]

--model Llama-3-8B   control: Llama 3 (8192 in its config.json too)

Where this litgpt has no config of that name the script exits 125. No process group: a world of 1 only.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import torch
from litgpt import GPT, Config

SIGNATURE = "the config's block_size is not the model's context length"
# "max_position_embeddings" in the models' config.json (meta-llama/Llama-3.2-1B, meta-llama/Meta-Llama-3-8B).
HF_CONTEXT = {"Llama-3.2-1B": 131072, "Llama-3-8B": 8192}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", choices=sorted(HF_CONTEXT), default="Llama-3.2-1B")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a model config, nothing distributed)")
        return 125

    name = args.model
    sizes = dict(n_layer=1, n_embd=32, n_head=4, n_query_groups=2, head_size=8, intermediate_size=64,
                 vocab_size=32, padded_vocab_size=32)
    try:
        config = Config.from_name(name, **sizes)
    except ValueError as e:  # "... is not a supported config name" before the model was added
        print(f"SKIP: this litgpt has no {name} config ({e})")
        return 125
    context = HF_CONTEXT[name]
    want = min(context, 16384)
    model = GPT(config)  # tiny: only the RoPE cache has block_size rows
    try:
        model.max_seq_length = want
        accepted = f"model.max_seq_length = {want} accepted"
    except ValueError as e:  # "Cannot attend to ..., block size is only ..."
        accepted = f"model.max_seq_length = {want}: ValueError: {e}"
    what = f"{name}: config.block_size={config.block_size}, HF max_position_embeddings={context}; {accepted}"
    if config.block_size != context:
        print(f"REPRODUCED: {SIGNATURE}: {what}", flush=True)
        return 1
    print(f"OK: {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
