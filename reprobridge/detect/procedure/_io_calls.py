"""Calls of a Python file that download, read or write data at run time (static).

The rules are data (``reprobridge/data/io_calls.toml``, typed here as :class:`IoRules`):
which library calls download (``fetch_covtype``, ``load_data``, a dataset class with
``download=True``, ``urlretrieve``...), which read a file named by a literal argument
(``np.load``, ``torch.load``, ``open`` in a reading mode...; a dataset class with its
download off reads the folder of its layout under its literal root, ``MNIST("./mnist")``
-> ``./mnist/MNIST``) and which write one
(``torch.save(x, "a.pt")``, ``np.save``, ``open(p, "w")``...). :func:`io_calls` lists a
parsed file's calls with the innermost function each is in, so a caller can tell a download
the run makes (in the entry, at module level, or in a function something calls) from a
library helper nobody calls; :func:`called_names` gives the names a file calls.

Only literals are read: ``np.load(args.path)`` is no evidence of anything. A rule's
switch keyword (``download=``) is the exception: a bare name there is followed to its
assignments in the file (:func:`_switched_on`), because scripts keep the switch in a
setting (``DOWNLOAD = False`` ... ``if not os.listdir(root): DOWNLOAD = True`` ...
``MNIST(root, download=DOWNLOAD)``).
"""

from __future__ import annotations

import ast
import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from reprobridge.data import IO_CALLS_FILE, load
from reprobridge.detect._pyast import (
    NotLiteral,
    arg,
    call_name,
    callee,
    child_nodes,
    defaults_of,
    import_map,
    kwarg,
    literal,
    nodes_of,
)

#: The "function" of code in a module's ``if __name__ == "__main__":`` block: it runs when
#: the file is the script, never when it is imported.
MAIN_BLOCK = "<__main__>"


@dataclass(frozen=True)
class DownloadRule:
    """Calls matching ``calls`` download; ``when``: only with that keyword true or possibly
    true (:func:`_switched_on`); ``local``: first-argument values that name local files
    instead."""

    calls: tuple[str, ...]
    what: str
    when: str | None = None
    local: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LocalDatasetRule:
    """Calls matching ``calls`` (dataset classes) that do not download read the folder
    ``layout`` under their root; ``{class}`` in it is the class's own name."""

    calls: tuple[str, ...]
    layout: str


@dataclass(frozen=True)
class IoRules:
    """The parsed ``io_calls.toml``."""

    downloads: tuple[DownloadRule, ...]
    local_datasets: tuple[LocalDatasetRule, ...]
    reads: tuple[str, ...]
    read_keywords: tuple[str, ...]
    modes: frozenset[str]
    writes: tuple[tuple[str, int], ...]


@lru_cache(maxsize=1)
def rules() -> IoRules:
    """The shipped rules, read once per process."""
    data = load(IO_CALLS_FILE)
    return IoRules(
        downloads=tuple(
            DownloadRule(
                calls=tuple(d["calls"]),
                what=str(d["what"]),
                when=d.get("when"),
                local=frozenset(d.get("local", ())),
            )
            for d in data["download"]
        ),
        local_datasets=tuple(
            LocalDatasetRule(calls=tuple(d["calls"]), layout=str(d["layout"]))
            for d in data["local_dataset"]
        ),
        reads=tuple(data["reads"]["calls"]),
        read_keywords=tuple(data["reads"]["keywords"]),
        modes=frozenset(data["reads"]["modes"]),
        writes=tuple((str(k), int(v)) for k, v in data["writes"].items()),
    )


Kind = Literal["download", "read", "write"]


@dataclass(frozen=True)
class IoCall:
    """One call: what it does, the literal path it reads or writes (``""`` for a
    download), its line, the resolved call name, why it counts, and the innermost function
    it is in (None at module level)."""

    kind: Kind
    path: str
    line: int
    call: str
    what: str
    function: str | None


def _matches(name: str, patterns: tuple[str, ...], imported: bool) -> bool:
    """Whether ``name`` is one of ``patterns``: a bare word (``open``) is a builtin, so
    it matches only a name that was not imported; the others match as fnmatch globs."""
    builtins, globs = _compiled(patterns)
    if name in builtins and not imported:
        return True
    return globs is not None and globs.match(name) is not None


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """``patterns`` as (bare words, one regex of the globs): fnmatchcase per pattern per
    call was most of the fetch detector's time (~45k calls on a 50-file repository)."""
    bare = frozenset(p for p in patterns if "." not in p and "*" not in p)
    globs = [fnmatch.translate(p) for p in patterns if p not in bare]
    return bare, re.compile("|".join(globs)) if globs else None


