"""Every cases/*/repro.py follows the canonical set-up of cases/README.md (checked statically).

The scripts are parsed with `ast`, never imported or run (the cases themselves run as pytest items elsewhere),
and this module imports no harness code. `check_script(source)` returns one line per broken rule:

- it parses with Python 3.8's grammar (the oldest cells run it);
- no `import harness` / `from harness ...`;
- an argparse `--device` option with choices cpu/cuda, defaulting on `torch.cuda.is_available()`;
- `MASTER_PORT` is never given a fixed port: where the script sets it, the value comes from `free_port()`, a helper
  that binds port 0; a script that calls `init_process_group` itself must set it that way;
- a script that chooses a backend names both "gloo" and "nccl";
- `main()` has no `sys.exit` / `exit` / `quit` / `os._exit` and raises no `SystemExit`; every `return` in it carries
  a value, and it cannot fall off its end (an implicit None would exit 0, i.e. "fixed");
- the module ends with `if __name__ == "__main__": sys.exit(main())`.

`check_flags_run(source, variant_args)` checks the script against its `case.yaml`: every value an argparse option
selects other than its default (a store_true/store_false flag, `--no-x` of a BooleanOptionalAction defaulting to
True, every non-default choice of an option with `choices`) is passed by some variant's `args`, so no documented
path goes unrun. Options with free values (`type=int` without choices) and the harness's own `--device` are exempt;
the gaps known today are listed, exactly, in KNOWN_UNRUN.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"
OWN_DIRS = sorted(p.parent for p in CASES.glob("*/repro.py"))


def case_dirs(environ: dict[str, str]) -> list[Path]:
    """This checkout's cases, and those of the folders in $BUGMATRIX_CASES_DIR (`os.pathsep`-separated): a case
    written with `bugmatrix --cases-dir DIR new ...` is checked by `BUGMATRIX_CASES_DIR=DIR pytest <this file>`."""
    extra = [Path(d) for d in environ.get("BUGMATRIX_CASES_DIR", "").split(os.pathsep) if d]
    return OWN_DIRS + sorted(p.parent for d in extra for p in d.glob("*/repro.py") if p.parent not in OWN_DIRS)


CASE_DIRS = case_dirs(dict(os.environ))

EXIT_CALLS = {"sys.exit", "exit", "quit", "os._exit", "_exit"}


def _name(node: ast.AST) -> str:
    """Dotted name of a Name/Attribute chain ('sys.exit'), or ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _walk_own(node: ast.AST):
    """The nodes of a function body, not descending into nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))


def _always_returns(body: list[ast.stmt]) -> bool:
    """True when control cannot run off the end of `body` (it ends in return/raise on every path)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _always_returns(last.body)
    if isinstance(last, ast.Try):
        if _always_returns(last.finalbody):
            return True
        normal = _always_returns(last.orelse) if last.orelse else _always_returns(last.body)
        return normal and all(_always_returns(h.body) for h in last.handlers)
    if isinstance(last, ast.While) and isinstance(last.test, ast.Constant) and last.test.value is True:
        return not any(isinstance(n, ast.Break) for n in _walk_own(last))
    return False


def _master_port_values(tree: ast.AST) -> list[ast.AST]:
    """Every expression the script gives MASTER_PORT (None stands for 'set, value unknown')."""
    values: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _const_str(target.slice) == "MASTER_PORT":
                    values.append(node.value)
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "MASTER_PORT":
                    values.append(kw.value)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if method in ("setdefault", "get", "putenv", "__setitem__") and node.args:
                if _const_str(node.args[0]) == "MASTER_PORT" and len(node.args) > 1:
                    values.append(node.args[1])
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _const_str(key) == "MASTER_PORT":
                    values.append(value)
    return values


def _is_free_port_helper(func: ast.FunctionDef) -> bool:
    """`def free_port(): ... s.bind((host, 0)) ...`"""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "bind":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Tuple) and len(arg.elts) == 2:
                port = arg.elts[1]
                if isinstance(port, ast.Constant) and port.value == 0:
                    return True
    return False


