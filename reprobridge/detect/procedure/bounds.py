"""Literals in an experiment's own code that bound its run, for a smoke tier to lower.

A notebook or a script without a command line is bounded by its code, not by a flag:
``train_config.max_iters = 2000`` in a config cell, ``EPOCHS = 500`` at the top of a script,
``for k in range(100):`` around an optimizer step. This detector reads the entry file of
every experiment found before it (a ``.py`` or ``.ipynb`` the command runs) and reports each
such literal as a ``bound`` finding; the merge turns them into the smoke tier's ``edits``,
applied to a copy of the file (:mod:`reprobridge.artifacts.derive`).

What counts (never executing anything):

* in the code that runs when the file runs (module level, ``if``/``with``/``for`` blocks,
  class bodies, and the bodies of the module's functions that code calls by name, such as
  ``main()``: the places a notebook cell or a script keeps its settings; not the body of a
  function nothing calls), a name the run-bounds vocabulary
  knows (:mod:`reprobridge.detect.runbounds`: ``max_iters``, ``num_epochs``, ...) given a
  positive whole number: assigned to a name, an attribute or a string subscript
  (``EPOCHS = 500``, ``C.trainer.max_iters = 2000``, ``cfg["epochs"] = 10``), annotated
  (``epochs: int = 10``), a dict literal's entry (``{"epochs": 100}``) or a call's keyword
  (``Trainer(max_epochs=100)``, ``model.fit(x, y, epochs=10)``; not a solver's iteration
  cap such as scikit-learn's ``max_iter=``, :data:`SOLVER_KEYWORDS`);
* in that same code, a positive ``int`` constant passed by position to a function of the
  repository whose parameter in that position has such a name: ``optimize(f, 200, bounds)``
  for ``def optimize(func, num_iter, bounds)``. The function is one the file (a notebook's
  cells together) defines at its top level, or one a repository module it imports does
  (``from utils import train``, ``import utils`` then ``utils.train(...)``); a name defined
  twice, or rebound, is left alone, since which function the call reaches is then unknown
  (:func:`definitions`, :func:`imported_definitions`). By keyword the rule above already
  holds (``optimize(f, num_iter=200)``);
* anywhere in the file, a ``for`` loop over ``range(N)`` (also ``range(1, N)``,
  ``trange(N)``, ``tqdm(range(N))``, ``enumerate(range(N))``) with a literal ``N`` whose body
  takes a training step: calls ``backward``/``step``/``zero_grad``/``apply_gradients``/...,
  an optimizer's ``update``, or assigns a loss or a gradient (``p.data -= lr * p.grad``).
  A loop without one (plotting, sampling) is not a run bound and is not reported.

A literal is a positive ``int``, a whole ``float`` (``1e4``), ``int(1e4)`` or an
arithmetic of those (``10**4``) on one line; its exact source text and column are reported,
so the edit can be checked before it is applied. The finding's value is a
:class:`~reprobridge.detect.findings.BoundValue`; its evidence is the line of the file (for
a notebook, the line of its JSON that holds the code).
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, replace

from reprobridge.detect._notebook import json_line_of, parsed_code_cells
from reprobridge.detect._pyast import defaults_of, dotted, nodes_of, walk_shallow
from reprobridge.detect._select import resolve_import
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import BoundValue, ExperimentValue
from reprobridge.detect.procedure._literal import LiteralBound, Site
from reprobridge.detect.procedure.configbounds import CONFIG_SUFFIXES, config_bounds
from reprobridge.detect.runbounds import smoke_value
from reprobridge.manifest.schema import edit_place

#: Calls whose last name component takes a training step (data: add a spelling here).
TRAINING_CALLS = frozenset(
    {
        "backward", "step", "zero_grad", "apply_gradients", "minimize", "train_step",
        "training_step", "train_on_batch", "train_batch", "optimize", "fit_batch",
    }
)  # fmt: skip
#: Call keywords that cap a solver's iterations (scikit-learn's ``LinearSVC(max_iter=...)``,
#: scipy's ``options={"maxiter": ...}``), not the run's length: lowered, the solver stops
#: unconverged and the smoke run shows another model.
SOLVER_KEYWORDS = frozenset({"max_iter", "n_iter", "maxiter", "max_iterations"})
#: Words in an assigned name that make the assignment a training update.
_UPDATE_WORDS = ("loss", "grad")
#: Iterator calls a training loop wraps ``range`` in, or replaces it with.
_RANGE_CALLS = frozenset({"range", "trange", "xrange"})
_WRAPPERS = frozenset({"tqdm", "enumerate", "notebook", "auto", "progress_bar", "track"})
_MAX_VALUE = 10**15


def _number(node: ast.AST) -> int | None:
    """The whole number a literal expression denotes (see the module docstring), else None."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        value = node.value
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer() and abs(value) < _MAX_VALUE:
            return int(value)
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int":
        return _number(node.args[0]) if len(node.args) == 1 and not node.keywords else None
    if isinstance(node, ast.BinOp):
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            result = left * right
        elif isinstance(node.op, ast.Pow) and 0 <= right <= 64 and abs(left) <= 10**6:
            result = left**right
        elif isinstance(node.op, ast.FloorDiv) and right:
            return left // right
        else:
            return None
        return result if abs(result) < _MAX_VALUE else None
    return None


