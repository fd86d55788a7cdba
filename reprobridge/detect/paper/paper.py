"""The paper given with ``--paper``: its title, result tables (targets) and claims.

Formats: Markdown (``.md``), LaTeX (``.tex``, following ``\\input``/``\\include``), an arXiv
source archive (``.tar.gz``/``.tgz``/``.tar``, or a single gzipped ``.tex``; members are read
from memory, never extracted) and PDF (text extraction, best effort). The format is chosen
by content first (``%PDF``, gzip/tar headers), then by suffix.

Where the paper is read from: a path relative to the repository goes through the index (a
file git ignores but that lies inside the repository is read directly, since the user named
it); an absolute path outside the repository is the user's own file and is read from disk,
its evidence showing only its base name. Nothing is fetched from the network.

Findings:

* ``project`` [``title``] — ``{"value": title}``;
* ``target`` [``row::column``] — one per numeric table cell: ``{"row", "column", "value",
  "table", "caption", "higher_is_better", "percent", "spread"?, "decimals"}``. ``value``
  is the number as printed (``91.2`` for ``91.2 ± 0.3`` and for ``91.2%``); ``spread`` is
  the ± part; ``percent`` is true when the cell or its column says ``%``; ``decimals`` the
  digits printed after the point (the precision the paper reports);
* ``claim`` [``better>worse``] — ``{"better", "worse", "metric"}`` from sentences such as
  "Mixup outperforms the baseline by 9 points of test accuracy" whose two sides are row
  labels of the tables; ``metric`` is the column the sentence names, or None.

Evidence is ``file:line`` of the paper (for a PDF the "line" is the page, and the note says
so). A paper that cannot be read or parsed is a DetectionError naming it; a paper with no
tables is only a warning.
"""

from __future__ import annotations

import gzip
import io
import posixpath
import re
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ClaimValue, ProjectValue, TargetValue
from reprobridge.detect.paper._paper_doc import PaperDoc, find_claims, parse_cell
from reprobridge.detect.paper._paper_doc import direction as column_direction
from reprobridge.detect.paper._paper_md import parse_markdown
from reprobridge.detect.paper._paper_pdf import parse_pdf
from reprobridge.detect.paper._paper_tex import parse_latex, strip_comments, tex_events
from reprobridge.errors import DetectionError

#: Largest paper file read (PDFs with figures are larger than source files).
MAX_PAPER_BYTES = 64 * 1024 * 1024
#: Most bytes read out of an archive, all members together (a bound on gzip bombs).
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
#: Largest single ``.tex`` member read from an archive.
MAX_TEX_BYTES = 8 * 1024 * 1024
_MAX_INPUT_DEPTH = 16

Reader = Callable[[str], str | None]


class PaperDetector(Detector):
    """Targets, claims and the title from the paper (``ctx.paper_path``); see the module."""

    name = "paper"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        if not ctx.paper_path:
            return []
        display, data, sibling = _load(ctx)
        docs = _parse(display, data, sibling)
        pdf = any(doc.pages for doc in docs)
        confidence: Confidence = "medium" if pdf else "high"
        findings: list[Finding] = []
        titled = next((d for d in docs if d.title), None)
        if titled is not None and titled.title:
            findings.append(
                Finding(
                    kind="project",
                    key="title",
                    value=ProjectValue(titled.title),
                    evidence=(Evidence(titled.path, titled.title_line),),
                    detector=self.name,
                    confidence=confidence,
                    note=_page_note(titled, titled.title_line),
                )
            )
        for doc in docs:
            findings += targets_of(doc, confidence, self.name)
        seen: set[tuple[str, str | None]] = set()
        for claim in find_claims(docs):
            key = f"{claim.better}>{claim.worse}"
            if (key, claim.metric) in seen:
                continue
            seen.add((key, claim.metric))
            sentence = (
                claim.sentence if len(claim.sentence) <= 200 else claim.sentence[:197] + "..."
            )
            findings.append(
                Finding(
                    kind="claim",
                    key=key,
                    value=ClaimValue(claim.better, claim.worse, claim.metric),
                    evidence=(Evidence(claim.path, claim.line),),
                    detector=self.name,
                    # Read from prose: the roles are clear, the metric less so.
                    confidence="medium",
                    note=f'"{sentence}"',
                )
            )
        if not any(doc.tables for doc in docs):
            ctx.warn("no result tables found in the paper; no metric targets from it", display)
        return findings


