"""Parameters, seeds and unbounded loops of the Python entry points.

Parameters (``param`` findings, key ``"<file>::<name>"``) come from, statically:

* argparse ``add_argument`` calls (flag, ``dest``, ``type``, ``default``, ``required``,
  ``choices``, ``store_true``/``store_false``) and ``set_defaults``;
* click ``@click.option``/``@click.argument`` decorators; typer commands (``typer.Option``,
  ``Annotated[...]`` and plain defaults); ``fire.Fire(fn)`` (the keyword defaults of ``fn``
  or of a class's ``__init__``);
* hydra ``@hydra.main(config_path, config_name)``: the YAML config it names, flattened
  (``optimizer.lr``), with the groups its ``defaults`` list selects; ``flag`` is then the
  hydra override key (``optimizer.lr``, used as ``optimizer.lr=value``);
* ``ml_collections.ConfigDict`` attribute assignments (flag ``--config.<path>``) and yacs
  ``_C.SOLVER.BASE_LR = 0.01`` (flag ``SOLVER.BASE_LR``, used as an ``opts`` pair).

A default that is not a literal is reported as ``None`` with the expression in the note.
``seed`` findings (key: the file) come from a parameter named like a seed, else from a
seeding call with a literal (``torch.manual_seed(0)``). ``unbounded`` findings report a
``while True``/``itertools.count()`` loop that has no exit at all (``"no bound found"``)
or whose only exits depend on a step/epoch budget such as ``max_steps`` — naming the flag
that bounds it. Loops that end on other conditions (data exhausted, convergence) and
generators (``yield``) are not reported.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from reprobridge.detect._pyast import (
    NOT_LITERAL,
    NotLiteral,
    Scalar,
    call_name,
    dotted,
    import_map,
    kwarg,
    literal,
    nodes_of,
    seed_calls,
    short_source,
    str_arg,
)
from reprobridge.detect._select import procedure_files
from reprobridge.detect._text import key_line, normalize_path, param_name
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ParamValue, SeedValue, Syntax, UnboundedValue
from reprobridge.detect.index import RepoIndex

SEED_NAMES = frozenset(
    {"seed", "random_seed", "rng_seed", "manual_seed", "seed_value", "global_seed"}
)
_BOUND_RE = re.compile(
    r"^(?:max_?steps?|max_?iters?|max_?iterations|num_?steps|n_?steps|total_?steps|train_?steps|"
    r"num_train_steps|steps|epochs?|num_?epochs|n_?epochs|max_?epochs|iterations|num_?iters?|"
    r"n_?iters?|total_?iters?|max_?updates|num_?updates|budget|max_?episodes|num_?episodes|"
    r"episodes|total_?timesteps|timesteps|max_?frames|max_?time|time_?limit)$",
    re.I,
)
_YAML11_FLOAT = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$")
_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool"}
_CLICK_TYPES = {
    "INT": "int",
    "FLOAT": "float",
    "STRING": "str",
    "BOOL": "bool",
    "Choice": "str",
    "Path": "str",
}


@dataclass(frozen=True)
class Param:
    """One command-line or config parameter found statically.

    ``flag`` is how the command line sets it (``--lr``, a hydra/yacs key, or None for a
    positional); ``syntax`` how a value follows it: ``"space"`` (``--lr 0.1``, yacs
    ``SOLVER.BASE_LR 0.1``) or ``"equals"`` (hydra ``optimizer.lr=0.1``, a CfgNode merged
    from ``--trainer.max_iters=20``); ``default`` is a literal scalar or None; ``required``
    means the command cannot run without a value.
    """

    name: str
    flag: str | None
    default: Scalar | None
    type: str | None
    line: int
    required: bool = False
    note: str = ""
    syntax: Syntax = "space"


# -- helpers -------------------------------------------------------------------------------


def type_of(value: object) -> str | None:
    """The manifest type name of a scalar (``int``, ``float``, ``str``, ``bool``) or None."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return None


def _type_name(node: ast.expr | None, imports: dict[str, str]) -> str | None:
    if node is None:
        return None
    name = dotted(node)
    if name is None:
        if isinstance(node, ast.Call):
            inner = call_name(node, imports) or ""
            return _CLICK_TYPES.get(inner.rsplit(".", 1)[-1])
        return None
    last = name.rsplit(".", 1)[-1]
    if last in _TYPES:
        return _TYPES[last]
    if last in _CLICK_TYPES:
        return _CLICK_TYPES[last]
    return "bool" if "bool" in last.lower() else None


