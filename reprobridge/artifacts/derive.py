#!/usr/bin/env python3
# repro/derive.py, copied from ReproBridge (reprobridge/artifacts/derive.py); regenerate with: rb init
"""Write a copy of a notebook or script with some of its literals replaced.

A smoke tier shortens a run whose loop is bounded by a literal in the code
(``train_config.max_iters = 2000``, ``for k in range(100):``) rather than by a flag: the
manifest lists the literals (``[[experiments.<id>.tiers.smoke.edits]]``), the launcher
calls this script before the command, and the command runs the copy. The original is never
modified. Standalone on purpose, like ``repro/check.py``: standard library only, Python 3.8
syntax, so it runs with whatever Python the run's environment has. The same file is
:mod:`reprobridge.artifacts.derive` inside ReproBridge, whose tests import it.

Usage::

    python repro/derive.py SOURCE COPY EDIT [EDIT ...]

``EDIT`` is ``CELL:LINE:COLUMN:VALUE:WAS``: in cell ``CELL`` (a notebook's, counted from 1
over every cell; empty for a script), line ``LINE`` (from 1), the text ``WAS`` found
``COLUMN`` characters into the line becomes ``VALUE``. Lines are counted as Python counts
them (``\\n``, ``\\r\\n`` or ``\\r``; a notebook cell's as ``str.splitlines``, as the
detector that found them did).

Contract:

- every edit is checked before anything is written: a line that no longer reads ``WAS``
  at ``COLUMN`` (the file changed since ``rb init`` derived the edits) stops with exit 2
  and a message naming it; nothing is written then;
- the copy is deterministic (same source and edits, same bytes): a script keeps every
  other byte; a notebook is rewritten as nbformat writes it (sorted keys, indent 1);
- an existing ``COPY`` is replaced, never written through (a committed symlink there
  cannot make the script write elsewhere);
- one line per edit goes to stdout (``rb derive: demo.ipynb cell 6 line 5:
  `max_iters = 2000` -> 20``), so the run's log records what ran.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import NamedTuple

#: A line as Python's tokenizer ends it (``\n``, ``\r\n`` or a lone ``\r``; not ``\f``).
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class DeriveError(Exception):
    """An edit that does not apply, or a file that cannot be read or written."""


class Edit(NamedTuple):
    """One literal to replace (see the module docstring for the fields)."""

    cell: int | None
    line: int
    column: int
    value: int
    was: str


def parse_edit(text: str) -> Edit:
    """An :class:`Edit` from its command-line form ``CELL:LINE:COLUMN:VALUE:WAS``."""
    parts = text.split(":", 4)
    if len(parts) != 5 or not parts[4]:
        raise DeriveError(f"not an edit (CELL:LINE:COLUMN:VALUE:WAS): {text!r}")
    try:
        cell = int(parts[0]) if parts[0] else None
        line, column, value = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise DeriveError(f"not an edit (CELL:LINE:COLUMN:VALUE:WAS): {text!r}") from None
    if (cell is not None and cell < 1) or line < 1 or column < 0:
        raise DeriveError(f"cell and line count from 1, columns from 0: {text!r}")
    return Edit(cell, line, column, value, parts[4])


def script_lines(text: str) -> list[str]:
    """``text`` split into lines as Python counts them, each with its line ending."""
    return _LINE_RE.findall(text)


def _apply(lines: list[str], edit: Edit, where: str) -> str:
    """The text of ``lines`` with ``edit`` applied (``where`` names it in errors)."""
    if edit.line > len(lines):
        raise DeriveError(f"{where}: there is no line {edit.line} (the file changed?)")
    line = lines[edit.line - 1]
    found = line[edit.column : edit.column + len(edit.was)]
    if found != edit.was:
        raise DeriveError(
            f"{where}: expected `{edit.was}` at column {edit.column}, the line reads "
            f"`{line.strip()}`: the file changed since rb init derived the edit; run "
            "`rb init` again"
        )
    lines[edit.line - 1] = (
        line[: edit.column] + str(edit.value) + line[edit.column + len(edit.was) :]
    )
    return line.strip()


def _ordered(edits: list[Edit]) -> list[Edit]:
    """Edits of one line applied right to left, so each column stays valid."""
    return sorted(edits, key=lambda e: (e.cell or 0, e.line, -e.column))


def derive_script(text: str, edits: list[Edit], name: str) -> tuple[str, list[str]]:
    """(the script ``text`` with ``edits`` applied, one report line per edit)."""
    lines = script_lines(text)
    notes = []
    for edit in _ordered(edits):
        if edit.cell is not None:
            raise DeriveError(f"{name}: a script has no cells (edit of cell {edit.cell})")
        code = _apply(lines, edit, f"{name} line {edit.line}")
        notes.append(f"{name} line {edit.line}: `{code}` -> {edit.value}")
    return "".join(lines), notes


def derive_notebook(text: str, edits: list[Edit], name: str) -> tuple[str, list[str]]:
    """(the notebook ``text`` with ``edits`` applied to its cells, one report line per edit)."""
    try:
        nb = json.loads(text)
    except ValueError as exc:
        raise DeriveError(f"{name}: not a notebook ({exc})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise DeriveError(f"{name}: not a notebook (no `cells` list)")
    notes = []
    for edit in _ordered(edits):
        where = f"{name} cell {edit.cell} line {edit.line}"
        if (
            edit.cell is None
            or edit.cell > len(cells)
            or not isinstance(cells[edit.cell - 1], dict)
        ):
            raise DeriveError(f"{where}: there is no such cell (the notebook changed?)")
        cell = cells[edit.cell - 1]
        source = cell.get("source", "")
        was_list = isinstance(source, list)
        joined = "".join(source) if was_list else str(source)
        lines = joined.splitlines(True)
        code = _apply(lines, edit, where)
        new = "".join(lines)
        cell["source"] = new.splitlines(True) if was_list else new
        notes.append(f"{where}: `{code}` -> {edit.value}")
    # nbformat's own layout (nbformat.writes): sorted keys, one-space indent, UTF-8 text.
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n", notes


def derive(source: str, text: str, edits: list[Edit]) -> tuple[str, list[str]]:
    """The copy of the file ``source`` (its ``text``) with ``edits`` applied, and the notes."""
    if source.endswith(".ipynb"):
        return derive_notebook(text, edits, source)
    return derive_script(text, edits, source)


def _write(path: str, text: str) -> None:
    """Write ``text`` to a new file at ``path``, replacing (never following) what is there."""
    try:
        os.unlink(path)  # a link is removed, not followed
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise DeriveError(f"{path}: a directory is in the way of the copy") from None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] in ("-h", "--help"):
        print("usage: python repro/derive.py SOURCE COPY CELL:LINE:COLUMN:VALUE:WAS ...")
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    source, copy = args[0], args[1]
    try:
        edits = [parse_edit(a) for a in args[2:]]
        try:
            with open(source, encoding="utf-8", newline="") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise DeriveError(f"{source}: cannot be read ({exc})") from None
        derived, notes = derive(source, text, edits)
        try:
            _write(copy, derived)
        except OSError as exc:
            raise DeriveError(f"{copy}: cannot be written ({exc})") from None
    except DeriveError as exc:
        print(f"rb derive: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"rb derive: {note}")
    print(f"rb derive: wrote {copy}; the command runs it instead of {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
