"""The format-neutral model of a paper, and what turns it into findings.

The format readers (``_paper_md``, ``_paper_tex``, ``_paper_pdf``) each produce a
:class:`PaperDoc`: its title, its tables (header + labelled rows of cell *text*) and its
prose as sentences with their line. Everything after that is shared and lives here:

* :func:`parse_cell` — ``"91.2 ± 0.3"`` → ``Cell(91.2, spread=0.3)``; ``None`` for a cell
  that is not one number (``"–"``, ``"n/a"``, ``"ResNet-50"``).
* :func:`direction` — ``True``/``False``/``None`` for higher-is-better of a column name,
  from an arrow (``↑``/``↓``) first, then the metric's name (accuracy, loss, ...).
* :func:`find_claims` — sentences saying one table row beats another.

Line numbers are 1-based lines of the file the text came from; a PDF reader puts the page
number there instead (``PaperDoc.pages`` says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# A number as printed in a table: sign, thousands separators, decimals.
_NUM = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+−]?\.\d+"
_CELL_RE = re.compile(
    rf"^(?P<value>{_NUM})\s*(?P<pct>%)?"
    rf"(?:\s*(?:±|\+/-|\+-|\\pm)\s*(?P<spread>{_NUM})\s*%?"
    rf"|\s*\(\s*(?:±\s*)?(?P<pspread>{_NUM})\s*\))?"
    r"\s*(?P<pct2>%)?$"
)
# Marks around a number that do not change it: emphasis, footnote daggers, stars.
_DECORATION_RE = re.compile(r"[*_`†‡§¶♯#]|\^\{?[a-z0-9,*†‡]+\}?$")

#: Metric words whose larger value is better, and those whose smaller value is.
_HIGHER = frozenset(
    [
        "acc",
        "accuracy",
        "top1",
        "top-1",
        "top5",
        "top-5",
        "f1",
        "f1-score",
        "bleu",
        "auc",
        "auroc",
        "auprc",
        "map",
        "precision",
        "recall",
        "iou",
        "miou",
        "rouge",
        "rouge-l",
        "psnr",
        "ssim",
        "r2",
        "reward",
        "return",
        "success",
        "ndcg",
        "mrr",
        "hit",
        "hits",
        "em",
    ]
)
_LOWER = frozenset(
    [
        "loss",
        "error",
        "err",
        "perplexity",
        "ppl",
        "mse",
        "rmse",
        "mae",
        "nll",
        "fid",
        "wer",
        "cer",
        "ece",
        "latency",
        "bpd",
    ]
)


@dataclass(frozen=True)
class Cell:
    """A numeric table cell: the value as printed, its ± spread, and whether it is a %.

    ``decimals`` is how many digits the value is printed with after the decimal point
    (``81.0`` has 1): the precision the paper reports, so ``81.0`` stands for anything
    in [80.95, 81.05). Not part of equality: it describes the print, not the number.
    """

    value: float
    spread: float | None = None
    percent: bool = False
    decimals: int = field(default=0, compare=False)


@dataclass
class Row:
    """One body row: its label (first cell(s)), the cells under each column, its line."""

    label: str
    cells: list[str]
    line: int


@dataclass
class Table:
    """One table: ``name`` like ``"Table 1"``, caption, header cells as written, body rows.

    ``headers`` keep arrows and emphasis (they decide higher-is-better); ``columns`` are
    the clean names used in finding keys.
    """

    name: str
    caption: str
    headers: list[str]
    rows: list[Row] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return [clean_column(h) for h in self.headers]


@dataclass
class PaperDoc:
    """What a reader recovered from one paper file."""

    path: str  # as shown in evidence
    title: str | None = None
    title_line: int | None = None
    tables: list[Table] = field(default_factory=list)
    sentences: list[tuple[str, int]] = field(default_factory=list)
    pages: bool = False  # True: "line" numbers are PDF page numbers


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-"))


def parse_cell(text: str) -> Cell | None:
    """The number in a table cell, or None when the cell is not one number.

    Accepts ``91.2``, ``91.2%``, ``**91.2**``, ``91.2 ± 0.3``, ``91.2±0.3%``, ``91.2 (0.3)``,
    ``1,234``; the spread is kept apart, never added to the value.
    """
    cleaned = _DECORATION_RE.sub("", text.strip()).strip()
    match = _CELL_RE.match(cleaned)
    if match is None:
        return None
    spread = match.group("spread") or match.group("pspread")
    printed = match.group("value")
    return Cell(
        value=_number(printed),
        spread=_number(spread) if spread else None,
        percent=bool(match.group("pct") or match.group("pct2")) or "%" in cleaned,
        decimals=len(printed.partition(".")[2]),
    )


def clean_column(name: str) -> str:
    """A column name without arrows and emphasis, whitespace collapsed."""
    name = re.sub(r"[↑↓*_`]|\((?:higher|lower) is better\)", " ", name, flags=re.I)
    return " ".join(name.split()).strip(" :")


def direction(column: str) -> bool | None:
    """Whether larger values of ``column`` are better: arrows first, then metric words."""
    if "↑" in column or re.search(r"higher is better", column, re.I):
        return True
    if "↓" in column or re.search(r"lower is better", column, re.I):
        return False
    words = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)?", column.lower()))
    # Split hyphenated words too ("top-1" stays whole, "val-loss" also gives "loss").
    words |= {part for word in words for part in word.split("-")}
    higher, lower = bool(words & _HIGHER), bool(words & _LOWER)
    if higher == lower:  # neither, or both ("error-rate accuracy"?): no guess
        return None
    return higher


# -- sentences -------------------------------------------------------------------------

_ABBREV_RE = re.compile(r"\b(?:vs|e\.g|i\.e|et al|cf|Fig|Figs|Tab|Eq|Sec|approx|resp)\.$", re.I)


def split_sentences(lines: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Prose ``(text, line)`` lines → sentences with the line each starts on.

    Blank text ends a paragraph; a sentence ends at ``.``/``!``/``?`` followed by space,
    except after common abbreviations (``vs.``, ``e.g.``, ``et al.``).
    """
    sentences: list[tuple[str, int]] = []
    current: list[str] = []
    start = 0
    for text, line in [*lines, ("", 0)]:
        if not text.strip():
            if current:
                sentences.append((" ".join(current), start))
                current = []
            continue
        pos = 0
        for match in re.finditer(r"[.!?](?=\s+|$)", text):
            piece = text[pos : match.end()].strip()
            if not piece:
                continue
            if not current:
                start = line
            current.append(piece)
            pos = match.end()
            if _ABBREV_RE.search(" ".join(current)):
                continue
            sentences.append((" ".join(current), start))
            current = []
        rest = text[pos:].strip()
        if rest:
            if not current:
                start = line
            current.append(rest)
    return sentences


