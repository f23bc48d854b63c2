"""Lightning-AI/litgpt PR #2216: the DeepSeek-R1 prompt style fails on an empty message list.

https://github.com/Lightning-AI/litgpt/pull/2216

`R1Base.apply()` (the prompt style litgpt picks for every model name containing "R1", first release
0.5.8) accepts a list of chat messages and looks for a system message with `prompt[0].get("role")` without
checking that the list has an element: `apply([])` raises `IndexError: list index out of range`. PR #2216
(first release 0.5.13) tests `if prompt and ...`; the empty conversation then formats as the bare assistant
turn "<｜Assistant｜>".

    python repro.py [--device cpu|cuda] [--messages empty|user]

(default)         apply([]) on the style of "DeepSeek-R1-Distill-Qwen-7B"                 (the bug)
--messages user   control: apply([{"role": "user", "content": "Hi"}])

No model, no process group: the prompt text is what is tested (--device is accepted for the harness).
Where litgpt has no R1 prompt style (before 0.5.8) the script exits 125.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import torch
from litgpt.prompts import model_name_to_prompt_style

SIGNATURE = "R1Base.apply on an empty message list raised IndexError"
MODEL = "DeepSeek-R1-Distill-Qwen-7B"
MESSAGES = {"empty": [], "user": [{"role": "user", "content": "Hi"}]}
EXPECTED = {"empty": "<｜Assistant｜>", "user": "<｜User｜>Hi<｜Assistant｜>"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--messages", choices=sorted(MESSAGES), default="empty")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a prompt string, nothing distributed)")
        return 125

    style = model_name_to_prompt_style(MODEL)
    if type(style).__name__ != "R1Base":
        print(f"SKIP: this litgpt maps {MODEL} to {type(style).__name__}, it has no R1 prompt style")
        return 125
    messages = MESSAGES[args.messages]
    try:
        prompt = style.apply(messages)
    except IndexError as e:
        print(f"REPRODUCED: {SIGNATURE}: R1Base().apply({messages!r}): IndexError: {e}", flush=True)
        return 1
    if prompt != EXPECTED[args.messages]:
        raise AssertionError(f"R1Base().apply({messages!r}) = {prompt!r}, expected {EXPECTED[args.messages]!r}")
    print(f"OK: R1Base().apply({messages!r}) = {prompt!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