def check_script(source: str) -> list[str]:
    """The canonical-set-up rules `source` breaks, one line each; [] when it follows cases/README.md."""
    problems: list[str] = []
    try:
        tree = ast.parse(source, feature_version=(3, 8))
    except SyntaxError as e:
        return [f"does not parse with Python 3.8's grammar: line {e.lineno}: {e.msg}"]

    # No harness code.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "harness" for a in node.names):
            problems.append(f"line {node.lineno}: imports harness")
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "harness":
            problems.append(f"line {node.lineno}: imports from harness")

    # --device cpu|cuda, defaulting to cuda when available.
    device_opts = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "add_argument"
        and n.args
        and _const_str(n.args[0]) == "--device"
    ]
    if not device_opts:
        problems.append("no argparse option --device")
    for opt in device_opts:
        kw = {k.arg: k.value for k in opt.keywords}
        choices = kw.get("choices")
        names = (
            {_const_str(e) for e in choices.elts} if isinstance(choices, (ast.List, ast.Tuple, ast.Set)) else None
        )
        if names != {"cpu", "cuda"}:
            problems.append(f"line {opt.lineno}: --device must have choices ['cpu', 'cuda']")
        default = kw.get("default")
        if default is None or "cuda.is_available()" not in ast.unparse(default):
            problems.append(f"line {opt.lineno}: --device must default to cuda when torch.cuda.is_available()")

    # Ports: never a fixed one; free_port() wherever MASTER_PORT is set or a process group is created here.
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    helper = functions.get("free_port")
    has_helper = helper is not None and _is_free_port_helper(helper)
    port_values = _master_port_values(tree)
    for value in port_values:
        fixed = [
            n
            for n in ast.walk(value)
            if isinstance(n, ast.Constant)
            and not isinstance(n.value, bool)
            and (isinstance(n.value, int) or (isinstance(n.value, str) and n.value.strip().isdigit()))
        ]
        if fixed:
            problems.append(f"line {value.lineno}: fixed port {fixed[0].value!r} for MASTER_PORT")
        calls = {_name(n.func) for n in ast.walk(value) if isinstance(n, ast.Call)}
        if "free_port" not in calls:
            problems.append(f"line {value.lineno}: MASTER_PORT not taken from free_port()")
    creates_group = any(
        isinstance(n, ast.Call) and _name(n.func).split(".")[-1] == "init_process_group" for n in ast.walk(tree)
    )
    if (port_values or creates_group) and not has_helper:
        problems.append("no free_port() helper that binds port 0")
    if creates_group and not port_values:
        problems.append("calls init_process_group but never sets MASTER_PORT from free_port() for a world of one")
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    if (creates_group or strings & {"gloo", "nccl"}) and not {"gloo", "nccl"} <= strings:
        problems.append('backend: needs "gloo" on CPU and "nccl" on CUDA')

    # main() returns the exit code.
    main = functions.get("main")
    if main is None:
        problems.append("no top-level def main()")
    else:
        for node in _walk_own(main):
            if isinstance(node, ast.Call) and _name(node.func) in EXIT_CALLS:
                problems.append(f"line {node.lineno}: {_name(node.func)}() inside main (return the code instead)")
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if _name(exc) == "SystemExit":
                    problems.append(f"line {node.lineno}: raise SystemExit inside main (return the code instead)")
            if isinstance(node, ast.Return) and node.value is None:
                problems.append(f"line {node.lineno}: bare return in main (return an exit code)")
        if not _always_returns(main.body):
            problems.append("main can fall off its end (an implicit None exits 0): end every path with a return")

    # The one exit point.
    last = tree.body[-1] if tree.body else None
    ok_tail = (
        isinstance(last, ast.If)
        and not last.orelse
        and re.fullmatch(r"__name__ == ['\"]__main__['\"]", ast.unparse(last.test)) is not None
        and len(last.body) == 1
        and isinstance(last.body[0], ast.Expr)
        and ast.unparse(last.body[0].value) == "sys.exit(main())"
    )
    if not ok_tail:
        problems.append('the module must end with: if __name__ == "__main__": sys.exit(main())')
    return list(dict.fromkeys(problems))  # once each, in order


HARNESS_FLAGS = {"--device"}  # the harness passes these itself (harness/launch/execute.py), not a variant


