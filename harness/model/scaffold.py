"""`bugmatrix new`: the first draft of a case, from an upstream issue or PR link (pure functions, no I/O).

`parse_url` reads what a GitHub link tells (library, number, issue or PR); `render_case_yaml` and `render_repro`
write the two files of `cases/<library>-<number>-<slug>/`. Nothing here touches the network or the disk.

An unfinished draft can never pass as `fixed`: `repro.py` exits 125 ("TODO: this case is not written yet") while its
SIGNATURE still starts with "TODO" (and `the_call_that_fails()` raises NotImplementedError until it is written), and
every variant of `case.yaml` expects `skip`. So the draft is "as expected" only while it skips; a script filled in
with `case.yaml` left as is observes fixed/reproduced where skip is expected (a miss), and a `case.yaml` filled in with
the script left as is observes skip where fixed/reproduced is expected (a miss too).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from harness.model import names

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_CASE_ID = names.MAX_LENGTH  # the case-id grammar is harness/model/names.py's
NOT_WRITTEN = "TODO: this case is not written yet"
PLACEHOLDER_SIGNATURE = "TODO: the text the bug prints"


@dataclass(frozen=True)
class Library:
    """One library bugmatrix knows: its canonical GitHub repository, the names it goes by, its default packages."""

    name: str  # the case id's prefix
    repo: str  # owner/name as GitHub spells it now
    aliases: tuple[str, ...]  # owner/name spellings that mean this repository (lower case)
    package: str  # the distribution under test, as case.yaml's `when` names it
    packages: tuple[str, ...]  # the default `packages` of a case
    source: str = ""  # a git repository of a pure-Python package, for git-pinned cells (case.yaml's `sources`)


LIBRARIES = (
    Library("torch", "pytorch/pytorch", ("pytorch/pytorch",), "torch", ("torch",)),
    Library(
        "torchrec",
        "meta-pytorch/torchrec",
        ("meta-pytorch/torchrec", "pytorch/torchrec"),
        "torchrec",
        ("torch", "torchrec", "fbgemm-gpu"),
        source="https://github.com/meta-pytorch/torchrec",
    ),
    Library("fbgemm", "pytorch/FBGEMM", ("pytorch/fbgemm",), "fbgemm-gpu", ("torch", "fbgemm-gpu")),
    Library(
        "lightning",
        "Lightning-AI/pytorch-lightning",
        ("lightning-ai/pytorch-lightning", "lightning-ai/lightning", "pytorchlightning/pytorch-lightning"),
        "lightning",
        ("torch", "lightning"),
    ),
    Library(
        "litgpt",
        "Lightning-AI/litgpt",
        ("lightning-ai/litgpt", "lightning-ai/lit-gpt"),
        "litgpt",
        ("torch", "litgpt"),
        source="https://github.com/Lightning-AI/litgpt",
    ),
)


@dataclass(frozen=True)
class Upstream:
    """What an upstream link tells: the library, the issue or PR number, and the link in its canonical form."""

    library: Library
    number: int
    kind: str  # "issues" or "pull"
    url: str  # https://github.com/<canonical owner/name>/<issues|pull>/<number>

    @property
    def is_pr(self) -> bool:
        """True for a pull request (`/pull/N`), False for an issue."""
        return self.kind == "pull"

    @property
    def ref(self) -> str:
        """`owner/name#N`, as GitHub writes a cross-reference."""
        return f"{self.library.repo}#{self.number}"


def parse_url(url: str) -> Upstream:
    """Read `https://github.com/<owner>/<repo>/(issues|pull)/<N>` (query, fragment and a trailing `/files` etc.
    ignored); raise ValueError with a one-line message naming the URL for any other link or repository."""
    known = ", ".join(lib.repo for lib in LIBRARIES)
    parts = urlsplit(url.strip())
    path = [p for p in parts.path.split("/") if p]
    if (
        parts.scheme not in ("http", "https")
        or parts.netloc.lower() not in ("github.com", "www.github.com")
        or len(path) < 4
        or path[2] not in ("issues", "pull")
        or not (path[3].isascii() and path[3].isdigit())
        or not path[3].strip("0")
    ):  # 0, 00: no issue has it
        raise ValueError(
            f"{url}: not a GitHub issue or pull request link "
            "(https://github.com/<owner>/<repo>/issues/<N> or .../pull/<N>)"
        )
    if len(path[3]) > MAX_CASE_ID:  # no case id holds it (and int() refuses past 4,300 digits)
        raise ValueError(
            f"{parts.netloc}/{path[0]}/{path[1]}/{path[2]}/{path[3][:12]}…: an issue number of "
            f"{len(path[3])} digits; a case id holds at most {MAX_CASE_ID} characters"
        )
    repo = f"{path[0]}/{path[1]}".lower()
    for library in LIBRARIES:
        if repo in library.aliases:
            number = int(path[3])
            return Upstream(library, number, path[2], f"https://github.com/{library.repo}/{path[2]}/{number}")
    raise ValueError(f"{url}: {path[0]}/{path[1]} is not a library bugmatrix knows ({known})")


def check_slug(slug: str) -> str:
    """`slug` when it is lowercase words of letters and digits joined by single hyphens; else ValueError."""
    if not SLUG.fullmatch(slug) or len(slug) > 60:
        raise ValueError(
            f"--slug {slug!r}: use lowercase letters, digits and single hyphens (at most 60), "
            "a few words saying what breaks, e.g. ddp-bool-buffer"
        )
    return slug


def parse_packages(text: str | None, library: Library) -> list[str]:
    """The packages a case needs: `text` split on commas or spaces, or the library's default when it is None."""
    if text is None:
        return list(library.packages)
    packages = [p for p in re.split(r"[,\s]+", text) if p]
    bad = [p for p in packages if not PACKAGE.fullmatch(p)]
    if not packages or bad:
        raise ValueError(f"--packages {text!r}: give distribution names separated by commas, e.g. torch,torchrec")
    return list(dict.fromkeys(packages))


