"""meta-pytorch/torchrec#2895: the GAUC metric ignores the sample weights.

https://github.com/meta-pytorch/torchrec/pull/2895 ("Fix GAUC not calculated with weights", commit b1b7e018,
2025-04-20: "if a label presence is false, the corresponding weight is set to 0. It should not be considered when
calculating gAUC")

torchrec's GAUC (group AUC) metric, added in torchrec 1.1.0 (PR #2614), takes `weights` in
`GAUCMetricComputation.update` and `get_auc_states(labels, predictions, weights, num_candidates)` but never uses
them: the per-session AUC is computed from ranks over every sample, so a sample with weight 0 (a missing label)
still counts as a positive or a negative, and the gAUC comes out lower (or higher) than the weighted one. PR #2895
computes the AUC from weighted positive/negative pairs; first released in torchrec 1.2.0.

The script scores one session of four samples: predictions 0.9, 0.8, 0.3, 0.1, labels 1, 0, 1, 0, weights 1, 0, 1, 1.
With the zero-weight negative (0.8) left out, every positive outranks every negative: gAUC 1.0. Counting it gives
3 of 4 pairs: 0.75.

    python repro.py [--device cpu|cuda] [--unit-weights]

--unit-weights: control, every weight 1: the weighted and unweighted AUC agree (0.75) in every release.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import importlib.util
import sys

import torch

SIGNATURE = "GAUC ignored the sample weights"
PREDICTIONS = [0.9, 0.8, 0.3, 0.1]
LABELS = [1.0, 0.0, 1.0, 0.0]
WEIGHTS = [1.0, 0.0, 1.0, 1.0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--unit-weights", action="store_true",
                        help="control: every weight 1 (weighted and unweighted AUC agree)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if importlib.util.find_spec("torchrec.metrics.gauc") is None:  # imports torchrec itself: its errors escape
        print("SKIP: this torchrec has no GAUC metric (torchrec.metrics.gauc, added in 1.1.0)")
        return 125
    from torchrec.metrics.gauc import compute_window_auc, get_auc_states
    device = torch.device(args.device)
    weights = [1.0] * len(WEIGHTS) if args.unit_weights else WEIGHTS
    # [n_task, n_sample]; one session (num_candidates) holding every sample
    states = get_auc_states(
        torch.tensor([LABELS], device=device),
        torch.tensor([PREDICTIONS], device=device),
        torch.tensor([weights], device=device),
        torch.tensor([len(PREDICTIONS)], device=device),
    )
    gauc = float(compute_window_auc(states["auc_sum"], states["num_samples"])["gauc"][0])
    expected = 0.75 if args.unit_weights else 1.0
    if abs(gauc - expected) < 1e-6:
        print(f"OK: gAUC {gauc:.4f} (expected {expected})", flush=True)
        return 0
    if not args.unit_weights and abs(gauc - 0.75) < 1e-6:
        print(f"REPRODUCED: {SIGNATURE}: gAUC {gauc:.4f}, expected {expected} (the zero-weight sample was counted)",
              flush=True)
        return 1
    raise AssertionError(f"gAUC {gauc} is neither the weighted ({expected}) nor the unweighted (0.75) value")


if __name__ == "__main__":
    sys.exit(main())