def _target_name(node: ast.AST) -> str | None:
    """``a.b.c`` of an assignment target; ``cfg["epochs"]`` -> ``cfg.epochs``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        base = dotted(node.value)
        return f"{base}.{key}" if base and isinstance(key, str) else None
    return dotted(node)


class _Source:
    """The lines of one piece of source, for exact columns and texts of nodes."""

    def __init__(self, text: str) -> None:
        # Lines as ast counts them (\r\n, \r or \n), as repro/derive.py does.
        self.lines = re.split(r"\r\n|\r|\n", text)

    def span(self, node: ast.AST) -> tuple[int, str, str] | None:
        """(column in characters, source text, the stripped line) of a one-line node."""
        lineno, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if lineno is None or end != lineno or col is None or end_col is None:
            return None
        if not 0 < lineno <= len(self.lines):
            return None
        raw = self.lines[lineno - 1].encode("utf-8")
        try:
            before = raw[:col].decode("utf-8")
            text = raw[col:end_col].decode("utf-8")
        except UnicodeDecodeError:
            return None
        return len(before), text, self.lines[lineno - 1].strip()[:200]


#: :class:`_Source` for the detectors that place nodes of an entry file as this one does
#: (the ``drift`` detector's references are edited by the same ``repro/derive.py``).
SourceLines = _Source


def _bound(
    src: _Source, node: ast.expr, name: str, site: Site, start: int = 0
) -> LiteralBound | None:
    value = _number(node)
    if value is None or value <= 0:
        return None  # 0 and -1 mean "no limit" to many trainers: nothing to lower
    span = src.span(node)
    if span is None:
        return None
    column, was, code = span
    return LiteralBound(node.lineno, column, was, value, name, site, code, start)


def _named(
    src: _Source, name: str | None, node: ast.expr, site: Site = "assign"
) -> Iterator[LiteralBound]:
    if name and smoke_value(name) is not None:
        found = _bound(src, node, name, site)
        if found is not None:
            yield found


def _run_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of ``body`` outside function bodies (nested blocks and class bodies
    included)."""
    stack: list[ast.stmt] = list(body)
    statements: list[ast.stmt] = []
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        statements.append(stmt)
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                stack.append(child)
            elif isinstance(child, ast.ExceptHandler):
                stack.extend(child.body)
    return statements


def _name_calls(statements: list[ast.stmt]) -> list[ast.Call]:
    """The calls by plain name (``main()``, ``train(cfg)``) in ``statements``' own code,
    each once: a statement's walk covers its nested statements, which are in
    ``statements`` too, so each node is walked once, not once per enclosing statement."""
    seen: set[int] = set()
    return [
        node
        for stmt in statements
        for node in walk_shallow([stmt], seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]


def _settings_code(tree: ast.Module, run: list[ast.stmt], calls: list[ast.Call]) -> list[ast.stmt]:
    """The statements that run when the file runs and hold its settings: those outside
    function bodies (``run``, :func:`_run_statements`), plus the bodies of the module's own
    functions that this code calls by name (``calls``, :func:`_name_calls`: ``main()``
    under a ``__main__`` guard, a notebook cell's ``train()``)."""
    statements = list(run)
    called = {node.func.id for node in calls if isinstance(node.func, ast.Name)}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name in called:
            statements += _run_statements(stmt.body)
    return statements


def _default_settings(tree: ast.Module, calls: list[ast.Call]) -> Iterator[tuple[str, ast.expr]]:
    """(parameter, default) of the module's own functions that the code outside function
    bodies calls by name (``calls``, :func:`_name_calls`) without passing that parameter:
    ``def main(num_epochs=30)`` run as ``main()`` under a ``__main__`` guard takes its
    length from the default."""
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        mine = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == fn.name]
        if not mine or any(isinstance(a, ast.Starred) for c in mine for a in c.args):
            continue
        positional = [*fn.args.posonlyargs, *fn.args.args]
        for arg, default in defaults_of(fn.args):
            index = positional.index(arg) if arg in positional else None
            passed = any(
                (index is not None and len(c.args) > index)
                or any(kw.arg in (arg.arg, None) for kw in c.keywords)
                for c in mine
            )
            if not passed:
                yield arg.arg, default


