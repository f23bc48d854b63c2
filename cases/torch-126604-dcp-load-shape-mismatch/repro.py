"""pytorch/pytorch#126604: torch.distributed.checkpoint.load fills a tensor of another shape without a word.

https://github.com/pytorch/pytorch/issues/126604 ("Distributed Checkpoint doesn't verify shapes are correct"), fixed
by https://github.com/pytorch/pytorch/pull/141571 ("Throw an error when loading a different size than saved tensor").

`dcp.load(state_dict, checkpoint_id=...)` plans its reads by intersecting the saved chunks with the chunk the caller's
tensor covers. When the caller's tensor has another shape than the saved one, the overlap is read and the rest of
the tensor is left as it was: a (4, 4) tensor saved and loaded into a (2, 8) template copies a 2 x 4 corner, and the
load returns normally. After the fix the default load planner raises ("Size mismatch between saved ... and current
...").

The script saves {"w": arange(16).reshape(4, 4)} with dcp.save into a temporary folder and loads it into
{"w": zeros(2, 8)}. A load that returns without an error is the bug; a load that refuses, naming the size mismatch,
is the fix. It runs in DCP's single-process mode, with no process group: DCP's object collectives
(gather_object, broadcast_object_list) need numpy, which a bare torch install does not bring, and the planner code
under test is the one every world size runs (as in torch-138575).

    python repro.py [--device cpu|cuda] [--same-shape]

--same-shape: control, load into a (4, 4) template: must load every value in every release.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import inspect
import shutil
import sys
import tempfile
import warnings

import torch

SIGNATURE = "dcp.load filled a tensor of another shape without an error"
SAVED_SHAPE = (4, 4)
OTHER_SHAPE = (2, 8)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--same-shape", action="store_true",
                        help="control: load into a template of the saved shape")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception
    except ImportError as e:
        print(f"SKIP: no torch.distributed.checkpoint here: {e}")
        return 125
    save = getattr(dcp, "save", None)
    if save is None or "checkpoint_id" not in inspect.signature(save).parameters:
        print("SKIP: this torch's dcp.save has no checkpoint_id (added in torch 2.2)")
        return 125
    device = torch.device(args.device)
    warnings.filterwarnings("ignore", message=".*assuming the intent is to (save|load) in a single process.*")
    path = tempfile.mkdtemp(prefix="dcp-126604-")
    try:
        saved = torch.arange(16, dtype=torch.float32, device=device).reshape(SAVED_SHAPE)
        dcp.save({"w": saved}, checkpoint_id=path)
        shape = SAVED_SHAPE if args.same_shape else OTHER_SHAPE
        template = {"w": torch.zeros(shape, device=device)}
        try:
            dcp.load(template, checkpoint_id=path)
        except (CheckpointException, ValueError) as e:  # the planner's ValueError, raw or collected
            if args.same_shape or "Size mismatch" not in str(e):
                raise
            first = next(line for line in str(e).splitlines() if "Size mismatch" in line).strip()[:200]
            print(f"OK: dcp.load refused the (2, 8) template: {first}", flush=True)
            return 0
        got = template["w"].cpu()
        if args.same_shape:
            if not torch.equal(got, saved.cpu()):
                raise AssertionError(f"the same-shape load returned other values:\n{got}")
            print("OK: the same-shape load returned every saved value", flush=True)
            return 0
        filled = int((got != 0).sum())
        print(f"REPRODUCED: {SIGNATURE}: saved {list(SAVED_SHAPE)}, loaded into {list(OTHER_SHAPE)}; "
              f"{filled} of {got.numel()} values written, the load returned normally", flush=True)
        return 1
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