def case_id(upstream: Upstream, slug: str) -> str:
    """The case folder's name: `<library>-<number>-<slug>`; ValueError when it is not a case id (lowercase
    letters, digits and hyphens, at most MAX_CASE_ID characters)."""
    cid = f"{upstream.library.name}-{upstream.number}-{check_slug(slug)}"
    try:
        return names.check_name("case id", cid)
    except names.UnsafeName:
        raise ValueError(
            f"case id {cid[: MAX_CASE_ID // 2]}… would be {len(cid)} characters (at most {MAX_CASE_ID}): "
            f"check the link's number ({len(str(upstream.number))} digits) or shorten --slug"
        ) from None


def _flow(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def render_case_yaml(upstream: Upstream, slug: str, packages: list[str]) -> str:
    """The draft `case.yaml`: valid, with every variant expecting `skip` until a person writes the case."""
    cid = case_id(upstream, slug)
    link = upstream.url
    if upstream.is_pr:
        fixed_by = f"fixed_by:\n  - {link}   # TODO: keep if this PR is the fix; else the fix, or []"
        upstream_note = "  # TODO: the issue, if there is one; the PR stays when it is the public record of the bug\n"
    else:
        fixed_by = "fixed_by: []   # TODO: the fixing PR(s)/commit(s), when known"
        upstream_note = ""
    sources = [f"  {lib.name}: {lib.source}" for lib in LIBRARIES if lib.source and lib.name in packages]
    lines = [
        f"# Drafted by `bugmatrix new {link} --slug {slug}`.",
        "# Until both files are written this case can only skip: repro.py exits 125",
        f'# ("{NOT_WRITTEN}") and every variant below expects `skip`.',
        '# See cases/README.md, "Starting a case"; delete these comments and the TODOs as you fill them in.',
        f"title: {json.dumps(f'TODO: one line saying what breaks ({upstream.ref})')}",
        "upstream:",
        upstream_note + f"  - {link}",
        fixed_by,
        f"packages: {_flow(packages)}",
        *(["sources:", *sources] if sources else []),
        "script: repro.py",
        f"nproc: {_flow([str(n) for n in _nprocs(upstream)])}",
        "devices: [cpu, cuda]",
        "timeout: 180",
        f"signature: {json.dumps(PLACEHOLDER_SIGNATURE)}   # TODO: a regex for the text the bug prints",
        "variants:",
        "  bug:",
        '    description: "TODO: what this variant runs"',
        "    args: []",
        "    expect:",
        "      # TODO: replace the `skip` rule with the real ones, first match wins, e.g.",
        f'      #   - when: {{{upstream.library.package}: "<X.Y"}}',
        "      #     outcome: reproduced",
        "      #   - outcome: fixed",
        "      - outcome: skip   # the draft: repro.py exits 125 until it is written",
        "        because: untestable",
        "evidence: |",
        f"  TODO: the upstream reading ({link}: what the bug is, the fixing PR or commit, the first release",
        "  with it and how that was established; see cases/README.md, `evidence`).",
        f"  Re-run: `uv run bugmatrix run {cid} --all-cells`.",
    ]
    return "\n".join(lines) + "\n"


REPRO_TEMPLATE = '''\
"""{ref}: TODO one line saying what breaks.

{link}

TODO: what the bug is, which versions have it (and the fix, when known), and what this script checks.

    python repro.py [--device cpu|cuda]
    torchrun --standalone --nproc_per_node=2 repro.py [--device cpu|cuda]

Every rank (a world of one under plain `python`) initialises a process group (gloo on CPU, nccl on
CUDA) and runs the same check on its own.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA; and, until it is written, this draft from `bugmatrix new`).
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist

# TODO: import the library under test ({packages}).

SIGNATURE = {signature}  # TODO: the text the bug prints (case.yaml's signature must match it)


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


def the_call_that_fails(device):
    """TODO: the smallest code that hits the bug on `device`; the bug's exception must escape from here."""
    raise NotImplementedError("TODO: write the_call_that_fails()")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    # TODO: the case's own variant options (case.yaml's `args`), if any
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if SIGNATURE.startswith("TODO"):  # the draft: delete this `if` once SIGNATURE and the call are written
        # Before init_dist: a rank that leaves a process group at once breaks a peer still connecting to it.
        rank = os.environ.get("RANK", "0")
        print(f"[rank {{rank}}] {not_written}: set SIGNATURE and write the_call_that_fails()", flush=True)
        return 125
    device = init_dist(args.device)
    try:
        rank = dist.get_rank()
        try:
            the_call_that_fails(device)
        except RuntimeError as e:  # TODO: only the exception the bug raises
            if SIGNATURE not in str(e):
                raise
            print(f"[rank {{rank}}] REPRODUCED: {{SIGNATURE}}", flush=True)
            return 1
        print(f"[rank {{rank}}] OK: TODO what the fixed behaviour is", flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
'''


LIGHTNING_TEMPLATE = '''\
"""{ref}: TODO one line saying what breaks.

{link}

TODO: what the bug is, which versions have it (and the fix, when known), and what this script checks.

    python repro.py [--device cpu|cuda]

A world of one: the Trainer (or Fabric) runs on one device and creates any process group itself, so this
script has no `init_dist`. For a DDP bug, run it under torchrun and give the Trainer
`devices=int(os.environ["WORLD_SIZE"])` (cases/lightning-18086-*). For a silent wrong value, compare the
value with the right one and return 1 after printing the signature when they differ.

Exit code: 0 = fixed, 1 = bug reproduced (the signature is printed first), 125 = cannot test here
(no CUDA, more than one rank; and, until it is written, this draft from `bugmatrix new`).
"""

import argparse
import os
import sys

import lightning as L
import torch

SIGNATURE = {signature}  # TODO: the text the bug prints (case.yaml's signature must match it)


def the_call_that_fails(accelerator):
    """TODO: the smallest Trainer/Fabric code that hits the bug (e.g. `L.Trainer(accelerator=accelerator,
    devices=1, logger=False, enable_progress_bar=False).fit(model)`); the bug's exception must escape from here."""
    raise NotImplementedError("TODO: write the_call_that_fails()")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    # TODO: the case's own variant options (case.yaml's `args`), if any
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: --device cuda but CUDA is not available")
        return 125
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("SKIP: a world of 1 only (the Trainer on one device)")
        return 125
    if SIGNATURE.startswith("TODO"):  # the draft: delete this `if` once SIGNATURE and the call are written
        print(f"lightning {{L.__version__}}: {not_written}: set SIGNATURE and write the_call_that_fails()",
              flush=True)
        return 125
    try:
        the_call_that_fails("gpu" if args.device == "cuda" else "cpu")
    except RuntimeError as e:  # TODO: only the exception the bug raises
        if SIGNATURE not in str(e):
            raise
        print(f"REPRODUCED: {{SIGNATURE}}", flush=True)
        return 1
    print("OK: TODO what the fixed behaviour is", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _nprocs(upstream: Upstream) -> list[int]:
    """The draft's world sizes: 1 for Lightning (its template runs the Trainer on one device), else 1 and 2."""
    return [1] if upstream.library.name == "lightning" else [1, 2]


def render_repro(upstream: Upstream, packages: list[str]) -> str:
    """The draft `repro.py`: the canonical set-up of cases/README.md, exiting 125 until it is written. A Lightning
    case gets a script without a process group of its own (the Trainer makes one where it needs it)."""
    template = LIGHTNING_TEMPLATE if upstream.library.name == "lightning" else REPRO_TEMPLATE
    return template.format(
        ref=upstream.ref,
        link=upstream.url,
        packages=", ".join(packages),
        signature=json.dumps(PLACEHOLDER_SIGNATURE),
        not_written=NOT_WRITTEN,
    )
