"""Lightning-AI/litgpt #2194: converting a Gemma-3 checkpoint to Hugging Face format fails with KeyError.

https://github.com/Lightning-AI/litgpt/issues/2194

`litgpt convert_from_litgpt` (`convert_lit_checkpoint`) picks a weight-copy function by the model's
name. Gemma-3 (first release 0.5.8, with its own `copy_weights_gemma_3`) was never added to that choice:
its `GemmaMLP` sends it to `copy_weights_llama`, whose name map has no entry for Gemma-3's extra weights
(the q/k norms `attn.norm_q`/`attn.norm_k`, `post_attention_norm`, `post_mlp_norm`), so the conversion
stops with a KeyError. PR #2195 (first release 0.5.13) routes "Gemma-3*" to `copy_weights_gemma_3`.

    python repro.py [--device cpu|cuda] [--model gemma-3|gemma-2]

--model gemma-3  a tiny random Gemma-3-1b-it (2 layers, n_embd 32, vocab 64), saved as a LitGPT checkpoint
                 (lit_model.pth + model_config.yaml), converted back to HF names     (the bug; default)
--model gemma-2  control: the same with Gemma-2-2b, which has its own converter in every release

Nothing is downloaded. The converted `model.pth` must hold the HF Gemma names (q_norm, the four layer
norms) with the LitGPT tensors' values. Where litgpt has no such config the script exits 125.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
from litgpt import GPT, Config
from litgpt.scripts.convert_lit_checkpoint import convert_lit_checkpoint
from litgpt.utils import save_config

SIGNATURE = "Gemma-3 conversion to HF names failed with KeyError"
MODELS = {"gemma-3": "Gemma-3-1b-it", "gemma-2": "Gemma-2-2b"}


def tiny_config(name):
    """`name`'s config, shrunk to 2 layers of width 32 (head size 16, one KV group, vocab 64)."""
    small = dict(n_layer=2, n_embd=32, n_head=2, n_query_groups=1, head_size=16, intermediate_size=64,
                 vocab_size=64, padded_vocab_size=64, block_size=32)
    base = Config.from_name(name)
    if getattr(base, "sliding_window_indices", None) is not None:
        small.update(sliding_window_size=8, sliding_window_indices=[1, 0])
    if getattr(base, "rope_indices", None) is not None:
        small.update(rope_indices=[1, 0])
    return Config.from_name(name, **small)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", choices=sorted(MODELS), default="gemma-3")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a checkpoint conversion, nothing distributed)")
        return 125

    name = MODELS[args.model]
    try:
        config = tiny_config(name)
    except ValueError as e:  # "... is not a supported config name" before the model was added
        print(f"SKIP: this litgpt has no {name} config ({e})")
        return 125

    torch.manual_seed(0)
    model = GPT(config)
    lit = model.state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, out = Path(tmp, "ckpt"), Path(tmp, "hf")
        ckpt.mkdir()
        torch.save(lit, ckpt / "lit_model.pth")
        save_config(config, ckpt)
        try:
            convert_lit_checkpoint(ckpt, out)
        except KeyError as e:
            if args.model != "gemma-3":
                raise
            print(f"REPRODUCED: {SIGNATURE}: KeyError {e} (convert_lit_checkpoint of a tiny {name})", flush=True)
            return 1
        hf = torch.load(out / "model.pth", map_location="cpu", weights_only=False)

    wanted = {
        "model.layers.0.self_attn.q_norm.weight": "transformer.h.0.attn.norm_q.weight",
        "model.layers.1.post_feedforward_layernorm.weight": "transformer.h.1.post_mlp_norm.weight",
        "model.layers.0.post_attention_layernorm.weight": "transformer.h.0.post_attention_norm.weight",
        "model.layers.1.pre_feedforward_layernorm.weight": "transformer.h.1.norm_2.weight",
    }
    if args.model == "gemma-2":  # no q/k norms in Gemma-2
        del wanted["model.layers.0.self_attn.q_norm.weight"]
    missing = sorted(k for k in wanted if k not in hf)
    assert not missing, f"converted checkpoint lacks {missing}; it has {sorted(hf)[:12]}..."
    for hf_name, lit_name in wanted.items():
        assert torch.equal(hf[hf_name], lit[lit_name]), f"{hf_name} differs from {lit_name}"
    print(f"OK: {name} converted to {len(hf)} HF tensors, Gemma norms included and equal", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
