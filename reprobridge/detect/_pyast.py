"""AST helpers shared by the procedure detectors.

Everything here is static: names are resolved through the file's own import statements,
values are read only from literals, and nothing is imported or evaluated. Contracts:

* :func:`import_map` + :func:`call_name` give the fully qualified dotted name of a call
  (``np.random.seed`` -> ``numpy.random.seed``, ``CIFAR10`` after ``from torchvision.datasets
  import CIFAR10`` -> ``torchvision.datasets.CIFAR10``); unknown roots stay as written.
* :func:`literal` returns a scalar for a literal expression or :data:`NOT_LITERAL`.
* :func:`static_path` returns the part of a path expression known before the run: the full
  path of a literal, or the static directory of an f-string / ``os.path.join`` / ``Path /``
  whose tail is computed at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from typing import Any, Final

Scalar = str | int | float | bool


class NotLiteral:
    """Marker for "this expression is not a literal" (None is a legitimate literal)."""

    def __repr__(self) -> str:
        return "NOT_LITERAL"


NOT_LITERAL: Final = NotLiteral()


_CACHE_ATTR = "_reprobridge_nodes"


def nodes_of(tree: ast.AST, *types: type[ast.AST]) -> list[Any]:
    """Every node of ``tree`` of one of ``types``, in ``ast.walk`` order.

    The tree is walked once and the nodes bucketed by type (cached on the tree object):
    the procedure detectors ask a file for its calls, assignments and functions a dozen
    times, and walking a large module a dozen times dominated their cost.
    """
    cache: dict[type[ast.AST], list[ast.AST]] | None = getattr(tree, _CACHE_ATTR, None)
    if cache is None:
        cache = {}
        # ast.walk's breadth-first order, with the children listed by child_nodes: the
        # generators of ast.walk/iter_child_nodes were most of the cost of bucketing.
        queue: list[ast.AST] = [tree]
        at = 0
        while at < len(queue):
            node = queue[at]
            at += 1
            cache.setdefault(type(node), []).append(node)
            queue.extend(child_nodes(node))
        setattr(tree, _CACHE_ATTR, cache)
    if len(types) == 1:
        return list(cache.get(types[0], []))
    found = [n for t in types for n in cache.get(t, [])]
    found.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return found


def import_map(tree: ast.AST) -> dict[str, str]:
    """Local name -> fully qualified name, for every import in ``tree`` (any depth)."""
    return import_map_of((tree,))


def import_map_of(trees: Iterable[ast.AST]) -> dict[str, str]:
    """:func:`import_map` of ``trees`` read one after the other, as if their sources were
    concatenated in that order (a notebook's code cells): imports apply in source order,
    a later one rebinding a name an earlier one bound."""
    names: dict[str, str] = {}
    for tree in trees:
        for node in nodes_of(tree, ast.Import, ast.ImportFrom):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        names.setdefault(root, root)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def resolve(name: str, imports: dict[str, str]) -> str:
    """``name`` with its first component replaced by what the file imported it as."""
    head, _, rest = name.partition(".")
    full = imports.get(head, head)
    return f"{full}.{rest}" if rest else full


def call_name(call: ast.Call, imports: dict[str, str]) -> str | None:
    """The resolved dotted name of the called function, or None (``f()()``, ``x[0]()``)."""
    name = dotted(call.func)
    return resolve(name, imports) if name else None


def callee(call: ast.Call) -> str | None:
    """The last component of the called name (``f()``, ``mod.f()``, ``obj.f()`` -> ``f``),
    or None (``f()()``, ``x[0]()``): what a call is named, wherever the callee came from."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def literal(node: ast.AST | None) -> Scalar | NotLiteral | None:
    """The value of a scalar literal (``1``, ``-0.5``, ``"x"``, ``True``, ``None``)."""
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, str | int | float | bool)
    ):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
        and not isinstance(node.operand.value, bool)
    ):
        value = node.operand.value
        return -value if isinstance(node.op, ast.USub) else value
    return NOT_LITERAL


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    """The expression passed as keyword ``name`` to ``call``, or None."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def defaults_of(args: ast.arguments) -> list[tuple[ast.arg, ast.expr]]:
    """(parameter, default expression) of each parameter of a signature that has a default:
    positional ones (``posonlyargs`` then ``args``) first, then keyword-only ones."""
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    pairs = list(zip(with_default, args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    return pairs


def arg(call: ast.Call, pos: int, *names: str) -> ast.expr | None:
    """The expression ``call`` passes positionally at ``pos``, else as the first of the
    keywords ``names`` it passes; None when it passes neither."""
    if len(call.args) > pos:
        return call.args[pos]
    return next((kw.value for name in names for kw in call.keywords if kw.arg == name), None)


def str_arg(call: ast.Call, pos: int, *names: str) -> str | None:
    """A string literal passed positionally at ``pos`` or as one of the keywords ``names``
    (:func:`arg`)."""
    value = literal(arg(call, pos, *names))
    return value if isinstance(value, str) else None


def short_source(node: ast.AST, max_len: int = 60) -> str:
    """``ast.unparse`` of ``node``, shortened for notes."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover - malformed synthetic trees
        return "<expression>"
    return text if len(text) <= max_len else text[: max_len - 3] + "..."


