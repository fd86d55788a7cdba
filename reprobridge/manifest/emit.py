"""TOML text for a fresh reprobridge.toml, written directly (no tomlkit document).

Contract of :func:`emit_document`: for the plain data of a manifest (str, int, float, bool,
lists and dicts; what ``model_dump(mode="json")`` gives), the bytes are exactly those of
the tomlkit document :func:`reprobridge.manifest.io._to_item` builds and ``tomlkit.dumps``
writes, which is how every reprobridge.toml so far was laid out:

* a dict at a table path is a ``[header]`` table (a super table writes no header of its
  own), its plain keys first in order, then its sub-tables, each after a blank line
  unless it was the first thing added to its table; other dicts are inline tables;
* the list at ``aot`` is an array of tables (``[[claims]]``), a blank line between them;
* an array is written on one line, or one item a line (4 spaces, trailing comma) when
  its items' JSON is longer than 60 characters in all;
* strings are basic strings with tomlkit's escapes (``\\b \\t \\n \\f \\r \\" \\\\``, other
  control characters as ``\\uXXXX``); a key is bare when it is ``[A-Za-z0-9_-]+``.

Why: building the tomlkit items was 70-90 ms of a small repository's ``rb init`` (benchmarks/log-2026-11.md),
and importing tomlkit another ~10 ms; a re-run still refreshes through tomlkit, which keeps
comments. ``tests/unit/manifest/test_emit.py`` holds the byte equality against tomlkit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x20), 0x7F)} | {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}

Loc = tuple[str, ...]


def string(text: str) -> str:
    """A TOML basic string, escaped as tomlkit escapes it."""
    return '"' + text.translate(_ESCAPES) + '"'


def key(name: str) -> str:
    """A key: bare when it can be, else a basic string (tomlkit's rule)."""
    return name if name and _BARE.issuperset(name) else string(name)


def value(item: Any, loc: Loc) -> str:
    """An inline value (a dict here is an inline table)."""
    if isinstance(item, str):
        return string(item)
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return str(item)
    if isinstance(item, dict):
        inner = ", ".join(f"{key(k)} = {value(v, (*loc, k))}" for k, v in item.items())
        return "{" + inner + "}"
    if isinstance(item, list):
        sub = (*loc, "*")
        parts = [value(v, sub) for v in item]
        if item and sum(len(json.dumps(v)) for v in item) > 60:
            return "[\n" + "".join(f"    {p},\n" for p in parts) + "]"
        return "[" + ", ".join(parts) + "]"
    raise TypeError(f"cannot write {type(item).__name__} at {'.'.join(loc)}")


class Layout:
    """Which dicts are tables: ``is_table(loc)`` for a ``[header]`` table, ``is_super(loc)``
    for one written only through its sub-tables; ``aot`` is the array of tables."""

    def __init__(
        self, is_table: Callable[[Loc], bool], is_super: Callable[[Loc], bool], aot: Loc
    ) -> None:
        self.is_table = is_table
        self.is_super = is_super
        self.aot = aot

    def _is_block(self, item: Any, loc: Loc) -> bool:
        return (isinstance(item, dict) and self.is_table(loc)) or (
            isinstance(item, list) and loc == self.aot
        )

    def table(self, out: list[str], data: dict[str, Any], loc: Loc, name: str) -> None:
        """The body of the table at ``loc`` (named ``name`` in headers): plain keys, then
        sub-tables. A sub-table added to a table that already held something starts
        after a blank line (tomlkit's ``Container.append``)."""
        blocks: list[tuple[str, Any, bool]] = []
        held = False
        for k, v in data.items():
            sub = (*loc, k)
            if self._is_block(v, sub):
                blocks.append((k, v, held))
            else:
                out.append(f"{key(k)} = {value(v, sub)}\n")
            held = True
        for k, v, blank in blocks:
            self.block(out, k, v, (*loc, k), f"{name}.{key(k)}" if name else key(k), blank)

    def block(self, out: list[str], k: str, v: Any, loc: Loc, name: str, blank: bool) -> None:
        """A ``[name]`` table (or its sub-tables only, for a super table) or the
        ``[[name]]`` tables of an array of tables."""
        if isinstance(v, list):
            for i, entry in enumerate(v):
                # Each table after a blank line (the first one as any block is).
                out.append(("\n" if blank or i else "") + f"[[{name}]]\n")
                for ek, ev in entry.items():
                    out.append(f"{key(ek)} = {value(ev, (*loc, '*', ek))}\n")
            return
        if self.is_super(loc):
            # No header; its indent goes before its first sub-table's header.
            start = len(out)
            self.table(out, v, loc, name)
            if blank and len(out) > start:
                out[start] = "\n" + out[start]
            return
        out.append(("\n" if blank else "") + f"[{name}]\n")
        self.table(out, v, loc, name)
