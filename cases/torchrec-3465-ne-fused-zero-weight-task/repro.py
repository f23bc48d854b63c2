"""meta-pytorch/torchrec#3465: fused NE with allow_missing_label_with_zero_weight reports eta for every task.

https://github.com/meta-pytorch/torchrec/pull/3465 ("Fix allow_missing_label_with_zero_weight for NE metric",
commit 80dbb881, 2025-10-20)

With `allow_missing_label_with_zero_weight=True`, torchrec's `compute_ne` returned `torch.tensor([eta])` as soon
as any task's weighted sample count was 0. Per task (UNFUSED_TASKS_COMPUTATION) that is the intended placeholder.
With the tasks fused (FUSED_TASKS_COMPUTATION) the states are one tensor of all tasks, so a single task without
weight replaced the NE of every task by one value, eta (1e-12): the first task's NE is reported as 1e-12 and the
other tasks' NE disappear from the result, with no error. PR #3465 computes the NE of every task and puts eta
only where the weight is 0; first released in torchrec 1.5.0.

The script updates an NEMetric of two tasks with one batch: task "a" predictions 0.9, 0.2, 0.7, 0.4, labels
1, 0, 1, 0, weights 1; task "b" the same with every weight 0. Task a's NE is computed here in plain Python
(cross entropy over the entropy of the mean label: 0.4314).

    python repro.py [--device cpu|cuda] [--unfused]

--unfused: control, UNFUSED_TASKS_COMPUTATION (each task on its own): task a's NE is right in every release.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import math
import sys

import torch

SIGNATURE = "fused NE of a weighted task replaced by eta"
PREDICTIONS = [0.9, 0.2, 0.7, 0.4]
LABELS = [1.0, 0.0, 1.0, 0.0]
ETA = 1e-12  # torchrec's default eta for NE


def normalized_entropy(predictions, labels):
    """Cross entropy over the entropy of the mean label (every weight 1), both in bits."""
    ce = -sum(y * math.log2(p) + (1.0 - y) * math.log2(1.0 - p) for p, y in zip(predictions, labels))
    pos = sum(labels)
    neg = len(labels) - pos
    mean = pos / len(labels)
    return ce / -(pos * math.log2(mean) + neg * math.log2(1.0 - mean))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--unfused", action="store_true",
                        help="control: UNFUSED_TASKS_COMPUTATION (each task's NE computed on its own)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    from torchrec.metrics.metrics_config import RecComputeMode, RecTaskInfo
    from torchrec.metrics.ne import NEMetric

    device = torch.device(args.device)
    expected = normalized_entropy(PREDICTIONS, LABELS)
    tasks = [RecTaskInfo(name=n, label_name="label_" + n, prediction_name="prediction_" + n,
                         weight_name="weight_" + n) for n in ("a", "b")]
    mode = RecComputeMode.UNFUSED_TASKS_COMPUTATION if args.unfused else RecComputeMode.FUSED_TASKS_COMPUTATION
    metric = NEMetric(world_size=1, my_rank=0, batch_size=len(PREDICTIONS), tasks=tasks, compute_mode=mode,
                      allow_missing_label_with_zero_weight=True).to(device)
    predictions = torch.tensor([PREDICTIONS, PREDICTIONS], device=device)
    labels = torch.tensor([LABELS, LABELS], device=device)
    weights = torch.tensor([[1.0] * len(LABELS), [0.0] * len(LABELS)], device=device)  # task b: no weight
    if args.unfused:  # one tensor per task
        metric.update(predictions={"a": predictions[0], "b": predictions[1]},
                      labels={"a": labels[0], "b": labels[1]},
                      weights={"a": weights[0], "b": weights[1]})
    else:  # fused: [n_tasks, batch_size]
        metric.update(predictions=predictions, labels=labels, weights=weights)
    result = metric.compute()
    ne_a = float(result["ne-a|window_ne"].reshape(-1)[0])
    ne_b = result.get("ne-b|window_ne")
    ne_b = None if ne_b is None else float(ne_b.reshape(-1)[0])
    print(f"window NE from torchrec: task a {ne_a:.6g}, task b {ne_b}; task a computed here: {expected:.6g}",
          flush=True)
    if abs(ne_a - expected) < 1e-5 and ne_b is not None:
        print(f"OK: task a NE {ne_a:.4f} (expected {expected:.4f}), task b (no weight) {ne_b:.3g}", flush=True)
        return 0
    if not args.unfused and abs(ne_a - ETA) < 1e-15:
        print(f"REPRODUCED: {SIGNATURE}: task a NE {ne_a:.3g}, expected {expected:.4f}; task b NE {ne_b}",
              flush=True)
        return 1
    raise AssertionError(f"task a NE {ne_a} is neither the expected {expected} nor eta; task b {ne_b}")


if __name__ == "__main__":
    sys.exit(main())
