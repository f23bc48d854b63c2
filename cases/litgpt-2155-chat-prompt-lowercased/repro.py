"""Lightning-AI/litgpt PR #2155: `litgpt chat` lowercases every prompt before it reaches the model.

https://github.com/Lightning-AI/litgpt/pull/2155

PR #1279 ("Allow multiline prompts", first release 0.4.0) moved chat's input loop into
`litgpt.chat.base.interact()` and wrote `prompt = prompt.lower().strip()`, meant only for the
`!quit`/`!exit` test: every prompt is then sent to the model lowercased (code, names, case-sensitive
instructions). PR #2155 (first release 0.5.12) strips without lowercasing and lowercases only for the
comparison. (0.3.x lowercased only for the comparison too, but had no `interact()`: this script
cannot drive it there and exits 125.)

The script runs the real `interact()` as `litgpt chat` does, with its input from stdin
("Hello World", then "!quit"), a tiny random GPT (1 layer, nothing downloaded), a `litgpt.Tokenizer`
read from a word-level `tokenizer.json` written here, and a user-defined `PromptStyle` (the
documented extension point, registered like any custom style) that records the prompt it is given
before returning it unchanged. The prompt the model gets must be "Hello World".

    python repro.py [--device cpu|cuda] [--multiline]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda] [--multiline]

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same check on its own; the bug is not distributed.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here.
"""

import argparse
import contextlib
import inspect
import io
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from litgpt import GPT, Config, Tokenizer

SIGNATURE = "chat lowercased the prompt"
PROMPT = "Hello World"


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


def write_tokenizer(ckpt_dir):
    """A word-level tokenizer.json (+ tokenizer_config.json) that knows both spellings."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    words = ["<unk>", "<s>", "</s>", "Hello", "World", "hello", "world"] + [f"w{i}" for i in range(25)]
    tok = HFTokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(ckpt_dir / "tokenizer.json"))
    (ckpt_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"}))
    return len(words)


def run_chat(device, multiline):
    """Drive litgpt.chat.base.interact with PROMPT on stdin; return the prompts the model was given."""
    import lightning as L
    from litgpt.chat import base as chat
    from litgpt.prompts import PromptStyle

    seen = []

    class RecordingStyle(PromptStyle):
        """A user's prompt style: remembers the prompt, sends it unchanged."""

        def apply(self, prompt, **kwargs):
            seen.append(prompt)
            return prompt

    with tempfile.TemporaryDirectory() as tmp:
        ckpt_dir = Path(tmp)
        vocab = write_tokenizer(ckpt_dir)
        tokenizer = Tokenizer(ckpt_dir)

    torch.manual_seed(0)
    config = Config(n_layer=1, n_head=2, n_embd=8, block_size=32, vocab_size=vocab, padded_vocab_size=vocab)
    model = GPT(config).to(device).eval()
    model.max_seq_length = 16
    model.set_kv_cache(batch_size=1, device=device)
    fabric = L.Fabric(accelerator=device.type, devices=1, precision="32-true")

    values = dict(multiline=multiline, model=model, tokenizer=tokenizer, prompt_style=RecordingStyle(),
                  fabric=fabric, temperature=0.0, max_new_tokens=3, top_k=1, top_p=1.0, stop_tokens=())
    params = inspect.signature(chat.interact).parameters
    missing = [p for p in params if p not in values]
    if missing:
        raise TypeError(f"interact() has parameters this script does not know: {missing}")
    stdin = f"{PROMPT}\n!submit\n!quit\n" if multiline else f"{PROMPT}\n!quit\n"
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            chat.interact(**{p: values[p] for p in params})
    finally:
        sys.stdin = old_stdin
    print()
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--multiline", action="store_true", help="chat --multiline True")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    try:
        from litgpt.chat.base import interact  # noqa: F401  (litgpt >= 0.4.0, PR #1279)
    except ImportError as e:
        print(f"SKIP: this litgpt's chat has no interact() ({e})")
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            seen = run_chat(device, args.multiline)
            if seen != [PROMPT]:
                raise RuntimeError(f"{SIGNATURE}: typed {PROMPT!r}, the model was given {seen!r}")
        except RuntimeError as e:
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {rank}] REPRODUCED: {e}", flush=True)
            verdict = 1
        else:
            print(f"[rank {rank}] OK: the model was given {seen!r}", flush=True)
            verdict = 0
        # Every rank leaves together: a rank that finished first closed gloo's connections while the other
        # was still joining (2 ranks, full test suite under load: "Gloo connectFullMesh failed").
        dist.barrier()
        return verdict
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