#: The parameters of the functions a call may reach, by the name the call uses (``train``,
#: ``utils.train``).
Signatures = Mapping[str, ast.arguments]


def _rebound(tree: ast.Module) -> set[str]:
    """The names ``tree`` binds otherwise than by a top-level ``def``: imports anywhere
    (``import a.b`` binds ``a``), and top-level assignments and classes (:func:`_assigned`)."""
    names = _assigned(tree)
    for node in nodes_of(tree, ast.Import, ast.ImportFrom):
        for alias in node.names:
            names.add(alias.asname or alias.name.split(".")[0])
    return names


def _assigned(tree: ast.Module) -> set[str]:
    """The names ``tree``'s top-level assignments and classes bind (``train = jit(train)``)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                names |= _bound_names(target)
    return names


def _bound_names(target: ast.expr) -> set[str]:
    """The names an assignment to ``target`` binds (``a``, ``a, *b``; not ``a.x``, ``a[0]``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_bound_names(e) for e in target.elts))
    return set()


def definitions(trees: Iterable[ast.Module]) -> dict[str, ast.arguments]:
    """The signatures of the functions ``trees`` (a file, or a notebook's cells in order)
    define at their top level, by name. A name defined twice, or also bound otherwise (an
    import, an assignment: :func:`_rebound`), is left out: which function a call of it
    reaches cannot be told without running the code."""
    found: dict[str, ast.arguments] = {}
    dropped: set[str] = set()
    for tree in trees:
        dropped |= _rebound(tree)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                if stmt.name in found:
                    dropped.add(stmt.name)
                found[stmt.name] = stmt.args
    return {name: args for name, args in found.items() if name not in dropped}


def _argument_bounds(
    src: _Source, call: ast.Call, signatures: Signatures
) -> Iterator[LiteralBound]:
    """The ``int`` constants ``call`` passes by position to a parameter of a known function
    (``signatures``) whose name bounds a run (see the module docstring). Arguments after a
    ``*args`` are not matched to parameters: their positions are unknown."""
    name = dotted(call.func)
    args = signatures.get(name) if name else None
    if args is None:
        return
    positional = [*args.posonlyargs, *args.args]
    for arg, param in zip(call.args, positional, strict=False):
        if isinstance(arg, ast.Starred):
            return
        if (
            isinstance(arg, ast.Constant)
            and type(arg.value) is int
            and param.arg not in SOLVER_KEYWORDS
            and smoke_value(param.arg) is not None
        ):
            found = _bound(src, arg, param.arg, "argument")
            if found is not None:
                yield found


