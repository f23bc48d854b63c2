"""pytorch/pytorch#197226: torch.compile applies an overridden __getattribute__ twice (super().__getattribute__).

https://github.com/pytorch/pytorch/pull/197226 ("[dynamo] Fix GenericAttrSource reconstruction", 2026-09-16, open
when read): when a class overrides `__getattribute__` and reads the stored value through
`super().__getattribute__(name)`, Dynamo traces that read as `object.__getattribute__` (a `GenericAttrSource`) but
reconstructs the graph input at run time with a plain `LOAD_ATTR`, which goes through the override again: "the
compiled graph could receive a different value from the one observed during tracing". `GenericAttrSource` first
appears in torch 2.7.1's `torch/_dynamo/source.py` (used by `SuperVariable` in `variables/misc.py`); torch 2.7.0
reads the attribute through the override at trace time instead.

The object here stores `x = ones(2)`; its `__getattribute__` returns `super().__getattribute__(name) * 2` for "x",
so `obj.x` is [2, 2] in Python. The compiled function returns `obj.x + t` (t = zeros); the script computes the
expected value by hand (ones * 2) and compares both eager and compiled results with it. Compiled with
backend="eager": the wrong value comes from Dynamo's bytecode, before any backend.

    python repro.py [--device cpu|cuda] [--no-override]

--no-override: the control, the same object and function without the `__getattribute__` override.

Exit code: 0 = fixed (compiled equals the expected value), 1 = bug reproduced (the signature and both values are
printed first), 125 = cannot test here (no torch.compile on this Python, or torch's compile stack imports a module
torch does not require and the environment lacks it). Any other wrong value, or eager disagreeing with the
expected value, is an error (exit 2), not a verdict on this bug.
"""

import argparse
import sys

import torch

SIGNATURE = "compiled read passed through __getattribute__ twice"

UNDECLARED = ("setuptools", "pkg_resources", "numpy")  # imported by torch.compile's stack, required by no torch <= 2.2


class Scaled:
    """`obj.x` is the stored tensor times 2: the override reads it with super().__getattribute__."""

    def __init__(self, device):
        self.x = torch.ones(2, device=device)

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if name == "x":
            return value * 2
        return value


class Plain:
    def __init__(self, device):
        self.x = torch.ones(2, device=device) * 2


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
    parser.add_argument("--no-override", action="store_true",
                        help="the control: the same read on an object without a __getattribute__ override")
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
    obj = Plain(device) if args.no_override else Scaled(device)
    what = "no __getattribute__ override" if args.no_override else "__getattribute__ returning super()'s value * 2"
    print(f"torch {torch.__version__}, device {device}: obj.x + t with {what}, compiled with backend='eager'",
          flush=True)

    def fn(t):
        return obj.x + t

    t = torch.zeros(2, device=device)
    expected = [2.0, 2.0]  # by hand: the stored ones, times 2 once
    eager = fn(t).tolist()
    if eager != expected:
        print(f"WRONG EAGER: {eager}, expected {expected}", flush=True)
        return 2
    try:  # torch.compile itself may import what torch does not require (torch 2.1: pkg_resources)
        compiled = torch.compile(fn, backend="eager")
        out = compiled(t).tolist()
    except Exception as e:
        missing = undeclared_import(e)
        if missing:
            print(f"SKIP: torch {torch.__version__}'s compile stack imports {missing}, which it does not require "
                  f"and this environment lacks ({type(e).__name__})")
            return 125
        raise
    if out == expected:
        print(f"OK: compiled {out} equals eager and the expected {expected}", flush=True)
        return 0
    if out == [4.0, 4.0]:
        print(f"REPRODUCED: {SIGNATURE}: compiled {out}, eager and expected {expected}", flush=True)
        return 1
    print(f"WRONG RESULT: compiled {out}, expected {expected} (not the doubled read of this bug)", flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
