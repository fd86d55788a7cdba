"""Whether a print of an imported module is switched off by every call that reaches it.

A library's trainer prints its loss only when asked: ``if self.verbose: print("Loss:",
loss)``, with ``self.verbose = verbose`` set from ``Trainer(..., verbose=True)``'s
parameter. An experiment that builds it as ``Trainer(model, opt, verbose=False)`` prints
nothing, so a metric read from that print would never match its log
(EmilienDupont/augmented-neural-odes). Statically, never running anything:

* :func:`print_switch` finds the switch of the print at a line: the innermost ``if`` around
  it tests a bare parameter of the enclosing function (``if verbose:``), or ``self.<attr>``
  in a method when the class's ``__init__`` assigns ``self.<attr> = <parameter>``. The
  switch is the callable a caller names (the function, or the class) and that parameter,
  with its default.
* :func:`switched_off` says whether every call of that callable in the given trees turns
  it off: a literal false keyword (``verbose=False``, ``0``, ``None``), or no keyword while
  the default is false. No call at all, a positional or ``**kwargs`` argument, or a value
  that is not a literal, and the print may run: it is kept.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from reprobridge.detect._pyast import NotLiteral, callee, defaults_of, literal, nodes_of


@dataclass(frozen=True)
class Switch:
    """The print runs only when ``callable`` (a function or class name) is called with
    ``parameter`` true; ``default`` is the parameter's literal default (None: none or not
    literal, then a call that omits it may switch the print on)."""

    callable: str
    parameter: str
    default: object
    #: How many positional arguments a call passes before reaching it (None: keyword-only).
    position: int | None


def _position(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, method: bool) -> int | None:
    """The index of positional parameter ``name`` in a call (``self`` not counted)."""
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if method and positional:
        positional = positional[1:]
    return positional.index(name) if name in positional else None


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, object]:
    """Parameter name -> its literal default (``NotLiteral`` when it has none or it is no
    literal)."""
    args = fn.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    out: dict[str, object] = dict.fromkeys(names, NotLiteral())
    for arg, default in defaults_of(args):
        out[arg.arg] = literal(default)
    return out


def _enclosing(tree: ast.Module, line: int) -> list[ast.AST]:
    """The chain of nodes from the module down to the innermost statement holding
    ``line``."""
    chain: list[ast.AST] = [tree]
    node: ast.AST = tree
    while True:
        inner = next(
            (
                child
                for child in ast.iter_child_nodes(node)
                if isinstance(child, ast.stmt)
                and child.lineno <= line <= (child.end_lineno or child.lineno)
            ),
            None,
        )
        if inner is None:
            return chain
        chain.append(inner)
        node = inner


def _self_attribute_parameter(cls: ast.ClassDef, attr: str) -> str | None:
    """The ``__init__`` parameter that ``self.<attr> = <parameter>`` stores, if that is the
    attribute's only assignment in ``__init__``."""
    init = next(
        (s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None
    )
    if init is None:
        return None
    params = _parameters(init)
    stored = [
        node.value.id
        for node in nodes_of(init, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
        and target.attr == attr
        and isinstance(node.value, ast.Name)
    ]
    return stored[0] if len(stored) == 1 and stored[0] in params else None


def print_switch(tree: ast.Module, line: int) -> Switch | None:
    """The switch of the print at ``line`` (see the module docstring), or None."""
    chain = _enclosing(tree, line)
    for guard in reversed(chain):
        if (
            isinstance(guard, ast.If)
            and guard.body[0].lineno <= line <= (guard.body[-1].end_lineno or line)
            and (found := _switch(chain, guard.test)) is not None
        ):
            return found
    return None


def _switch(chain: list[ast.AST], test: ast.expr) -> Switch | None:
    """The switch that ``test`` (an ``if`` around the print, in ``chain``) reads."""
    functions = [n for n in chain if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        return None
    fn = functions[-1]
    if isinstance(test, ast.Name):
        params = _parameters(fn)
        if test.id in params and fn.name != "__init__" and len(functions) == 1:
            method = any(isinstance(n, ast.ClassDef) for n in chain)
            if method:
                return None  # obj.method(...) calls are not told apart from others by name
            return Switch(fn.name, test.id, params[test.id], _position(fn, test.id, False))
        return None
    if not (
        isinstance(test, ast.Attribute)
        and isinstance(test.value, ast.Name)
        and test.value.id == "self"
    ):
        return None
    classes = [n for n in chain if isinstance(n, ast.ClassDef)]
    if not classes:
        return None
    cls = classes[-1]
    param = _self_attribute_parameter(cls, test.attr)
    if param is None:
        return None
    init = next(s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__")
    return Switch(cls.name, param, _parameters(init)[param], _position(init, param, True))


def _off(value: object) -> bool:
    return not isinstance(value, NotLiteral) and not value


def switched_off(switch: Switch, trees: Iterable[ast.Module]) -> bool:
    """Whether every call of ``switch.callable`` in ``trees`` turns the print off, and there
    is at least one."""
    calls = [
        call
        for tree in trees
        for call in nodes_of(tree, ast.Call)
        if callee(call) == switch.callable
    ]
    if not calls:
        return False
    for call in calls:
        if any(kw.arg is None for kw in call.keywords) or any(
            isinstance(a, ast.Starred) for a in call.args
        ):
            return False
        if switch.position is not None and len(call.args) > switch.position:
            return False  # passed by position: not read here
        given = next((kw.value for kw in call.keywords if kw.arg == switch.parameter), None)
        if given is None:
            if not _off(switch.default):
                return False
        elif not _off(literal(given)):
            return False
    return True
