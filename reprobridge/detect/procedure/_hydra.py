"""Parameters of a hydra entry point: the YAML config ``@hydra.main`` names, flattened, with
the groups its ``defaults`` list selects (see :mod:`~reprobridge.detect.procedure.params`)."""

from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath
from typing import Any

from reprobridge.detect._pyast import (
    Scalar,
    call_name,
    nodes_of,
    str_arg,
)
from reprobridge.detect._text import key_line, normalize_path, param_name
from reprobridge.detect.base import DetectContext, Evidence
from reprobridge.detect.procedure._param import Param, type_of

_YAML11_FLOAT = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


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


def _load_yaml(ctx: DetectContext, path: str) -> Any:
    import yaml  # loaded only when a repository has YAML to read (~20 ms of a small `rb init`)

    text = ctx.text_or_warn(path, limit=1024 * 1024)
    if text is None:
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
    data = _load_yaml(ctx, file)
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