def _dir_of(prefix: str) -> str | None:
    # A path whose tail is computed at run time: keep only the directory known statically.
    if "/" not in prefix:
        return None
    head = prefix.rsplit("/", 1)[0]
    return head or None


def _format_prefix(text: str, marker: str) -> tuple[str, bool]:
    cut = text.find(marker)
    return (text, False) if cut < 0 else (text[:cut], True)


def static_path(node: ast.AST, imports: dict[str, str]) -> tuple[str, bool] | None:
    """``(path, partial)`` known statically from a path expression, or None.

    ``partial`` is True when only the directory is known (the file name is computed).
    """
    value = literal(node)
    if isinstance(value, str):
        return (value, False) if value else None
    if isinstance(node, ast.JoinedStr):
        prefix = ""
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                prefix += part.value
            else:
                head = _dir_of(prefix)
                return (head, True) if head else None
        return (prefix, False) if prefix else None
    if isinstance(node, ast.Call):
        name = call_name(node, imports)
        if name in {"os.path.join", "posixpath.join"}:
            return _join(node.args, imports)
        if name in {"pathlib.Path", "pathlib.PurePath", "Path"} and len(node.args) >= 1:
            return _join(node.args, imports)
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
        ):
            prefix, cut = _format_prefix(node.func.value.value, "{")
            if not cut:
                return (prefix, False)
            head = _dir_of(prefix)
            return (head, True) if head else None
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _join([node.left, node.right], imports)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        left = literal(node.left)
        if isinstance(left, str):
            prefix, cut = (
                _format_prefix(left, "%") if isinstance(node.op, ast.Mod) else (left, True)
            )
            if not cut:
                return (prefix, False)
            head = _dir_of(prefix)
            return (head, True) if head else None
    return None


def _join(parts: list[ast.expr], imports: dict[str, str]) -> tuple[str, bool] | None:
    known: list[str] = []
    for i, part in enumerate(parts):
        sub = static_path(part, imports)
        if sub is None:
            return ("/".join(known), True) if known else None
        text, partial = sub
        known.append(text.rstrip("/") if i < len(parts) - 1 else text)
        if partial:
            return "/".join(known), True
    return ("/".join(known), False) if known else None


def is_main_guard(node: ast.stmt) -> bool:
    """True for ``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    has_name = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    has_main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return has_name and has_main


def main_guard(tree: ast.Module) -> ast.If | None:
    """The module-level ``if __name__ == "__main__":`` block, or None."""
    for stmt in tree.body:
        if is_main_guard(stmt):
            assert isinstance(stmt, ast.If)
            return stmt
    return None


#: Calls that set a random seed from their first argument (resolved names).
SEED_CALLS: Final = frozenset(
    {
        "torch.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.random.manual_seed",
        "numpy.random.seed",
        "numpy.random.default_rng",
        "numpy.random.RandomState",
        "random.seed",
        "tensorflow.random.set_seed",
        "tensorflow.set_random_seed",
        "tensorflow.compat.v1.set_random_seed",
        "jax.random.PRNGKey",
        "jax.random.key",
        "pytorch_lightning.seed_everything",
        "lightning.seed_everything",
        "lightning.pytorch.seed_everything",
        "transformers.set_seed",
        "accelerate.utils.set_seed",
        "keras.utils.set_random_seed",
        "tensorflow.keras.utils.set_random_seed",
        "mindspore.set_seed",
        "paddle.seed",
    }
)
#: Last name components of project-local seed helpers (``utils.set_seed(0)``).
SEED_HELPERS: Final = frozenset(
    {"set_seed", "seed_everything", "set_random_seed", "fix_seed", "seed_all"}
)


def seed_calls(tree: ast.AST, imports: dict[str, str]) -> Iterator[tuple[ast.Call, int | None]]:
    """Every seeding call in ``tree`` with its literal integer seed (None when computed)."""
    for node in nodes_of(tree, ast.Call):
        name = call_name(node, imports)
        if name is None:
            continue
        if name not in SEED_CALLS and name.rsplit(".", 1)[-1] not in SEED_HELPERS:
            continue
        value = literal(arg(node, 0, "seed"))
        yield node, value if isinstance(value, int) and not isinstance(value, bool) else None


#: Nodes whose bodies :func:`walk_shallow` does not enter.
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def walk_shallow(nodes: list[ast.stmt], seen: set[int] | None = None) -> Iterator[ast.AST]:
    """Walk ``nodes`` without descending into nested functions, classes or lambdas
    (pre-order, children in field order, as :func:`ast.iter_child_nodes` gives them).

    With ``seen`` (ids of nodes), a node already in it is skipped with everything under it,
    and each node walked is added: walks of several statements that nest one another
    then visit each node once. (What lies under a node that is not a start node does not
    depend on where the walk started, so skipping it loses nothing.)
    """
    stack: list[ast.AST] = list(reversed(nodes))
    while stack:
        node = stack.pop()
        if seen is not None:
            if id(node) in seen:
                continue
            seen.add(id(node))
        yield node
        stack.extend(c for c in reversed(child_nodes(node)) if not isinstance(c, _SCOPES))
    return None


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))``, without its two generator layers per node
    (they were most of the cost of the detectors' own walks)."""
    children: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            children.append(value)
        elif isinstance(value, list):
            children.extend(item for item in value if isinstance(item, ast.AST))
    return children