def _default(node: ast.expr | None) -> tuple[Scalar | None, str]:
    """(literal default or None, note when the default is an expression)."""
    if node is None:
        return None, ""
    value = literal(node)
    if isinstance(value, NotLiteral):
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            return None, f"default is a collection: {short_source(node)}"
        return None, f"default is computed: {short_source(node)}"
    return value, ""


def _coerce(value: Scalar | None, type_: str | None) -> Scalar | None:
    # argparse applies ``type`` to string defaults: default="0.1", type=float gives 0.1.
    if isinstance(value, str) and type_ in {"int", "float"}:
        try:
            return int(value) if type_ == "int" else float(value)
        except ValueError:
            return value
    return value


# -- argparse ------------------------------------------------------------------------------


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
        type_ = _type_name(kwarg(node, "type"), imports)
        notes: list[str] = []
        default_node = kwarg(node, "default")
        if default_node is None and action in {"store_true", "store_false"}:
            default: Scalar | None = action == "store_false"
            type_ = "bool"
        else:
            default, note = _default(default_node)
            if note:
                notes.append(note)
        if action in {"store_true", "store_false"}:
            type_ = "bool"
        if type_ is None and default is not None:
            type_ = type_of(default)
        default = _coerce(default, type_)
        required = literal(kwarg(node, "required")) is True or (
            positional and nargs not in {"?", "*"} and default_node is None
        )
        choices = kwarg(node, "choices")
        if isinstance(choices, ast.List | ast.Tuple | ast.Set):
            values = [literal(e) for e in choices.elts]
            notes.append("choices: " + ", ".join(str(v) for v in values if v is not NOT_LITERAL))
        if nargs not in {None, "?", NOT_LITERAL, 1}:
            notes.append(f"takes several values (nargs={nargs})")
        params.append(Param(name, flag, default, type_, node.lineno, required, "; ".join(notes)))
    if overrides:
        params = [_override(p, overrides) for p in params]
    return params


def _override(param: Param, overrides: dict[str, ast.expr]) -> Param:
    if param.name not in overrides:
        return param
    default, note = _default(overrides[param.name])
    return replace(param, default=_coerce(default, param.type), note=note or param.note)


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
    default, note = _default(kwarg(dec, "default"))
    if is_flag and kwarg(dec, "default") is None:
        default = False
    type_ = "bool" if is_flag else _type_name(kwarg(dec, "type"), imports) or type_of(default)
    required = literal(kwarg(dec, "required")) is True or (
        kind == "argument" and kwarg(dec, "default") is None
    )
    return Param(name, flag, _coerce(default, type_), type_, dec.lineno, required, note)


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
    return _type_name(node, imports), None


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
            marker, default_node = (
                default_node,
                (default_node.args[0] if default_node.args else kwarg(default_node, "default")),
            )
        if marker is not None:
            is_argument = (call_name(marker, imports) or "").endswith("Argument")
            if default_node is None:
                default_node = marker.args[0] if marker.args else kwarg(marker, "default")
        if typer and marker is None and default_node is None:
            is_argument = True  # typer: an argument without default is a CLI argument
        required = default_node is None or (
            isinstance(default_node, ast.Constant) and default_node.value is Ellipsis
        )
        default, note = (None, "") if required else _default(default_node)
        flag = None if is_argument else "--" + (a.arg.replace("_", "-") if typer else a.arg)
        type_ = type_ or type_of(default)
        params.append(Param(name, flag, _coerce(default, type_), type_, a.lineno, required, note))
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


# -- config objects: ml_collections, yacs -------------------------------------------------


