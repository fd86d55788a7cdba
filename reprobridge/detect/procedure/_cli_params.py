"""Command-line parameters of a Python file, read statically: argparse ``add_argument``
calls (and ``set_defaults``), click decorators, typer commands and ``fire.Fire`` targets
(see :mod:`~reprobridge.detect.procedure.params`)."""

from __future__ import annotations

import ast
from dataclasses import replace

from reprobridge.detect._pyast import (
    NOT_LITERAL,
    Scalar,
    arg,
    call_name,
    dotted,
    kwarg,
    literal,
    nodes_of,
)
from reprobridge.detect._text import param_name
from reprobridge.detect.procedure._param import (
    Param,
    coerce_default,
    literal_default,
    type_name,
    type_of,
)


def argparse_params(tree: ast.AST, imports: dict[str, str]) -> list[Param]:
    """Parameters declared with ``add_argument`` (and overridden by ``set_defaults``)."""
    params: list[Param] = []
    overrides: dict[str, ast.expr] = {}
    for node in nodes_of(tree, ast.Call):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "set_defaults":
            for kw in node.keywords:
                if kw.arg:
                    overrides[kw.arg] = kw.value
            continue
        if node.func.attr != "add_argument":
            continue
        names = [v for v in (literal(a) for a in node.args) if isinstance(v, str)]
        if not names:
            continue
        longs = [n for n in names if n.startswith("--")]
        shorts = [n for n in names if n.startswith("-") and not n.startswith("--")]
        positional = not (longs or shorts)
        flag = None if positional else (longs or shorts)[0]
        given = literal(kwarg(node, "dest"))
        if isinstance(given, str):
            dest: str | None = given
        elif positional:
            dest = names[0]
        else:
            dest = flag.lstrip("-").replace("-", "_") if flag else None
        name = param_name(dest) if dest else None
        if name is None:
            continue
        action = literal(kwarg(node, "action"))
        nargs = literal(kwarg(node, "nargs"))
        type_ = type_name(kwarg(node, "type"), imports)
        notes: list[str] = []
        default_node = kwarg(node, "default")
        if default_node is None and action in {"store_true", "store_false"}:
            default: Scalar | None = action == "store_false"
            type_ = "bool"
        else:
            default, note = literal_default(default_node)
            if note:
                notes.append(note)
        if action in {"store_true", "store_false"}:
            type_ = "bool"
        if type_ is None and default is not None:
            type_ = type_of(default)
        default = coerce_default(default, type_)
        required = literal(kwarg(node, "required")) is True or (
            positional and nargs not in {"?", "*"} and default_node is None
        )
        choices = kwarg(node, "choices")
        allowed: tuple[Scalar, ...] = ()
        if isinstance(choices, ast.List | ast.Tuple | ast.Set):
            values = [literal(e) for e in choices.elts]
            notes.append("choices: " + ", ".join(str(v) for v in values if v is not NOT_LITERAL))
            allowed = tuple(v for v in values if isinstance(v, str | int | float | bool))
        if nargs not in {None, "?", NOT_LITERAL, 1}:
            notes.append(f"takes several values (nargs={nargs})")
        note = "; ".join(notes)
        params.append(
            Param(name, flag, default, type_, node.lineno, required, note, choices=allowed)
        )
    if overrides:
        params = [_override(p, overrides) for p in params]
    return params


def _override(param: Param, overrides: dict[str, ast.expr]) -> Param:
    if param.name not in overrides:
        return param
    default, note = literal_default(overrides[param.name])
    return replace(param, default=coerce_default(default, param.type), note=note or param.note)


# -- click / typer / fire -----------------------------------------------------------------


def _click_param(dec: ast.Call, kind: str, imports: dict[str, str]) -> Param | None:
    decls = [v for v in (literal(a) for a in dec.args) if isinstance(v, str)]
    if not decls:
        return None
    plain = [d for d in decls if not d.startswith("-")]
    longs = [d.split("/")[0] for d in decls if d.startswith("--")]
    shorts = [d.split("/")[0] for d in decls if d.startswith("-") and not d.startswith("--")]
    flags = longs or shorts
    flag = flags[0] if flags and kind != "argument" else None
    raw = plain[0] if plain else (flag or "")
    name = param_name(raw.lstrip("-").replace("-", "_"))
    if name is None:
        return None
    is_flag = literal(kwarg(dec, "is_flag")) is True or any("/" in d for d in decls)
    default, note = literal_default(kwarg(dec, "default"))
    if is_flag and kwarg(dec, "default") is None:
        default = False
    type_ = "bool" if is_flag else type_name(kwarg(dec, "type"), imports) or type_of(default)
    required = literal(kwarg(dec, "required")) is True or (
        kind == "argument" and kwarg(dec, "default") is None
    )
    return Param(name, flag, coerce_default(default, type_), type_, dec.lineno, required, note)


def click_params(tree: ast.AST, imports: dict[str, str]) -> list[Param]:
    """Parameters of ``@click.option``/``@click.argument`` decorators."""
    params: list[Param] = []
    for node in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in node.decorator_list:
            if not isinstance(dec, ast.Call):
                continue
            name = call_name(dec, imports) or ""
            if not name.startswith("click."):
                continue
            kind = name.rsplit(".", 1)[-1]
            if kind in {"option", "argument"}:
                param = _click_param(dec, kind, imports)
                if param:
                    params.append(param)
    return params