def _setting_bounds(
    src: _Source, tree: ast.Module, signatures: Signatures
) -> Iterator[LiteralBound]:
    """Named bounds in the code that runs (see the module docstring), the literal arguments
    its calls pass to known functions' run-bounding parameters (``signatures``:
    :func:`_argument_bounds`), and the defaults of its functions' parameters that no call
    passes (:func:`_default_settings`)."""
    run = _run_statements(tree.body)
    calls = _name_calls(run)
    for name, default in _default_settings(tree, calls):
        yield from _named(src, name, default)
    statements = _settings_code(tree, run, calls)
    for stmt in statements:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                    for t, v in zip(target.elts, stmt.value.elts, strict=False):
                        yield from _named(src, _target_name(t), v)
                else:
                    yield from _named(src, _target_name(target), stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            yield from _named(src, _target_name(stmt.target), stmt.value)
        # Dict entries and keywords in this statement's own expressions (nested statements
        # are visited on their own; nested functions and lambdas are not settings).
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                continue
            for node in walk_shallow([child]):  # type: ignore[list-item]
                if isinstance(node, ast.Dict):
                    for key, value in zip(node.keys, node.values, strict=False):
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            yield from _named(src, key.value, value)
                elif isinstance(node, ast.Call):
                    for kw in node.keywords:
                        if kw.arg not in SOLVER_KEYWORDS:
                            yield from _named(src, kw.arg, kw.value, "keyword")
                    yield from _argument_bounds(src, node, signatures)


def _trains(body: list[ast.stmt]) -> bool:
    """Whether a loop body takes a training step (see the module docstring)."""
    for node in walk_shallow(body):
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in TRAINING_CALLS:
                return True
            if last == "update" and "opt" in name.rsplit(".", 1)[0].lower():
                return True
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [(_target_name(t) or "").lower() for t in targets]
            if isinstance(node, ast.AugAssign):
                names += [(dotted(n) or "").lower() for n in ast.walk(node.value)]
            if any(word in n for n in names for word in _UPDATE_WORDS):
                return True
    return False


def _range_stop(node: ast.expr) -> tuple[ast.expr, int] | None:
    """(the stop expression, the literal start) of ``range(N)``-like iterators."""
    if not isinstance(node, ast.Call):
        return None
    last = (dotted(node.func) or "").rsplit(".", 1)[-1]
    if last in _RANGE_CALLS and not node.keywords:
        if len(node.args) == 1:
            return node.args[0], 0
        if len(node.args) == 2:
            start = _number(node.args[0])
            return (node.args[1], start) if start is not None and start >= 0 else None
        return None
    if last in _WRAPPERS and node.args:
        return _range_stop(node.args[0])
    return None


def _loops(tree: ast.Module) -> list[ast.For | ast.AsyncFor]:
    """Every ``for`` loop of ``tree`` (the tree's cached node buckets, not a walk per
    caller; what the callers compute does not depend on the loops' order)."""
    return [*nodes_of(tree, ast.For), *nodes_of(tree, ast.AsyncFor)]


def _loop_bounds(src: _Source, tree: ast.Module) -> Iterator[LiteralBound]:
    for loop in _loops(tree):
        found = _range_stop(loop.iter)
        if found is None or not _trains(loop.body):
            continue
        stop, start = found
        variable = dotted(loop.target) or ""
        if isinstance(loop.target, ast.Tuple) and loop.target.elts:
            variable = dotted(loop.target.elts[-1]) or ""  # for i, k in enumerate(range(N))
        bound = _bound(src, stop, variable, "loop", start)
        if bound is not None and bound.value > start:
            yield bound


def literal_bounds(
    code: str, tree: ast.Module | None = None, signatures: Signatures | None = None
) -> list[LiteralBound]:
    """The run-bounding literals of the Python ``code`` (a file, or a cell's code), in
    source order; none when it does not parse. ``tree`` is ``code`` already parsed (the
    index's cached AST of a file); ``signatures`` the functions its calls may reach (by
    default those ``code`` defines: :func:`definitions`)."""
    if tree is None:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError):
            return []
    src = _Source(code)
    try:
        if signatures is None:
            signatures = definitions([tree])
        found = {(b.line, b.column): b for b in _setting_bounds(src, tree, signatures)}
        for b in _loop_bounds(src, tree):
            found.setdefault((b.line, b.column), b)
        gates = print_gates(tree)
    except RecursionError:
        return []
    return [
        replace(b, every=gates.get(b.name, 0) or gates.get(f"@{b.line}:{b.column}", 0))
        for b in (found[k] for k in sorted(found))
    ]


def print_gates(tree: ast.Module) -> dict[str, int]:
    """The iterations each training loop over ``range(stop)`` needs before it prints
    anything: K when it prints only under ``(i + 1) % K == 0``, K + 1 under ``i % K == 0
    and i != 0`` (the first print is at ``i == K``), by the stop's name (``range(num_epochs)``,
    ``range(args.steps)`` -> ``args.steps``), or by ``@line:column`` of a literal stop
    (``range(60)``). K is a literal or a name the code assigns one whole number, once
    (``print_interval = 20``). The ``params`` detector reads it too, for a loop bounded by a
    command-line flag."""
    gates: dict[str, int] = {}
    constants = _int_constants(tree)
    for loop in _loops(tree):
        found = _range_stop(loop.iter)
        variable = loop.target.id if isinstance(loop.target, ast.Name) else None
        if found is None or variable is None:
            continue
        every = _print_every(loop.body, variable, constants)
        if not every:
            continue
        stop = found[0]
        name = dotted(stop) if isinstance(stop, ast.Name | ast.Attribute) else None
        if name:
            gates[name] = max(every, gates.get(name, 0))
        elif isinstance(stop, ast.Constant):
            gates[f"@{stop.lineno}:{stop.col_offset}"] = every
    return gates


