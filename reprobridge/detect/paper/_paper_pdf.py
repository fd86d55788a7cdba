"""PDF papers, best effort: pypdf's extracted text, read line by line.

A PDF keeps no table structure, so this reader looks for runs of at least two consecutive
lines that look like table rows — a label followed by the same count (≥ 1) of numbers
(``91.2``, ``91.2 ± 0.3``, ``91.2%``) — and names each run after the ``Table N`` caption
nearest above it on the same page (or just below). Column names come from the line above
the run when it splits into exactly as many words (or ``|``/double-space separated parts);
otherwise they are ``column 1``, ``column 2``, .... The "line" of a PDF's evidence is its
page number. Metadata gives the title, else the first line of page 1.
"""

from __future__ import annotations

import io
import re

from reprobridge.detect.paper._paper_doc import (
    PaperDoc,
    Row,
    Table,
    parse_cell,
    split_sentences,
)
from reprobridge.errors import DetectionError

_CAPTION_RE = re.compile(r"^\s*(Table\s+(\d+|[IVXL]+))\s*[:.]\s*(.*)$", re.I)
_NUM_TOKEN = re.compile(r"^[-+−]?(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)%?$")


def parse_pdf(data: bytes, path: str) -> PaperDoc:
    """The :class:`PaperDoc` of a PDF. Raises DetectionError (naming ``path``) for a file
    pypdf cannot open or read."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as exc:  # a dependency, but say what is missing if it is not there
        raise DetectionError("needs the `pypdf` package to read a PDF", path=path) from exc
    doc = PaperDoc(path=path, pages=True)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        pages = [page.extract_text() or "" for page in reader.pages]
        meta = reader.metadata
        meta_title = str(meta.title).strip() if meta is not None and meta.title else ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise DetectionError(
            f"is not a readable PDF ({type(exc).__name__}: {exc})", path=path
        ) from exc
    if not pages:
        raise DetectionError("is a PDF without pages", path=path)
    if meta_title and meta_title.lower() not in {"untitled", "title", "microsoft word"}:
        doc.title, doc.title_line = meta_title, 1
    else:
        first = next((ln.strip() for ln in pages[0].splitlines() if ln.strip()), "")
        if 3 <= len(first) <= 200 and re.search(r"[A-Za-z]{3}", first):
            doc.title, doc.title_line = first, 1
    prose: list[tuple[str, int]] = []
    for number, text in enumerate(pages, start=1):
        lines = [ln.strip() for ln in text.splitlines()]
        doc.tables += _tables(lines, number, len(doc.tables))
        prose += [(ln, number) for ln in lines if not _row_of(ln)] + [("", number)]
    doc.sentences = split_sentences(prose)
    return doc


def _row_of(line: str) -> tuple[str, list[str]] | None:
    """``(label, numeric cells)`` if ``line`` is a label followed by numbers, else None."""
    tokens = line.replace("±", " ± ").replace("+/-", " ± ").split()
    cells: list[str] = []
    while tokens:
        if len(tokens) >= 3 and tokens[-2] == "±" and _NUM_TOKEN.match(tokens[-1]):
            if not _NUM_TOKEN.match(tokens[-3]):
                break
            cells.insert(0, " ".join(tokens[-3:]))
            del tokens[-3:]
        elif _NUM_TOKEN.match(tokens[-1]):
            cells.insert(0, tokens.pop())
        else:
            break
    label = " ".join(tokens)
    if not cells or not re.search(r"[A-Za-z]", label) or len(label) > 60:
        return None
    if label.endswith((".", ",", ";", ":")) or label.lower().startswith(("table", "figure")):
        return None  # the end of a sentence or a caption, not a row label
    if any(parse_cell(c) is None for c in cells):
        return None
    return label, cells


def _columns(header: str, count: int) -> list[str]:
    for parts in (
        [p.strip() for p in header.split("|") if p.strip()],
        [p for p in re.split(r"\s{2,}|\t", header) if p],
        header.split(),
    ):
        if len(parts) == count + 1:  # a header cell above the labels too ("Method")
            parts = parts[1:]
        if len(parts) == count:
            return parts
    return [f"column {k}" for k in range(1, count + 1)]


def _tables(lines: list[str], page: int, before: int) -> list[Table]:
    """The row runs of one page as tables (``before``: tables on earlier pages)."""
    tables: list[Table] = []
    k = 0
    while k < len(lines):
        first = _row_of(lines[k])
        if first is None:
            k += 1
            continue
        run = [(k, first)]
        end = k + 1
        while end < len(lines):
            nxt = _row_of(lines[end])
            if nxt is None or len(nxt[1]) != len(first[1]):
                break
            run.append((end, nxt))
            end += 1
        if len(run) >= 2:
            name, caption = _caption(lines, k, end) or (f"Table {before + len(tables) + 1}", "")
            header = lines[k - 1] if k > 0 and not _CAPTION_RE.match(lines[k - 1]) else ""
            table = Table(name=name, caption=caption, headers=_columns(header, len(first[1])))
            table.rows = [Row(label=r[0], cells=r[1], line=page) for _, r in run]
            tables.append(table)
        k = end
    return tables


def _caption(lines: list[str], start: int, end: int) -> tuple[str, str] | None:
    """The ``Table N`` caption nearest above the run (within 6 lines), else just below."""
    for k in [*range(start - 1, max(-1, start - 7), -1), *range(end, min(len(lines), end + 3))]:
        match = _CAPTION_RE.match(lines[k])
        if match:
            return "Table " + match.group(2), lines[k]
    return None
