"""meta-pytorch/torchrec#2720: fused multi-task NDCG mixes the tasks (a wrong value with as many tasks as sessions).

https://github.com/meta-pytorch/torchrec/pull/2720 ("fix ndcg metrics in multitasks cases", commit 6e3d2960,
2025-02-04: "Runs into some errors when using NDCG metrics with multiple tasks")

torchrec's `_get_ndcg_states` expands the sorted labels, shaped [num_tasks, batch_size], to
[num_tasks, num_sessions, batch_size] without first adding the session dimension, so broadcasting lines the task
dimension up with the session dimension. With a number of tasks different from the number of sessions this raises
("The expanded size of the tensor ... must match"); with as many tasks as sessions it runs and returns a wrong
NDCG for every task (task i's labels are read as session i's), with no error. PR #2720 adds the missing
`unsqueeze(1)`; first released in torchrec 1.2.0.

The script updates an NDCGMetric of two tasks (FUSED_TASKS_COMPUTATION) with one batch of two sessions (five and
three samples, the same labels for both tasks, the predictions of task t1 in the reverse order of t0's) and
compares each task's lifetime NDCG (reported as 1 - NDCG, averaged over sessions) with the one computed here in
plain Python: t0 0.2281, t1 0.2331.

    python repro.py [--device cpu|cuda] [--unfused]

--unfused: control, UNFUSED_TASKS_COMPUTATION (each task on its own): right in every release.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import math
import sys

import torch

SIGNATURE = "fused multi-task NDCG differs from the per-task NDCG"
SESSIONS = [1, 1, 1, 1, 1, 2, 2, 2]
LABELS = [0.0, 1.0, 0.0, 0.0, 2.0, 2.0, 1.0, 0.0]
PREDICTIONS = {
    "t0": [0.1, 0.2, 0.3, 0.4, 0.5, 0.1, 0.2, 0.3],
    "t1": [0.5, 0.4, 0.3, 0.2, 0.1, 0.3, 0.2, 0.1],
}


def dcg(gains):
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))


def one_minus_ndcg(predictions, labels, sessions):
    """Mean over sessions of 1 - NDCG (linear gain, every weight 1): torchrec's default report."""
    values = []
    for s in sorted(set(sessions)):
        rows = [(p, y) for p, y, sid in zip(predictions, labels, sessions) if sid == s]
        observed = dcg([y for _, y in sorted(rows, key=lambda r: -r[0])])
        ideal = dcg(sorted((y for _, y in rows), reverse=True))
        values.append(1.0 - observed / ideal)
    return sum(values) / len(values)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--unfused", action="store_true",
                        help="control: UNFUSED_TASKS_COMPUTATION (each task's NDCG computed on its own)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    from torchrec.metrics.metrics_config import RecComputeMode, RecTaskInfo
    from torchrec.metrics.ndcg import SESSION_KEY, NDCGMetric

    device = torch.device(args.device)
    names = sorted(PREDICTIONS)
    expected = {n: one_minus_ndcg(PREDICTIONS[n], LABELS, SESSIONS) for n in names}
    tasks = [RecTaskInfo(name=n, label_name="label_" + n, prediction_name="prediction_" + n,
                         weight_name="weight_" + n) for n in names]
    mode = RecComputeMode.UNFUSED_TASKS_COMPUTATION if args.unfused else RecComputeMode.FUSED_TASKS_COMPUTATION
    metric = NDCGMetric(world_size=1, my_rank=0, batch_size=len(LABELS), tasks=tasks, compute_mode=mode,
                        session_key=SESSION_KEY).to(device)
    predictions = torch.tensor([PREDICTIONS[n] for n in names], device=device)
    labels = torch.tensor([LABELS] * len(names), device=device)
    weights = torch.ones(len(names), len(LABELS), device=device)
    sessions = torch.tensor([SESSIONS] * len(names), device=device)
    if args.unfused:  # one tensor per task; the sessions of one task
        metric.update(predictions={n: predictions[i] for i, n in enumerate(names)},
                      labels={n: labels[i] for i, n in enumerate(names)},
                      weights={n: weights[i] for i, n in enumerate(names)},
                      required_inputs={SESSION_KEY: sessions[0]})
    else:  # fused: [n_tasks, batch_size]
        metric.update(predictions=predictions, labels=labels, weights=weights,
                      required_inputs={SESSION_KEY: sessions})
    result = metric.compute()
    got = {n: float(result[f"ndcg-{n}|lifetime_ndcg"].reshape(-1)[0]) for n in names}
    print("lifetime NDCG (1 - NDCG) from torchrec: " + ", ".join(f"{n} {got[n]:.4f}" for n in names)
          + "; computed here: " + ", ".join(f"{n} {expected[n]:.4f}" for n in names), flush=True)
    if all(abs(got[n] - expected[n]) < 1e-4 for n in names):
        print("OK: every task's NDCG is right", flush=True)
        return 0
    if not args.unfused:
        print(f"REPRODUCED: {SIGNATURE}: " + ", ".join(
            f"{n} {got[n]:.4f} (expected {expected[n]:.4f})" for n in names), flush=True)
        return 1
    raise AssertionError(f"unfused NDCG {got} differs from {expected}")


if __name__ == "__main__":
    sys.exit(main())
