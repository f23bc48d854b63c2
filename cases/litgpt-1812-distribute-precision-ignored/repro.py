"""LitGPT #1812 (and PR #1802): `LLM.distribute(precision=...)` ignores the precision.

In litgpt 0.4.12 - 0.5.2, `litgpt.api.LLM.distribute()` overwrote its `precision`
argument with a leftover debugging line (`precision = "32-true"`), so the model it
builds with Fabric (`fabric.init_module()` + `load_checkpoint` + `setup_module`) always
stays in float32: `precision="bf16-true"` (PR #1802) and the default `precision=None`,
which should pick `get_default_supported_precision(training=False)` = "bf16-true" on
CPU and bf16-capable GPUs (issue #1812), both give float32 weights. Fixed in 0.5.3.

The script writes a tiny local checkpoint directory (random weights of a 1-layer model,
`model_config.yaml`, a small word-level `tokenizer.json`; nothing is downloaded), loads
it with `LLM.load(..., distribute=None)`, calls `llm.distribute(accelerator=..., devices="auto",
precision=...)` and checks the dtype of the model's parameters, and that a forward
pass through the distributed model works.

    python repro.py [--device cpu|cuda] [--precision bf16-true|default|32-true]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [...]

Under torchrun every rank builds its own single-device LLM (the API's default for
generate_strategy=None) in its own scratch directory; no process group is needed.

Variants: `--precision bf16-true` (explicit, PR #1802), `--precision default`
(precision=None, issue #1812), `--precision 32-true` (control: float32 wanted).

Exit 0: the parameters have the requested dtype; 1: bug reproduced; 125: cannot test here.
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from litgpt import GPT, Config

try:
    from litgpt.api import LLM
except ImportError as e:  # litgpt < 0.4.0 has no Python API
    LLM = None
    _IMPORT_ERROR = e

SIGNATURE = "LLM.distribute ignored precision"


def write_checkpoint(ckpt_dir: Path) -> Config:
    """A tiny random checkpoint in litgpt's layout (lit_model.pth + model_config.yaml + tokenizer)."""
    from litgpt.utils import save_config
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(29)]
    vocab = {w: i for i, w in enumerate(words)}
    tok = HFTokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(ckpt_dir / "tokenizer.json"))
    (ckpt_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"}))

    config = Config(name="tiny", n_layer=1, n_head=2, n_embd=8, block_size=16,
                    vocab_size=len(words), padded_vocab_size=len(words))
    save_config(config, ckpt_dir)
    torch.manual_seed(0)
    torch.save(GPT(config).state_dict(), ckpt_dir / "lit_model.pth")
    return config


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=["bf16-true", "default", "32-true"], default="bf16-true")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if LLM is None:
        print(f"SKIP: this litgpt has no litgpt.api.LLM ({_IMPORT_ERROR})")
        return 125
    if not hasattr(LLM, "distribute"):  # added in 0.4.9 (#1657)
        print("SKIP: this litgpt's LLM has no distribute() method")
        return 125
    if args.device == "cuda" and args.precision != "32-true" and not torch.cuda.is_bf16_supported():
        print("SKIP: this GPU does not support bfloat16")
        return 125
    rank = int(os.environ.get("RANK", "0"))
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))

    precision = None if args.precision == "default" else args.precision
    # What get_default_supported_precision(training=False) gives on CPU / bf16-capable GPUs.
    wanted = torch.float32 if args.precision == "32-true" else torch.bfloat16

    with tempfile.TemporaryDirectory() as tmp:
        ckpt_dir = Path(tmp) / "tiny-checkpoint"
        ckpt_dir.mkdir()
        config = write_checkpoint(ckpt_dir)

        llm = LLM.load(str(ckpt_dir), distribute=None)
        # devices="auto" means one device without a generate_strategy; an int is checked against
        # the number of CUDA devices in 0.4.x, so it cannot be used on CPU there.
        llm.distribute(accelerator=args.device, devices="auto", precision=precision)

        dtypes = sorted({str(p.dtype) for p in llm.model.parameters()})
        device = next(llm.model.parameters()).device
        # The distributed model still works (whatever its dtype).
        idx = torch.randint(0, config.vocab_size, (1, 8), device=device)
        with torch.no_grad():
            logits = llm.model(idx)
        assert logits.shape == (1, 8, config.padded_vocab_size), logits.shape
        assert torch.isfinite(logits.float()).all()

    if dtypes != [str(wanted)]:
        print(f"[rank {rank}] REPRODUCED: {SIGNATURE}: distribute(precision={precision!r}) "
              f"gave parameters of dtype {dtypes}, wanted {wanted} (logits {logits.dtype})", flush=True)
        return 1
    print(f"[rank {rank}] OK: distribute(precision={precision!r}) gave {dtypes} parameters "
          f"on {device} (logits {logits.dtype})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