def _attr_path(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return list(reversed(parts))
    return None


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
    default, note = _default(value)
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


# -- hydra ---------------------------------------------------------------------------------


def flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, scalar) pairs of nested mappings; lists and None-valued maps are skipped."""
    out: list[tuple[str, Any]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str | int) or isinstance(key, bool):
                continue
            full = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                out.extend(flatten(value, full))
            elif isinstance(value, str) and _YAML11_FLOAT.match(value):
                # YAML 1.1 (PyYAML) reads ``1e-4`` as a string; OmegaConf and people read a number.
                out.append((full, float(value)))
            elif value is None or isinstance(value, str | int | float | bool):
                out.append((full, value))
    return out


def _load_yaml(index: RepoIndex, path: str, ctx: DetectContext) -> Any:
    import yaml  # loaded only when a repository has YAML to read (~20 ms of a small `rb init`)

    text = index.try_read_text(path, limit=1024 * 1024)
    if text is None:
        ctx.warn("skipped: not readable as text (binary, too large or unsafe)", path)
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        ctx.warn(f"skipped: not valid YAML{where}", path)
        return None


def _yaml_line(text: str | None, key: str) -> int | None:
    return key_line(text.splitlines(), key) if text is not None else None


def hydra_params(
    tree: ast.Module, imports: dict[str, str], path: str, ctx: DetectContext
) -> list[tuple[Param, Evidence]]:
    """Parameters of the config a ``@hydra.main`` decorator names, with their YAML evidence."""
    out: list[tuple[Param, Evidence]] = []
    for node in nodes_of(tree, ast.FunctionDef):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if not (isinstance(dec, ast.Call) and call_name(dec, imports) == "hydra.main"):
                continue
            config_path = str_arg(dec, 0, "config_path")
            config_name = str_arg(dec, 1, "config_name")
            if config_name is None:
                continue
            base = normalize_path(f"{PurePosixPath(path).parent}/{config_path or ''}")
            name = config_name if config_name.endswith((".yaml", ".yml")) else f"{config_name}.yaml"
            file = normalize_path(f"{base}/{name}")
            if file not in ctx.index:
                ctx.warn(f"@hydra.main names {file}, which is not in the repository", path)
                continue
            out.extend(_hydra_file(ctx, file, base, "", dec.lineno))
    return out


def _hydra_file(
    ctx: DetectContext, file: str, base: str, prefix: str, line: int
) -> list[tuple[Param, Evidence]]:
    data = _load_yaml(ctx.index, file, ctx)
    if not isinstance(data, dict):
        return []
    text = ctx.index.try_read_text(file)
    out: list[tuple[Param, Evidence]] = []
    defaults = data.get("defaults")
    if isinstance(defaults, list):
        for item in defaults:
            if not isinstance(item, dict) or len(item) != 1:
                continue
            ((group, option),) = item.items()
            if (
                not isinstance(group, str)
                or not isinstance(option, str)
                or group.startswith(("override ", "/"))
            ):
                continue
            group_key = f"{prefix}.{group}" if prefix else group
            name = param_name(group_key.replace(".", "_").replace("/", "_"))
            ev = Evidence(file, _yaml_line(text, group))
            if name:
                out.append(
                    (
                        Param(
                            name,
                            group_key,
                            option,
                            "str",
                            line,
                            False,
                            "hydra config group",
                            "equals",
                        ),
                        ev,
                    )
                )
            sub = normalize_path(f"{base}/{group}/{option}.yaml")
            if sub in ctx.index:
                sub_text = ctx.index.try_read_text(sub) or ""
                global_pkg = "@package _global_" in sub_text[:500]
                out.extend(_hydra_file(ctx, sub, base, "" if global_pkg else group_key, line))
    for key, value in flatten({k: v for k, v in data.items() if k != "defaults"}):
        full = f"{prefix}.{key}" if prefix else key
        name = param_name(full.replace(".", "_"))
        if name is None:
            continue
        note = ""
        default: Scalar | None = value
        if isinstance(value, str) and "${" in value:
            default, note = None, f"interpolated: {value}"
        elif value == "???":
            default, note = None, "mandatory (???): must be given on the command line"
        out.append(
            (
                Param(name, full, default, type_of(default), line, value == "???", note, "equals"),
                Evidence(file, _yaml_line(text, key)),
            )
        )
    return out


# -- unbounded loops -----------------------------------------------------------------------


def _is_infinite(node: ast.AST, imports: dict[str, str]) -> bool:
    if isinstance(node, ast.While):
        value = literal(node.test)
        return value is True or (
            isinstance(value, int) and value != 0 and not isinstance(value, bool)
        )
    if isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
        name = call_name(node.iter, imports) or ""
        return name in {"itertools.count", "count"}
    return False


def _exits(
    body: list[ast.stmt], conds: list[ast.expr], in_inner: bool, imports: dict[str, str]
) -> list[list[ast.expr] | None]:
    """Condition chains of every exit of a loop body; None for an exit inside ``except``."""
    found: list[list[ast.expr] | None] = []
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(stmt, ast.Break | ast.Continue):
            if isinstance(stmt, ast.Break) and not in_inner:
                found.append(list(conds))
            continue
        if isinstance(stmt, ast.Return | ast.Raise):
            found.append(list(conds))
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            name = call_name(stmt.value, imports) or ""
            if name in {"sys.exit", "exit", "quit", "os._exit"}:
                found.append(list(conds))
            continue
        if isinstance(stmt, ast.If):
            found += _exits(stmt.body, [*conds, stmt.test], in_inner, imports)
            found += _exits(stmt.orelse, [*conds, stmt.test], in_inner, imports)
        elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            found += _exits(stmt.body, conds, True, imports)
            found += _exits(stmt.orelse, conds, in_inner, imports)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            found += _exits(stmt.body, conds, in_inner, imports)
        elif isinstance(stmt, ast.Try):
            found += _exits(stmt.body + stmt.orelse + stmt.finalbody, conds, in_inner, imports)
            for handler in stmt.handlers:
                if _exits(handler.body, conds, in_inner, imports):
                    found.append(None)  # ends when the data (or something else) runs out
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                found += _exits(case.body, conds, in_inner, imports)
    return found


def _names(expr: ast.expr) -> list[tuple[str, str]]:
    """(leaf name, dotted path without its root) of every name a condition reads."""
    out: list[tuple[str, str]] = []
    local: list[tuple[str, str]] = []  # bare names last: `epoch > cfg.epochs` is bounded by cfg
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            local.append((node.id, node.id))
        elif isinstance(node, ast.Attribute):
            chain = dotted(node)
            out.append((node.attr, chain.split(".", 1)[1] if chain else node.attr))
        elif isinstance(node, ast.Subscript):
            key = literal(node.slice)
            if isinstance(key, str):
                out.append((key, key))
    return out + local


@dataclass(frozen=True)
class Unbounded:
    """One loop that does not end on its own; ``bound`` names what would end it."""

    line: int
    bound: str | None
    path: str | None = None  # "trainer.max_steps" for cfg.trainer.max_steps


def unbounded_loops(tree: ast.AST, imports: dict[str, str]) -> list[Unbounded]:
    """Infinite loops with no exit, or whose only exits test a step/epoch budget."""
    out: list[Unbounded] = []
    for node in nodes_of(tree, ast.While, ast.For):
        if not isinstance(node, ast.While | ast.For) or not _is_infinite(node, imports):
            continue
        if any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Await) for n in ast.walk(node)):
            continue  # a generator (or a server loop): the consumer decides when it stops
        exits = _exits(node.body, [], False, imports)
        if not exits:
            out.append(Unbounded(node.lineno, None))
            continue
        if any(chain is None or not chain for chain in exits):
            continue  # an unconditional exit, or the data running out, ends it
        bounds: list[tuple[str, str]] = []
        for chain in exits:
            assert chain is not None
            names = [n for cond in chain for n in _names(cond) if _BOUND_RE.match(n[0])]
            if not names:
                bounds = []
                break  # some exit depends on something else (convergence, a signal...)
            bounds.append(names[0])
        if bounds:
            out.append(Unbounded(node.lineno, bounds[0][0], bounds[0][1]))
    return out


# -- config sections and loops in imported modules ----------------------------------------


def _module_file(ctx: DetectContext, importer: str, dotted_name: str) -> tuple[str, list[str]]:
    """(repository file, attribute path inside it) of a resolved dotted name, or ("", [])."""
    parts = dotted_name.split(".")
    base = str(PurePosixPath(importer).parent)
    for cut in range(len(parts) - 1, 0, -1):
        stem = "/".join(parts[:cut])
        for cand in (f"{stem}.py", f"{stem}/__init__.py", f"src/{stem}.py", f"{base}/{stem}.py"):
            norm = normalize_path(cand)
            if norm in ctx.index:
                return norm, parts[cut:]
    return "", []


def _find_def(tree: ast.Module, attrs: list[str]) -> ast.AST | None:
    """The class/function ``attrs`` names inside a module (``["Trainer", "get_config"]``)."""
    body: list[ast.stmt] = tree.body
    found: ast.ClassDef | ast.FunctionDef | None = None
    for attr in attrs:
        found = next(
            (n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == attr),
            None,
        )
        if found is None:
            return None
        body = found.body
    return found


def _section_params(
    ctx: DetectContext, path: str, tree: ast.Module, imports: dict[str, str]
) -> list[tuple[Param, Evidence]]:
    """Parameters of config sections whose defaults a function of another module makes
    (``C.trainer = Trainer.get_default_config()``), keyed under the section."""
    out: list[tuple[Param, Evidence]] = []
    argv = merges_from_argv(tree)
    for keys, callee, line in config_sections(tree, imports):
        file, attrs = _module_file(ctx, path, callee)
        other = ctx.index.parse_python(file) if file else None
        node = _find_def(other, attrs) if other is not None else None
        if other is None or node is None:
            continue
        for param in config_object_params(node, import_map(other), prefix=keys, argv=argv):
            out.append((replace(param, line=line), Evidence(file, param.line)))
    return out


def _imported_loop(
    ctx: DetectContext, path: str, by_name: dict[str, tuple[Param, Evidence]]
) -> tuple[str, Unbounded] | None:
    """(module, loop) of a budget-bounded infinite loop in a repository module ``path``
    imports, when one of ``path``'s own parameters sets that budget (a Trainer's
    ``while True`` ending on ``config.max_iters``, set by ``--trainer.max_iters``)."""
    from reprobridge.detect._select import resolve_import

    params = [p for p, _ in by_name.values()]
    paths = ctx.index.python_paths()
    for module, names in ctx.index.imported_modules(path):
        for file in sorted(resolve_import(paths, path, module, names)):
            other = ctx.index.parse_python(file)
            if other is None:
                continue
            for loop in unbounded_loops(other, import_map(other)):
                if loop.bound and _bounding_param(loop, params) is not None:
                    return file, loop
    return None


# -- the detector --------------------------------------------------------------------------


#: Bytes of a file that may declare parameters, seeds or loops (tested only on the files
#: :func:`~reprobridge.detect._select.procedure_files` selects).
_CANDIDATE_RE = re.compile(
    rb"argparse|add_argument|click|typer|fire|hydra|ml_collections|yacs|seed|while True|"
    rb"itertools\.count"
)
#: Imports of a config module, which declares parameters without being an entry point.
_CONFIG_IMPORTS = frozenset({"ml_collections", "yacs"})


def candidate_files(ctx: DetectContext) -> list[str]:
    """The Python files worth parsing for parameters, seeds or loops, most relevant first:
    the experiments' entry points and what they import, plus config modules."""
    configs = [p for p, s in ctx.index.py_scan().items() if s.imports & _CONFIG_IMPORTS]
    return procedure_files(ctx, _CANDIDATE_RE, "params", extra=configs)


