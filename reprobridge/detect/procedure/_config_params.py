"""Parameters of config objects built in code: ``ml_collections.ConfigDict`` attribute
assignments (flag ``--config.<path>``) and yacs ``CfgNode`` keys (flag ``SOLVER.BASE_LR``),
and the config sections a file defines (see :mod:`~reprobridge.detect.procedure.params`)."""

from __future__ import annotations

import ast

from reprobridge.detect._pyast import (
    NOT_LITERAL,
    call_name,
    dotted,
    literal,
    nodes_of,
)
from reprobridge.detect._text import param_name
from reprobridge.detect.findings import Syntax
from reprobridge.detect.procedure._param import Param, literal_default, type_of


def _attr_path(node: ast.expr) -> list[str] | None:
    """``["a", "b", "c"]`` for ``a.b.c``, else None."""
    name = dotted(node)
    return name.split(".") if name is not None else None


def config_object_params(
    tree: ast.AST,
    imports: dict[str, str],
    *,
    prefix: tuple[str, ...] = (),
    argv: bool | None = None,
) -> list[Param]:
    """Parameters assigned on ``ConfigDict``/yacs ``CfgNode`` objects (``cfg.a.b = 1``).

    ``prefix`` is prepended to every key (a section whose defaults another function makes);
    ``argv`` says whether the object is merged from ``--a.b=value`` arguments
    (``cfg.merge_from_args(sys.argv[1:])``): None decides from ``tree``.
    """
    if argv is None:
        argv = merges_from_argv(tree)
    roots: dict[str, str] = {}  # variable -> "ml_collections" | "yacs" | "argv"
    for node in nodes_of(tree, ast.Assign):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            kind = _config_kind(call_name(node.value, imports) or "")
            if kind == "yacs" and argv:
                kind = "argv"
            for target in node.targets:
                if kind and isinstance(target, ast.Name):
                    roots[target.id] = kind
    params: list[Param] = []
    seen: set[str] = set()
    for node in nodes_of(tree, ast.Assign):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        path = _attr_path(node.targets[0])
        if not path or len(path) < 2 or path[0] not in roots:
            continue
        kind = roots[path[0]]
        keys = [*prefix, *path[1:]]
        if isinstance(node.value, ast.Call):
            if _config_kind(call_name(node.value, imports) or ""):
                if node.value.args and isinstance(node.value.args[0], ast.Dict):
                    params.extend(_dict_params(node.value.args[0], keys, kind, node.lineno, seen))
                continue
            if isinstance(node.value.func, ast.Attribute | ast.Name) and not node.value.args:
                continue  # a section made by another function: see config_sections
        params.extend(_leaf(keys, node.value, kind, node.lineno, seen))
    for node in nodes_of(tree, ast.Assign):
        # ml_collections.ConfigDict({"lr": 0.1, ...}) as the root itself
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args:
            kind = _config_kind(call_name(node.value, imports) or "")
            if kind and isinstance(node.value.args[0], ast.Dict):
                params.extend(
                    _dict_params(node.value.args[0], list(prefix), kind, node.lineno, seen)
                )
    return params


def merges_from_argv(tree: ast.AST) -> bool:
    """Whether ``tree`` merges a config object from ``--a.b=value`` arguments."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "merge_from_args"
        for n in nodes_of(tree, ast.Call)
    )


def config_sections(
    tree: ast.AST, imports: dict[str, str]
) -> list[tuple[tuple[str, ...], str, int]]:
    """(keys, resolved callee, line) of config sections another function makes:
    ``C.trainer = Trainer.get_default_config()`` -> ``(("trainer",),
    "pkg.trainer.Trainer.get_default_config", line)``."""
    roots = {
        t.id
        for n in nodes_of(tree, ast.Assign)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and _config_kind(call_name(n.value, imports) or "")
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    out: list[tuple[tuple[str, ...], str, int]] = []
    for node in nodes_of(tree, ast.Assign):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        path = _attr_path(node.targets[0])
        value = node.value
        if (
            path
            and len(path) >= 2
            and path[0] in roots
            and isinstance(value, ast.Call)
            and not value.args
            and not _config_kind(call_name(value, imports) or "")
        ):
            callee = call_name(value, imports)
            if callee:
                out.append((tuple(path[1:]), callee, node.lineno))
    return out


def _config_kind(name: str) -> str:
    last = name.rsplit(".", 1)[-1]
    if last in {"ConfigDict", "FrozenConfigDict"}:
        return "ml_collections"
    if last == "CfgNode" or name in {"yacs.config.CfgNode", "CN"}:
        return "yacs"
    return ""


def _flag(keys: list[str], kind: str) -> str:
    joined = ".".join(keys)
    if kind == "ml_collections":
        return f"--config.{joined}"
    return f"--{joined}" if kind == "argv" else joined


def _leaf(keys: list[str], value: ast.expr, kind: str, line: int, seen: set[str]) -> list[Param]:
    name = param_name("_".join(keys))
    if name is None or name in seen:
        return []
    seen.add(name)
    default, note = literal_default(value)
    syntax: Syntax = "equals" if kind in {"argv", "ml_collections"} else "space"
    return [Param(name, _flag(keys, kind), default, type_of(default), line, False, note, syntax)]


def _dict_params(
    node: ast.Dict, prefix: list[str], kind: str, line: int, seen: set[str]
) -> list[Param]:
    out: list[Param] = []
    for key, value in zip(node.keys, node.values, strict=True):
        k = literal(key) if key is not None else NOT_LITERAL
        if not isinstance(k, str):
            continue
        if isinstance(value, ast.Dict):
            out.extend(_dict_params(value, [*prefix, k], kind, line, seen))
        else:
            out.extend(_leaf([*prefix, k], value, kind, line, seen))
    return out