def _module_literal(tree: ast.Module, node: ast.AST) -> object:
    """The value of a literal, of a module-level name bound to one (a dict stands for its keys) or of
    sorted()/list()/tuple() of those; None when it is not known statically."""
    if isinstance(node, ast.Call) and _name(node.func) in ("sorted", "list", "tuple") and len(node.args) == 1:
        inner = _module_literal(tree, node.args[0])
        return list(inner) if isinstance(inner, (list, tuple, set, dict)) else None
    if isinstance(node, ast.Name):
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets):
                value = stmt.value
                if isinstance(value, ast.Dict):  # DTYPES = {"bf16": (torch.bfloat16, ...), ...}: its keys
                    keys = [ast.literal_eval(k) for k in value.keys if isinstance(k, ast.Constant)]
                    return keys if len(keys) == len(value.keys) else None
                return _module_literal(tree, value)
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def selectable_values(source: str) -> list[tuple[int, list[str], str | None]]:
    """(line, option strings, value) for every non-default path the script's argparse options select: value None
    for a flag that takes no value (the option string itself selects it), else the choice as the command line
    spells it. Free-valued options and HARNESS_FLAGS are left out."""
    tree = ast.parse(source)
    found: list[tuple[int, list[str], str | None]] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        ):
            continue
        flags = [s for s in (_const_str(a) for a in node.args) if s and s.startswith("-")]
        if not flags or set(flags) & HARNESS_FLAGS:
            continue
        kw = {k.arg: k.value for k in node.keywords}
        action = kw.get("action")
        action_name = _const_str(action) if action is not None else None
        if action is not None and _name(action).split(".")[-1] == "BooleanOptionalAction":
            default = _module_literal(tree, kw["default"]) if "default" in kw else None
            if default is True:  # --no-x is the path off the default
                found.append((node.lineno, [f"--no-{f[2:]}" for f in flags if f.startswith("--")], None))
            else:
                found.append((node.lineno, flags, None))
        elif action_name in ("store_true", "store_false", "store_const", "count"):
            found.append((node.lineno, flags, None))
        elif "choices" in kw:
            choices = _module_literal(tree, kw["choices"])
            if not isinstance(choices, (list, tuple, set)):
                continue  # not known statically
            default = _module_literal(tree, kw["default"]) if "default" in kw else None
            for choice in choices:
                if "default" not in kw or str(choice) != str(default):
                    found.append((node.lineno, flags, str(choice)))
    return found


def _passes(args: list[str], flags: list[str], value: str | None) -> bool:
    """Does this argument list select `value` of the option `flags` (or the flag itself when value is None)?"""
    for i, token in enumerate(args):
        for flag in flags:
            if value is None and token == flag:
                return True
            if value is not None and (
                (token == flag and i + 1 < len(args) and args[i + 1] == value) or token == f"{flag}={value}"
            ):
                return True
    return False


def check_flags_run(source: str, variant_args: list[list[str]]) -> list[str]:
    """One line per non-default option value the script defines that no variant's args pass; [] when every
    documented path is run by some variant."""
    problems = []
    for line, flags, value in selectable_values(source):
        if not any(_passes(args, flags, value) for args in variant_args):
            spelled = flags[0] if value is None else f"{flags[0]} {value}"
            problems.append(f"line {line}: `{spelled}` is defined but no variant in case.yaml passes it")
    return problems


def case_variant_args(case_dir: Path) -> list[list[str]]:
    spec = yaml.safe_load((case_dir / "case.yaml").read_text())
    return [[str(a) for a in (v or {}).get("args", [])] for v in spec["variants"].values()]


def readme_snippet() -> str:
    """The canonical snippet: the first ```python block of cases/README.md."""
    text = (CASES / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "cases/README.md has no ```python block"
    return match.group(1)


def test_there_are_cases():
    assert len(OWN_DIRS) >= 16


@pytest.mark.parametrize("case_dir", OWN_DIRS, ids=lambda p: p.name)
def test_the_cases_table_has_a_row_for_the_case(case_dir: Path):
    """The cases table of docs/cases.md (`bugmatrix report --format cases`, regenerated by `bugmatrix record tables`)
    lists every case: a new case is not done until its measured row is there."""
    rows = [line for line in (ROOT / "docs" / "cases.md").read_text().splitlines() if line.startswith("| `")]
    assert any(line.startswith(f"| `{case_dir.name}` ") for line in rows), \
        f"docs/cases.md's cases table lacks {case_dir.name}"


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=lambda p: p.name)
def test_case_follows_the_canonical_setup(case_dir: Path):
    problems = check_script((case_dir / "repro.py").read_text())
    assert not problems, f"{_shown(case_dir)}/repro.py:\n  " + "\n  ".join(problems)


# Documented paths that no variant runs yet, each still to be given a measured variant (or dropped from the
# script). The list must be exact: a new gap fails, and so does an entry whose gap a variant has closed.
KNOWN_UNRUN = {
    "lightning-20450-resume-weights-only-torch26": ["`--load load_from_checkpoint`"],
    "litgpt-2201-lora-ind-head-size": ["`--n-query-groups 1`"],
}


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=lambda p: p.name)
def test_every_flag_the_script_defines_is_run_by_a_variant(case_dir: Path):
    problems = check_flags_run((case_dir / "repro.py").read_text(), case_variant_args(case_dir))
    known = KNOWN_UNRUN.get(case_dir.name, [])
    new = [p for p in problems if not any(k in p for k in known)]
    closed = [k for k in known if not any(k in p for p in problems)]
    assert not new, f"{_shown(case_dir)}:\n  " + "\n  ".join(new)
    assert not closed, f"{_shown(case_dir)}: now run by a variant, drop from KNOWN_UNRUN: {closed}"


