"""Lightning-AI/pytorch-lightning#21079: AsyncCheckpointIO saves the live tensors, so an optimizer step that runs
while the background thread serializes them leaks into the checkpoint (a race).

https://github.com/Lightning-AI/pytorch-lightning/pull/21079

`AsyncCheckpointIO.save_checkpoint` hands the checkpoint dict to a ThreadPoolExecutor and returns at once; the
background thread then `torch.save`s the tensors it was given. Those are the module's live parameters (a
`state_dict()` shares their storage), so when the training thread goes on and the optimizer updates them in place
before the thread has written them, the checkpoint holds the next step's weights (or a mix). PR #21079 (first in
lightning 2.5.4) clones every tensor of the payload on the caller's thread before submitting the save.

    python repro.py [--device cpu|cuda]

A world of one: a Linear(64, 64) with SGD; one backward, then the checkpoint of the current weights is saved through
AsyncCheckpointIO(TorchCheckpointIO()) and the training thread at once takes the optimizer step (as a training loop
does after a checkpoint callback); `teardown()` waits for the save. The right checkpoint is the weights as they were
when the save was called: the script clones them itself before the call and compares the file's tensors with that
copy (and with the stepped weights, to say which it got). Whether the thread writes before or after the step is a
race: most launches lose it before the fix.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import os
import shutil
import sys
import tempfile

import lightning as L
import torch
from lightning.pytorch.plugins.io import AsyncCheckpointIO, TorchCheckpointIO

SIGNATURE = "the async checkpoint holds weights changed after the save was called"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (one training thread and the checkpoint thread)")
        return 125

    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.randn(32, 64, device=args.device)
    model(x).pow(2).mean().backward()

    expected = {k: v.detach().clone().cpu() for k, v in model.state_dict().items()}  # the weights at the save call
    directory = tempfile.mkdtemp()
    path = os.path.join(directory, "step.ckpt")
    checkpoint_io = AsyncCheckpointIO(TorchCheckpointIO())
    try:
        checkpoint_io.save_checkpoint({"state_dict": model.state_dict(), "global_step": 1}, path)
        optimizer.step()  # the training thread goes on at once: an in-place update of the parameters
        checkpoint_io.teardown()  # waits for the background save
        saved = torch.load(path, map_location="cpu")["state_dict"]
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    stepped = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    bad = []
    for name in sorted(expected):
        diff = (saved[name] - expected[name]).abs().max().item()
        diff_stepped = (saved[name] - stepped[name]).abs().max().item()
        print(f"lightning {L.__version__}, torch {torch.__version__}: {name}: max |saved - at save call| = {diff:.6g}, "
              f"max |saved - after the step| = {diff_stepped:.6g}", flush=True)
        if diff != 0:
            bad.append(name)
    if bad:
        print(f"REPRODUCED: {SIGNATURE}: {', '.join(bad)} differ from the weights at the save call "
              "(the optimizer step that followed the call reached the file)", flush=True)
        return 1
    print("OK: the checkpoint holds the weights as they were when save_checkpoint was called", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
