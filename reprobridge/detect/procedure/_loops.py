"""Loops without an end: ``while True`` / ``itertools.count()`` loops that have no exit, or
whose only exits depend on a step or epoch budget (see :mod:`~reprobridge.detect.procedure.params`)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from reprobridge.detect._pyast import (
    call_name,
    dotted,
    literal,
    nodes_of,
)

_BOUND_RE = re.compile(
    r"^(?:max_?steps?|max_?iters?|max_?iterations|num_?steps|n_?steps|total_?steps|train_?steps|"
    r"num_train_steps|steps|epochs?|num_?epochs|n_?epochs|max_?epochs|iterations|num_?iters?|"
    r"n_?iters?|total_?iters?|max_?updates|num_?updates|budget|max_?episodes|num_?episodes|"
    r"episodes|total_?timesteps|timesteps|max_?frames|max_?time|time_?limit)$",
    re.I,
)


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