def targets_of(doc: PaperDoc, confidence: Confidence, detector: str) -> list[Finding]:
    """One ``target`` finding per numeric cell of ``doc``'s tables (see the module)."""
    findings: list[Finding] = []
    for table in doc.tables:
        columns = table.columns
        for row in table.rows:
            for k, text in enumerate(row.cells[: len(columns)]):
                cell = parse_cell(text)
                if cell is None:
                    continue
                column = columns[k] or f"column {k + 1}"
                value = TargetValue(
                    row=row.label,
                    column=column,
                    value=cell.value,
                    table=table.name,
                    caption=table.caption,
                    higher_is_better=column_direction(table.headers[k]),
                    percent=cell.percent or "%" in table.headers[k],
                    spread=cell.spread,
                    decimals=cell.decimals,
                )
                notes = [_page_note(doc, row.line)] if doc.pages else []
                if cell.spread is not None:
                    notes.append(f"± {cell.spread:g} is the spread the paper reports")
                findings.append(
                    Finding(
                        kind="target",
                        key=f"{row.label}::{column}",
                        value=value,
                        evidence=(Evidence(doc.path, row.line),),
                        detector=detector,
                        confidence=confidence,
                        note="; ".join(notes),
                    )
                )
    return findings


def _page_note(doc: PaperDoc, line: int | None) -> str:
    return f"page {line}" if doc.pages and line is not None else ""


# -- reading the file ---------------------------------------------------------------------


def _load(ctx: DetectContext) -> tuple[str, bytes, Reader]:
    """``(display path, bytes, reader of files beside it)`` of ``ctx.paper_path``."""
    given = ctx.paper_path or ""
    root = ctx.index.root.resolve()
    candidate = Path(given) if Path(given).is_absolute() else root / given
    try:
        full = candidate.resolve()
    except (OSError, RuntimeError) as exc:
        raise DetectionError(f"paper cannot be resolved: {exc}", path=given) from exc
    if full.is_relative_to(root):
        rel = full.relative_to(root).as_posix()
        folder = posixpath.dirname(rel)
        if rel in ctx.index:
            data = ctx.index.read_bytes(rel, limit=MAX_PAPER_BYTES)

            def in_repo(name: str) -> str | None:
                path = posixpath.normpath(posixpath.join(folder, name))
                return ctx.index.try_read_text(path) if path in ctx.index else None

            return rel, data, in_repo
        return rel, _read_disk(full, given), _disk_reader(full.parent)
    # The user's own file outside the repository: only its name goes into the evidence.
    return full.name, _read_disk(full, given), _disk_reader(full.parent)


def _read_disk(full: Path, given: str) -> bytes:
    if not full.is_file():
        raise DetectionError("paper file not found (or not a regular file)", path=given)
    try:
        with open(full, "rb") as fh:
            data = fh.read(MAX_PAPER_BYTES + 1)
    except OSError as exc:
        raise DetectionError(f"paper cannot be read: {exc.strerror or exc}", path=given) from exc
    if len(data) > MAX_PAPER_BYTES:
        raise DetectionError(
            f"paper is above the {MAX_PAPER_BYTES // 2**20} MB limit for a paper", path=given
        )
    return data


def _disk_reader(folder: Path) -> Reader:
    def read(name: str) -> str | None:
        try:
            path = (folder / name).resolve()
            # \input{../x} must not read outside the paper's own folder.
            if not path.is_relative_to(folder) or not path.is_file():
                return None
            if path.stat().st_size > MAX_TEX_BYTES:
                return None
            return path.read_bytes().decode("utf-8-sig", "replace")
        except OSError:
            return None

    return read


