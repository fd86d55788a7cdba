"""The Python version: declared in runtime.txt / .python-version / .tool-versions, and the
lowest version the code's syntax allows.

Declared files give an exact ``X.Y`` (confidence high). The syntax gives a lower bound
(confidence medium) from constructs a newer Python introduced: assignment expressions and
positional-only parameters and the f-string ``=`` specifier (3.8), parenthesized context
managers (3.9's parser, officially 3.10), ``match`` (3.10) and ``except*`` (3.11). To stay
cheap, a file is parsed only when a textual hint for one of these appears in its bytes;
files that do not parse (Python 2 code, templates) are ignored.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

from reprobridge.detect._text import skip_path
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import PythonVersionValue
from reprobridge.detect.index import MAX_SCAN_BYTES
from reprobridge.errors import DetectionError, UnsafePathError

_VERSION_RE = re.compile(r"(?:^|[^\d.])(\d)\.(\d{1,2})(?:\.\d+)?")
_DECLARED_DIRS = ("", "binder/", ".binder/")

# Textual hints with the minor version each construct needs; a file is parsed only when it
# has a hint for a version above the best bound found so far. Each pattern starts with a
# literal (``except``, ``match``, ``with``, ``/``), which the regex engine finds at the speed
# of a substring search; what must precede it on the line is then checked in Python
# (a ``^[ \t]*`` multiline prefix would make the engine try every byte position).
_EXCEPT_STAR = re.compile(rb"except[ \t]*\*")
_MATCH = re.compile(rb"match[ \t(\[{\"'][^\n]*:[ \t]*(?:#[^\n]*)?\r?$", re.M)
_WITH = re.compile(rb"with[ \t]*\(")
_POSONLY = re.compile(rb"/[ \t]*[,)]")


def _at_line_start(data: bytes, start: int, *, allow: bytes = b"") -> bool:
    head = data[data.rfind(b"\n", 0, start) + 1 : start].strip(b" \t")
    return not head or head == allow


def _hinted(minor: int, data: bytes) -> bool:
    if minor == 11:
        return _EXCEPT_STAR.search(data) is not None
    if minor == 10:
        return any(_at_line_start(data, m.start()) for m in _MATCH.finditer(data))
    if minor == 9:
        return any(_at_line_start(data, m.start(), allow=b"async") for m in _WITH.finditer(data))
    if b":=" in data:
        return True
    for m in _POSONLY.finditer(data):
        before = data[max(0, m.start() - 80) : m.start()].rstrip(b" \t")[-1:]
        if before in (b",", b"("):
            return True
    return False


_FSTRING_HINT = re.compile(rb"=[ \t]*(?:![rsa])?(?::[^}\n]*)?\}")
_FSTRING_DEBUG_RE = re.compile(r"(?<!\{)\{[^{}!:]*?[^=!<>\s{]\s*=\s*(?:![rsa])?(?::[^{}]*)?\}")


@dataclass(frozen=True, order=True)
class _Bound:
    minor: int
    line: int
    why: str


def _declared_version(text: str, path: str) -> tuple[str, int] | None:
    """(``X.Y``, line) of the first version in a runtime.txt / .python-version / .tool-versions."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if path.endswith(".tool-versions"):
            fields = line.split()
            if not fields or fields[0] != "python" or len(fields) < 2:
                continue
            line = fields[1]
        match = _VERSION_RE.search(line)
        if match and match.group(1) in ("2", "3"):
            return f"{match.group(1)}.{match.group(2)}", number
        return None  # first meaningful line is not a CPython version (e.g. "system")
    return None


