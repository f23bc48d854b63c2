"""Numeric criteria of case scripts: they must tell a bug from float32 rounding on CPU and on CUDA.

A case's criterion lives in a small function of its repro.py; the script is loaded here from its path with
importlib (a script stays standalone: it never imports the harness, and nothing here changes it).

litgpt-2201-lora-ind-head-size, `logits_agree(y, y_merged)`: merged vs unmerged LoRA logits. Measured (CPU,
litgpt 0.5.12 / 0.5.13, the script's model: n_embd 32, n_head 4, head_size 16, LoRA on q and v):

- max |logit| 1.53-1.71; CPU float32 rounding |y - y_merged| 3.6e-7 - 6.0e-7;
- on an H100 (torch 2.11, litgpt 0.5.13, n_query_groups 2) the difference was 4.96e-4: the LoRA path's F.conv1d
  runs in cuDNN with TF32 (torch.backends.cudnn.allow_tf32 is True by default); rounding conv1d's inputs to
  TF32 on CPU gives 1.9e-4 - 6.3e-4, the same size;
- an update in the wrong columns or lost: the v update written into the k block moves the logits by 0.67-0.97,
  dropping the update by 0.67-0.96, 0.5.12's index applied without index_copy_'s size check by 1.04-1.48 (in
  the released 0.5.5-0.5.12 the forward raises IndexError before the logits are compared).
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

CASES = Path(__file__).resolve().parent.parent / "cases"

CUDA_ROUNDING = 4.96e-4  # H100, gqa variant: "merged and unmerged LoRA logits differ by 0.000496"
LOGIT_SCALE = 1.654  # max |logit| of the gqa variant's model (CPU)
SMALLEST_BUG = 0.6655  # the smallest misplacement measured: gqa, the LoRA update dropped


def load_script(case: str) -> ModuleType:
    """Import cases/<case>/repro.py as a module (its `main()` does not run: __name__ is not "__main__")."""
    path = CASES / case / "repro.py"
    spec = importlib.util.spec_from_file_location(f"case_{case.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lora_case() -> ModuleType:
    pytest.importorskip("litgpt.lora")
    return load_script("litgpt-2201-lora-ind-head-size")


def logits(scale: float = LOGIT_SCALE) -> torch.Tensor:
    """Logits shaped like the script's (1, 6, 64), with max |logit| = scale."""
    g = torch.Generator().manual_seed(1)
    y = torch.randn(1, 6, 64, generator=g)
    return y * (scale / y.abs().max())


def with_difference(y: torch.Tensor, size: float) -> torch.Tensor:
    """y plus a perturbation whose largest absolute entry is `size`."""
    g = torch.Generator().manual_seed(2)
    noise = torch.randn(y.shape, generator=g)
    return y + noise * (size / noise.abs().max())


def test_lora_logits_accept_a_cuda_sized_rounding_difference(lora_case: ModuleType) -> None:
    y = logits()
    y_merged = with_difference(y, CUDA_ROUNDING)
    # The old criterion called this a reproduction (the false `reproduced` on the H100).
    assert not torch.allclose(y, y_merged, atol=1e-4, rtol=1e-4)
    agree, diff, scale = lora_case.logits_agree(y, y_merged)
    assert agree and diff == pytest.approx(CUDA_ROUNDING) and scale == pytest.approx(LOGIT_SCALE)
    # With a margin: four times the H100's difference is still rounding.
    assert lora_case.logits_agree(y, with_difference(y, 4 * CUDA_ROUNDING))[0]


@pytest.mark.parametrize("size", [SMALLEST_BUG, 0.9669, 1.481])
def test_lora_logits_reject_the_measured_misplacement(lora_case: ModuleType, size: float) -> None:
    y = logits()
    agree, diff, _ = lora_case.logits_agree(y, with_difference(y, size))
    assert not agree and diff == pytest.approx(size)
    # With a margin: a tenth of the smallest measured misplacement is still rejected.
    assert not lora_case.logits_agree(y, with_difference(y, SMALLEST_BUG / 10))[0]


def test_lora_logits_on_the_real_model(lora_case: ModuleType) -> None:
    """In the installed litgpt (the project's .venv: a fixed release), the script's model: the merged copy agrees,
    and the same merge with the v update written into the k columns (a misplacement of the same width) does not."""
    from litgpt.lora import GPT, Config, merge_lora_weights

    torch.manual_seed(0)
    config = Config(
        n_layer=1,
        n_head=4,
        n_query_groups=2,
        n_embd=32,
        head_size=16,
        block_size=16,
        vocab_size=64,
        padded_vocab_size=64,
        lora_r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        lora_query=True,
        lora_key=False,
        lora_value=True,
    )
    model = GPT(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.eval()
    idx = torch.randint(0, config.vocab_size, (1, 6))
    attn = model.transformer.h[0].attn
    qkv = attn.qkv if hasattr(attn, "qkv") else attn.attn
    q_w, kv_w = 16 * 4, 16 * 2
    if hasattr(qkv, "lora_ind") and len(qkv.lora_ind) != q_w + kv_w:
        pytest.skip(f"the installed litgpt has the bug (lora_ind of length {len(qkv.lora_ind)})")

    with torch.no_grad():
        y = model(idx)
        merged = copy.deepcopy(model)
        merge_lora_weights(merged)
        assert lora_case.logits_agree(y, merged(idx))[0]

        misplaced = copy.deepcopy(model)
        layer = misplaced.transformer.h[0].attn
        layer = layer.qkv if hasattr(layer, "qkv") else layer.attn
        if not hasattr(layer, "_lora_ind"):
            pytest.skip("the installed litgpt builds no _lora_ind buffer")
        layer._lora_ind = torch.arange(q_w + kv_w)  # q block, then the v update into the k block
        merge_lora_weights(misplaced)
        agree, diff, scale = lora_case.logits_agree(y, misplaced(idx))
    assert not agree and diff > 0.1 * scale
