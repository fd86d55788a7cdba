"""Which imports of a Python source are optional: guarded by a ``try`` that falls back.

Contract: :func:`import_sites` parses ``source`` (never runs it) and returns every absolute
import with its 1-based line and whether it is *guarded*: it sits in the body of a ``try``
(at any depth of ``if``/``with``/``for``/class bodies, which run right there) whose handlers
catch the failure of an import: ``ImportError``, ``ModuleNotFoundError``, ``Exception``,
``BaseException`` or a bare ``except:``. A function body inside the ``try`` runs later,
outside it, so its imports are not guarded by it. None when ``source`` does not parse (Python
2, a notebook cell with a syntax error): the caller must then treat every import as required.

An import that is guarded everywhere it appears is optional (``try: import signatory except
ImportError: signatory = Dummy()``): the code runs without it, so it is not a requirement.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Exception names whose handler catches a failed import.
_CATCHES_IMPORT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class ImportSite:
    """One absolute import: the module (``a.b`` for ``import a.b`` and ``from a.b import
    c``), the names imported from it (``from`` form only), its line, and whether a
    ``try`` that catches import errors guards it."""

    module: str
    names: tuple[str, ...]
    line: int
    guarded: bool

    @property
    def top(self) -> str:
        """The top-level package name (``a`` of ``a.b``)."""
        return self.module.split(".", 1)[0]


def _catches_import(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True  # a bare except: catches everything
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for node in types:
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in _CATCHES_IMPORT:
            return True
    return False


def _visit(nodes: list[ast.stmt], guarded: bool, out: list[ImportSite]) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [ImportSite(a.name, (), node.lineno, guarded) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module and node.level == 0:
                names = tuple(a.name for a in node.names)
                out.append(ImportSite(node.module, names, node.lineno, guarded))
        elif isinstance(node, ast.Try | ast.TryStar):
            catches = any(_catches_import(h) for h in node.handlers)
            _visit(node.body, guarded or catches, out)
            for handler in node.handlers:
                _visit(handler.body, guarded, out)
            _visit(node.orelse, guarded, out)
            _visit(node.finalbody, guarded, out)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _visit(node.body, False, out)  # runs when called, outside any enclosing try
        else:
            for field in ("body", "orelse", "finalbody"):
                child = getattr(node, field, None)
                if isinstance(child, list):
                    _visit([c for c in child if isinstance(c, ast.stmt)], guarded, out)
            for case in getattr(node, "cases", ()):  # match statements
                _visit(case.body, guarded, out)


def import_sites(source: str) -> list[ImportSite] | None:
    """Every absolute import of ``source`` in line order (see the module docstring), or
    None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: list[ImportSite] = []
    _visit(tree.body, False, out)
    return sorted(out, key=lambda s: (s.line, s.module))
