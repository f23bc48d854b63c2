"""`bugmatrix new URL --slug WORDS`: draft a case folder from an upstream issue or pull request link (no network).

Exit codes: 0 written, 2 an unknown link, a bad slug, a missing cases folder or an existing case folder (nothing
written).
"""

from __future__ import annotations

import argparse

from harness.commands.context import Context
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `new` and its options."""
    p = sub.add_parser("new", help="draft a case folder from an upstream issue or PR link (no network)")
    p.add_argument(
        "url",
        help="https://github.com/<owner>/<repo>/issues/<N> or .../pull/<N> of pytorch, "
        "torchrec, FBGEMM, Lightning or LitGPT",
    )
    p.add_argument(
        "--slug",
        required=True,
        help="a few lowercase words saying what breaks, e.g. ddp-bool-buffer: the case is cases/<library>-<N>-<slug>/",
    )
    p.add_argument(
        "--packages",
        help="distributions the case needs, separated by commas (default: the "
        "library's, e.g. torch,torchrec,fbgemm-gpu for torchrec)",
    )


def run(args: argparse.Namespace) -> ExitCode:
    """Write `cases/<library>-<N>-<slug>/{case.yaml,repro.py}`, a draft that can only skip until a person writes it
    (see `harness.model.scaffold`), and end with the command that runs the draft (nothing is launched here); an
    unknown link, a bad slug or an existing folder is a one-line error (2)."""
    from rich.markup import escape

    from harness.model import scaffold
    from harness.model.case import cases_dir_option

    try:
        upstream = scaffold.parse_url(args.url)
        case_id = scaffold.case_id(upstream, args.slug)
        packages = scaffold.parse_packages(args.packages, upstream.library)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not args.cases_dir.is_dir():
        raise UsageError(f"--cases-dir {args.cases_dir}: no such folder")
    folder = Context(args).writable("--cases-dir") / case_id
    if folder.exists():
        raise UsageError(f"{folder} already exists: nothing written (choose another --slug, or edit that case)")
    taken = sorted(p.name for p in args.cases_dir.glob(f"{upstream.library.name}-{upstream.number}-*"))
    folder.mkdir()
    (folder / "case.yaml").write_text(scaffold.render_case_yaml(upstream, args.slug, packages))
    (folder / "repro.py").write_text(scaffold.render_repro(upstream, packages))
    printer = Context(args).printer
    printer.show(
        escape(f"wrote {folder}/case.yaml and {folder}/repro.py (packages: {', '.join(packages)})"),
        soft_wrap=True,
        highlight=False,
    )
    if taken:
        printer.show(
            f"[yellow]note:[/] {upstream.ref} already has a case: {', '.join(taken)}", soft_wrap=True, highlight=False
        )
    run = f"bugmatrix {cases_dir_option(args.cases_dir)}run {case_id}"
    printer.show(
        escape(
            f'until both files are written, it can only skip ("{scaffold.NOT_WRITTEN}"); see cases/README.md, '
            '"Starting a case"'
        ),
        soft_wrap=True,
        highlight=False,
    )
    printer.show(  # the last line: `new` launches nothing itself
        escape(
            f"run the draft now: `{run}` (its recorded skip starts the case's intake; a draft never run leaves "
            'the intake "not measured")'
        ),
        soft_wrap=True,
        highlight=False,
    )
    return ExitCode.OK
