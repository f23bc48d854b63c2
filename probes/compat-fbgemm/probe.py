"""Compatibility probe: does this fbgemm-gpu build work with this torch? (bugmatrix compat)

Imports torch and fbgemm_gpu (which loads its compiled operator libraries into torch), then calls two operators
directly through torch.ops.fbgemm on CPU and checks their results: a build made for another torch fails here with
an undefined symbol at load time, or with a missing operator when the library did not load
(FBGEMM #2715, #3275, #5953).

Exit code: 0 works, 1 failed (the line names the stage, `import` or `use`, and the error).
"""

import sys


def fail(stage, exc):
    text = str(exc).strip().splitlines()
    print(f"COMPAT-PROBE-FAILED {stage}: {type(exc).__name__}: {text[0][:400] if text else ''}", flush=True)
    return 1


def main():
    try:
        import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)
        import torch
    except Exception as exc:  # an undefined symbol is an OSError/ImportError here
        return fail("import", exc)
    print(f"torch {torch.__version__}, fbgemm_gpu {getattr(fbgemm_gpu, '__version__', '?')}", flush=True)
    print("COMPAT-PROBE stage: use", flush=True)
    try:
        offsets = torch.ops.fbgemm.asynchronous_complete_cumsum(torch.tensor([1, 2, 3], dtype=torch.int64))
        if offsets.tolist() != [0, 1, 3, 6]:
            raise AssertionError(f"asynchronous_complete_cumsum([1, 2, 3]) = {offsets.tolist()}, not [0, 1, 3, 6]")
        rows = torch.arange(16, dtype=torch.float32).reshape(2, 8)
        fused = torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(rows)
        back = torch.ops.fbgemm.Fused8BitRowwiseQuantizedToFloat(fused)
        if not torch.allclose(back, rows, atol=0.1):
            raise AssertionError(f"8-bit rowwise round trip: {back.tolist()} != {rows.tolist()}")
    except Exception as exc:
        return fail("use", exc)
    print("COMPAT-PROBE works: fbgemm operators ran on CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
