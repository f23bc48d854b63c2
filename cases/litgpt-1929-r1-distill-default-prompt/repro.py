"""Lightning-AI/litgpt PR #1929: the DeepSeek-R1 distilled models are prompted without their chat template.

https://github.com/Lightning-AI/litgpt/pull/1929

PR #1922 (first release 0.5.7) added the configs of DeepSeek-R1-Distill-Llama-8B and -70B, but no prompt
style for them: `model_name_to_prompt_style` (what `litgpt generate`, `chat`, `serve`, `LLM.generate` and
the finetuning data use through `PromptStyle.from_config`) matched none of its patterns and returned
`Default`, which sends the user's text as it is. The model is a chat model trained on
"<｜User｜>...<｜Assistant｜>" turns (its tokenizer_config.json chat template); given the bare text it
continues it instead of answering. PR #1929 (first release 0.5.8) adds `R1Base` and maps "R1" names to it.

    python repro.py [--device cpu|cuda] [--model DeepSeek-R1-Distill-Llama-8B|Llama-3-8B-Instruct]

--model Llama-3-8B-Instruct   control: a chat model with a prompt style of its own (Llama3)

The prompt for "Hi" must contain the model's user and assistant turn markers. No model, no process group
(--device is accepted for the harness). Where this litgpt has no config of that name the script exits 125.
Exit codes: 0 correct, 1 bug reproduced, 125 cannot test here.
"""

import argparse
import os
import sys

import torch
from litgpt import Config
from litgpt.prompts import PromptStyle

SIGNATURE = "the chat model is prompted without its chat template"
# The markers a user's "Hi" gets in each model's own chat template (tokenizer_config.json on the Hub).
TURN = {
    "DeepSeek-R1-Distill-Llama-8B": ("<｜User｜>Hi<｜Assistant｜>",),
    "Llama-3-8B-Instruct": ("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
                            "<|start_header_id|>assistant<|end_header_id|>\n\n"),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", choices=sorted(TURN), default="DeepSeek-R1-Distill-Llama-8B")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (a prompt string, nothing distributed)")
        return 125

    name = args.model
    try:
        config = Config.from_name(name)
    except ValueError as e:  # "... is not a supported config name" before the model was added
        print(f"SKIP: this litgpt has no {name} config ({e})")
        return 125
    style = PromptStyle.from_config(config)
    prompt = style.apply("Hi")
    what = f"PromptStyle.from_config({name}) is {type(style).__name__}; apply('Hi') = {prompt!r}"
    missing = [marker for marker in TURN[name] if marker not in prompt]
    if missing:
        print(f"REPRODUCED: {SIGNATURE}: {what}, expected it to contain {missing!r}", flush=True)
        return 1
    print(f"OK: {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
