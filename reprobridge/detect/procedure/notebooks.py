"""Jupyter notebooks as experiments, with the metrics and seeds they show.

Every ``*.ipynb`` (outside vendored directories and ``.ipynb_checkpoints``) becomes an
experiment of kind ``notebook`` run headless as ``jupyter nbconvert --to notebook
--execute --allow-errors --output-dir <folder> --output <stem>.executed.ipynb <path>`` (the
executed copy lands next to the notebook under exactly that name, whatever the nbconvert
version; every cell runs, and the auditor names each cell that raised unmarked),
medium confidence. A notebook that is not valid JSON (or not nbformat) is
``ctx.warn``-ed and skipped.

Imports are left to the imports detector, which reads the code cells through
:func:`~reprobridge.detect._notebook.notebook_code` (IPython magics and shell escapes
blanked). What this detector adds from the cells:

* ``metric`` candidates from saved outputs (stream text and ``text/plain`` results): lines
  such as ``test accuracy: 0.912`` or ``f1=0.87`` whose label names a result, with a regex
  source that matches the printed text (the value seen is in the note;
  :func:`~reprobridge.detect.procedure._printed.output_metrics`);
* ``metric`` candidates from the code cells, by the rules of ``.py`` files
  (:mod:`~reprobridge.detect.procedure._printed`): print-like calls (``print(f"step {k} loss {l}")``)
  and a cell's last expression when it names a result (``loss.item()``, shown alone on a
  line of the cell's output). Outputs are often cleared before a commit, and the auditor
  reads the executed notebook's outputs, where these lines will be. A saved output's
  regex wins over a code cell's of the same name (it was seen to match);
* a ``seed`` finding from a seeding call with a literal in a code cell
  (``torch.manual_seed(0)``);
* a ``raises`` finding naming the code cells whose saved outputs show an error (the
  authors saw them raise; the run expects them to raise that error again, see
  ``docs/audit.md``, "Notebook cells that raise").

Evidence lines point into the ``.ipynb`` JSON (the line holding the matched text).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from reprobridge.detect._notebook import (
    cell_code,
    cell_source,
    json_line_of,
    output_texts,
    parsed_cell,
)
from reprobridge.detect._pyast import call_name, import_map, import_map_of, nodes_of, seed_calls
from reprobridge.detect._text import slugify, unique_id
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import (
    ExperimentValue,
    MetricSource,
    MetricValue,
    RaisesValue,
    SavedError,
    SeedValue,
)
from reprobridge.detect.procedure._printed import (
    PrintedMetric,
    keep_metrics,
    last_expression_metric,
    line_metrics,
    message_formats,
    output_metrics,
    printed_line,
)
from reprobridge.manifest.schema import DOTTED_NAME_PATTERN


def _python2(cells: list[dict[str, Any]]) -> bool:
    """Whether a code cell is Python 2 (``print 'x'``, backquotes), which no current
    kernel runs: the notebook ranks below the others (low confidence)."""
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        parsed = parsed_cell(cell_code(cell_source(cell)))
        if isinstance(parsed, SyntaxError):
            line = (parsed.text or "").strip()
            if re.match(r"print\s+[^\s(=]", line) or "`" in line or "<>" in line:
                return True
    return False


def _notebook_imports(cells: list[dict[str, Any]]) -> dict[str, str]:
    """The import map of every code cell together (``from tqdm import tqdm`` in one cell,
    ``tqdm.write`` in another): the code cells as one module, none if it does not parse.

    From the cells' own (memoized) trees when each parses alone: the joined module then
    parses too, and its imports are the cells' in order, so the map is the same without
    parsing every cell a second time. Otherwise (say a cell continued by the next one)
    the joined code is parsed, as that is what decides.
    """
    codes = [cell_code(cell_source(c)) for c in cells if c.get("cell_type") == "code"]
    trees = [parsed_cell(code) for code in codes]
    modules = [t for t in trees if isinstance(t, ast.Module)]
    if len(modules) == len(trees):
        return import_map_of(modules)
    try:
        return import_map(ast.parse("\n".join(codes)))
    except (SyntaxError, ValueError, RecursionError):
        return {}


def _cell_metrics(
    source: str, raw_lines: list[str], cursor: int, imports: dict[str, str]
) -> list[tuple[PrintedMetric, int | None]]:
    """The metrics a code cell prints (its print-like calls, and its last expression,
    which Jupyter shows), each with its line in the notebook JSON."""
    tree = parsed_cell(cell_code(source))
    if not isinstance(tree, ast.Module):
        return []  # Python 2 cells (print 'x'), half-written cells
    lines = source.splitlines()
    found: list[PrintedMetric] = []
    try:
        messages = message_formats(tree)
        for call in nodes_of(tree, ast.Call):
            shown = printed_line(call, imports, messages)
            if shown is not None:
                found.extend(line_metrics(shown))
        last = last_expression_metric(tree)
    except RecursionError:
        return []
    if last is not None:
        found.append(last)
    out: list[tuple[PrintedMetric, int | None]] = []
    for m in sorted(found, key=lambda m: (m.line, m.name)):
        needle = lines[m.line - 1].strip() if 0 < m.line <= len(lines) else ""
        out.append((m, json_line_of(raw_lines, needle, cursor) if needle else None))
    return out


def _kept_metrics(
    found: list[tuple[PrintedMetric, int | None]],
) -> list[tuple[PrintedMetric, int | None]]:
    """(metric, JSON line) of the code cells' metrics worth declaring
    (:func:`~reprobridge.detect.procedure._printed.keep_metrics` over the whole notebook)."""
    where = {id(m): line for m, line in found}
    return [(m, where[id(m)]) for m in keep_metrics(m for m, _ in found)]


def _code_seed(source: str) -> tuple[int, int] | None:
    """(line within the cell, literal seed) of the first literal seeding call in ``source``."""
    tree = parsed_cell(cell_code(source))
    if not isinstance(tree, ast.Module):
        return None
    imports = import_map(tree)
    for call, value in seed_calls(tree, imports):
        if value is not None and call_name(call, imports):
            return call.lineno, value
    return None


class NotebooksDetector(Detector):
    """Notebooks as headless experiments, plus their printed metrics and seeds."""

    name = "notebooks"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        taken: set[str] = set()
        for path, text in ctx.own_texts(ctx.index.with_suffix(".ipynb"), "notebook"):
            try:
                nb = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                ctx.warn(f"skipped notebook: not valid JSON ({exc})", path)
                continue
            cells = nb.get("cells") if isinstance(nb, dict) else None
            if not isinstance(cells, list):
                ctx.warn("skipped notebook: no `cells` list (not nbformat 4)", path)
                continue
            findings.extend(
                self._notebook(path, text, [c for c in cells if isinstance(c, dict)], taken)
            )
        return findings

    def _metric(
        self, path: str, name: str, regex: str, line: int | None, confidence: Confidence, note: str
    ) -> Finding:
        return Finding(
            kind="metric",
            key=name,
            value=MetricValue(path, MetricSource(regex=regex)),
            evidence=(Evidence(path, line),),
            detector=self.name,
            confidence=confidence,
            note=note,
        )

    def _notebook(
        self, path: str, text: str, cells: list[dict[str, Any]], taken: set[str]
    ) -> list[Finding]:
        pure = PurePosixPath(path)
        exp_id = unique_id(slugify(pure.stem) or "notebook", taken)
        title = ""
        for cell in cells:
            if cell.get("cell_type") == "markdown":
                heading = next(
                    (
                        ln.lstrip("#").strip()
                        for ln in cell_source(cell).splitlines()
                        if ln.startswith("#")
                    ),
                    "",
                )
                if heading:
                    title = heading[:200]
                    break
        output = shlex.quote(f"{pure.stem}.executed.ipynb")
        # --output-dir (the notebook's own folder): nbconvert before 7.17 appends
        # ".nbconvert" to --output's name unless an output directory is given, so without
        # it the declared output (<stem>.executed.ipynb) is never written.
        folder = shlex.quote(str(pure.parent))
        # --ExecutePreprocessor.timeout=-1: nbconvert stops a cell after 30 s by default
        # (before 6.0, and in nbclient's older releases), so a training cell failed with
        # "Cell execution timed out" on a slow CPU; the experiment's own timeout bounds it.
        # --allow-errors: teaching notebooks raise on purpose (`# this will not work`), often
        # unmarked, and nbconvert stops at the first cell that raises. Run to the end; the
        # auditor reads the executed copy and names every cell that raised without the
        # `raises-exception` tag (the procedure is then incomplete, never a pass), and a
        # cell that raised shows no metric (repro/check.py).
        command = (
            f"jupyter nbconvert --to notebook --execute --allow-errors "
            f"--ExecutePreprocessor.timeout=-1 "
            f"--output-dir {folder} --output {output} {shlex.quote(path)}"
        )
        py2 = _python2(cells)
        findings: list[Finding] = [
            Finding(
                kind="experiment",
                key=exp_id,
                value=ExperimentValue(command, "notebook", title, path, "."),
                evidence=(Evidence(path, 1),),
                detector=self.name,
                confidence="low" if py2 else "medium",
                note="Python 2 code cells: it may not run" if py2 else "",
            )
        ]
        raw_lines = text.splitlines()
        metrics: dict[str, Finding] = {}
        code_metrics: list[tuple[PrintedMetric, int | None]] = []
        imports = _notebook_imports(cells)
        seed: Finding | None = None
        cursor = 0
        for cell in cells:
            if cell.get("cell_type") != "code":
                continue
            source = cell_source(cell)
            first = source.splitlines()[0] if source.strip() else ""
            src_line = json_line_of(raw_lines, first, cursor) if first else None
            if src_line:
                cursor = src_line
            if seed is None:
                hit = _code_seed(source)
                if hit is not None:
                    line_in_cell, value = hit
                    cell_lines = source.splitlines()
                    needle = (
                        cell_lines[line_in_cell - 1].strip()
                        if line_in_cell <= len(cell_lines)
                        else ""
                    )
                    seed = Finding(
                        kind="seed",
                        key=path,
                        value=SeedValue(path, None, value),
                        evidence=(
                            Evidence(
                                path, json_line_of(raw_lines, needle, cursor) if needle else None
                            ),
                        ),
                        detector=self.name,
                        confidence="medium",
                        note="literal seed in a code cell",
                    )
            code_metrics.extend(_cell_metrics(source, raw_lines, cursor, imports))
            for out_text in output_texts(cell):
                for name, regex, shown, matched in output_metrics(out_text):
                    if name in metrics:
                        continue
                    note = f"saved output shows {matched.strip()!r} (value {shown})"
                    at = json_line_of(raw_lines, matched, cursor)
                    metrics[name] = self._metric(path, name, regex, at, "medium", note)
        # What the code cells print: the metric the executed notebook will show, whether or
        # not the saved outputs show it (outputs are often cleared before a commit).
        for m, line in _kept_metrics(code_metrics):
            if m.name in metrics:
                continue
            note = "printed by a code cell" + (
                "" if m.labelled else " without a label: named after the value"
            )
            note += f"; {m.note}" if m.note else ""
            conf: Confidence = "medium" if m.labelled else "low"
            metrics[m.name] = self._metric(path, m.name, m.regex, line, conf, note)
        if seed is not None:
            findings.append(seed)
        findings.extend(metrics[name] for name in sorted(metrics))
        raised = self._saved_errors(path, raw_lines, cells)
        if raised is not None:
            findings.append(raised)
        return findings

    def _saved_errors(
        self, path: str, raw_lines: list[str], cells: list[dict[str, Any]]
    ) -> Finding | None:
        """The ``raises`` finding of the cells whose saved outputs hold an error output
        (its ``ename`` a Python name), evidence at the first one; None without any."""
        saved: list[SavedError] = []
        for number, cell in enumerate(cells, 1):
            outputs = cell.get("outputs") if cell.get("cell_type") == "code" else None
            for out in outputs if isinstance(outputs, list) else []:
                if not isinstance(out, dict) or out.get("output_type") != "error":
                    continue
                ename = out.get("ename")
                if isinstance(ename, str) and re.fullmatch(DOTTED_NAME_PATTERN, ename):
                    saved.append(SavedError(number, ename))
                break  # a cell stops at its first error
        if not saved:
            return None
        first = next(
            (i for i, ln in enumerate(raw_lines, 1) if '"ename"' in ln and saved[0].error in ln),
            None,
        )
        shown = ", ".join(f"cell {s.cell} ({s.error})" for s in saved)
        return Finding(
            kind="raises",
            key=path,
            value=RaisesValue(path, tuple(saved)),
            evidence=(Evidence(path, first),),
            detector=self.name,
            confidence="medium",
            note=f"saved outputs show {shown} raising",
        )
