"""Markdown papers: the title, pipe tables with their caption, and the prose.

A table's name is the ``Table N`` of a caption line just above it (up to three non-blank
lines up, or two below it); failing that it is ``Table k`` by order in the file, with the
nearest heading above as caption. Fenced code blocks are skipped entirely.
"""

from __future__ import annotations

import re

from reprobridge.detect.paper._paper_doc import PaperDoc, Row, Table, split_sentences

_SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_CAPTION_RE = re.compile(r"^\s*[*_]*\s*(Table\s+(\d+|[IVXL]+))\s*[*_]*\s*[:.]\s*(.*)$", re.I)
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")


def _split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    # "\|" is a literal pipe inside a cell, not a separator.
    return [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", body)]


def _strip_inline(text: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    return " ".join(re.sub(r"(\*\*|__|`)", "", text).split())


def parse_markdown(text: str, path: str) -> PaperDoc:
    """The :class:`PaperDoc` of a Markdown paper (never raises on odd Markdown)."""
    doc = PaperDoc(path=path)
    lines = text.splitlines()
    prose: list[tuple[str, int]] = []
    in_fence = False
    heading = ""
    last_number = 0  # a table without a "Table N" line is numbered after the one before
    i = 0
    if lines and lines[0].strip() == "---":  # YAML front matter: title, then skip it
        end = next((k for k in range(1, len(lines)) if lines[k].strip() in {"---", "..."}), 0)
        for k in range(1, end):
            m = re.match(r"^title:\s*['\"]?(.*?)['\"]?\s*$", lines[k])
            if m and m.group(1):
                doc.title, doc.title_line = m.group(1), k + 1
        i = end + 1 if end else 0
    while i < len(lines):
        line = lines[i]
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            prose.append(("", i + 1))
            i += 1
            continue
        if in_fence:
            i += 1
            continue
        heading_match = _HEADING_RE.match(line)
        if heading_match:
            heading = _strip_inline(heading_match.group(2))
            if heading_match.group(1) == "#" and doc.title is None:
                doc.title, doc.title_line = heading, i + 1
            prose.append(("", i + 1))
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _SEPARATOR_RE.match(lines[i + 1]):
            end = i + 2
            while end < len(lines) and "|" in lines[end] and lines[end].strip():
                end += 1
            table = _table(lines, i, end, heading, last_number + 1)
            last_number = _number_of(table.name, last_number + 1)
            doc.tables.append(table)
            prose.append(("", i + 1))
            i = end
            continue
        if _CAPTION_RE.match(line):  # captions are not claims' prose
            prose.append(("", i + 1))
        else:
            prose.append((_strip_inline(line), i + 1))
        i += 1
    doc.sentences = split_sentences(prose)
    return doc


def _number_of(name: str, default: int) -> int:
    match = re.fullmatch(r"Table (\d+)", name)
    return int(match.group(1)) if match else default


def _caption_near(lines: list[str], start: int, end: int) -> tuple[str, str] | None:
    """``("Table 1", caption)`` from a caption line just above or below lines[start:end]."""
    above = [k for k in range(start - 1, max(-1, start - 8), -1) if lines[k].strip()][:3]
    below = [k for k in range(end, min(len(lines), end + 6)) if lines[k].strip()][:2]
    for k in [*above, *below]:
        match = _CAPTION_RE.match(lines[k])
        if match:
            name = "Table " + match.group(2)
            return name, _strip_inline(lines[k].strip().strip("*_"))
    return None


def _table(lines: list[str], start: int, end: int, heading: str, number: int) -> Table:
    header = [_strip_inline(c) for c in _split_row(lines[start])]
    found = _caption_near(lines, start, end)
    name, caption = found if found else (f"Table {number}", heading)
    table = Table(name=name, caption=caption, headers=header[1:])
    for k in range(start + 2, end):
        cells = [_strip_inline(c) for c in _split_row(lines[k])]
        if not cells or not cells[0]:
            continue
        table.rows.append(Row(label=cells[0], cells=cells[1:], line=k + 1))
    return table
