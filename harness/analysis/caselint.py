"""The case linter: does a case folder follow cases/README.md? Checked statically, nothing launched or
imported.

For each case: `case.yaml` validates (harness/model/case_schema.py), every `skip` rule says why it skips
(`because: absent | untestable`), no version/outcome pair its `evidence` states ("torch 2.7.1 reproduced", "fixed in
torch 2.10.0": the grammar is harness/analysis/evidence.py's) is contradicted by the record's current results, its
`repro.py` follows the canonical set-up (`check_script`), and every
documented path of the script is run by a variant (`check_flags_run`). The script is parsed with `ast`, never
imported or run. `check_script(source)` returns one line per broken rule:

- it parses with Python 3.8's grammar (the oldest cells run it);
- no `import harness` / `from harness ...`;
- an argparse `--device` option with choices cpu/cuda, defaulting on `torch.cuda.is_available()`;
- `MASTER_PORT` is never given a fixed port: where the script sets it, the value comes from `free_port()`, a helper
  that binds port 0; a script that calls `init_process_group` itself must set it that way;
- a script that chooses a backend names both "gloo" and "nccl";
- `main()` has no `sys.exit` / `exit` / `quit` / `os._exit` and raises no `SystemExit`; every `return` in it carries
  a value, and it cannot fall off its end (an implicit None would exit 0, i.e. "fixed");
- the module ends with `if __name__ == "__main__": sys.exit(main())`.

`check_flags_run(source, variant_args)`: every value an argparse option selects other than its default (a
store_true/store_false flag, `--no-x` of a BooleanOptionalAction defaulting to True, every non-default choice of an
option with `choices`) is passed by some variant's `args`, so no documented path goes unrun. Options with free values
(`type=int` without choices) and the harness's own `--device` are exempt.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.model.errors import UsageError

if TYPE_CHECKING:  # the schema (pydantic) is imported when a case is checked, not when the CLI starts
    from harness.model.case_schema import CaseSpec
    from harness.model.result import Result


def current_results(cases_dir: Path, record: Path) -> list[tuple[str, Result]]:
    """The record's current results (`latest()`, superseded rows left out) that the evidence is held against; a
    record that cannot be read is a usage error (one line)."""
    from harness.model.case import discover
    from harness.session.contract import StoreError
    from harness.session.readers import open_reader

    try:
        return open_reader(None, False, discover(cases_dir)[0], record).latest()
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def case_problems(folder: Path, latest: Iterable[tuple[str, Result]] = ()) -> list[str]:
    """Every rule the case folder breaks, one line each naming the file: `<folder>/repro.py: line 3: ...`; with
    `latest` (the record's current results), every claim of its evidence they contradict (analysis/evidence.py)."""
    from harness.analysis.evidence import contradicted
    from harness.model.case import load_case
    from harness.model.case_schema import CaseError

    try:
        case = load_case(folder / "case.yaml")
    except CaseError as exc:
        return [str(exc)]
    source = case.script.read_text()
    variant_args = [list(v.args) for v in case.spec.variants.values()]
    where = f"{folder}/{case.spec.script}"
    said = skip_rules_unexplained(case.spec) + cold_unsaid(case.spec, source) + contradicted(case, latest)
    return [f"{folder}/case.yaml: {p}" for p in said] + [
        f"{where}: {p}" for p in check_script(source) + check_flags_run(source, variant_args)
    ]


# What a script exercises of torchrun itself (its agent, its launcher): a warm launch forks ranks without them.
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch", "torch.distributed.elastic")


def torchrun_imports(source: str) -> list[str]:
    """The modules of torchrun itself (`TORCHRUN_MODULES`, or their parts) that `source` imports, sorted."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found |= {n for n in names if any(n == m or n.startswith(m + ".") for m in TORCHRUN_MODULES)}
    return sorted(found)


def cold_unsaid(spec: CaseSpec, source: str) -> list[str]:
    """One line when the script uses torchrun itself (`torchrun_imports`) and some variant may launch warm: a
    warm launch has no torchrun agent, so such a case says `cold:` (the case or each such variant)."""
    try:
        used = torchrun_imports(source)
    except SyntaxError:
        return []  # check_script says so
    warm = [name for name in spec.variants if not spec.cold_of(name)]
    if not used or not warm:
        return []
    return [
        f"cold: the script imports {', '.join(used)} (torchrun itself, which a warm launch does not run): set "
        f"`cold: <why>` on the case, or on each variant that uses it ({', '.join(warm)} may launch warm)"
    ]


def skip_rules_unexplained(spec: CaseSpec) -> list[str]:
    """One line per `skip` rule that does not say why it skips (`because: absent | untestable`, see
    `Rule.because`): `bugmatrix audit` answers not_affected or cannot_say by it, never a guess."""
    from harness.model.outcome import Outcome

    return [
        f"variants.{name}.expect[{i}].because: a skip rule must say why it skips (absent: the bug's code does "
        "not exist in those versions; untestable: it exists but the case cannot test it there)"
        for name, variant in spec.variants.items()
        for i, rule in enumerate(variant.expect)
        if rule.outcome is Outcome.SKIP and rule.because is None
    ]


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


def _master_port_values(tree: ast.AST) -> list[ast.expr]:
    """Every expression the script gives MASTER_PORT (None stands for 'set, value unknown')."""
    values: list[ast.expr] = []
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
        names = {_const_str(e) for e in choices.elts} if isinstance(choices, (ast.List, ast.Tuple, ast.Set)) else None
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
