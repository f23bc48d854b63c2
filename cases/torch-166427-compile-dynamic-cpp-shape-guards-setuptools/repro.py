"""torch 2.9.0: torch.compile(backend="eager") with dynamic shapes needs setuptools (C++ symbolic shape guards).

pytorch/pytorch PR #140756 (merged 2025-08) turned on `torch._dynamo.config.enable_cpp_symbolic_shape_guards`: Dynamo
compiles the SHAPE_ENV guard of a frame with dynamic shapes into a C++ function through Inductor's CppCodeCache,
which imports `torch.utils.cpp_extension`, which imports setuptools. Torch 2.9.0 requires setuptools only on Python
>= 3.12 (`Requires-Dist: setuptools; python_version >= "3.12"`), so in a Python 3.10/3.11 environment that has
none, compiling any function with a shape guard fails, even with the eager backend, which generates no code:
`InternalTorchDynamoError: ModuleNotFoundError: No module named 'setuptools'`. Related reports: #157458 ("runs
fine with torch 2.7, but failed with 2.9.0.dev": the same guard compile without a C++ compiler on Windows) and
#173823 (setuptools missing on Python < 3.12 with torch 2.9/2.10, for Inductor). PR #166427 ("[dynamo] Revert
C++-fying of symbolic shape guards", 2025-10-28) sets the default back to False; torch 2.9.1's
`torch/_dynamo/config.py` has `enable_cpp_symbolic_shape_guards = False`, 2.9.0's `not is_fbcode()`.

The script makes setuptools unimportable in its own process (an import hook that raises the ModuleNotFoundError a
missing package raises), as in the environment torch 2.9 creates on Python 3.11, whatever the environment holds
(triton 3.3/3.4 brings setuptools into torch 2.7/2.8 environments; torch >= 2.11 requires it). It then compiles
`x * 2 if x.size(0) > 3 else x + 1` with torch.compile(backend="eager", dynamic=True) and checks three inputs
(sizes 5, 7, 2) against eager.

    python repro.py [--device cpu|cuda] [--static]

--static: the control, the same function compiled with dynamic=False (no symbolic shape guard).

Exit code: 0 = fixed (compiled results equal eager), 1 = bug reproduced (the signature is printed first),
125 = cannot test here (no torch.compile on this Python, setuptools already imported before the script could
hide it, or torch's compile stack imports another module torch does not require and the environment lacks it:
torch 2.1's Dynamo imports pkg_resources, 2.2's numpy). A compiled result that differs from eager is an error
(exit 2), not a verdict on this bug.
"""

import argparse
import importlib.abc
import sys

import torch

SIGNATURE = "No module named 'setuptools'"

UNDECLARED = ("pkg_resources", "numpy")  # imported by torch.compile's stack in 2.1/2.2, required by neither


class HideSetuptools(importlib.abc.MetaPathFinder):
    """Make `import setuptools` fail as it does where setuptools is not installed."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "setuptools" or fullname.startswith("setuptools."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def f(x):
    if x.size(0) > 3:
        return x * 2
    return x + 1


def undeclared_import(error):
    """The module torch's compile stack failed to import that torch does not require (other than setuptools, the
    bug's own), found along the exception's chain (Dynamo wraps it); None for anything else."""
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
    parser.add_argument("--static", action="store_true",
                        help="the control: compile with dynamic=False (no symbolic shape guard)")
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
    if "setuptools" in sys.modules:
        print(f"SKIP: setuptools was imported with torch {torch.__version__}; it cannot be hidden from this process")
        return 125
    sys.meta_path.insert(0, HideSetuptools())
    device = torch.device(args.device)
    dynamic = not args.static
    print(f"torch {torch.__version__}, device {device}, setuptools hidden: torch.compile(backend='eager', "
          f"dynamic={dynamic}) of a function with a shape guard", flush=True)

    inputs = [torch.ones(n, device=device) for n in (5, 7, 2)]
    eager = [f(x).tolist() for x in inputs]
    try:  # torch.compile itself may import what torch does not require (torch 2.1: pkg_resources)
        compiled = torch.compile(f, backend="eager", dynamic=dynamic)
        out = [compiled(x).tolist() for x in inputs]
    except Exception as e:  # torch._dynamo.exc.InternalTorchDynamoError wraps the ModuleNotFoundError
        missing = undeclared_import(e)
        if missing:
            print(f"SKIP: torch {torch.__version__}'s compile stack imports {missing}, which it does not require "
                  f"and this environment lacks ({type(e).__name__})")
            return 125
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: torch.compile(backend='eager', dynamic={dynamic}) without setuptools: "
              f"{type(e).__name__}: {SIGNATURE}", flush=True)
        return 1
    if out != eager:
        print(f"WRONG RESULT: compiled {out} differs from eager {eager}", flush=True)
        return 2
    print("OK: compiled without setuptools, results equal eager for sizes 5, 7, 2", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