def _parse(display: str, data: bytes, sibling: Reader) -> list[PaperDoc]:
    lower = display.lower()
    if data.startswith(b"%PDF"):
        return [parse_pdf(data, display)]
    if data[:2] == b"\x1f\x8b" or data[257:262] == b"ustar" or lower.endswith((".tgz", ".tar")):
        return _parse_archive(display, data)
    if lower.endswith(".pdf"):
        return [parse_pdf(data, display)]  # no %PDF header: pypdf says what is wrong
    if b"\0" in data[:8192]:
        raise DetectionError("is a binary file, not a Markdown, LaTeX or PDF paper", path=display)
    text = data.decode("utf-8-sig", "replace")
    if lower.endswith((".tex", ".latex")) or (
        not lower.endswith((".md", ".markdown", ".txt"))
        and re.search(r"\\documentclass|\\begin\{document\}", text)
    ):
        return _parse_tex_tree(display, text, sibling)
    return [parse_markdown(text, display)]


def _parse_archive(display: str, data: bytes) -> list[PaperDoc]:
    """The ``.tex`` files of an arXiv source archive, read from memory."""
    texts: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            unpacked = 0
            while (entry := tar.next()) is not None:
                unpacked += entry.size + 512
                if unpacked > MAX_UNPACKED_BYTES:
                    raise DetectionError(
                        f"archive unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MB",
                        path=display,
                    )
                name = posixpath.normpath(entry.name)
                if not entry.isfile() or not name.lower().endswith(".tex"):
                    continue
                if name.startswith(("/", "..")) or entry.size > MAX_TEX_BYTES:
                    continue  # never extracted, but an odd name is no member of the paper
                handle = tar.extractfile(entry)
                if handle is not None:
                    texts[name] = handle.read(MAX_TEX_BYTES).decode("utf-8-sig", "replace")
    except tarfile.ReadError:
        # arXiv serves a single-file source as a gzipped .tex, not a tar.
        single = _gunzip(display, data)
        return _parse_tex_tree(display, single, lambda _: None)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise DetectionError(f"is not a readable source archive ({exc})", path=display) from exc
    if not texts:
        raise DetectionError("source archive has no .tex file", path=display)
    mains = sorted(
        (n for n, t in texts.items() if re.search(r"\\documentclass", strip_comments(t))),
        key=lambda n: ("\\begin{document}" not in texts[n], n.count("/"), n),
    )
    if not mains:  # no main file: every .tex member, in name order
        return [parse_latex(texts[name], f"{display}/{name}") for name in sorted(texts)]
    main = mains[0]
    folder = posixpath.dirname(main)

    def read_member(name: str) -> str | None:
        return texts.get(posixpath.normpath(posixpath.join(folder, name)))

    return _parse_tex_tree(f"{display}/{main}", texts[main], read_member)


def _gunzip(display: str, data: bytes) -> str:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
            raw = fh.read(MAX_TEX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise DetectionError(
            f"is neither a tar archive nor gzipped LaTeX ({exc})", path=display
        ) from exc
    if len(raw) > MAX_TEX_BYTES or b"\0" in raw[:8192]:
        raise DetectionError("is neither a tar archive nor gzipped LaTeX", path=display)
    return raw.decode("utf-8-sig", "replace")


def _parse_tex_tree(base: str, text: str, read: Reader) -> list[PaperDoc]:
    """The main ``.tex`` and the files it inputs, tables numbered in document order.

    ``base`` is the main file's evidence path; ``read`` returns an ``\\input`` file's text
    by its name relative to the main file's folder (None: not available, skipped).
    """
    files: dict[str, tuple[str, str]] = {}  # input name -> (evidence path, text)
    numbers: dict[str, list[int]] = {}
    counter = 0

    def visit(key: str, shown: str, body: str, depth: int) -> None:
        nonlocal counter
        files[key] = (shown, body)
        numbers[key] = []
        for kind, child in tex_events(body):
            if kind == "table":
                counter += 1
                numbers[key].append(counter)
                continue
            if depth >= _MAX_INPUT_DEPTH:
                continue
            for candidate in (child, child + ".tex"):
                path = posixpath.normpath(candidate)
                if path in files:
                    break  # included twice (or a cycle): its tables count once
                child_text = read(path)
                if child_text is not None:
                    where = posixpath.normpath(posixpath.join(posixpath.dirname(base), path))
                    visit(path, where, child_text, depth + 1)
                    break

    visit("", base, text, 0)
    return [parse_latex(body, shown, numbers=numbers[key]) for key, (shown, body) in files.items()]
