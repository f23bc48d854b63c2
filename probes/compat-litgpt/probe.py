"""Compatibility probe: does this litgpt work with this torch? (bugmatrix compat)

Imports litgpt, builds a GPT from a tiny Config (2 layers, 2 heads, 32-dim embedding) and runs one forward on
CPU, checking the logits' shape and that they are finite (litgpt #1825: installing litgpt moved torch through a
pin).

Exit code: 0 works, 1 failed (the line names the stage, `import` or `use`, and the error).
"""

import sys


def fail(stage, exc):
    text = str(exc).strip().splitlines()
    print(f"COMPAT-PROBE-FAILED {stage}: {type(exc).__name__}: {text[0][:400] if text else ''}", flush=True)
    return 1


def main():
    try:
        import torch
        from litgpt import GPT, Config
    except Exception as exc:
        return fail("import", exc)
    print(f"torch {torch.__version__}", flush=True)
    print("COMPAT-PROBE stage: use", flush=True)
    try:
        torch.manual_seed(0)
        config = Config(block_size=16, vocab_size=64, padded_vocab_size=64, n_layer=2, n_head=2, n_embd=32)
        model = GPT(config)
        idx = torch.randint(0, 64, (1, 8))
        with torch.no_grad():
            logits = model(idx)
        if tuple(logits.shape) != (1, 8, 64):
            raise AssertionError(f"logits shape {tuple(logits.shape)} != (1, 8, 64)")
        if not torch.isfinite(logits).all():
            raise AssertionError("non-finite logits")
    except Exception as exc:
        return fail("use", exc)
    print("COMPAT-PROBE works: a tiny litgpt GPT forward on CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
