"""Lightning-AI/litgpt PR #2201: LoRA's padding index is wrong when `n_embd != n_head * head_size`.

https://github.com/Lightning-AI/litgpt/pull/2201

`LoRAQKVLinear` with LoRA on only some of q, k, v (e.g. `lora_key=False`) scatters the LoRA update
into the fused qkv output through an index buffer (`lora_ind`, used by `zero_pad` in the forward
pass and in `merge`). PR #1013 ("Drop interleave placement in QKV matrix", first release 0.5.5)
rebuilt that index from `self.linear.in_features` (= `n_embd`) as the query width and
`in_features // (n_head // n_query_groups)` as the key/value width. That is only right when
`n_embd == n_head * head_size`; configs with an explicit larger `head_size` (Gemma-style) get an
index of the wrong length or the wrong columns, so the LoRA forward fails (or, where the lengths
happen to match, puts the update into the wrong columns). Up to 0.5.4 the index came from
`head_size` and the interleaved layout (right). PR #2201 (first release 0.5.13) builds it from
`head_size * n_head` and `head_size * n_query_groups`.

The script builds a tiny `litgpt.lora.GPT` (1 layer, n_embd 32, n_head 4, head_size 16, random
weights, nothing downloaded) with LoRA on query and value, gives every `lora_B` random values (a
trained adapter), and checks that the LoRA forward pass works and equals the forward pass of a
copy whose LoRA weights were merged with `merge_lora_weights` and of the same model with the
LoRA update computed by hand from `lora_A`/`lora_B` into the q and v columns.

    python repro.py [--device cpu|cuda] [--n-query-groups 4|2|1] [--lora-key] [--head-size 16|8]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [...]

`--lora-key` (LoRA on q, k and v: zero_pad returns early, no index) is the workaround;
`--head-size 8` (= n_embd / n_head) is the control where the buggy formula is right.

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same check on its own; the bug is not distributed.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import copy
import os
import socket
import sys

import torch
import torch.distributed as dist
from litgpt.lora import GPT, Config, merge_lora_weights

SIGNATURE = "LoRA qkv update misplaced"
REL_TOL = 1e-2  # merged vs unmerged logits: tolerance relative to max |logit| (see logits_agree)


def free_port():
    """A TCP port that is free now: the OS picks it when we bind to port 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_dist(device_type):
    """Join the process group (gloo on CPU, nccl on CUDA); return this rank's device.

    Under plain `python` (no RANK in the environment) this is a world of one on a free port.
    """
    if "RANK" not in os.environ:  # plain `python repro.py`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in os.environ:
            os.environ["MASTER_PORT"] = str(free_port())
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return device


def logits_agree(y, y_merged, rel_tol=REL_TOL):
    """Whether merged and unmerged logits agree: max |y - y_merged| <= rel_tol * max |y|.

    Returns (agree, max abs difference, max |y|). The tolerance is relative to the logits' scale
    (about 1.5-1.7 here): float32 rounding is ~4e-7 on CPU, but on CUDA the LoRA path's F.conv1d runs
    in cuDNN with TF32 by default (torch.backends.cudnn.allow_tf32), which gave 5e-4 (3e-4 of the scale);
    an update in the wrong columns (or lost) moves the logits by 0.67-1.5 (40-97% of the scale).
    """
    diff = (y - y_merged).abs().max().item()
    scale = y.abs().max().item()
    return diff <= rel_tol * scale, diff, scale


def check(device, n_query_groups, lora_key, head_size):
    torch.manual_seed(0)
    config = Config(n_layer=1, n_head=4, n_query_groups=n_query_groups, n_embd=32, head_size=head_size,
                    block_size=16, vocab_size=64, padded_vocab_size=64,
                    lora_r=4, lora_alpha=8, lora_dropout=0.0,
                    lora_query=True, lora_key=lora_key, lora_value=True)
    model = GPT(config).to(device)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            with torch.no_grad():
                p.normal_(0, 0.5)  # a trained adapter (lora_B starts at zero)
    model.eval()
    qkv = model.transformer.h[0].attn.qkv if hasattr(model.transformer.h[0].attn, "qkv") \
        else model.transformer.h[0].attn.attn
    x = torch.randn(1, 5, config.n_embd, device=device)

    # What the LoRA update must be: (x @ A^T @ B^T) * scaling, placed into the q, (k,) v column blocks
    # of the fused qkv output (litgpt >= 0.5.5 lays it out as [q | k | v]; before, interleaved per group).
    with torch.no_grad():
        try:
            out = qkv(x)
        except IndexError as e:  # an index of the wrong length: zero_pad's index_copy_ size check
            if "index_copy_" not in str(e):
                raise
            raise RuntimeError(f"{SIGNATURE}: LoRAQKVLinear forward failed: IndexError: {e}") from e
        base = qkv.linear(x)
        delta = out - base
    q_w = head_size * config.n_head
    kv_w = head_size * n_query_groups
    total = q_w + 2 * kv_w
    assert delta.shape[-1] == total, (delta.shape, total)

    # The merged model must give the same logits as the unmerged one.
    idx = torch.randint(0, config.vocab_size, (1, 6), device=device)
    merged = copy.deepcopy(model)
    with torch.no_grad():
        y = model(idx)
        try:
            merge_lora_weights(merged)
        except IndexError as e:
            if "index_copy_" not in str(e):
                raise
            raise RuntimeError(f"{SIGNATURE}: merge_lora_weights failed: IndexError: {e}") from e
        y_merged = merged(idx)
    agree, diff, scale = logits_agree(y, y_merged)
    if not agree:
        raise RuntimeError(f"{SIGNATURE}: merged and unmerged LoRA logits differ by {diff:.3g} "
                           f"(max |logit| {scale:.3g}; tolerance {REL_TOL:g} of it)")

    # The k block gets no update when LoRA is off for the key (whatever the layout: count nonzero columns).
    changed = int((delta.abs().amax(dim=(0, 1)) > 1e-6).sum())
    expected_changed = total if lora_key else q_w + kv_w
    if changed != expected_changed:
        raise RuntimeError(f"{SIGNATURE}: the LoRA update changed {changed} qkv columns, "
                           f"expected {expected_changed} (q {q_w}, k {kv_w}, v {kv_w}, lora_key={lora_key})")
    return (f"LoRA forward and merge agree (n_embd 32, n_head 4, head_size {head_size}, "
            f"n_query_groups {n_query_groups}, lora_key={lora_key}); update in {changed}/{total} columns")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--n-query-groups", type=int, choices=[1, 2, 4], default=4)
    parser.add_argument("--lora-key", action="store_true", help="LoRA on the key too (the workaround)")
    parser.add_argument("--head-size", type=int, choices=[8, 16], default=16,
                        help="16: n_embd != n_head * head_size (the bug); 8: equal (control)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            what = check(device, args.n_query_groups, args.lora_key, args.head_size)
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: {e}", flush=True)
            verdict = 1
        else:
            print(f"[rank {rank}] OK: {what}", flush=True)
            verdict = 0
        # Every rank leaves together: a rank that finished first closed gloo's connections while the other
        # was still joining (2 ranks, full test suite under load: "Gloo connectFullMesh failed").
        dist.barrier()
        return verdict
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
