#!/usr/bin/env python3
# repro/derive.py, copied from ReproBridge (reprobridge/artifacts/derive.py); regenerate with: rb init
"""Write a copy of a notebook or script with some of its literals or names replaced.

A smoke tier shortens a run whose loop is bounded by a literal in the code
(``train_config.max_iters = 2000``, ``for k in range(100):``) rather than by a flag; and
every tier renames, in code older than the pinned packages, the names those packages
removed (``jax.tree_multimap`` -> ``jax.tree_util.tree_map``). The manifest lists the
edits (``[[experiments.<id>.tiers.<tier>.edits]]``), the launcher calls this script before
the command, and the command runs the copy. The original is never modified. Standalone on purpose, like ``repro/check.py``: standard library only, Python 3.8
syntax, so it runs with whatever Python the run's environment has. The same file is
:mod:`reprobridge.artifacts.derive` inside ReproBridge, whose tests import it.

Usage::

    python repro/derive.py SOURCE COPY [--if=DIST>=VERSION] EDIT [[--if=...] EDIT ...]

``EDIT`` is ``CELL:LINE:COLUMN:VALUE:WAS``: in cell ``CELL`` (a notebook's, counted from 1
over every cell; empty for a script), line ``LINE`` (from 1), the text ``WAS`` found
``COLUMN`` characters into the line becomes ``VALUE``, a whole number or a dotted Python
name (nothing else is accepted: the edit can rename what the code calls, never add code).
``--if=jax>=0.3.16`` before an edit applies it only when the Python running this script
(the run's) has that distribution installed at that version or later; otherwise the edit
is skipped and the copy keeps the original text there. Lines are counted as Python counts
them (``\\n``, ``\\r\\n`` or ``\\r``; a notebook cell's as ``str.splitlines``, as the
detector that found them did).

Contract:

- every edit is checked before anything is written: a line that no longer reads ``WAS``
  at ``COLUMN`` (the file changed since ``rb init`` derived the edits) stops with exit 2
  and a message naming it; nothing is written then;
- the copy is deterministic (same source and edits, same bytes): a script keeps every
  other byte; a notebook is rewritten as nbformat writes it (sorted keys, indent 1);
- the copy of an executable script is executable (a command may run the script as its
  program, ``./train.py``);
- an existing ``COPY`` is replaced, never written through (a committed symlink there
  cannot make the script write elsewhere);
- one line per edit goes to stdout (``rb derive: demo.ipynb cell 6 line 5:
  `max_iters = 2000` -> 20``; a skipped one says why), so the run's log records what ran.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import NamedTuple

#: A line as Python's tokenizer ends it (``\n``, ``\r\n`` or a lone ``\r``; not ``\f``).
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
#: What an edit may write besides a whole number (the manifest schema's DOTTED_NAME_PATTERN).
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}(?:\.[A-Za-z_][A-Za-z0-9_]{0,99}){0,9}$")
#: ``--if=DIST>=VERSION`` (the schema's AT_LEAST_PATTERN).
_IF_RE = re.compile(
    r"^--if=([a-z0-9](?:[a-z0-9._-]{0,98}[a-z0-9])?)>=([0-9]{1,9}(?:\.[0-9]{1,9}){0,5})$"
)


class DeriveError(Exception):
    """An edit that does not apply, or a file that cannot be read or written."""


class Edit(NamedTuple):
    """One literal or name to replace (see the module docstring for the fields); ``when``
    is the ``(distribution, version)`` of its ``--if``, if any."""

    cell: int | None
    line: int
    column: int
    value: int | str
    was: str
    when: tuple[str, str] | None = None


def parse_edit(text: str, when: tuple[str, str] | None = None) -> Edit:
    """An :class:`Edit` from its command-line form ``CELL:LINE:COLUMN:VALUE:WAS``."""
    parts = text.split(":", 4)
    if len(parts) != 5 or not parts[4]:
        raise DeriveError(f"not an edit (CELL:LINE:COLUMN:VALUE:WAS): {text!r}")
    try:
        cell = int(parts[0]) if parts[0] else None
        line, column = int(parts[1]), int(parts[2])
    except ValueError:
        raise DeriveError(f"not an edit (CELL:LINE:COLUMN:VALUE:WAS): {text!r}") from None
    value: int | str
    if re.fullmatch(r"-?[0-9]+", parts[3]):
        value = int(parts[3])
    elif _NAME_RE.match(parts[3]):
        value = parts[3]
    else:
        raise DeriveError(f"an edit writes a whole number or a dotted name, not {parts[3]!r}")
    if (cell is not None and cell < 1) or line < 1 or column < 0:
        raise DeriveError(f"cell and line count from 1, columns from 0: {text!r}")
    return Edit(cell, line, column, value, parts[4], when)


def parse_edits(args: list[str]) -> list[Edit]:
    """The edits of the command line's ``[--if=DIST>=VERSION] EDIT ...`` words."""
    edits: list[Edit] = []
    when: tuple[str, str] | None = None
    for arg in args:
        if arg.startswith("--if="):
            match = _IF_RE.match(arg)
            if match is None:
                raise DeriveError(f"not a condition (--if=DIST>=VERSION): {arg!r}")
            when = (match.group(1), match.group(2))
            continue
        edits.append(parse_edit(arg, when))
        when = None
    if when is not None:
        raise DeriveError("--if must come before the edit it applies to")
    return edits