def _int_constants(tree: ast.Module) -> dict[str, int]:
    """The names ``tree`` assigns exactly once, anywhere, and to a whole number
    (``print_interval = 20`` in a function, ``LOG_EVERY = 10`` at the top): a name assigned
    twice, or to anything else, may hold another value when a loop reads it."""
    seen: dict[str, int | None] = {}
    for node in nodes_of(tree, ast.Assign, ast.AnnAssign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = None if isinstance(node, ast.AugAssign) else node.value
        for target in targets:
            if isinstance(target, ast.Name):
                number = _number(value) if value is not None else None
                seen[target.id] = number if target.id not in seen else None
    return {k: v for k, v in seen.items() if v is not None}


def _print_every(body: list[ast.stmt], variable: str, constants: Mapping[str, int]) -> int:
    """The iterations a ``print`` in ``body`` waits for: K when it runs only under ``if
    (variable + 1) % K == 0``, K + 1 under ``if variable % K == 0 and variable != 0`` (or
    ``> 0``); 0 when every print can run on the first iterations."""
    every = 0
    for node in walk_shallow(body):
        if not isinstance(node, ast.If) or not any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "print"
            for c in walk_shallow(node.body)
        ):
            continue
        every = max(every, _gate_of(node.test, variable, constants))
    return every


def _gate_of(test: ast.expr, variable: str, constants: Mapping[str, int]) -> int:
    """The iterations ``test`` (a print's condition) waits for; see :func:`_print_every`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        gates = [_gate_of(v, variable, constants) for v in test.values]
        skips_first = any(_is_past_zero(v, variable) for v in test.values)
        modulo = [_modulo_of(v, variable, constants) for v in test.values]
        plain = max((k for k, shifted in filter(None, modulo) if not shifted), default=0)
        return max([*gates, plain + 1 if plain and skips_first else 0])
    found = _modulo_of(test, variable, constants)
    if found is None:
        return 0
    k, shifted = found
    return k if shifted else 0  # `i % K == 0` alone prints at i == 0


def _modulo_of(
    test: ast.expr, variable: str, constants: Mapping[str, int]
) -> tuple[int, bool] | None:
    """``(K, shifted)`` when ``test`` is ``variable % K == 0`` (shifted False) or
    ``(variable + 1) % K == 0`` (shifted True), K > 1 a literal or a known constant."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and _number(test.comparators[0]) == 0
        and isinstance(test.left, ast.BinOp)
        and isinstance(test.left.op, ast.Mod)
    ):
        return None
    counted, divisor = test.left.left, test.left.right
    k = constants.get(divisor.id) if isinstance(divisor, ast.Name) else _number(divisor)
    if k is None or k <= 1:
        return None
    if isinstance(counted, ast.Name) and counted.id == variable:
        return k, False
    if (
        isinstance(counted, ast.BinOp)
        and isinstance(counted.op, ast.Add)
        and isinstance(counted.left, ast.Name)
        and counted.left.id == variable
        and _number(counted.right) == 1
    ):
        return k, True
    return None


