"""setup.py, read by AST only: ``install_requires``, ``python_requires``, ``extras_require``.

setup.py is never executed or imported. Values are recovered from literals, from names
assigned earlier at module level (``REQS = [...]``, ``REQS += [...]``, ``REQS.append(...)``)
and from list concatenation. When ``install_requires`` is computed from a file
(``open("requirements.txt").read().splitlines()``, a helper that reads one), the detector
says that it defers to that file and reads it (unless the requirements detector already does).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from reprobridge.detect._pyast import callee
from reprobridge.detect.base import Confidence, DeclaredFileDetector, DetectContext, Finding
from reprobridge.detect.declared.requirements import DeclaredFile
from reprobridge.errors import DetectionError

_FILE_RE = re.compile(r"^[\w./-]+\.(?:txt|in)$")
_MAX_DEPTH = 20


@dataclass(frozen=True)
class _Item:
    text: str
    line: int


class _Evaluator:
    """Static values of expressions in one module (None: not statically known)."""

    def __init__(self, tree: ast.Module) -> None:
        self.env: dict[str, ast.expr] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        for stmt in tree.body:
            self._record(stmt)

    def _record(self, stmt: ast.stmt) -> None:
        # Only module-level statements: assignments inside if/try/functions depend on the
        # run, and a static reader must not guess which branch was taken.
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.env[target.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            self.env[stmt.target.id] = stmt.value
        elif (
            isinstance(stmt, ast.AugAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(stmt.op, ast.Add)
            and stmt.target.id in self.env
        ):
            self.env[stmt.target.id] = ast.BinOp(self.env[stmt.target.id], ast.Add(), stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in self.env
                and func.attr in ("append", "extend")
                and len(call.args) == 1
            ):
                arg = call.args[0]
                added = ast.List([arg], ast.Load()) if func.attr == "append" else arg
                self.env[func.value.id] = ast.BinOp(self.env[func.value.id], ast.Add(), added)
        elif isinstance(stmt, ast.FunctionDef):
            self.functions[stmt.name] = stmt

    def strings(self, node: ast.expr, depth: int = 0) -> list[_Item] | None:
        """The strings of a str/list/tuple expression, or None when not static."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            # setuptools accepts one string with a requirement per line.
            lines = [ln.split("#", 1)[0].strip() for ln in node.value.splitlines()]
            return [_Item(ln, node.lineno + i) for i, ln in enumerate(lines) if ln]
        if isinstance(node, ast.List | ast.Tuple):
            items: list[_Item] = []
            for elt in node.elts:
                sub = self.strings(elt, depth + 1)
                if sub is None:
                    return None
                items += sub
            return items
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.strings(self.env[node.id], depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.strings(node.left, depth + 1)
            right = self.strings(node.right, depth + 1)
            return None if left is None or right is None else left + right
        return None

    def dict_keys(self, node: ast.expr, depth: int = 0) -> list[str] | None:
        """Literal string keys of a dict expression (``extras_require``)."""
        if isinstance(node, ast.Name) and node.id in self.env and depth < _MAX_DEPTH:
            return self.dict_keys(self.env[node.id], depth + 1)
        if isinstance(node, ast.Dict):
            return [
                k.value
                for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        return None

    def files_read(self, node: ast.AST, depth: int = 0) -> list[str]:
        """File names (``*.txt``/``*.in``) that a non-static expression seems to read."""
        if depth > _MAX_DEPTH:
            return []
        found: list[str] = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                if _FILE_RE.match(sub.value.strip()):
                    found.append(sub.value.strip())
            elif isinstance(sub, ast.Name) and sub.id in self.env:
                found += self.files_read(self.env[sub.id], depth + 1)
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Name)
                and sub.func.id in self.functions
            ):
                found += self.files_read(self.functions[sub.func.id], depth + 1)
        return list(dict.fromkeys(found))


def _setup_call(tree: ast.Module) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and callee(node) == "setup":
            return node
    return None


def _keywords(call: ast.Call, ev: _Evaluator) -> dict[str, ast.expr]:
    """setup()'s keyword arguments, including those of a ``**dict(...)``/``**{...}``."""
    found: dict[str, ast.expr] = {}
    for kw in call.keywords:
        if kw.arg is not None:
            found[kw.arg] = kw.value
            continue
        value = ev.env.get(kw.value.id) if isinstance(kw.value, ast.Name) else kw.value
        if isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    found.setdefault(k.value, v)
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "dict"
        ):
            for sub in value.keywords:
                if sub.arg is not None:
                    found.setdefault(sub.arg, sub.value)
    return found


class SetupPyDetector(DeclaredFileDetector):
    """Dependencies and the Python bound of every ``setup.py`` (AST only).

    The root ``setup.py`` is a declared source: one that does not parse, or a requirement
    or ``python_requires`` that is not valid, raises DetectionError naming it and the line.
    A nested setup.py (a vendored package, a CUDA extension) gives medium-confidence findings
    and is skipped with a warning when broken.
    """

    name = "setuppy"
    filename = "setup.py"

    def _one(self, ctx: DetectContext, path: str, confidence: Confidence) -> list[Finding]:
        text = ctx.index.read_text(path)
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            raise DetectionError(
                f"does not parse as Python: {exc.msg}", path=path, field=f"line {exc.lineno}"
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise DetectionError(f"does not parse as Python: {exc}", path=path) from exc
        call = _setup_call(tree)
        if call is None:
            return []
        ev = _Evaluator(tree)
        kws = _keywords(call, ev)
        out = DeclaredFile(ctx, self.name, path, confidence)
        if "python_requires" in kws:
            values = ev.strings(kws["python_requires"])
            if values and len(values) == 1:
                value = values[0]
                out.python(value.text, value.line, "setup.py python_requires", "python_requires")
        if "install_requires" in kws:
            node = kws["install_requires"]
            items = ev.strings(node)
            if items is not None:
                for item in items:
                    out.requirement(item.text, item.line)
            else:
                files = ev.files_read(node)
                for target in files:
                    out.deferred(node.lineno, target, "install_requires")
                if not files:
                    ctx.warn(
                        f"line {node.lineno}: install_requires is computed at build time and "
                        "could not be read statically",
                        path,
                    )
        if "extras_require" in kws:
            groups = ev.dict_keys(kws["extras_require"]) or []
            if groups:
                ctx.warn(
                    f"extras_require groups {', '.join(sorted(groups))} are optional and not "
                    "included in the environment",
                    path,
                )
        return out.findings
