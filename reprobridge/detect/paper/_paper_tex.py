"""LaTeX papers: ``\\title{}``, ``tabular`` environments inside ``table`` floats, prose.

Deliberately simple, not a TeX engine: comments are dropped line by line (so line numbers
stay those of the file), formatting commands keep their argument (``\\textbf{91.2}`` →
``91.2``), ``$\\pm$`` becomes ``±``, ``\\%`` becomes ``%``, ``\\multicolumn{n}{..}{x}``
spans ``x`` over ``n`` columns and ``\\multirow{..}{..}{x}`` is ``x`` (rows below with an
empty cell inherit it). Header rows are those above the first rule (``\\midrule``,
``\\hline``) after a row; body rows are the rest. Macros the paper defines are not expanded.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Sequence

from reprobridge.detect.paper._paper_doc import (
    PaperDoc,
    Row,
    Table,
    parse_cell,
    split_sentences,
)

_FORMAT_CMDS = (
    "textbf|textit|emph|underline|uline|mathbf|mathrm|mathit|text|textsc|texttt|textrm|textsf"
    "|bm|boldsymbol|mbox|makecell|hl|textnormal|mathbb|mathcal|ensuremath|textup"
)
_DROP_CMDS = "cite|citep|citet|citealp|ref|eqref|autoref|cref|Cref|label|footnote|thanks|url"
# cmidrule/cline underline part of a header; only full-width rules end the header rows.
_PARTIAL_RULE_RE = re.compile(r"\\(?:cmidrule(?:\([^)]*\))?\{[^}]*\}|cline\{[^}]*\})")
_RULES_RE = re.compile(
    r"\\(?:hline|toprule|midrule|bottomrule|specialrule\{[^}]*\}\{[^}]*\}\{[^}]*\}"
    r"|cmidrule(?:\([^)]*\))?\{[^}]*\}|cline\{[^}]*\}|addlinespace(?:\[[^\]]*\])?"
    r"|rowcolor(?:\[[^\]]*\])?\{[^}]*\}|noalign\{[^}]*\}|hhline\{[^}]*\})"
)
_TABLE_ENV_RE = re.compile(r"\\begin\{(table\*?|sidewaystable\*?|wraptable)\}")
_TABULAR_RE = re.compile(r"\\begin\{(tabular\*?|tabularx|tabulary|longtable)\}")
_INPUT_RE = re.compile(r"\\(?:input|include|subfile)\{([^}]+)\}")
_SKIP_ENVS = (
    "table|table\\*|figure|figure\\*|equation|equation\\*|align|align\\*|tabular|verbatim"
    "|lstlisting|algorithm|algorithmic|minted|tikzpicture|thebibliography|wraptable|wrapfigure"
)
#: One tabular row: its cells, its line, and whether a rule separates it from the row above.
TexRow = tuple[list[str], int, bool]

_SKIP_ENV_RE = re.compile(rf"\\begin\{{({_SKIP_ENVS})\}}.*?\\end\{{\1\}}", re.S)


def strip_comments(text: str) -> str:
    """``text`` without ``%`` comments; line count unchanged."""
    return "\n".join(re.sub(r"(?<!\\)%.*", "", line) for line in text.split("\n"))


def braced(text: str, pos: int) -> tuple[str, int] | None:
    """The content of the ``{...}`` starting at ``text[pos]`` (after spaces) and its end."""
    while pos < len(text) and text[pos] in " \t\n":
        pos += 1
    if pos >= len(text) or text[pos] != "{":
        return None
    depth = 0
    for k in range(pos, len(text)):
        if text[k] == "{" and (k == 0 or text[k - 1] != "\\"):
            depth += 1
        elif text[k] == "}" and text[k - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[pos + 1 : k], k + 1
    return None


def _skip_optional(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n":
        pos += 1
    if pos < len(text) and text[pos] == "[":
        end = text.find("]", pos)
        return end + 1 if end != -1 else pos
    return pos


def clean_tex(text: str) -> str:
    """Inline LaTeX as plain text: formatting kept as its argument, markup dropped."""
    text = re.sub(r"\$?\\pm\$?", "±", text)
    text = re.sub(r"\$?\\uparrow\$?", "↑", text)
    text = re.sub(r"\$?\\downarrow\$?", "↓", text)
    text = text.replace("\\%", "%").replace("\\&", "&").replace("\\_", "_")
    text = re.sub(r"\\[,;:! ]|~", " ", text)
    text = re.sub(rf"\\(?:{_DROP_CMDS})\*?(?:\[[^\]]*\])*\{{[^{{}}]*\}}", "", text)
    text = re.sub(r"\\textcolor\{[^{}]*\}\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\(?:cellcolor|color)(?:\[[^\]]*\])?\{[^{}]*\}", "", text)
    for _ in range(4):  # nested formatting: \textbf{\underline{91.2}}
        text = re.sub(rf"\\(?:{_FORMAT_CMDS})\*?\{{([^{{}}]*)\}}", r"\1", text)
        text = re.sub(r"\{\\(?:bf|it|em|bfseries|itshape)\s+([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\multirow\{[^{}]*\}(?:\[[^\]]*\])?\{[^{}]*\}\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\[a-zA-Z]+\*?", "", text)  # any other command (\dagger, \bf) goes
    text = re.sub(r"[{}$]", "", text)
    return " ".join(text.split())


def tex_events(text: str) -> list[tuple[str, str]]:
    """``("table", "")`` for each table float and ``("input", name)`` for each
    ``\\input``/``\\include``, in the order they appear (comments ignored)."""
    text = strip_comments(text)
    events = [(m.start(), "table", "") for m in _TABLE_ENV_RE.finditer(text)]
    events += [(m.start(), "input", m.group(1).strip()) for m in _INPUT_RE.finditer(text)]
    return [(kind, name) for _, kind, name in sorted(events)]


def parse_latex(text: str, path: str, *, numbers: Sequence[int] = ()) -> PaperDoc:
    """The :class:`PaperDoc` of one ``.tex`` file.

    ``numbers`` are the document-wide numbers of this file's table floats, in order (a file
    that is ``\\input`` into another does not start at Table 1); by default 1, 2, ....
    """
    text = strip_comments(text)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset)

    doc = PaperDoc(path=path)
    title = re.search(r"\\title\s*(?:\[[^\]]*\])?\s*(?=\{)", text)
    if title:
        got = braced(text, title.end())
        if got:
            doc.title = clean_tex(got[0].replace("\\\\", " ")) or None
            doc.title_line = line_of(title.start())
    for ordinal, env in enumerate(_TABLE_ENV_RE.finditer(text)):
        number = numbers[ordinal] if ordinal < len(numbers) else ordinal + 1
        end = re.compile(rf"\\end\{{{re.escape(env.group(1))}\}}").search(text, env.end())
        body_end = end.start() if end else len(text)
        table = _float_table(text, env.end(), body_end, f"Table {number}", line_of)
        if table is not None:
            doc.tables.append(table)
    doc.sentences = split_sentences(_prose(text))
    return doc


def _float_table(
    text: str, start: int, end: int, name: str, line_of: Callable[[int], int]
) -> Table | None:
    chunk = text[start:end]
    caption = ""
    cap = re.search(r"\\caption\s*(?:\[[^\]]*\])?\s*(?=\{)", chunk)
    if cap:
        got = braced(chunk, cap.end())
        caption = clean_tex(got[0]) if got else ""
    tab = _TABULAR_RE.search(chunk)
    if tab is None:
        return None
    pos = _skip_optional(chunk, tab.end())
    for _ in range(1 if tab.group(1) in {"tabular", "longtable"} else 2):  # width, then spec
        got = braced(chunk, pos)
        if got is None:
            return None
        pos = got[1]
    close = chunk.find(f"\\end{{{tab.group(1)}}}", pos)
    body = chunk[pos : close if close != -1 else len(chunk)]
    rows = _rows(body, start + pos, line_of)
    return _assemble(rows, name, caption)


def _rows(body: str, base: int, line_of: Callable[[int], int]) -> list[TexRow]:
    """``(cells, line, rule_before)`` for each ``\\\\``-separated row of a tabular body."""
    rows: list[TexRow] = []
    pending_rule = False
    pos = 0
    for piece in re.split(r"(\\\\(?:\s*\[[^\]]*\])?)", body):
        offset = pos
        pos += len(piece)
        if piece.startswith("\\\\"):
            continue
        # Rules sit between rows: one in this piece separates it from the row above.
        full_rules = _PARTIAL_RULE_RE.sub("", piece)
        rule = pending_rule or bool(_RULES_RE.search(full_rules))
        stripped = _RULES_RE.sub(lambda m: " " * len(m.group(0)), piece)
        if not stripped.strip():
            pending_rule = rule
            continue
        pending_rule = False
        lead = len(stripped) - len(stripped.lstrip())
        rows.append((_cells(stripped), line_of(base + offset + lead), rule))
    return rows


def _cells(row: str) -> list[str]:
    cells: list[str] = []
    for raw in re.split(r"(?<!\\)&", row):
        span = re.match(r"\s*\\multicolumn\s*(?=\{)", raw)
        if span:
            count = braced(raw, span.end())
            spec = braced(raw, count[1]) if count else None
            content = braced(raw, spec[1]) if spec else None
            if count and content and count[0].strip().isdigit():
                cells += [clean_tex(content[0])] * int(count[0].strip())
                continue
        cells.append(clean_tex(raw))
    return cells


def _assemble(rows: list[TexRow], name: str, caption: str) -> Table | None:
    if len(rows) < 2:
        return None
    n_header = next((k for k in range(1, min(len(rows), 4)) if rows[k][2]), 1)
    headers, body = rows[:n_header], rows[n_header:]
    width = max(len(cells) for cells, _, _ in rows)
    # Label columns: cells before the first number, the same for the whole table.
    firsts = Counter(
        next((k for k, c in enumerate(cells) if parse_cell(c) is not None), len(cells))
        for cells, _, _ in body
        if any(parse_cell(c) is not None for c in cells)
    )
    if not firsts:
        return None
    n_label = max(1, firsts.most_common(1)[0][0])
    columns = []
    for k in range(n_label, width):
        parts: list[str] = []
        for cells, _, _ in headers:
            if k < len(cells) and cells[k] and cells[k] not in parts:
                parts.append(cells[k])
        columns.append(" ".join(parts) or f"column {k + 1}")
    table = Table(name=name, caption=caption, headers=columns)
    previous = [""] * n_label
    for cells, line, _ in body:
        cells = cells + [""] * (width - len(cells))
        # \multirow leaves the cells below it empty: they belong to the group above.
        labels = [
            cell or (previous[k] if k < n_label - 1 else "")
            for k, cell in enumerate(cells[:n_label])
        ]
        previous = labels
        label = " / ".join(c for c in labels if c)
        if label:
            table.rows.append(Row(label=label, cells=cells[n_label:], line=line))
    return table


def _prose(text: str) -> list[tuple[str, int]]:
    """Prose lines of the document body, cleaned, with their line numbers."""
    begin = text.find("\\begin{document}")
    if begin != -1:
        text = re.sub(r"[^\n]", " ", text[:begin]) + text[begin:]  # keep line numbers
    # Blank out floats, maths and code, keeping newlines so line numbers stay true.
    text = _SKIP_ENV_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    lines: list[tuple[str, int]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if re.match(
            r"^\s*\\(?:begin|end|(?:sub)*section|paragraph|chapter|maketitle|caption)\b", line
        ):
            lines.append(("", number))
            continue
        lines.append((clean_tex(line), number))
    return lines
