"""Lightning-AI/litgpt#2238: `temperature=0` samples from the softmax instead of taking the argmax.

https://github.com/Lightning-AI/litgpt/issues/2238 (fixed by PR #2239)

`temperature=0` is greedy decoding. In litgpt 0.3.0 `litgpt.generate.base.sample` did
`if temperature > 0.0: <sample> ... return argmax`. PR #1360 (top-p sampling, first release 0.3.1)
changed the test to `if temperature > 0.0 or top_p > 0.0:` with `top_p` defaulting to 1.0, so the
sampling branch is always taken: at `temperature=0` the logits are left unscaled and the token is
drawn with `multinomial(softmax(logits))` -- `generate(..., temperature=0)` (and `litgpt generate`,
`chat`, `LLM.generate`) is not greedy, not even deterministic. PR #2239 (first release 0.5.13) made
it `and`.

The script checks greedy decoding in one of two ways (`--via`):
  sample    `sample(logits, temperature=0.0)` 200 times under a fixed seed must always return the
            argmax of the logits (the function the fix changed);
  generate  `generate(model, prompt, N, temperature=0.0)` with a tiny random GPT (1 layer, built in
            the script, nothing downloaded), under 3 different seeds, must equal the greedy decode
            computed here with full forward passes and argmax.
`--top-p 0` passes `top_p=0.0` too (the workaround: both values 0 reach the argmax branch in every
version; litgpt 0.3.0 has no `top_p` argument, so it is not passed there).

    python repro.py [--device cpu|cuda] [--via sample|generate] [--top-p 0]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [...]

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same check on its own; the bug is not distributed.

Exit code: 0 = fixed (greedy), 1 = bug reproduced (the signature is printed first), 125 = cannot test
here (no CUDA).
"""

import argparse
import inspect
import os
import socket
import sys

import torch
import torch.distributed as dist
from litgpt import GPT, Config
from litgpt.generate.base import generate, sample

SIGNATURE = "temperature=0 did not decode greedily"


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


def extra_kwargs(fn, top_p):
    """`top_p=...` when asked for and `fn` has that parameter (litgpt >= 0.3.1)."""
    if top_p is None or "top_p" not in inspect.signature(fn).parameters:
        return {}
    return {"top_p": top_p}


def check_sample(device, top_p):
    """sample(temperature=0) must always return the argmax."""
    logits = torch.tensor([[[0.5, -1.2, 3.1, 0.8, -0.3, 2.7, -0.9, 1.4]]], device=device)
    expected = int(torch.argmax(logits[0, -1]))
    torch.manual_seed(0)
    kwargs = extra_kwargs(sample, top_p)
    shown = f", top_p={top_p!r}" if kwargs else ""
    tokens = [int(sample(logits, temperature=0.0, **kwargs)) for _ in range(200)]
    if set(tokens) != {expected}:
        raise RuntimeError(f"{SIGNATURE}: sample(logits, temperature=0.0{shown}) "
                           f"returned tokens {sorted(set(tokens))} over 200 calls, argmax is {expected} "
                           f"({tokens.count(expected)}/200 were the argmax)")
    return f"sample(temperature=0.0) returned the argmax {expected} in 200/200 calls"


def check_generate(device, top_p):
    """generate(temperature=0) must equal the greedy decode of the same model, whatever the seed."""
    torch.manual_seed(1234)
    config = Config(n_layer=1, n_head=2, n_embd=16, block_size=32, vocab_size=64, padded_vocab_size=64)
    model = GPT(config).to(device).eval()
    prompt = torch.tensor([1, 5, 9, 13], device=device)
    n_new = 12
    max_returned = prompt.numel() + n_new

    greedy = prompt.clone()
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(greedy.unsqueeze(0))
            greedy = torch.cat([greedy, logits[0, -1].argmax().view(1)])

    model.max_seq_length = max_returned
    model.set_kv_cache(batch_size=1, device=device)
    kwargs = extra_kwargs(generate, top_p)
    shown = f", top_p={top_p!r}" if kwargs else ""
    outs = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        out = generate(model, prompt, max_returned, temperature=0.0, **kwargs)
        outs.append(out.tolist())
    wrong = [o for o in outs if o != greedy.tolist()]
    if wrong:
        raise RuntimeError(f"{SIGNATURE}: generate(temperature=0.0{shown}) "
                           f"gave {wrong[0]} (and {len(wrong)}/3 seeds differ), greedy is {greedy.tolist()}")
    return f"generate(temperature=0.0) equals the greedy decode under 3 seeds: {greedy.tolist()}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--via", choices=["sample", "generate"], default="sample")
    parser.add_argument("--top-p", type=float, default=None,
                        help="also pass top_p (the workaround: 0); default: leave litgpt's default")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        check = check_sample if args.via == "sample" else check_generate
        try:
            what = check(device, args.top_p)
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
