"""meta-pytorch/torchrec#3523: the AUPRC metric is NaN when the top-ranked samples have weight 0.

https://github.com/meta-pytorch/torchrec/pull/3523 ("Fix NaN handling in AUPRC metric calculation", commit
2e5701ce, 2025-11-12)

torchrec's `_compute_auprc_helper` takes the weighted true/false positives at each threshold, highest prediction
first, and divides: precision = tp / (tp + fp). When every sample above some threshold has weight 0 (a missing
label), that division is 0/0 = NaN; the code replaced NaNs in the recall only, so the NaN precision reaches the
Riemann sum and the whole window AUPRC comes out NaN, with no error. PR #3523 replaces NaN precisions by 1.0 (the
value appended at recall 0, where they sit); first released in torchrec 1.5.0.

The script updates an `AUPRCMetric` with one batch of five samples: predictions 0.9, 0.8, 0.7, 0.3, 0.2, labels
1, 0, 1, 0, 1, weights 0, 1, 1, 1, 1, and compares its window AUPRC with the average precision computed here in
plain Python over the samples of non-zero weight (0.5).

    python repro.py [--device cpu|cuda] [--unit-weights]

--unit-weights: control, every weight 1 (no 0/0): torchrec and the plain computation agree (0.7556) in every
release.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import math
import sys

import torch

SIGNATURE = "AUPRC is NaN when the top-ranked sample has weight 0"
PREDICTIONS = [0.9, 0.8, 0.7, 0.3, 0.2]
LABELS = [1.0, 0.0, 1.0, 0.0, 1.0]
WEIGHTS = [0.0, 1.0, 1.0, 1.0, 1.0]


def average_precision(predictions, labels, weights):
    """Weighted average precision, sum over thresholds of (R_k - R_k-1) * P_k, samples of weight 0 left out."""
    samples = sorted(((p, y, w) for p, y, w in zip(predictions, labels, weights) if w > 0), key=lambda s: -s[0])
    total_pos = sum(w * y for _, y, w in samples)
    tp = fp = 0.0
    prev_recall = 0.0
    ap = 0.0
    for i, (p, y, w) in enumerate(samples):
        tp += w * y
        fp += w * (1.0 - y)
        if i + 1 < len(samples) and samples[i + 1][0] == p:
            continue  # a tie: one threshold for all of them
        recall = tp / total_pos
        ap += (recall - prev_recall) * (tp / (tp + fp))
        prev_recall = recall
    return ap


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--unit-weights", action="store_true",
                        help="control: every weight 1 (no zero-weight sample, no 0/0)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    from torchrec.metrics.auprc import AUPRCMetric
    from torchrec.metrics.metrics_config import RecTaskInfo

    device = torch.device(args.device)
    weights = [1.0] * len(WEIGHTS) if args.unit_weights else WEIGHTS
    expected = average_precision(PREDICTIONS, LABELS, weights)

    task = RecTaskInfo(name="t", label_name="label", prediction_name="prediction", weight_name="weight")
    metric = AUPRCMetric(world_size=1, my_rank=0, batch_size=len(PREDICTIONS), tasks=[task]).to(device)
    metric.update(
        predictions={"t": torch.tensor(PREDICTIONS, device=device)},
        labels={"t": torch.tensor(LABELS, device=device)},
        weights={"t": torch.tensor(weights, device=device)},
    )
    auprc = float(metric.compute()["auprc-t|window_auprc"][0])
    print(f"window AUPRC from torchrec: {auprc:.4f}; average precision computed here: {expected:.4f}", flush=True)
    if abs(auprc - expected) < 1e-5:
        print(f"OK: AUPRC {auprc:.4f} (expected {expected:.4f})", flush=True)
        return 0
    if not args.unit_weights and math.isnan(auprc):
        print(f"REPRODUCED: {SIGNATURE}: AUPRC nan, expected {expected:.4f}", flush=True)
        return 1
    raise AssertionError(f"AUPRC {auprc} is neither the expected {expected} nor NaN")


if __name__ == "__main__":
    sys.exit(main())