# -- claims ----------------------------------------------------------------------------

_NEGATION_RE = re.compile(r"\b(?:not|never|fails? to|no|cannot|hardly)\s*$", re.I)
# Verbs whose subject is the better row; "worse"/"underperforms" swap the roles.
_BETTER_RE = re.compile(
    r"\b(?:outperform(?:s|ed|ing)?|beat(?:s|ing)?|surpass(?:es|ed|ing)?|exceed(?:s|ed|ing)?|"
    r"improv(?:es|ed|ing)\s+(?:up)?on|improv(?:es|ed|ing)\s+over|improv(?:es|ed)|"
    r"(?:is|are|was|were|performs?|does|do)?\s*better\s+than|superior\s+to|"
    r"(?:is|are)\s+ahead\s+of)\b",
    re.I,
)
_WORSE_RE = re.compile(
    r"\b(?:underperform(?:s|ed|ing)?|(?:is|are|was|were|performs?)?\s*worse\s+than|"
    r"inferior\s+to|lags?\s+behind|falls?\s+behind)\b",
    re.I,
)
_COMPARE_RE = re.compile(
    r"\b(?P<dir>higher|lower|larger|smaller|greater)\s+(?P<what>[\w%()-]+(?:\s+[\w%()-]+)?)\s+than\b",
    re.I,
)


@dataclass(frozen=True)
class Claim:
    """``better`` beats ``worse`` (row labels), on ``metric`` (a column) if the text says."""

    better: str
    worse: str
    metric: str | None
    path: str
    line: int
    sentence: str


def _aliases(label: str) -> list[str]:
    """Names a sentence may use for a row: the label, and without its parenthetical."""
    names = [label]
    bare = re.sub(r"\s*\([^)]*\)", "", label).strip()
    if bare and bare != label:
        names.append(bare)
    if re.search(r"\((?:ours|our method|proposed)\)", label, re.I):
        names += ["our method", "our approach", "ours"]
    return names


#: A row mention in a sentence: where it is and the row label(s) it may mean.
Mention = tuple[int, int, tuple[str, ...]]


def _alias_table(labels: list[str]) -> dict[str, tuple[str, ...]]:
    """Lower-cased name → the labels it names. ``"CIFAR-10 / LS"`` is also named by its
    leaf ``"LS"`` (which then names every group's LS row)."""
    names: dict[str, list[str]] = {}
    for label in labels:
        leaf = label.rsplit(" / ", 1)[-1]
        for alias in {*_aliases(label), *_aliases(leaf)}:
            bucket = names.setdefault(alias.lower(), [])
            if label not in bucket:
                bucket.append(label)
    return {name: tuple(found) for name, found in names.items()}


