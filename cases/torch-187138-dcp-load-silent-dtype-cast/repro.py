"""pytorch/pytorch#187138: torch.distributed.checkpoint.load casts a tensor to the template's dtype without a word.

https://github.com/pytorch/pytorch/issues/187138 ("[DCP] load silently casts checkpoint tensors to the template
dtype, truncating precision without any warning", 2026-06, open). Proposed fix, not merged when read:
https://github.com/pytorch/pytorch/pull/187257 ("Raise RuntimeError on load dtype mismatch").

`dcp.load(state_dict, checkpoint_id=...)` reads each saved tensor into the tensor the caller's template holds. The
planner checks that the sizes agree (since torch 2.6, pytorch#126604) but never the dtypes: a float32 checkpoint
loaded into a bfloat16 template is cast by `copy_` and the load returns normally, with the values rounded to
bfloat16 and nothing reported.

The script saves {"w": rand(4, 3) * 100} (float32) with dcp.save into a temporary folder and loads it into
{"w": zeros(4, 3, dtype=bfloat16)}. A load that returns without an error or a warning naming the dtype is the bug;
a load that refuses (or warns), naming the dtype mismatch, is the fix. It runs in DCP's single-process mode, with
no process group (as torch-126604 and torch-138575): DCP's object collectives need numpy, which a bare torch install
does not bring, and the planner and reader code under test is the one every world size runs.

    python repro.py [--device cpu|cuda] [--same-dtype | --template-from-metadata]

--same-dtype: control, load into a float32 template: must load every value exactly in every release.
--template-from-metadata: the workaround, build the template from the checkpoint's own metadata
  (FileSystemReader(path).read_metadata(): the stored dtype and size of every tensor), then cast afterwards
  where a narrower dtype is wanted: the load is exact and any cast is the caller's own.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import inspect
import shutil
import sys
import tempfile
import warnings

import torch

SIGNATURE = "dcp.load cast a float32 checkpoint tensor to bfloat16 without an error"
SHAPE = (4, 3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--same-dtype", action="store_true",
                      help="control: load into a template of the saved dtype")
    mode.add_argument("--template-from-metadata", action="store_true",
                      help="workaround: build the template from the checkpoint's metadata")
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
    path = tempfile.mkdtemp(prefix="dcp-187138-")
    try:
        torch.manual_seed(0)
        saved = (torch.rand(SHAPE, dtype=torch.float32) * 100).to(device)
        dcp.save({"w": saved}, checkpoint_id=path)

        if args.template_from_metadata:
            meta = dcp.FileSystemReader(path).read_metadata().state_dict_metadata["w"]
            template = {"w": torch.zeros(tuple(meta.size), dtype=meta.properties.dtype, device=device)}
        else:
            dtype = torch.float32 if args.same_dtype else torch.bfloat16
            template = {"w": torch.zeros(SHAPE, dtype=dtype, device=device)}
        mismatch = not (args.same_dtype or args.template_from_metadata)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                dcp.load(template, checkpoint_id=path)
            except (CheckpointException, ValueError, RuntimeError) as e:  # a planner/reader check, raw or collected
                if not mismatch or "dtype" not in str(e).lower():
                    raise
                first = next(line for line in str(e).splitlines() if "dtype" in line.lower()).strip()[:200]
                print(f"OK: dcp.load refused the bfloat16 template: {first}", flush=True)
                return 0
        got = template["w"]
        if not mismatch:
            if got.dtype != torch.float32 or not torch.equal(got.cpu(), saved.cpu()):
                raise AssertionError(f"the float32 load returned other values or dtype {got.dtype}:\n{got}")
            how = "a template built from the metadata" if args.template_from_metadata else "a float32 template"
            print(f"OK: {how} got every saved float32 value exactly", flush=True)
            return 0
        told = [str(w.message) for w in caught if "dtype" in str(w.message).lower()]
        if told:
            print(f"OK: dcp.load warned about the dtype mismatch: {told[0][:200]}", flush=True)
            return 0
        dev = (saved.double().cpu() - got.double().cpu()).abs().max().item()
        print(f"REPRODUCED: {SIGNATURE}: loaded dtype {got.dtype}, max |saved - loaded| = {dev:.4g}; "
              f"no error, no warning", flush=True)
        return 1
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
