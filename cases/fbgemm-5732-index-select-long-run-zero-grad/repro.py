"""FBGEMM #5732: batch_index_select_dim0 backward gives zero gradient for an index repeated >= 32 times (CUDA).

The backward of `torch.ops.fbgemm.batch_index_select_dim0` sorts the indices into runs and launches
`split_embedding_backward_codegen_find_long_segments` to find the runs of length >= 32, which a separate kernel
accumulates. After the TBE backward kernels moved to FBGEMM_LAUNCH_KERNEL (first in fbgemm-gpu 1.3.0), that
launch failed silently on H100 (sm_90) and B200 (sm_100) with CUDA 12.8 builds ("__global__ function call is
not configured"): the long runs were never accumulated and their rows got zero gradient. Fixed by
https://github.com/pytorch/FBGEMM/pull/5732 (build the PackedTensorAccessor32 arguments before the launch),
first released in fbgemm-gpu 1.7.0.

What the script does: one input of 8 rows x 16 columns, 48 indices of which 40 are row 3 (a run of 40 >= 32)
and 8 are rows 0..7 once each; forward, backward with ones, and compares the input gradient with
index_select's (row r gets as many ones as r appears in the indices).

Usage:
    python repro.py [--device cuda] [--run-length N]

    --run-length 8   control: no run reaches 32, find_long_segments has nothing to find

Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here (no CUDA, --device cpu, no op).
"""
import argparse
import os
import sys

import torch

SIGNATURE = "batch_index_select_dim0 backward lost the gradient of a long run"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--run-length", type=int, default=40,
                        help="how many times row 3 is selected (default 40; >= 32 is a long run)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if args.device == "cpu":
        print("SKIP: the bug is in the CUDA backward (find_long_segments launch); the CPU path is not affected")
        return 125
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", torch.cuda.current_device())
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm.*)
    if not hasattr(torch.ops.fbgemm, "batch_index_select_dim0"):
        print("SKIP: this fbgemm_gpu has no batch_index_select_dim0 op")
        return 125

    rows, cols, long_row = 8, 16, 3
    indices = torch.tensor([long_row] * args.run_length + list(range(rows)), dtype=torch.long, device=device)
    torch.manual_seed(0)
    weight = torch.rand(rows, cols, device=device)
    flat = weight.flatten().clone().requires_grad_(True)
    out = torch.ops.fbgemm.batch_index_select_dim0(flat, indices, [indices.numel()], [rows], [cols], False)
    out.backward(torch.ones_like(out))
    torch.cuda.synchronize()
    grad = flat.grad.view(rows, cols).cpu()

    counts = torch.bincount(indices.cpu(), minlength=rows).float()
    expected = counts[:, None].expand(rows, cols)
    forward_ok = torch.equal(out.view(-1, cols).cpu(), weight.cpu()[indices.cpu()])
    print(f"torch {torch.__version__}, GPU {torch.cuda.get_device_name()}, row {long_row} selected "
          f"{args.run_length} times, forward {'matches' if forward_ok else 'DIFFERS from'} index_select", flush=True)
    if torch.equal(grad, expected):
        print(f"FIXED: input gradient matches index_select's (row {long_row}: {args.run_length + 1})", flush=True)
        return 0
    wrong_rows = (grad != expected).any(dim=1).nonzero().flatten().tolist()
    if forward_ok and wrong_rows == [long_row]:
        print(f"REPRODUCED: {SIGNATURE}: row {long_row} gradient {grad[long_row, 0].item()} "
              f"instead of {expected[long_row, 0].item()}; every other row right", flush=True)
        return 1
    print(f"WRONG RESULT (not this bug's pattern): rows {wrong_rows} differ, forward_ok={forward_ok}", flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