def _mentions(sentence: str, aliases: dict[str, tuple[str, ...]]) -> list[Mention]:
    """Non-overlapping row mentions in ``sentence``, longest names first, in text order."""
    candidates: list[Mention] = []
    for alias, labels in aliases.items():
        pattern = r"(?<![\w-])" + re.escape(alias) + r"(?![\w-])"
        candidates += [(m.start(), m.end(), labels) for m in re.finditer(pattern, sentence, re.I)]
    candidates.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    taken: list[Mention] = []
    for cand in candidates:
        if all(cand[1] <= t[0] or cand[0] >= t[1] for t in taken):
            taken.append(cand)
    return sorted(taken)


def _words(text: str) -> str:
    words = re.sub(r"\([^)]*\)|[^\w]+", " ", text.lower()).split()
    # "acc" and "accuracy" are the same metric in a header and in prose.
    return " ".join("accuracy" if w == "acc" else w for w in words)


def _metric_in(sentence: str, columns: list[str]) -> str | None:
    """The column a sentence names: ``"test accuracy"`` names ``Test accuracy (%)``, and
    ``"accuracy"`` names ``Metrics Acc.`` (a trailing part of a grouped header)."""
    lowered = f" {_words(sentence)} "
    best: tuple[int, str] | None = None
    for column in columns:
        words = _words(column).split()
        for k in range(len(words)):  # the whole name first, then shorter tails
            tail = " ".join(words[k:])
            if len(tail) >= 2 and f" {tail} " in lowered:
                if best is None or len(tail) > best[0]:
                    best = (len(tail), column)
                break
    return best[1] if best else None


def find_claims(docs: list[PaperDoc]) -> list[Claim]:
    """Sentences that say one table row is better than another, in document order.

    ``docs`` are the files of one paper (a LaTeX source may be several): row labels and
    column names come from the tables of all of them. A sentence naming rows by their
    leaf in a grouped table (``"LS is better than CE"``) claims it for every group with both
    rows, or only for the groups the sentence names (``"... on ImageNet"``).
    """
    labels: list[str] = []
    columns: list[str] = []
    for table in (t for doc in docs for t in doc.tables):
        labels += [r.label for r in table.rows if r.label not in labels]
        columns += [c for c in table.columns if c not in columns]
    if len(labels) < 2:
        return []
    aliases = _alias_table(labels)
    claims: list[Claim] = []
    for doc in docs:
        for sentence, line in doc.sentences:
            mentions = _mentions(sentence, aliases)
            if len(mentions) < 2:
                continue
            found = _claim_of(sentence, mentions, columns)
            if found is None:
                continue
            sides, metric = found
            for better, worse in sides:
                for b, w in _pairs(sentence, better, worse):
                    claims.append(Claim(b, w, metric, doc.path, line, sentence))
    return claims


def _pairs(sentence: str, better: tuple[str, ...], worse: tuple[str, ...]) -> list[tuple[str, str]]:
    """Row pairs meant by two mentions: direct for unique labels, else matched by group."""
    if len(better) == 1 and len(worse) == 1:
        return [(better[0], worse[0])] if better[0] != worse[0] else []

    def group(label: str) -> str:
        return label.rsplit(" / ", 1)[0] if " / " in label else ""

    pairs = [(b, w) for b in better for w in worse if b != w and group(b) == group(w)]
    named = [
        p
        for p in pairs
        if group(p[0])
        and re.search(rf"(?<![\w-]){re.escape(group(p[0]))}(?![\w-])", sentence, re.I)
    ]
    return named or pairs


def _claim_of(
    sentence: str, mentions: list[Mention], columns: list[str]
) -> tuple[list[tuple[tuple[str, ...], tuple[str, ...]]], str | None] | None:
    """``([(better, worse), ...], metric)`` if ``sentence`` compares its ``mentions``."""
    verb = _BETTER_RE.search(sentence)
    swap = False
    metric = _metric_in(sentence, columns)
    if verb is None:
        verb = _WORSE_RE.search(sentence)
        swap = verb is not None
    if verb is None:
        compare = _COMPARE_RE.search(sentence)
        if compare is None:
            return None
        what = compare.group("what")
        good = direction(what)
        if good is None and metric is not None:
            good = direction(metric)
        if good is None:
            return None  # "higher X than" with X of unknown direction says nothing
        higher = compare.group("dir").lower() in {"higher", "larger", "greater"}
        swap = higher != good
        verb = compare
        metric = metric or _metric_in(what, columns)
    if _NEGATION_RE.search(sentence[: verb.start()]):
        return None
    before = [m for m in mentions if m[1] <= verb.start()]
    after = [m for m in mentions if m[0] >= verb.end()]
    if not before or not after:
        return None
    # "A and B outperform C": every subject joined to the last one by "and"/commas.
    subjects = [before[-1]]
    for prev in reversed(before[:-1]):
        if not re.fullmatch(r"[\s,]*(?:and|&)?\s*", sentence[prev[1] : subjects[0][0]]):
            break
        subjects.insert(0, prev)
    other = after[0][2]
    return [(other, s[2]) if swap else (s[2], other) for s in subjects], metric