def _annotation(
    node: ast.expr | None, imports: dict[str, str]
) -> tuple[str | None, ast.Call | None]:
    """(type name, typer.Option/Argument call inside ``Annotated[...]``) of an annotation."""
    if node is None:
        return None, None
    if isinstance(node, ast.Subscript):
        base = resolve_name(node.value, imports)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base.endswith("Annotated") and elts:
            marker = next((e for e in elts[1:] if isinstance(e, ast.Call)), None)
            return _annotation(elts[0], imports)[0], marker
        if base.endswith("Optional") and elts:
            return _annotation(elts[0], imports)
        return None, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left = _annotation(node.left, imports)
        return left if left[0] else _annotation(node.right, imports)
    return type_name(node, imports), None


def resolve_name(node: ast.expr, imports: dict[str, str]) -> str:
    """Resolved dotted name of a Name/Attribute (empty string for anything else)."""
    name = dotted(node)
    if name is None:
        return ""
    head, _, rest = name.partition(".")
    full = imports.get(head, head)
    return f"{full}.{rest}" if rest else full


def function_params(
    func: ast.FunctionDef | ast.AsyncFunctionDef, imports: dict[str, str], *, typer: bool
) -> list[Param]:
    """Parameters of a typer command or a fire target: one per argument of ``func``."""
    args = [a for a in func.args.args + func.args.kwonlyargs if a.arg not in {"self", "cls"}]
    pos_defaults = func.args.defaults
    defaults: dict[str, ast.expr | None] = {}
    n_pos = len(func.args.args)
    for i, a in enumerate(func.args.args):
        j = i - (n_pos - len(pos_defaults))
        defaults[a.arg] = pos_defaults[j] if j >= 0 else None
    for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults, strict=True):
        defaults[a.arg] = d
    params: list[Param] = []
    for a in args:
        name = param_name(a.arg)
        if name is None:
            continue
        type_, marker = _annotation(a.annotation, imports)
        default_node = defaults.get(a.arg)
        is_argument = False
        if (
            typer
            and isinstance(default_node, ast.Call)
            and "typer" in (call_name(default_node, imports) or "")
        ):
            marker, default_node = default_node, arg(default_node, 0, "default")
        if marker is not None:
            is_argument = (call_name(marker, imports) or "").endswith("Argument")
            if default_node is None:
                default_node = arg(marker, 0, "default")
        if typer and marker is None and default_node is None:
            is_argument = True  # typer: an argument without default is a CLI argument
        required = default_node is None or (
            isinstance(default_node, ast.Constant) and default_node.value is Ellipsis
        )
        default, note = (None, "") if required else literal_default(default_node)
        flag = None if is_argument else "--" + (a.arg.replace("_", "-") if typer else a.arg)
        type_ = type_ or type_of(default)
        params.append(
            Param(name, flag, coerce_default(default, type_), type_, a.lineno, required, note)
        )
    return params


def typer_params(tree: ast.Module, imports: dict[str, str]) -> list[Param]:
    """Parameters of typer commands (``@app.command()`` functions or ``typer.run(fn)``)."""
    if not any(v == "typer" or v.startswith("typer.") for v in imports.values()):
        return []
    targets: set[str] = set()
    for node in nodes_of(tree, ast.Call):
        if isinstance(node, ast.Call) and call_name(node, imports) == "typer.run" and node.args:
            fn = dotted(node.args[0])
            if fn:
                targets.add(fn)
    params: list[Param] = []
    for node in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        decorated = any(
            isinstance(d, ast.Call) and (dotted(d.func) or "").endswith((".command", ".callback"))
            for d in node.decorator_list
        )
        if decorated or node.name in targets:
            params.extend(function_params(node, imports, typer=True))
    return params


def fire_params(tree: ast.Module, imports: dict[str, str]) -> list[Param]:
    """Parameters of the function (or class ``__init__``) passed to ``fire.Fire``."""
    defs = {
        n.name: n
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    params: list[Param] = []
    for node in nodes_of(tree, ast.Call):
        if not (
            isinstance(node, ast.Call) and call_name(node, imports) == "fire.Fire" and node.args
        ):
            continue
        target = defs.get(dotted(node.args[0]) or "")
        if isinstance(target, ast.ClassDef):
            target = next(
                (n for n in target.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None,
            )
        if isinstance(target, ast.FunctionDef | ast.AsyncFunctionDef):
            params.extend(function_params(target, imports, typer=False))
    return params


def cli_params(tree: ast.Module, imports: dict[str, str]) -> list[Param]:
    """Every command-line parameter of one file (argparse, click, typer, fire), unique by name."""
    seen: set[str] = set()
    out: list[Param] = []
    for param in [
        *argparse_params(tree, imports),
        *click_params(tree, imports),
        *typer_params(tree, imports),
        *fire_params(tree, imports),
    ]:
        if param.name not in seen:
            seen.add(param.name)
            out.append(param)
    return out
