"""Reading Jupyter notebooks (nbformat 4 JSON), for every detector that looks into one.

Contracts:

* :func:`notebook_cells` is the cell dicts of a notebook's text (None for text that is not
  an nbformat-4 notebook); :func:`cell_source` is a cell's source as one string and
  :func:`output_texts` the texts its saved outputs show.
* :func:`cell_code` is a code cell's Python: IPython magics, shell escapes (``!pip``) and
  help lines (``obj?``) blanked, the line count kept, so line numbers stay the cell's; a
  cell magic other than the timing/capture ones (``%%bash``) blanks the whole cell.
  :func:`notebook_code` is every code cell's, one after the other (the imports detector
  and the procedure-file selection read a notebook as that module);
  :func:`notebook_shell_lines` are the shell-escape and ``%pip``/``%conda`` lines.
* :func:`parsed_cell` parses a cell's code (memoized, the trees shared: callers only read
  them); :func:`parsed_code_cells` is (cell number, code, tree) of each code cell that
  parses, numbered as an edit's ``cell`` is.
* :func:`json_line_of` is the line of the notebook's JSON that holds a code or output
  line: evidence points there.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from typing import Any

_MAGIC_RE = re.compile(r"^\s*[%!?]")
#: ``files = !ls`` / ``t = %timeit f()``: an assignment from a magic or a shell escape.
_ASSIGNED_MAGIC_RE = re.compile(r"^\s*[\w.,\s]+=\s*[%!]")
#: Cell magics whose body is still Python (``%%time``); any other (``%%bash``) is not.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit"})


def cell_source(cell: dict[str, Any]) -> str:
    """A cell's ``source`` as one string (nbformat stores it as a list of lines or a string)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _is_magic(line: str) -> bool:
    stripped = line.rstrip()
    return bool(
        _MAGIC_RE.match(line)
        or _ASSIGNED_MAGIC_RE.match(line)
        or (stripped.endswith("?") and not stripped.lstrip().startswith("#"))
    )


@functools.lru_cache(maxsize=1024)
def cell_code(source: str) -> str:
    """The Python of one code cell: magic, shell-escape and help lines blanked (line count
    kept); a cell magic other than the timing/capture ones (``%%bash``) blanks the cell.
    Memoized: every notebook reader asks for each cell's code, several times."""
    lines = source.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if first.startswith("%%"):
        magic = first[2:].split(None, 1)[0] if len(first) > 2 else ""
        if magic not in _PYTHON_CELL_MAGICS:
            return "\n" * len(lines)
    return "\n".join("" if _is_magic(line) else line for line in lines)


def notebook_cells(text: str) -> list[dict[str, Any]] | None:
    """The cell dicts of an nbformat-4 notebook's JSON ``text``; None when it is not one."""
    try:
        nb = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return None
    return [c for c in cells if isinstance(c, dict)]


def notebook_code(text: str) -> str | None:
    """The Python of every code cell of the notebook ``text``, in order, one cell after the
    other (see :func:`cell_code`); None when ``text`` is not an nbformat-4 notebook."""
    cells = notebook_cells(text)
    if cells is None:
        return None
    return "\n".join(cell_code(cell_source(c)) for c in cells if c.get("cell_type") == "code")


def notebook_shell_lines(text: str) -> list[str]:
    """The shell-escape and ``%pip``/``%conda`` lines of the notebook's code cells
    (``!pip install x``), without the escape character."""
    out: list[str] = []
    for cell in notebook_cells(text) or []:
        if cell.get("cell_type") != "code":
            continue
        for line in cell_source(cell).splitlines():
            stripped = line.strip()
            if stripped.startswith(("!", "%pip ", "%conda ")):
                out.append(stripped[1:].strip())
    return out


def json_line_of(raw_lines: list[str], needle: str, start: int = 0) -> int | None:
    """The 1-based line of the notebook JSON (``raw_lines``: its text's lines) holding the
    code or output text ``needle``: the first from index ``start`` on (a cursor past the
    cells already read), else the first anywhere; None when no line holds it."""
    # The JSON escapes quotes and backslashes; search for the escaped form.
    escaped = json.dumps(needle)[1:-1]
    for i in range(start, len(raw_lines)):
        if escaped in raw_lines[i]:
            return i + 1
    for i, line in enumerate(raw_lines):
        if escaped in line:
            return i + 1
    return None


def output_texts(cell: dict[str, Any]) -> list[str]:
    """The texts a code cell's saved outputs show: each stream's text and each result's
    ``text/plain``, in order."""
    texts: list[str] = []
    for out in cell.get("outputs") or []:
        if not isinstance(out, dict):
            continue
        if out.get("output_type") == "stream":
            raw = out.get("text", "")
        else:
            raw = (out.get("data") or {}).get("text/plain", "")
        texts.append("".join(raw) if isinstance(raw, list) else str(raw))
    return texts


@functools.lru_cache(maxsize=256)
def parsed_cell(code: str) -> ast.Module | SyntaxError | None:
    """``ast.parse(code)``; the SyntaxError; None for code that cannot be parsed otherwise
    (NUL bytes, nesting too deep). Memoized: the notebooks detector reads each code cell three times
    (the Python 2 check, its metrics, the seed), and parsing was most of its time. The
    trees are shared, so callers only read them (``nodes_of`` caches its walk on them)."""
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError):
        return None


def parsed_code_cells(text: str) -> list[tuple[int, str, ast.Module]]:
    """(cell number, code, tree) of each code cell of the notebook ``text`` that parses, in
    order; cells are counted from 1 over every cell (markdown too), as an edit's ``cell``
    is. The code is :func:`cell_code`'s: magics blanked, the cell's own lines kept, so the
    lines and columns of its nodes are the cell's, as ``repro/derive.py`` counts them
    (``str.splitlines``). Empty for text that is no notebook."""
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError):
        return []
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return []
    parsed: list[tuple[int, str, ast.Module]] = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code = cell_code(cell_source(cell))
        tree = parsed_cell(code)  # memoized: shared with the other notebook readers
        if isinstance(tree, ast.Module):
            parsed.append((number, code, tree))
    return parsed