def test_known_unrun_names_existing_cases():
    assert set(KNOWN_UNRUN) <= {p.name for p in OWN_DIRS}


def _shown(case_dir: Path) -> str:
    return f"cases/{case_dir.name}" if case_dir.parent == CASES else str(case_dir)


def test_cases_in_another_folder_are_checked_too(tmp_path: Path) -> None:
    """A case kept outside cases/ (`bugmatrix --cases-dir DIR new ...`) is checked by this module when
    $BUGMATRIX_CASES_DIR names its folder: a script that breaks the protocol fails, named by its real path."""
    own = OWN_DIRS[0]
    good, bad = tmp_path / "mine-1-good", tmp_path / "mine-2-bad"
    for folder in (good, bad):
        folder.mkdir()
        (folder / "case.yaml").write_text((own / "case.yaml").read_text())
    (good / "repro.py").write_text((own / "repro.py").read_text())
    (bad / "repro.py").write_text((own / "repro.py").read_text().replace("sys.exit(main())", "main()"))
    assert case_dirs({"BUGMATRIX_CASES_DIR": str(tmp_path)})[-2:] == [good, bad]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          str(Path(__file__)), "-k", "canonical_setup and mine"], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "BUGMATRIX_CASES_DIR": str(tmp_path)}, check=False)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "1 failed, 1 passed" in run.stdout and f"{bad}/repro.py" in run.stdout


FLAGS = """
import argparse
DTYPES = {"bf16": 1, "fp16": 2}
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--hparams", choices=["module", "plain"], default="module")
    p.add_argument("--check", required=True, choices=["a", "b"])
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--heads", type=int, choices=[1, 2], default=2)
    p.add_argument("--workaround", action="store_true")
    p.add_argument("--static-graph", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--rows", type=int, default=3)
"""


def test_flag_check_reports_each_unrun_path():
    problems = "\n".join(check_flags_run(FLAGS, [["--check", "a"]]))
    for missing in (
        "`--hparams plain`",
        "`--check b`",
        "`--dtype fp16`",
        "`--heads 1`",
        "`--workaround`",
        "`--no-static-graph`",
    ):
        assert missing in problems
    for exempt in ("--device", "--rows", "`--check a`", "`--hparams module`", "`--dtype bf16`", "`--heads 2`"):
        assert exempt not in problems


def test_flag_check_passes_when_every_path_runs():
    variants = [
        ["--check", "a", "--hparams=plain"],
        ["--check", "b", "--dtype", "fp16", "--heads", "1"],
        ["--check", "a", "--workaround", "--no-static-graph"],
    ]
    assert check_flags_run(FLAGS, variants) == []


def test_readme_snippet_follows_its_own_rules():
    assert check_script(readme_snippet()) == []


BAD = '''
import argparse
import os
import sys

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    print("REPRODUCED: something")
    sys.exit(1)


if __name__ == "__main__":
    main()
'''


def test_checker_catches_a_fixed_port_and_sys_exit_in_main(tmp_path: Path):
    script = tmp_path / "repro.py"
    script.write_text(BAD)
    problems = check_script(script.read_text())
    joined = "\n".join(problems)
    assert "fixed port '29517' for MASTER_PORT" in joined
    assert "sys.exit() inside main" in joined
    assert "must end with" in joined  # `main()` instead of `sys.exit(main())`
    assert "fall off its end" in joined


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import harness\n", "imports harness"),
        ("from harness.cases import Case\n", "imports from harness"),
        ("import os\nos.environ.setdefault('MASTER_PORT', 29500)\n", "fixed port 29500"),
        ("import os\nport = os.environ.get('MASTER_PORT', '29518')\n", "fixed port '29518'"),
        ("def main():\n    import os\n    os._exit(0)\n", "os._exit() inside main"),
        ("def main():\n    return\n", "bare return in main"),
        ("def main():\n    raise SystemExit(1)\n", "raise SystemExit inside main"),
        ("def f():\n    match x:\n        case 1:\n            pass\n", "Python 3.8's grammar"),
        ("p.add_argument('--device', choices=['cpu', 'gpu'], default='cpu')\n", "choices ['cpu', 'cuda']"),
        ("import torch.distributed as dist\ndist.init_process_group('gloo')\n", "no free_port() helper"),
    ],
)
def test_checker_reports(source: str, expected: str):
    assert expected in "\n".join(check_script(source))