def _path_of(node: ast.expr | None, imports: dict[str, str]) -> str | None:
    """A literal path, or the literal path of ``open(path, ...)`` used as a file object."""
    if node is None:
        return None
    if isinstance(node, ast.Call) and call_name(node, imports) in {"open", "io.open"}:
        node = arg(node, 0, "file")
    value = literal(node)
    return value if isinstance(value, str) and value else None


def _mode(node: ast.Call) -> str:
    mode = literal(arg(node, 1, "mode"))
    return mode if isinstance(mode, str) else "r"


#: The assignments of a bare name in a file: (line, the assigned expression), in order.
Assigned = Callable[[str], list[tuple[int, ast.expr]]]


def _assignments(tree: ast.Module) -> Assigned:
    """Every value ``tree`` gives each bare name, in any scope: ``X = e``, ``X: T = e``,
    ``X = Y = e``, and a function parameter's default (``def load(download=True)``). Scopes
    are not told apart: a switch set True anywhere is a switch that may be on."""
    table: dict[str, list[tuple[int, ast.expr]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    table.setdefault(target.id, []).append((node.lineno, node.value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                table.setdefault(node.target.id, []).append((node.lineno, node.value))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for arg, default in defaults_of(node.args):
                table.setdefault(arg.arg, []).append((default.lineno, default))
    return lambda name: table.get(name, [])


def _switched_on(value: ast.expr | None, assigned: Assigned, depth: int = 0) -> str | None:
    """Why a switch keyword's ``value`` may be true when the call runs, or None when it is
    not (absent, a false constant) or cannot be told (an attribute such as ``args.download``,
    a name the file never assigns: another module's or the caller's setting).

    ``""`` for a literal ``True``; for a bare name, the first of its assignments that may be
    true, as ``"NAME = <code> at line N"``: a ``True``, or an expression computed at run time
    (``not os.path.exists(root)``, a call), which is followed no further: whether it holds
    depends on the machine. A name assigned only false constants is off."""
    if value is None or depth > 3:
        return None
    if isinstance(value, ast.Name):
        for line, expr in assigned(value.id):
            if _switched_on(expr, assigned, depth + 1) is not None:
                return f"{value.id} = {ast.unparse(expr)[:60]} at line {line}"
        return None
    if isinstance(value, ast.Attribute | ast.Subscript):
        return None
    found = literal(value)
    if found is True:
        return ""
    return None if not isinstance(found, NotLiteral) else ast.unparse(value)[:60]


@dataclass(frozen=True)
class _Matched:
    """The rules a call name matches, in the order :func:`_classify` tries them."""

    downloads: tuple[DownloadRule, ...]
    layout: str | None  # the folder a dataset class reads under its root, when not downloading
    write: int | None  # the path argument's position of the first write rule matched
    read: bool


@lru_cache(maxsize=4096)
def _matched(name: str, imported: bool) -> _Matched:
    """Which rules ``name`` matches (a pure function of the name and whether its root was
    imported): a file calls the same few names over and over, and matching every rule's
    patterns on every call was most of the fetch detector's time."""
    r = rules()
    write = next((pos for pattern, pos in r.writes if _matches(name, (pattern,), imported)), None)
    layout = next((d.layout for d in r.local_datasets if _matches(name, d.calls, imported)), None)
    return _Matched(
        downloads=tuple(rule for rule in r.downloads if _matches(name, rule.calls, imported)),
        layout=layout.replace("{class}", name.rsplit(".", 1)[-1]) if layout else None,
        write=write,
        read=_matches(name, r.reads, imported),
    )


def _classify(
    node: ast.Call, name: str, imports: dict[str, str], assigned: Assigned
) -> tuple[Kind, str, str] | None:
    """(kind, path, what) of one call, or None when it does no I/O the rules know."""
    r = rules()
    matched = _matched(name, name.split(".", 1)[0] in imports)
    for rule in matched.downloads:
        what = rule.what
        if rule.when is not None:
            why = _switched_on(kwarg(node, rule.when), assigned)
            if why is None:
                continue
            if why:
                switch = ast.unparse(kwarg(node, rule.when) or node)[:60]
                what = f"{what}: {rule.when}={switch} may be true ({why})"
        first = literal(arg(node, 0, "path"))
        if rule.local and isinstance(first, str) and first in rule.local:
            return None
        return "download", "", what
    if matched.layout is not None:
        # No download: the class reads its local copy, in its own layout under the root.
        root = _path_of(arg(node, 0, "root"), imports)
        if not root:
            return None
        return "read", posixpath.join(root, matched.layout), name
    if matched.write is not None:
        path = _path_of(arg(node, matched.write), imports)
        return ("write", path, name) if path else None
    if matched.read:
        path = _path_of(arg(node, 0, *r.read_keywords), imports)
        if not path:
            return None
        if name in r.modes and any(c in _mode(node) for c in "wax"):
            return "write", path, name
        return "read", path, name
    return None


def io_calls(tree: ast.Module) -> list[IoCall]:
    """Every call of ``tree`` that downloads, reads or writes (see the module docstring),
    in source order."""
    imports = import_map(tree)
    # The calls come from the tree's cached buckets (import_map walked it already); the
    # walk that finds each call's function runs only when some call does I/O: on most
    # files none does, and walking every tree again was most of the fetch detector's time.
    hits: dict[int, tuple[str, tuple[Kind, str, str]]] = {}
    table: list[Assigned] = []

    def assigned(name: str) -> list[tuple[int, ast.expr]]:
        # Built on the first switch that names a variable: most files have none.
        if not table:
            table.append(_assignments(tree))
        return table[0](name)

    for node in nodes_of(tree, ast.Call):
        name = call_name(node, imports)
        hit = _classify(node, name, imports, assigned) if name else None
        if hit is not None and name is not None:
            hits[id(node)] = (name, hit)
    if not hits:
        return []
    found: list[IoCall] = []
    stack: list[tuple[ast.AST, str | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        elif function is None and _is_main_guard(node):
            function = MAIN_BLOCK
        elif isinstance(node, ast.Call) and id(node) in hits:
            name, (kind, path, what) = hits[id(node)]
            found.append(IoCall(kind, path, node.lineno, name, what, function))
        stack.extend((child, function) for child in child_nodes(node))
    return sorted(found, key=lambda c: (c.line, c.kind, c.path, c.call))


def called_names(tree: ast.Module) -> set[str]:
    """The last component of every called name (``f()``, ``mod.f()``, ``obj.f()`` -> f),
    except a function's calls of its own name (``def from_pretrained(): ...
    Other.from_pretrained()`` says nothing about whether anyone calls it)."""
    # The calls come from the tree's cached buckets (io_calls reads the same ones); only the
    # bodies of functions named like some call are walked, to find the calls whose
    # innermost function has their name, instead of walking the whole tree.
    calls = nodes_of(tree, ast.Call)
    names = {name for call in calls if (name := callee(call))}
    own: set[int] = set()
    for fn in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef):
        if fn.name in names:
            own |= _own_calls(fn)
    return {name for call in calls if (name := callee(call)) and id(call) not in own}


def _own_calls(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """Ids of the calls named ``fn.name`` whose innermost function is ``fn`` (its body,
    decorators and defaults, not the functions nested in it)."""
    found: set[int] = set()
    stack = child_nodes(fn)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.Call) and callee(node) == fn.name:
            found.add(id(node))
        stack.extend(child_nodes(node))
    return found


def _is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    return names == {"__name__"} and values == {"__main__"}


#: (first line, last line, name) of each function of a tree and of its module-level
#: ``__main__`` block, in :func:`ast.walk` order (:func:`function_spans`).
Spans = tuple[tuple[int, int, str], ...]


def function_spans(tree: ast.Module) -> Spans:
    """Where each function of ``tree`` (and its ``__main__`` block) is: what
    :func:`function_in` needs, kept instead of the tree (a tree is ~40x its source).

    From the tree's cached buckets rather than a walk of its own; the order does not
    matter: no two of these statements can start on one line."""
    spans = [
        (node.lineno, node.end_lineno or node.lineno, node.name)
        for node in nodes_of(tree, ast.FunctionDef, ast.AsyncFunctionDef)
    ]
    spans += [
        (node.lineno, node.end_lineno or node.lineno, MAIN_BLOCK)
        for node in tree.body
        if _is_main_guard(node)
    ]
    return tuple(spans)


def function_in(spans: Spans, line: int) -> str | None:
    """The innermost function of :func:`function_spans` whose body holds ``line``;
    :data:`MAIN_BLOCK` for the module's ``if __name__ == "__main__":`` block (it does not
    run on import); None at module level."""
    best: tuple[int, str] | None = None
    for start, end, name in spans:
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, name)
    return best[1] if best else None


def function_at(tree: ast.Module, line: int) -> str | None:
    """:func:`function_in` of ``tree``'s spans at ``line``."""
    return function_in(function_spans(tree), line)
