"""Lightning-AI/litgpt#2156: converting a multimodal Gemma-3 checkpoint fails once transformers >= 4.52 is installed.

https://github.com/Lightning-AI/litgpt/pull/2156   (the fix, first in 0.5.12)
https://github.com/Lightning-AI/litgpt/pull/2062   (the cause, first in 0.5.10)

Gemma-3 4b/12b/27b are multimodal: their Hugging Face files hold the text model under `language_model.model.`
(next to `vision_tower.` and `multi_modal_projector.`); transformers 4.52 renamed the modules, so a checkpoint it
saves has `model.language_model.` (and `model.vision_tower.`, `model.multi_modal_projector.`). Up to 0.5.9,
`litgpt convert_to_litgpt` recognised only the first layout. PR #2062 (first in 0.5.10) picked the prefix from the
*installed transformers' version* (`RequirementCache("transformers>=4.52.0")`) instead of from the checkpoint's keys:
with transformers >= 4.52 in the environment (litgpt does not need it; `lm-eval` and many others pull it in), the
files downloaded from the Hub are read with the wrong prefix, no text weight is mapped, and the conversion dies with
`KeyError: 'transformer.wte.weight'`. PR #2156 (first in 0.5.12) picks each prefix from the checkpoint's own keys.

    python repro.py [--device cpu|cuda] [--layout hub|transformers-4.52]

(default)                      the layout of the files on the Hub (`language_model.model.`): converted wrongly by
                               litgpt 0.5.10-0.5.11 when transformers >= 4.52 is installed              (the bug)
--layout transformers-4.52     the layout transformers >= 4.52 saves (`model.language_model.`): not understood by
                               litgpt <= 0.5.9, nor by 0.5.10-0.5.11 without transformers >= 4.52

The script writes a tiny random checkpoint in that layout (one text layer, one vision layer; shapes are not checked
by the converter) under the config name `Gemma-3-4b-it`, runs `convert_hf_checkpoint` on it and checks that the
converted `lit_model.pth` holds the text model's embedding and fused qkv. It does not import transformers: litgpt
reads its installed version from the package metadata, and the script prints it. `--device` is accepted for the
harness (the conversion is CPU-only). No process group; a world of one. Exit code: 0 = converted correctly,
1 = bug reproduced (the signature is printed first), 125 = cannot test here (no CUDA, no Gemma-3 in this litgpt,
more than one rank).
"""

import argparse
import contextlib
import io
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import torch

SIGNATURE = "the multimodal Gemma-3 checkpoint's text weights were not converted"
MODEL = "Gemma-3-4b-it"
# text-model prefix, vision-tower prefix, projector prefix
LAYOUTS = {
    "hub": ("language_model.model", "vision_tower", "multi_modal_projector"),
    "transformers-4.52": ("model.language_model", "model.vision_tower", "model.multi_modal_projector"),
}


def version_of(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def hf_weights(layout, n_embd=8, head_size=4, vocab=16, inter=12):
    """A one-layer Gemma-3 text model plus one vision layer, with the keys of `layout`; random values."""
    text, vision, projector = LAYOUTS[layout]
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g)

    w = {f"{text}.embed_tokens.weight": rand(vocab, n_embd), f"{text}.norm.weight": rand(n_embd)}
    layer = f"{text}.layers.0"
    w.update({
        f"{layer}.self_attn.q_proj.weight": rand(2 * head_size, n_embd),
        f"{layer}.self_attn.k_proj.weight": rand(head_size, n_embd),
        f"{layer}.self_attn.v_proj.weight": rand(head_size, n_embd),
        f"{layer}.self_attn.o_proj.weight": rand(n_embd, 2 * head_size),
        f"{layer}.self_attn.q_norm.weight": rand(head_size),
        f"{layer}.self_attn.k_norm.weight": rand(head_size),
        f"{layer}.mlp.gate_proj.weight": rand(inter, n_embd),
        f"{layer}.mlp.up_proj.weight": rand(inter, n_embd),
        f"{layer}.mlp.down_proj.weight": rand(n_embd, inter),
        f"{layer}.input_layernorm.weight": rand(n_embd),
        f"{layer}.post_attention_layernorm.weight": rand(n_embd),
        f"{layer}.pre_feedforward_layernorm.weight": rand(n_embd),
        f"{layer}.post_feedforward_layernorm.weight": rand(n_embd),
    })
    vlayer = f"{vision}.vision_model.encoder.layers.0"
    w.update({
        f"{vlayer}.self_attn.q_proj.weight": rand(6, 6),
        f"{vlayer}.self_attn.k_proj.weight": rand(6, 6),
        f"{vlayer}.self_attn.v_proj.weight": rand(6, 6),
        f"{vlayer}.self_attn.out_proj.weight": rand(6, 6),
        f"{projector}.mm_input_projection_weight": rand(6, n_embd),
    })
    return w


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default="hub")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a checkpoint conversion, nothing distributed)")
        return 125

    from litgpt import Config
    from litgpt.scripts.convert_hf_checkpoint import convert_hf_checkpoint

    try:
        Config.from_name(MODEL)
    except ValueError as e:  # "... is not a supported config name" before Gemma-3 (litgpt < 0.5.8)
        print(f"SKIP: this litgpt has no {MODEL} config ({e})")
        return 125

    # safetensors comes with litgpt from 0.4.7 (an older litgpt, which has no Gemma-3 either, skipped above)
    from safetensors.torch import save_file

    where = (f"litgpt {version_of('litgpt')}, transformers {version_of('transformers') or 'not installed'}, "
             f"layout {args.layout} ({LAYOUTS[args.layout][0]}.*)")
    weights = hf_weights(args.layout)
    text = LAYOUTS[args.layout][0]
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint_dir = Path(tmp) / MODEL
        checkpoint_dir.mkdir()
        save_file(weights, str(checkpoint_dir / "model.safetensors"))
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                convert_hf_checkpoint(checkpoint_dir=checkpoint_dir, model_name=MODEL)
        except KeyError as e:
            # 0.5.10-0.5.11 with the prefix of the other layout: nothing maps, 'transformer.wte.weight' is missing;
            # <= 0.5.9 with the transformers-4.52 layout: the key itself is not in the weight map
            missing = e.args[0] if e.args else ""
            if missing != "transformer.wte.weight" and not str(missing).startswith(LAYOUTS[args.layout]):
                raise
            print(f"REPRODUCED: {SIGNATURE}: convert_hf_checkpoint raised KeyError({missing!r}) ({where})",
                  flush=True)
            return 1
        converted = torch.load(str(checkpoint_dir / "lit_model.pth"), map_location="cpu")

    layer = f"{text}.layers.0.self_attn"
    expected_qkv = torch.cat([weights[f"{layer}.{p}_proj.weight"] for p in ("q", "k", "v")])
    wte = converted.get("transformer.wte.weight")
    qkv = converted.get("transformer.h.0.attn.qkv.weight")
    if wte is None or qkv is None or not torch.equal(wte, weights[f"{text}.embed_tokens.weight"]) \
            or not torch.equal(qkv, expected_qkv):
        print(f"REPRODUCED: {SIGNATURE}: the converted checkpoint's embedding or layer-0 qkv is missing or wrong; "
              f"keys {sorted(converted)} ({where})", flush=True)
        return 1
    print(f"OK: converted {len(converted)} tensors, embedding and layer-0 qkv equal to the text model's ({where})",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
