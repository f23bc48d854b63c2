"""pytorch/pytorch#181366: torch.compile on CPU fails with a C++ compile error (argmax -> pad -> interpolate -> conv).

https://github.com/pytorch/pytorch/issues/181366 (2026-04-24): a six-line model that runs in eager mode makes
Inductor's CPU backend generate C++ that does not compile (`CppCompileError: C++ compile error`); the thread
confirms it on torch 2.11.0 and sees it fixed in a nightly (2026-05-08). No fixing PR is named in the thread.

The model, from the thread: `x.argmax(0)` of a one-element int64 tensor, cast to float and viewed as (1, 1, 1, 1),
`F.pad(..., (0, 0, 0, 0, 0, 2))` to three channels, bilinear `F.interpolate` to 5x5, then a 3x3 `nn.Conv2d`.
The script compiles it with `torch.compile` (default backend, Inductor) in a fresh Inductor cache folder, so a
cached kernel from an earlier run can never hide the compile, and compares the result with eager mode.

    python repro.py [--device cpu|cuda] [--backend inductor|aot_eager]

--backend aot_eager: the workaround, torch.compile(backend="aot_eager") (the same Dynamo and AOTAutograd graph,
  run by eager kernels: no C++ is generated); fixed in every release that has torch.compile on Python 3.11.

Exit code: 0 = fixed (the compiled model runs and matches eager), 1 = bug reproduced (the signature is printed
first), 125 = cannot test here (no torch.compile on this Python, no C++ compiler, a module the compile stack
imports that torch does not require and the environment lacks, or no setuptools: Inductor's C++
builder imports torch.utils.cpp_extension, which imports setuptools; torch >= 2.11 requires setuptools, torch <= 2.10
does not, so a bare torch 2.10 environment cannot build C++ kernels). A compiled result that differs
from eager is an error (exit 2), not a verdict on this bug.
"""

import argparse
import os
import shutil
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

SIGNATURE = "C++ compile error"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, kernel_size=3)

    def forward(self, x):
        x = x.argmax(0)
        x = x.float().view(1, 1, 1, 1)
        x = F.pad(x, (0, 0, 0, 0, 0, 2))
        x = F.interpolate(x, size=(5, 5), mode="bilinear", align_corners=False)
        return self.conv(x)


UNDECLARED = ("setuptools", "pkg_resources", "numpy")  # imported by torch.compile's stack, required by no torch <= 2.10


def undeclared_import(error: BaseException) -> str | None:
    """The module torch's compile stack failed to import that torch does not require (torch 2.1's Dynamo imports
    pkg_resources, 2.2's numpy), found along the exception's chain (Dynamo wraps it); None for anything else."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in UNDECLARED:
            return error.name
        error = error.__cause__ or error.__context__
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--backend", choices=["inductor", "aot_eager"], default="inductor",
                        help="torch.compile backend (aot_eager: the workaround, no generated C++)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if not hasattr(torch, "compile"):
        print(f"SKIP: torch {torch.__version__} has no torch.compile")
        return 125
    if sys.version_info >= (3, 11) and torch.__version__.startswith("2.0."):
        print(f"SKIP: torch {torch.__version__} does not support torch.compile on Python 3.11")
        return 125
    if args.device == "cpu" and args.backend == "inductor" and not (
            shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++") or shutil.which("clang++")):
        print("SKIP: Inductor's CPU backend needs a C++ compiler and none is on PATH")
        return 125
    if args.backend == "inductor":
        try:
            import setuptools  # noqa: F401  (torch.utils.cpp_extension, which Inductor's C++ builder imports, needs it)
        except ImportError:
            print(f"SKIP: torch {torch.__version__}'s Inductor imports setuptools (torch.utils.cpp_extension) and this "
                  f"environment has none (torch >= 2.11 requires it; older torch does not)")
            return 125
    # A fresh cache per run: a kernel compiled by an earlier run (or another torch) must never answer for this one.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="repro-181366-inductor-")
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {device}, backend {args.backend}", flush=True)

    torch.manual_seed(0)
    model = Model().to(device)
    x = torch.tensor([6], device=device)
    with torch.no_grad():
        eager = model(x.clone())
        try:  # torch.compile itself may import what torch does not require (torch 2.1: pkg_resources)
            compiled = torch.compile(model, backend=args.backend)
            out = compiled(x.clone())
        except Exception as e:  # torch._dynamo.exc.BackendCompilerFailed / InductorError wrap CppCompileError
            missing = undeclared_import(e)
            if missing:
                print(f"SKIP: torch {torch.__version__}'s compile stack imports {missing}, which it does not require "
                      f"and this environment lacks ({type(e).__name__})")
                return 125
            if SIGNATURE not in str(e):
                raise
            print(f"REPRODUCED: torch.compile (backend {args.backend}) on {device}: {SIGNATURE} "
                  f"({type(e).__name__})", flush=True)
            return 1
    if tuple(out.shape) != tuple(eager.shape) or not torch.allclose(out, eager, rtol=1e-4, atol=1e-5):
        print(f"WRONG RESULT: compiled {tuple(out.shape)} differs from eager {tuple(eager.shape)} "
              f"(max abs diff {(out - eager).abs().max().item() if out.shape == eager.shape else 'n/a'})",
              flush=True)
        return 2
    print(f"OK: torch.compile (backend {args.backend}) on {device} runs and matches eager, "
          f"output {tuple(out.shape)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
