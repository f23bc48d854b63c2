"""Lightning-AI/litgpt PR #2218: the Mistral-7B v0.2/v0.3, Mathstral and Mistral-Large configs use rope_base 10000.

https://github.com/Lightning-AI/litgpt/pull/2218

Mistral-7B v0.2 and v0.3 (base and instruct), Mathstral-7B-v0.1 and Mistral-Large-Instruct-2407/2411 are
trained with a RoPE base of 1,000,000: their Hugging Face `config.json` says `"rope_theta": 1000000.0`.
litgpt's configs for them never set `rope_base`, so `Config.from_name(...)` leaves the default 10000 and the
model litgpt builds rotates queries and keys with the wrong frequencies: every converted checkpoint of these
models computes wrong logits (no error). PR #2218 (first release 0.5.13) adds `rope_base=1000000` to the seven
configs; Mixtral-8x7B, which had it all along, is the control.

The script takes the named config, shrinks it (`Config.from_name(name, n_layer=1, n_embd=32, ...)`: the
sizes are overridden, `rope_base` is whatever litgpt's config says), builds the model with random weights
(nothing downloaded) and compares the model's RoPE cache `cos` with the one computed here from the base in
the model's Hugging Face config, theta_j = 1e6 ** (-2j / n_elem), cos(position * theta_j).

    python repro.py [--device cpu|cuda] [--model Mistral-7B-Instruct-v0.2|Mixtral-8x7B-Instruct-v0.1]

Mistral-7B-Instruct-v0.2 (in every litgpt from 0.3.0) is the bug; Mixtral-8x7B-Instruct-v0.1 the control.

Where this litgpt has no config of that name the script exits 125. No process group: a world of 1 only.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import torch
from litgpt import GPT, Config

SIGNATURE = "the RoPE base is not the model's rope_theta"
# "rope_theta" in each model's config.json on the Hugging Face Hub (mistralai/<name>, unsloth/Mistral-7B-v0.2).
HF_ROPE_THETA = {  # the other five configs of the fix are added later (v0.3: 0.4.x, Large: 0.5.x)
    "Mistral-7B-Instruct-v0.2": 1000000.0,
    "Mixtral-8x7B-Instruct-v0.1": 1000000.0,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", choices=sorted(HF_ROPE_THETA), default="Mistral-7B-Instruct-v0.2")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a model config, nothing distributed)")
        return 125

    name = args.model
    sizes = dict(n_layer=1, n_embd=32, n_head=4, n_query_groups=2, head_size=8, intermediate_size=64,
                 vocab_size=32, padded_vocab_size=32, block_size=16)
    if name.startswith("Mixtral"):
        sizes.update(n_expert=2, n_expert_per_token=1)
    try:
        config = Config.from_name(name, **sizes)
    except ValueError as e:  # "... is not a supported config name" before the model was added
        print(f"SKIP: this litgpt has no {name} config ({e})")
        return 125
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GPT(config).to(device)
    cos = model.cos.float()
    if cos.dim() != 2:
        raise AssertionError(f"unexpected RoPE cache shape {tuple(cos.shape)}")

    n_elem = config.rope_n_elem
    base = HF_ROPE_THETA[name]
    theta = base ** (-torch.arange(0, n_elem, 2, dtype=torch.float64) / n_elem)
    positions = torch.arange(cos.size(0), dtype=torch.float64)
    expected = torch.cos(torch.outer(positions, theta)).repeat(1, 2).to(device)
    err = (cos.double() - expected).abs().max().item()
    what = (f"{name}: config.rope_base={config.rope_base}, HF rope_theta={base:g}; model.cos{tuple(cos.shape)} "
            f"vs cos(pos * {base:g}**(-2j/{n_elem})): max |diff| {err:.3e} (cos[15,1]: {cos[15, 1].item():.6f} "
            f"vs {expected[15, 1].item():.6f})")
    if err > 1e-4:
        print(f"REPRODUCED: {SIGNATURE}: {what}", flush=True)
        return 1
    print(f"OK: {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
