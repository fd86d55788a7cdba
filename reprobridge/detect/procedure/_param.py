"""The parameter record the parameter readers share: its name, flag, literal default and
manifest type (:class:`Param`), and how a default's type is read and coerced."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from reprobridge.detect._pyast import (
    NotLiteral,
    Scalar,
    call_name,
    dotted,
    literal,
    short_source,
)
from reprobridge.detect.findings import Syntax

SEED_NAMES = frozenset(
    {"seed", "random_seed", "rng_seed", "manual_seed", "seed_value", "global_seed"}
)
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
    means the command cannot run without a value; ``choices`` the literal values an
    argparse ``choices=[...]`` allows (empty when any value goes).
    """

    name: str
    flag: str | None
    default: Scalar | None
    type: str | None
    line: int
    required: bool = False
    note: str = ""
    syntax: Syntax = "space"
    choices: tuple[Scalar, ...] = ()


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


def type_name(node: ast.expr | None, imports: dict[str, str]) -> str | None:
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


def literal_default(node: ast.expr | None) -> tuple[Scalar | None, str]:
    """(literal default or None, note when the default is an expression)."""
    if node is None:
        return None, ""
    value = literal(node)
    if isinstance(value, NotLiteral):
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            return None, f"default is a collection: {short_source(node)}"
        return None, f"default is computed: {short_source(node)}"
    return value, ""


def coerce_default(value: Scalar | None, type_: str | None) -> Scalar | None:
    # argparse applies ``type`` to string defaults: default="0.1", type=float gives 0.1.
    if isinstance(value, str) and type_ in {"int", "float"}:
        try:
            return int(value) if type_ == "int" else float(value)
        except ValueError:
            return value
    return value