class ParamsDetector(Detector):
    """Parameters, seeds and unbounded loops of Python files (see module docstring)."""

    name = "params"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        for path in sorted(candidate_files(ctx)):
            tree = ctx.index.parse_python(path)
            if tree is None:
                continue
            try:
                findings.extend(self._file(ctx, path, tree))
            except RecursionError:  # pathologically nested expressions (generated code)
                ctx.warn("skipped: expressions nested too deeply to analyse", path)
        return findings

    def _file(self, ctx: DetectContext, path: str, tree: ast.Module) -> list[Finding]:
        imports = import_map(tree)
        pairs: list[tuple[Param, Evidence]] = [
            (p, Evidence(path, p.line)) for p in cli_params(tree, imports)
        ]
        pairs += [(p, Evidence(path, p.line)) for p in config_object_params(tree, imports)]
        pairs += _section_params(ctx, path, tree, imports)
        pairs += hydra_params(tree, imports, path, ctx)
        findings: list[Finding] = []
        by_name: dict[str, tuple[Param, Evidence]] = {}
        for param, ev in pairs:
            if param.name in by_name:
                continue
            by_name[param.name] = (param, ev)
            evidence = (ev,) if ev.path == path else (ev, Evidence(path, param.line))
            note = "; ".join(n for n in (param.note, "required" if param.required else "") if n)
            findings.append(
                Finding(
                    kind="param",
                    key=f"{path}::{param.name}",
                    value=ParamValue(
                        path, param.name, param.flag, param.default, param.type, param.syntax
                    ),
                    evidence=evidence,
                    detector=self.name,
                    confidence="high",
                    note=note,
                )
            )
        seed = self._seed(path, tree, imports, by_name)
        if seed:
            findings.append(seed)
        loops = unbounded_loops(tree, imports)
        if loops:
            findings.append(self._unbounded(path, loops, by_name))
        else:
            found = _imported_loop(ctx, path, by_name)
            if found is not None:
                findings.append(self._unbounded(found[0], [found[1]], by_name, entry=path))
        return findings

    def _seed(
        self,
        path: str,
        tree: ast.Module,
        imports: dict[str, str],
        by_name: dict[str, tuple[Param, Evidence]],
    ) -> Finding | None:
        names = sorted(
            (n for n in by_name if n.lower() in SEED_NAMES or n.lower().endswith("_seed")),
            key=lambda n: (n.lower() != "seed", n.lower() not in SEED_NAMES, n),
        )
        if names:
            param, ev = by_name[names[0]]
            default = (
                param.default
                if isinstance(param.default, int) and not isinstance(param.default, bool)
                else None
            )
            return Finding(
                kind="seed",
                key=path,
                value=SeedValue(path, param.flag, default, param.syntax),
                evidence=(ev,),
                detector=self.name,
                confidence="high",
                note=f"parameter {param.name}"
                + ("" if default is not None else "; no literal default"),
            )
        calls = list(seed_calls(tree, imports))
        if not calls:
            return None
        literal_calls = [(c, v) for c, v in calls if v is not None]
        if literal_calls:
            values = sorted({v for _, v in literal_calls if v is not None})
            call, value = literal_calls[0]
            note = f"set by {call_name(call, imports)}({value}) in the code; no seed flag"
            if len(values) > 1:
                note += f"; other literal seeds: {', '.join(str(v) for v in values if v != value)}"
            return Finding(
                kind="seed",
                key=path,
                value=SeedValue(path, None, value),
                evidence=tuple(Evidence(path, c.lineno) for c, _ in literal_calls[:5]),
                detector=self.name,
                confidence="medium",
                note=note,
            )
        call = calls[0][0]
        return Finding(
            kind="seed",
            key=path,
            value=SeedValue(path, None, None),
            evidence=(Evidence(path, call.lineno),),
            detector=self.name,
            confidence="low",
            note=f"seeded from a computed value: {short_source(call)}",
        )

    def _unbounded(
        self,
        path: str,
        loops: list[Unbounded],
        by_name: dict[str, tuple[Param, Evidence]],
        *,
        entry: str | None = None,
    ) -> Finding:
        """The ``unbounded`` finding of ``entry`` (default ``path``) for loops in ``path``."""
        loop = next((lp for lp in loops if lp.bound), loops[0])
        param: Param | None = None
        if loop.bound is None:
            reason = f"infinite loop at line {loop.line} has no exit: no bound found"
        else:
            param = _bounding_param(loop, [p for p, _ in by_name.values()])
            reason = f"infinite loop at line {loop.line} ends only when {loop.bound} is reached"
            if param is not None and param.default is None:
                reason += f" ({param.flag or loop.bound} has no default: set it)"
            elif param is None:
                reason += " (no flag sets it)"
        if entry is not None and entry != path:
            reason = f"{path}: {reason}"
        value = UnboundedValue(entry or path, reason, None)
        if param is not None:
            value = UnboundedValue(
                entry or path, reason, param.flag, param.name, param.syntax, param.default
            )
        return Finding(
            kind="unbounded",
            key=entry or path,
            value=value,
            evidence=tuple(Evidence(path, lp.line) for lp in loops[:5]),
            detector=self.name,
            confidence="medium",
        )


def _bounding_param(loop: Unbounded, params: list[Param]) -> Param | None:
    """The parameter a loop's budget reads: same override path, else same name."""

    def key(flag: str | None) -> str:
        return (flag or "").lstrip("-").removeprefix("config.").replace("-", "_").lower()

    if loop.path:
        path = loop.path.lower()
        for param in params:
            if key(param.flag) == path:
                return param
    bound = (loop.bound or "").lower()
    for param in params:
        if param.name.lower() == bound or key(param.flag) == bound:
            return param
    if loop.path and "." not in loop.path:
        # A loop in an imported module reads its own config (``config.max_iters``); the
        # entry sets it under a section (``--trainer.max_iters``).
        for param in params:
            if key(param.flag).rsplit(".", 1)[-1] == bound:
                return param
    return None
