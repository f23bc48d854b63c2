"""pytorch/pytorch#152012: torch.compile crashes when an exception leaves a `with torch.autocast(...)` block.

https://github.com/pytorch/pytorch/issues/152012 ("[Dynamo] Exception raised inside torch.autocast causes crash
AttributeError: 'NoneType' object has no attribute 'is_python_constant'"; "passes on 2.6, fails on 2.7"): a compiled
function catches an exception raised inside `with torch.autocast(device_type="cpu", dtype=None):`. Torch 2.7.0's
Dynamo traces the exception path, calls the autocast context's `__exit__`, and `AutocastModeVariable.exit` returns a
raw Python None instead of a VariableTracker; Dynamo then calls `.is_python_constant()` on it and the compile fails
with InternalTorchDynamoError. Torch 2.7.1's `torch/_dynamo/variables/ctx_manager.py` returns
`ConstantVariable.create(None)` there (the cherry-picked fix).

The function is the issue's: a custom autograd Function whose forward raises NotImplementedError, applied inside
the autocast block, the exception caught outside it and `x + 1` returned. The script compiles it with
backend="eager": the crash is in Dynamo's tracing, before any backend runs, and the eager backend needs no C++
compiler (Inductor would). The compiled result is compared with the eager one.

    python repro.py [--device cpu|cuda] [--no-autocast]

--no-autocast: the control, the same try/except without the autocast block (fixed in every release).

Exit code: 0 = fixed (the compiled function returns x + 1 as eager does), 1 = bug reproduced (the signature is
printed first), 125 = cannot test here (no torch.compile on this Python, or torch's compile stack imports a module
torch does not require and the environment lacks it: torch 2.1's Dynamo imports pkg_resources, 2.2's numpy). A
compiled result that differs from eager is an error (exit 2), not a verdict on this bug.
"""

import argparse
import sys

import torch

SIGNATURE = "'NoneType' object has no attribute 'is_python_constant'"

UNDECLARED = ("setuptools", "pkg_resources", "numpy")  # imported by torch.compile's stack, required by no torch <= 2.2


class Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("boom")

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out


def with_autocast(x, device_type):
    try:
        with torch.autocast(device_type=device_type, dtype=None):
            Boom.apply(x)
    except NotImplementedError:
        return x + 1
    return x


def without_autocast(x, device_type):
    try:
        Boom.apply(x)
    except NotImplementedError:
        return x + 1
    return x


def undeclared_import(error):
    """The module torch's compile stack failed to import that torch does not require, found along the exception's
    chain (Dynamo wraps it); None for anything else."""
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
    parser.add_argument("--no-autocast", action="store_true",
                        help="the control: the same try/except without the autocast block")
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
    device = torch.device(args.device)
    fn = without_autocast if args.no_autocast else with_autocast
    what = "without autocast" if args.no_autocast else f"inside torch.autocast(device_type={device.type!r})"
    print(f"torch {torch.__version__}, device {device}: exception raised {what}, caught, compiled with "
          f"backend='eager'", flush=True)

    x = torch.ones(3, device=device)
    eager = fn(x, device.type)
    try:  # torch.compile itself may import what torch does not require (torch 2.1: pkg_resources)
        compiled = torch.compile(fn, backend="eager")
        out = compiled(x, device.type)
    except Exception as e:  # torch._dynamo.exc.InternalTorchDynamoError wraps the AttributeError
        missing = undeclared_import(e)
        if missing:
            print(f"SKIP: torch {torch.__version__}'s compile stack imports {missing}, which it does not require "
                  f"and this environment lacks ({type(e).__name__})")
            return 125
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: torch.compile {what}: {type(e).__name__}: {SIGNATURE}", flush=True)
        return 1
    if not torch.equal(out, eager):
        print(f"WRONG RESULT: compiled {out.tolist()} differs from eager {eager.tolist()}", flush=True)
        return 2
    print(f"OK: torch.compile {what} returns {out.tolist()}, as eager does", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