def _release(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version (``2.0.1rc1`` -> ``(2, 0, 1)``)."""
    match = re.match(r"[0-9]+(?:\.[0-9]+)*", version.strip())
    numbers = [int(n) for n in match.group(0).split(".")] if match else [0]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()  # 2.0 == 2.0.0
    return tuple(numbers)


def installed(distribution: str) -> str | None:
    """The version of ``distribution`` installed for the Python running this script;
    ``python`` is the interpreter itself (the standard library's removals)."""
    if distribution == "python":
        import platform

        return platform.python_version()
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def applies(edit: Edit, version_of: Callable[[str], str | None] = installed) -> str | None:
    """None when ``edit`` applies, else why it is skipped (its ``--if`` does not hold)."""
    if edit.when is None:
        return None
    dist, least = edit.when
    have = version_of(dist)
    if have is None:
        return f"{dist} is not installed"
    if _release(have) < _release(least):
        return f"{dist} {have} is older than {least}: it still has `{edit.was}`"
    return None


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


def _shown(code: str, edit: Edit) -> str:
    """What an edit did, for the log: the line's literal lowered, or the name renamed."""
    if isinstance(edit.value, str):
        return f"`{edit.was}` -> `{edit.value}` (`{code}`)"
    return f"`{code}` -> {edit.value}"


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
        notes.append(f"{name} line {edit.line}: {_shown(code, edit)}")
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
        notes.append(f"{where}: {_shown(code, edit)}")
    # nbformat's own layout (nbformat.writes): sorted keys, one-space indent, UTF-8 text.
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n", notes


def derive(source: str, text: str, edits: list[Edit]) -> tuple[str, list[str]]:
    """The copy of the file ``source`` (its ``text``) with ``edits`` applied, and the notes."""
    if source.endswith(".ipynb"):
        return derive_notebook(text, edits, source)
    return derive_script(text, edits, source)


def _write(path: str, text: str, executable: bool = False) -> None:
    """Write ``text`` to a new file at ``path``, replacing (never following) what is there;
    ``executable``: mode 755 (the copy of a script a command runs as its program)."""
    try:
        os.unlink(path)  # a link is removed, not followed
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise DeriveError(f"{path}: a directory is in the way of the copy") from None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o755 if executable else 0o644)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] in ("-h", "--help"):
        print(
            "usage: python repro/derive.py SOURCE COPY [--if=DIST>=VERSION] "
            "CELL:LINE:COLUMN:VALUE:WAS ..."
        )
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    source, copy = args[0], args[1]
    skipped: list[str] = []
    try:
        edits = []
        for edit in parse_edits(args[2:]):
            why = applies(edit)
            if why is None:
                edits.append(edit)
            else:
                at = f"cell {edit.cell} line {edit.line}" if edit.cell else f"line {edit.line}"
                skipped.append(f"{source} {at}: `{edit.was}` kept ({why})")
        try:
            with open(source, encoding="utf-8", newline="") as fh:
                text = fh.read()
                executable = bool(os.fstat(fh.fileno()).st_mode & 0o100)
        except (OSError, UnicodeDecodeError) as exc:
            raise DeriveError(f"{source}: cannot be read ({exc})") from None
        derived, notes = derive(source, text, edits)
        try:
            _write(copy, derived, executable)
        except OSError as exc:
            raise DeriveError(f"{copy}: cannot be written ({exc})") from None
    except DeriveError as exc:
        print(f"rb derive: {exc}", file=sys.stderr)
        return 2
    for note in [*skipped, *notes]:
        print(f"rb derive: {note}")
    print(f"rb derive: wrote {copy}; the command runs it instead of {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