def _is_past_zero(test: ast.expr, variable: str) -> bool:
    """Whether ``test`` is ``variable != 0``, ``variable > 0`` or ``variable >= 1``."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Name)
        and test.left.id == variable
    ):
        return False
    op, bound = test.ops[0], _number(test.comparators[0])
    return (isinstance(op, ast.NotEq | ast.Gt) and bound == 0) or (
        isinstance(op, ast.GtE) and bound == 1
    )


def config_files(ctx: DetectContext) -> list[str]:
    """The repository's JSON and YAML files that the commands of the experiments found so
    far name as a word of their own (``python main.py config.json``, ``--config c.yaml``),
    sorted, each once: the files whose bounds a smoke tier can lower in a copy."""
    found: set[str] = set()
    for f in ctx.of(ExperimentValue):
        try:
            words = shlex.split(f.value.command)
        except ValueError:
            continue
        for word in words[1:]:
            if word.endswith(CONFIG_SUFFIXES) and not set(word) & set("{}$*?"):
                path = posixpath.normpath(posixpath.join(f.value.workdir, word))
                if path in ctx.index:
                    found.add(path)
    return sorted(found)


def imported_definitions(
    ctx: DetectContext, path: str, trees: Iterable[ast.Module]
) -> dict[str, ast.arguments]:
    """The signatures of the functions that the repository's own modules define at their
    top level (:func:`definitions`) and ``path`` imports (``trees``: its code, a notebook's
    cells), by the name its calls use: ``from utils import train`` -> ``train``, ``import
    utils as u`` -> ``u.train``. A module is found as Python would from the repository's
    root, ``src/`` or ``path``'s folder (:func:`~reprobridge.detect._select.resolve_import`);
    a name that reaches two different functions is left out."""
    paths = ctx.index.python_paths()
    found: dict[str, ast.arguments] = {}
    dropped: set[str] = set()

    def module_defs(module: str) -> Iterator[dict[str, ast.arguments]]:
        for file in sorted(resolve_import(paths, path, module, ())):
            tree = ctx.index.parse_python(file)
            if tree is not None:
                yield definitions([tree])

    def add(name: str, args: ast.arguments) -> None:
        if found.setdefault(name, args) is not args:
            dropped.add(name)

    for tree in trees:
        for node in nodes_of(tree, ast.Import, ast.ImportFrom):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for defs in module_defs(module):
                    for alias in node.names:
                        if alias.name in defs:
                            add(alias.asname or alias.name, defs[alias.name])
            else:
                for alias in node.names:
                    for defs in module_defs(alias.name):
                        for name, args in defs.items():
                            add(f"{alias.asname or alias.name}.{name}", args)
    return {name: args for name, args in found.items() if name not in dropped}


def call_signatures(ctx: DetectContext, path: str, trees: list[ast.Module]) -> Signatures:
    """The functions ``path``'s calls may reach: its own (:func:`definitions`) and those it
    imports from the repository (:func:`imported_definitions`); a name in both, or that
    ``path`` also assigns (``train = jit(train)``), is left out."""
    own = definitions(trees)
    imported = imported_definitions(ctx, path, trees)
    both = own.keys() & imported.keys()
    assigned: set[str] = set().union(*(_assigned(tree) for tree in trees))
    imported = {k: v for k, v in imported.items() if k.split(".")[0] not in assigned}
    return {k: v for k, v in (*own.items(), *imported.items()) if k not in both}


class BoundsDetector(Detector):
    """Literal run bounds in the entry files of the experiments found so far, and in the
    JSON or YAML config files their commands name (:mod:`.configbounds`)."""

    name = "bounds"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        entries = ctx.experiment_entries(".py", ".ipynb")
        findings: list[Finding] = []
        for entry in entries:
            text = ctx.index.try_read_text(entry)
            if text is None:
                continue
            if entry.endswith(".ipynb"):
                findings += self._notebook(ctx, entry, text)
            else:
                # The index's cached tree: the other procedure detectors parse entries too.
                tree = ctx.index.parse_python(entry)
                if tree is None:
                    continue
                signatures = call_signatures(ctx, entry, [tree])
                findings += [
                    self._finding(entry, None, b, Evidence(entry, b.line))
                    for b in literal_bounds(text, tree, signatures)
                ]
        findings += [
            self._finding(path, None, b, Evidence(path, b.line))
            for path in config_files(ctx)
            for b in config_bounds(path, ctx.index.try_read_text(path) or "")
        ]
        return findings

    def _notebook(self, ctx: DetectContext, entry: str, text: str) -> list[Finding]:
        raw_lines = text.splitlines()
        parsed = parsed_code_cells(text)
        # A function one cell defines is called from later cells: the cells are one program.
        signatures = call_signatures(ctx, entry, [tree for _, _, tree in parsed])
        out: list[Finding] = []
        for number, code, tree in parsed:
            for b in literal_bounds(code, tree, signatures):
                out.append(
                    self._finding(entry, number, b, Evidence(entry, _json_line(raw_lines, b)))
                )
        return out

    def _finding(
        self, entry: str, cell: int | None, b: LiteralBound, evidence: Evidence
    ) -> Finding[BoundValue]:
        where = edit_place(cell, b.line)
        what = {"loop": "training loop over range()", "argument": f"argument `{b.name}`"}.get(
            b.site, f"`{b.name}`"
        )
        # The finding's value is the literal's record, placed in its entry (and cell).
        value = BoundValue(entry=entry, cell=cell, **asdict(b))
        return Finding(
            kind="bound",
            key=f"{entry}::{'' if cell is None else f'{cell}:'}{b.line}:{b.column}",
            value=value,
            evidence=(evidence,),
            detector=self.name,
            confidence="medium",
            note=f"{where}: {what} = {b.was}",
        )


def _json_line(raw_lines: list[str], b: LiteralBound) -> int | None:
    return json_line_of(raw_lines, b.code) if b.code else None