def _fstring_debug_line(text: str) -> int | None:
    """Line of the first f-string with a ``{expr=}`` debug specifier (Python 3.8).

    The AST cannot tell ``f"{x=}"`` from ``f"x={x!r}"``, so this reads tokens: one STRING
    token per f-string before Python 3.12, FSTRING_START..FSTRING_END from 3.12 on.
    """
    lines = text.splitlines(keepends=True)
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    starts: list[tuple[int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                prefix = re.match(r"[A-Za-z]*", tok.string)
                is_f = prefix is not None and "f" in prefix.group(0).lower()
                if is_f and _FSTRING_DEBUG_RE.search(tok.string):
                    return tok.start[0]
            elif fstring_start is not None and tok.type == fstring_start:
                starts.append(tok.start)
            elif fstring_end is not None and tok.type == fstring_end and starts:
                (row, col), (end_row, end_col) = starts.pop(), tok.end
                segment = "".join(lines[row - 1 : end_row])
                segment = segment[col : len(segment) - len(lines[end_row - 1]) + end_col]
                if _FSTRING_DEBUG_RE.search(segment):
                    return row
    except (tokenize.TokenError, SyntaxError):
        return None
    return None


def _paren_with(node: ast.With | ast.AsyncWith, lines: list[str]) -> bool:
    """True for ``with (a as b, c as d):`` (parenthesized items, not a parenthesized expr)."""
    first = node.items[0].context_expr
    if first.lineno != node.lineno:
        head = lines[node.lineno - 1][node.col_offset :]
    else:
        head = lines[node.lineno - 1][node.col_offset : first.col_offset]
    keyword = "async with" if isinstance(node, ast.AsyncWith) else "with"
    between = head.strip().removeprefix(keyword).strip()
    if not between.startswith("("):
        return False
    # "(a) as b" / "(a, b)" alone parse on older Pythons; items with "as" inside the
    # parentheses, or several items inside them, do not.
    return any(item.optional_vars is not None for item in node.items) or len(node.items) > 1


def _syntax_bound(tree: ast.Module, text: str, *, fstrings: bool) -> _Bound | None:
    lines = text.splitlines()
    best: _Bound | None = None

    def see(minor: int, line: int, why: str) -> None:
        nonlocal best
        if best is None or (minor, -line) > (best.minor, -best.line):
            best = _Bound(minor, line, why)

    for node in ast.walk(tree):
        if isinstance(node, ast.TryStar):
            see(11, node.lineno, "except* needs Python 3.11")
        elif isinstance(node, ast.Match):
            see(10, node.lineno, "a match statement needs Python 3.10")
        elif isinstance(node, ast.With | ast.AsyncWith) and _paren_with(node, lines):
            see(9, node.lineno, "parenthesized context managers need Python 3.9 (officially 3.10)")
        elif isinstance(node, ast.NamedExpr):
            see(8, node.lineno, "an assignment expression (:=) needs Python 3.8")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and (
            node.args.posonlyargs
        ):
            see(8, node.lineno, "positional-only parameters need Python 3.8")
    if fstrings and (best is None or best.minor < 8):
        line = _fstring_debug_line(text)
        if line is not None:
            see(8, line, "an f-string {expr=} specifier needs Python 3.8")
    return best


class PythonVersionDetector(Detector):
    """``python_version`` findings: declared exact versions and a syntax lower bound.

    Declared: ``runtime.txt`` (``python-3.9.7``), ``.python-version``, ``.tool-versions``
    (its ``python`` line), at the root or in ``binder/``. Syntax: one finding,
    ``{"specifier": ">=3.N"}``, for the newest construct found, with its ``file:line``.
    Unreadable declared files are warned about and skipped (they are hints, not a lock).
    """

    name = "pyversion"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        wanted = [
            d + n
            for d in _DECLARED_DIRS
            for n in ("runtime.txt", ".python-version", ".tool-versions")
        ]
        scope = env_scope(ctx.index)
        for path in sorted(p for p in wanted if p in ctx.index and not scope.ignores(p)):
            text = ctx.index.try_read_text(path)
            found = _declared_version(text, path) if text is not None else None
            if found is None:
                if text is None or path.endswith((".python-version", "runtime.txt")):
                    ctx.warn("no Python version found in it", path)
                continue
            version, line = found
            findings.append(
                Finding(
                    kind="python_version",
                    key="python",
                    value=PythonVersionValue(exact=version),
                    evidence=(Evidence(path, line),),
                    detector=self.name,
                )
            )
        bound = self._syntax(ctx)
        if bound is not None:
            path, b = bound
            findings.append(
                Finding(
                    kind="python_version",
                    key="python",
                    value=PythonVersionValue(specifier=f">=3.{b.minor}"),
                    evidence=(Evidence(path, b.line),),
                    detector=self.name,
                    confidence="medium",
                    note=b.why,
                )
            )
        return findings

    @staticmethod
    def _syntax(ctx: DetectContext) -> tuple[str, _Bound] | None:
        best: tuple[str, _Bound] | None = None
        for path in sorted(ctx.index.py_scan()):
            if skip_path(path):
                continue
            try:
                data = ctx.index.read_bytes(path, limit=MAX_SCAN_BYTES)
            except (DetectionError, UnsafePathError):
                continue  # an unreadable source only loses a hint
            floor = best[1].minor if best is not None else 7
            level = next((m for m in (11, 10, 9, 8) if m > floor and _hinted(m, data)), 0)
            fstrings = floor < 8 and bool(_FSTRING_HINT.search(data))
            if not level and not fstrings:
                continue
            text = data.decode("utf-8-sig", "replace")
            try:
                tree = ast.parse(text, filename=path)
            except (SyntaxError, ValueError, RecursionError):
                continue
            found = _syntax_bound(tree, text, fstrings=fstrings)
            if found is not None and (best is None or found.minor > best[1].minor):
                best = (path, found)
        return best
