"""Lightning-AI/litgpt PR #2258: the Qwen3 prompt style sends the literal system message "None".

https://github.com/Lightning-AI/litgpt/pull/2258

PR #2036 ("Add optional sys prompt") made `ChatML.system_message` optional and `ChatML.apply()` format
`sys_prompt or self.system_message` unconditionally into the system turn; the `Qwen3` style (added with
the Qwen3 models, first release 0.5.9) is a `ChatML` with no system message. So every Qwen3 prompt that
`litgpt chat`/`generate`/`LLM.generate`/finetuning build starts with

    <|im_start|>system\nNone<|im_end|>

(the model is told its system prompt is the word "None"). PR #2258 (first release 0.5.13) omits the
system turn when there is no system message, as Qwen3's own chat template does.

    python repro.py [--device cpu|cuda] [--style qwen3|qwen2.5] [--sys-prompt TEXT]

(default)           the prompt style `PromptStyle.from_config(Config.from_name("Qwen3-0.6B"))` picks,
                    applied to "Hello"                                                       (the bug)
--sys-prompt TEXT   workaround: pass a system prompt explicitly (apply(..., sys_prompt=TEXT))
--style qwen2.5     control: Qwen2.5, a ChatML style with a system message of its own

No model, no process group: the prompt text is what is tested (--device is accepted for the harness; the
string does not depend on it). Where litgpt has no Qwen3 prompt style (before 0.5.9) the script exits 125.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import torch
from litgpt import Config
from litgpt.prompts import PromptStyle

SIGNATURE = "the prompt's system turn is the literal string None"
MODELS = {"qwen3": "Qwen3-0.6B", "qwen2.5": "Qwen2.5-0.5B-Instruct"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--style", choices=sorted(MODELS), default="qwen3")
    parser.add_argument("--sys-prompt", default=None)
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a prompt string, nothing distributed)")
        return 125

    name = MODELS[args.style]
    try:
        config = Config.from_name(name)
    except ValueError as e:  # "... is not a supported config name" before the model was added
        print(f"SKIP: this litgpt has no {name} config ({e})")
        return 125
    style = PromptStyle.from_config(config)
    if args.style == "qwen3" and type(style).__name__ != "Qwen3":
        print(f"SKIP: this litgpt maps {name} to {type(style).__name__}, not a Qwen3 prompt style")
        return 125

    if args.sys_prompt is None:
        prompt = style.apply("Hello")
        where = f"{type(style).__name__}().apply('Hello') for {name}"
    else:
        prompt = style.apply("Hello", sys_prompt=args.sys_prompt)
        where = f"{type(style).__name__}().apply('Hello', sys_prompt={args.sys_prompt!r}) for {name}"
    assert prompt.endswith("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"), repr(prompt)

    if "<|im_start|>system\nNone<|im_end|>" in prompt:
        print(f"REPRODUCED: {SIGNATURE}: {prompt!r} ({where})", flush=True)
        return 1
    if args.sys_prompt is not None:
        assert f"<|im_start|>system\n{args.sys_prompt}<|im_end|>" in prompt, repr(prompt)
    print(f"OK: {prompt!r} ({where})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
