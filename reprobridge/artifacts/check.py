#!/usr/bin/env python3
# repro/check.py, copied from ReproBridge (reprobridge/artifacts/check.py); regenerate with: rb init
"""Threshold check of one experiment run: extract each metric, judge it, print a verdict.

Standalone on purpose: standard library only, Python 3.8 syntax, so the flake's
``reproduce-<exp>`` apps can run it with whatever Python the pinned environment has. The
same file is :mod:`reprobridge.artifacts.check` inside ReproBridge, where the auditor
imports :func:`extract_metric` and :func:`judge_metric`, and ``rb init`` copies it byte for
byte into target repositories as ``repro/check.py``.

Usage::

    python repro/check.py --spec SPEC.json --experiment EXP --tier full|smoke \\
        --log LOG --workdir DIR

``SPEC.json`` is one experiment of ``reprobridge.toml`` as JSON (the flake writes it with
``builtins.toJSON``): ``metrics``, ``outputs`` and ``tiers`` as in the manifest schema.

Rules:

- A regex source is searched in the log (stdout and stderr together, multiline mode); the
  value is the first capture group of the LAST match, because training logs print running
  values and the final one is the result. How many matches there were is reported.
- An executed notebook prints into its cells, not to stdout: the text outputs (streams,
  and the ``text/plain`` of results and displays) of every declared output ending in
  ``.ipynb`` are searched too, after the log (:func:`metric_log`). A cell that raised
  (an ``error`` output) shows no metric: a number it printed before raising proves
  nothing, as a number printed by a run that then crashed proves nothing.
- Cells that raised (:func:`raised_cells`). A notebook run past its errors
  (``--allow-errors``) ends with exit 0 whatever its cells did, so its executed copy is
  read: a cell that raised and that nothing marks as meant to raise leaves the run
  ``INCOMPLETE`` (a line names each such cell and its error): it may be a teaching cell
  that raises on purpose or a broken one, and only its authors can say which. Marks: the
  ``raises-exception`` cell tag (which Jupyter honours), and the output's ``raises``
  (``[{"cell": 5, "error": "ValueError"}]``; ``rb init`` lists there the cells whose saved
  outputs show an error), which expects that exception and no other.
- Ambiguity. The line the value is read from must hold one value: ``train acc=0.99 val
  acc=0.85`` matched by ``acc=([0-9.]+)`` is ambiguous (which one is meant?) and fails, quoting
  the line. Across lines the last match wins (the rule above), so a result printed twice
  on two lines cannot be told from a running value by default; a source with
  ``select = "only"`` requires every match to carry the same value (B8's "exactly one
  value"), for logs that print the result once. Repeats of one value are never ambiguous
  (a logger teeing to stdout and stderr), and numbers compare as numbers (``0.8`` equals
  ``0.80``). In a JSON file, a key on the path given twice in one object with different
  values is ambiguous too.
- A file source is read relative to the workdir: ``.json``; ``.yaml``/``.yml`` when PyYAML
  can be imported; ``.csv`` (``key`` is a column, its last non-empty value is read); a
  TensorBoard log directory or event file (``key`` is the scalar's tag, e.g.
  ``test/loss``; the last value logged is read, from the event files in path order). The key
  is dotted (``eval.top1``; list indices as numbers); a literal key containing dots wins
  over a split one.
- Values must be numbers (or strings that parse as one, e.g. ``"0.91"``); booleans, missing
  values and NaN/inf fail, with the reason printed.
- Failures have a kind (:attr:`MetricError.kind`): ``missing`` (nothing where the source
  points), ``invalid`` (not a finite number, or an unreadable file) or ``ambiguous``.
- Thresholds: ``target`` with ``tolerance`` (absolute) and/or ``relative_tolerance`` (of
  ``|target|``; with both, the wider band applies, as in ``pytest.approx``); ``min`` and
  ``max`` are inclusive. A bare ``target`` means at least it when ``higher_is_better`` is
  true, at most it when false, and equal to it otherwise.
- Tier ``full`` judges the experiment's ``metrics`` (or ``tiers.full.metrics``). Tier
  ``smoke`` judges ``tiers.smoke.metrics`` when present; otherwise the experiment's metrics
  (whose targets describe full runs) only have to exist and be finite, and are reported
  ``UNJUDGED``. A metric without any threshold (no ``target``, ``min`` or ``max``) is
  ``UNJUDGED`` in every tier: a value that was not compared with anything passes nothing.
- Declared ``outputs`` must exist (relative to the workdir): a file, or a directory with at
  least one file in it; a declared ``sha256`` (a directory's: the tree hash of
  ``reprobridge.audit.datasets``) is compared in tier ``full`` only.

Output: one line per metric and output, then the verdict: ``PASS`` (at least one metric
was compared with a threshold, and every check held), ``FAIL`` (a check failed) or
``INCOMPLETE`` (nothing failed, but no metric or some metric was not judged, or a notebook
cell raised unmarked: the line says which). Exit status 0 (pass), 1 (fail), 2 (usage
error: bad arguments or an unreadable spec), 20 (incomplete; the same code as ``rb
audit``'s INCOMPLETE).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import re
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CheckResult",
    "MetricAmbiguous",
    "MetricError",
    "MetricInvalid",
    "MetricMissing",
    "check_experiment",
    "describe_thresholds",
    "extract_metric",
    "has_thresholds",
    "judge_metric",
    "main",
    "notebook_raises",
    "raised_cells",
    "tier_metrics",
    "unexpected_raises",
]

TIERS = ("full", "smoke")
#: How a regex source picks its value among several matches (``select``; default ``last``).
SELECT = ("last", "only")
#: Exit status of an INCOMPLETE verdict (rb's own ``EXIT_INCOMPLETE``; kept equal by a test).
EXIT_INCOMPLETE = 20
#: Why an extracted value was not judged, as check lines and the auditor report it.
NO_THRESHOLD = "no threshold declared (not judged): add `target`, `min` or `max`"
SMOKE_UNJUDGED = "smoke: exists and is finite; the tier declares no thresholds (not judged)"
#: Slack for float round-off when comparing against a threshold (values pass through
#: decimal text in logs and JSON, and Nix's JSON printer keeps 6 significant digits).
_EPS = 1e-9


class MetricError(ValueError):
    """A metric could not be extracted; the message says why, in one line.

    ``kind`` is ``"missing"``, ``"invalid"`` or ``"ambiguous"`` (the subclasses below);
    ``lines`` quotes the log lines involved (``line 7: 'acc=0.9x'``), empty for files.
    """

    kind = "invalid"

    def __init__(self, message: str, lines: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.lines = list(lines)


class MetricMissing(MetricError):
    """No value where the source points: no regex match, no file, no key, no row."""

    kind = "missing"


class MetricInvalid(MetricError):
    """A value that is not a finite number, a source that cannot be used, an unreadable file."""

    kind = "invalid"


class MetricAmbiguous(MetricError):
    """One metric, several different values (a result printed twice, a duplicated JSON key)."""

    kind = "ambiguous"


class CheckResult:
    """The outcome of one check line (a metric or an output).

    ``judged`` is false for a metric whose value was extracted but compared with no
    threshold (``UNJUDGED``), and for an executed notebook whose cells raised unmarked:
    it fails nothing and passes nothing.
    """

    def __init__(
        self, name: str, ok: bool, line: str, value: float | None = None, judged: bool = True
    ) -> None:
        self.name = name
        self.ok = ok
        self.line = line
        self.value = value
        self.judged = judged

    def __repr__(self) -> str:
        return f"CheckResult({self.name!r}, ok={self.ok!r}, line={self.line!r})"


# -- extraction ---------------------------------------------------------------------------


def _to_number(raw: Any, where: str, lines: Sequence[str] = ()) -> float:
    """``raw`` as a finite float, or :class:`MetricInvalid` quoting ``lines`` at its end."""
    quoted = " ({})".format("; ".join(lines)) if lines else ""
    if isinstance(raw, _Duplicate):
        raise MetricAmbiguous(f"{where}: {raw.describe()}")
    if isinstance(raw, bool) or raw is None:
        raise MetricInvalid(f"{where} is {raw!r}, not a number{quoted}", lines)
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            raise MetricInvalid(f"{where} is {raw!r}, not a number{quoted}", lines) from None
    else:
        raise MetricInvalid(f"{where} is a {type(raw).__name__}, not a number{quoted}", lines)
    if not math.isfinite(value):
        raise MetricInvalid(f"{where} is {value} (not finite){quoted}", lines)
    return value


class _Duplicate:
    """A JSON key given twice in one object with different values (kept to report it)."""

    def __init__(self, key: str, values: list[Any]) -> None:
        self.key = key
        self.values = values

    def describe(self) -> str:
        shown = ", ".join(
            json.dumps(v, sort_keys=True, default=lambda _: "?")[:40] for v in self.values[:3]
        )
        times = len(self.values)
        return f"ambiguous: key {self.key!r} appears {times} times in one object with different values ({shown})"


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of duplicated keys silently; a metric read through such a
    # key has two candidate values, so the duplicate is kept as a marker and reported.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key not in out:
            out[key] = value
            continue
        seen = out[key]
        values = seen.values if isinstance(seen, _Duplicate) else [seen]
        if all(v == value for v in values):
            continue
        out[key] = _Duplicate(key, [*values, value])
    return out


def _lookup(data: Any, key: str, where: str) -> Any:
    """Follow a dotted ``key`` into nested dicts and lists."""
    if isinstance(data, _Duplicate):
        raise MetricAmbiguous(f"{where}: {data.describe()}")
    if isinstance(data, dict) and key in data:
        return data[key]
    head, dot, rest = key.partition(".")
    if isinstance(data, dict):
        if head not in data:
            raise MetricMissing(f"{where}: no key {head!r}")
        node = data[head]
    elif isinstance(data, list):
        try:
            node = data[int(head)]
        except (ValueError, IndexError):
            raise MetricMissing(f"{where}: no list index {head!r}") from None
    else:
        raise MetricMissing(f"{where}: {head!r} is not inside a table or list")
    return _lookup(node, rest, where) if dot else node


def _read_csv(path: Path, column: str, where: str) -> Any:
    """The last non-empty value of ``column``: a logger that writes one row per event
    (Lightning's CSVLogger: training rows, then a validation row) leaves a metric's cell
    empty in the rows of other events."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if column not in (reader.fieldnames or ()):
            raise MetricMissing(f"{where}: no column {column!r}")
        values = [row[column] for row in reader if (row.get(column) or "").strip()]
    if not values:
        raise MetricMissing(f"{where}: no row has a value in column {column!r}")
    return values[-1]


# -- TensorBoard event files --------------------------------------------------------------

#: The name TensorBoard writers give event files (``events.out.tfevents.<time>.<host>...``).
TFEVENTS = "tfevents"
#: Bytes of event files one metric reads at most (a log directory can hold many runs).
_TFEVENTS_MAX_BYTES = 512 * 1024 * 1024
_DT_FLOAT, _DT_DOUBLE = 1, 2


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one protobuf message: varints as ints,
    fixed32/fixed64 and length-delimited fields as raw bytes."""
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        out.append((field, wire, value))
    return out


def _tensor_scalar(buf: bytes) -> float | None:
    """The first value of a TensorProto holding floats or doubles (TF2 scalar summaries)."""
    dtype, content, floats, doubles = 0, b"", [], []
    for field, wire, value in _fields(buf):
        if field == 1 and wire == 0:
            dtype = value
        elif field == 4 and wire == 2:
            content = value
        elif field == 5:  # float_val: packed (wire 2) or one fixed32
            floats += (
                [v for (v,) in struct.iter_unpack("<f", value)]
                if wire == 2
                else [struct.unpack("<f", value)[0]]
            )
        elif field == 6:
            doubles += (
                [v for (v,) in struct.iter_unpack("<d", value)]
                if wire == 2
                else [struct.unpack("<d", value)[0]]
            )
    if dtype == _DT_FLOAT and (floats or len(content) >= 4):
        return float(floats[0] if floats else struct.unpack("<f", content[:4])[0])
    if dtype == _DT_DOUBLE and (doubles or len(content) >= 8):
        return float(doubles[0] if doubles else struct.unpack("<d", content[:8])[0])
    return None


def _event_scalars(record: bytes) -> list[tuple[str, float]]:
    """(tag, value) of the scalar summaries in one serialized ``Event``."""
    out = []
    for field, wire, summary in _fields(record):
        if field != 5 or wire != 2:  # Event.summary
            continue
        for vfield, vwire, value in _fields(summary):
            if vfield != 1 or vwire != 2:  # Summary.value
                continue
            tag, number = None, None
            for f, w, v in _fields(value):
                if f == 1 and w == 2:
                    tag = v.decode("utf-8", "replace")
                elif f == 2 and w == 5:  # simple_value
                    number = float(struct.unpack("<f", v)[0])
                elif f == 8 and w == 2 and number is None:  # tensor
                    number = _tensor_scalar(v)
            if tag is not None and number is not None:
                out.append((tag, number))
    return out


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    found = []
    for folder, dirs, files in os.walk(path, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = Path(folder, name)
            if TFEVENTS in name and not full.is_symlink() and full.is_file():
                found.append(full)
    return found


def _read_tfevents(path: Path, tag: str, where: str) -> float:
    """The last value logged for scalar ``tag`` in the TensorBoard event file ``path``, or in
    the event files under the directory ``path`` (by path order, then record order).

    TFRecord framing (length: uint64, its CRC, the record, its CRC; little-endian) with the
    Event/Summary protobuf fields TensorBoard writers use: ``simple_value`` (PyTorch's
    SummaryWriter, TF1) and a float/double ``tensor`` (TF2's ``tf.summary.scalar``). CRCs
    are not checked; a truncated last record (a run killed while writing) ends the file.
    """
    files = _event_files(path)
    if not files:
        raise MetricMissing(f"{where}: no TensorBoard event file (*{TFEVENTS}*) there")
    last = None
    budget = _TFEVENTS_MAX_BYTES
    for file in files:
        with open(file, "rb") as handle:
            data = handle.read(budget + 1)
        if len(data) > budget:
            raise MetricInvalid(f"{where}: event files larger than {budget} bytes in all")
        budget -= len(data)
        pos = 0
        while pos + 12 <= len(data):
            (size,) = struct.unpack_from("<Q", data, pos)
            start = pos + 12
            if start + size + 4 > len(data):
                break
            try:
                scalars = _event_scalars(data[start : start + size])
            except (ValueError, struct.error):
                scalars = []  # not an event we can read (another record type): skip it
            for name, value in scalars:
                if name == tag:
                    last = value
            pos = start + size + 4
    if last is None:
        raise MetricMissing(f"{where}: no scalar tagged {tag!r} in {len(files)} event file(s)")
    return last


def _read_structured(path: Path, where: str) -> Any:
    lower = path.name.lower()
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if lower.endswith((".yaml", ".yml")):
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise MetricInvalid(f"{where}: PyYAML is not installed, cannot read YAML") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise MetricInvalid(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        return json.loads(text, object_pairs_hook=_object_pairs)
    except ValueError as exc:
        raise MetricInvalid(f"{where}: not valid JSON ({exc})") from None


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Start and end of the line around ``text[start:end]``; ``\r`` ends a line too."""
    head = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
    tails = [i for i in (text.find("\n", end), text.find("\r", end)) if i != -1]
    return head, min(tails) if tails else len(text)


def _quote(number: int, line: str) -> str:
    shown = line if len(line) <= 200 else line[:200] + "..."
    return f"line {number}: {shown!r}"


def _same_value(raw: Any) -> Any:
    """What two printed values are compared by: the number when there is one, else the text."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        return str(raw).strip()
    return value if math.isfinite(value) else str(raw).strip()


def _regex_value(regex: str, log_text: str, select: str) -> float:
    try:
        pattern = re.compile(regex, re.MULTILINE)
    except re.error as exc:
        raise MetricInvalid(f"regex {regex!r} does not compile: {exc}") from None
    if pattern.groups < 1:
        raise MetricInvalid(f"regex {regex!r} has no capture group")
    # (line number, offset where the line starts, line text, raw value), in log order
    found: list[tuple[int, int, str, Any]] = []
    line_no, counted_to = 1, 0
    for match in pattern.finditer(log_text):
        start, end = match.span(1) if match.start(1) != -1 else match.span()
        line_no += log_text.count("\n", counted_to, start)
        counted_to = start
        head, tail = _line_bounds(log_text, start, end)
        found.append((line_no, head, log_text[head:tail], match.group(1)))
    if not found:
        raise MetricMissing(f"regex {regex!r} does not match the log")
    last_no, last_head, last_line, raw = found[-1]
    where = f"regex {regex!r}"
    if len(found) > 1:
        where += f" (last of {len(found)} matches)"
    value = _to_number(raw, where, [_quote(last_no, last_line)])
    # "last": only the line the value is read from must be unambiguous; "only": every match.
    rivals = found if select == "only" else [f for f in found if f[1] == last_head]
    distinct: dict[Any, tuple[int, str]] = {}
    for number, _, line, other in rivals:
        distinct.setdefault(_same_value(other), (number, line))
    if len(distinct) > 1:
        shown = sorted(set(distinct.values()))
        quoted = [_quote(n, text) for n, text in shown[:3]]
        if len(shown) == 1:
            what = f"{len(distinct)} different values on one line"
        else:
            what = f"{len(distinct)} different values"
        raise MetricAmbiguous(
            "ambiguous: regex {!r} matches {} ({}); make the regex match only the result".format(
                regex, what, "; ".join(quoted)
            ),
            quoted,
        )
    return value


#: The cell tag with which Jupyter (nbclient, nbconvert) runs on past a cell that raises.
RAISES_TAG = "raises-exception"


def _notebook_cells(path: Path) -> list[Any]:
    """The cells of the notebook at ``path``; [] when it is not a readable nbformat-4 one."""
    try:
        with open(path, encoding="utf-8") as handle:
            nb = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return []
    cells = nb.get("cells") if isinstance(nb, dict) else None
    return cells if isinstance(cells, list) else []


def _outputs(cell: Any) -> list[Any]:
    outputs = cell.get("outputs") if isinstance(cell, dict) else None
    return outputs if isinstance(outputs, list) else []


def _error_output(cell: Any) -> Any:
    """The cell's first ``error`` output, or None."""
    return next(
        (o for o in _outputs(cell) if isinstance(o, dict) and o.get("output_type") == "error"),
        None,
    )


class RaisedCell:
    """A code cell of an executed notebook that raised.

    ``cell`` counts every cell from 1 (markdown too), as a smoke edit's ``cell`` does;
    ``error`` is ``Name: first line of the message`` (at most 200 characters);
    ``expected`` is whether the cell carries the ``raises-exception`` tag or the output's
    ``raises`` lists it with this exception's name; ``declared`` is the name listed there
    for the cell, if any (another error is not the one expected).
    """

    def __init__(self, cell: int, error: str, expected: bool, declared: str = "") -> None:
        self.cell = cell
        self.error = error
        self.expected = expected
        self.declared = declared

    def describe(self) -> str:
        also = f"; expected {self.declared}" if self.declared and not self.expected else ""
        return f"cell {self.cell} ({self.error}{also})"

    def __repr__(self) -> str:
        return f"RaisedCell({self.cell!r}, {self.error!r}, expected={self.expected!r})"


def raised_cells(path: Path, declared: Mapping[int, str] | None = None) -> list[RaisedCell]:
    """Every cell of the executed notebook at ``path`` whose outputs hold an error, in
    order; ``declared`` maps a cell to the exception it is meant to raise (an output's
    ``raises``)."""
    found: list[RaisedCell] = []
    for number, cell in enumerate(_notebook_cells(path), 1):
        error = _error_output(cell)
        if error is None:
            continue
        name = str(error.get("ename") or "error")
        message = str(error.get("evalue") or "").strip().splitlines()
        text = f"{name}: {message[0]}" if message else name
        meta = cell.get("metadata")
        tags = meta.get("tags") if isinstance(meta, dict) else None
        want = (declared or {}).get(number, "")
        expected = (isinstance(tags, list) and RAISES_TAG in tags) or want == name
        found.append(RaisedCell(number, text[:200], expected, want))
    return found


def _declared_notebooks(spec: Mapping[str, Any], workdir: str) -> list[Mapping[str, Any]]:
    """The declared ``.ipynb`` outputs present under ``workdir``, in declared order."""
    found: list[Mapping[str, Any]] = []
    for output in spec.get("outputs") or []:
        rel = str(output.get("path", "")) if isinstance(output, dict) else ""
        if rel.lower().endswith(".ipynb") and Path(workdir, rel).is_file():
            found.append(output)
    return found


def _declared_raises(output: Mapping[str, Any]) -> dict[int, str]:
    """An output's ``raises`` as {cell: exception name} (malformed entries left out)."""
    declared: dict[int, str] = {}
    for item in output.get("raises") or []:
        if isinstance(item, dict) and isinstance(item.get("cell"), int):
            declared[item["cell"]] = str(item.get("error") or "")
    return declared


def notebook_raises(spec: Mapping[str, Any], workdir: str) -> dict[str, list[RaisedCell]]:
    """Per declared executed notebook under ``workdir``: every cell that raised, marked or
    not (:attr:`RaisedCell.expected`); notebooks where none raised are left out."""
    found: dict[str, list[RaisedCell]] = {}
    for output in _declared_notebooks(spec, workdir):
        rel = str(output["path"])
        raised = raised_cells(Path(workdir, rel), _declared_raises(output))
        if raised:
            found[rel] = raised
    return found


def unexpected_raises(spec: Mapping[str, Any], workdir: str) -> dict[str, list[RaisedCell]]:
    """:func:`notebook_raises` restricted to the cells that nothing marks as meant to raise
    (neither the ``raises-exception`` tag nor the output's ``raises`` with that exception)."""
    found: dict[str, list[RaisedCell]] = {}
    for rel, raised in notebook_raises(spec, workdir).items():
        cells = [c for c in raised if not c.expected]
        if cells:
            found[rel] = cells
    return found


def describe_raises(rel: str, cells: Sequence[RaisedCell]) -> str:
    """One line naming the cells of ``rel`` that raised unmarked (every one of them)."""
    return "{}: {} cell(s) raised that nothing marks as meant to raise: {}".format(
        rel, len(cells), "; ".join(c.describe() for c in cells)
    )


def notebook_text(path: Path) -> str:
    """The text outputs of a notebook's code cells, in order, one per line group.

    Streams (stdout/stderr) and the ``text/plain`` of execute results and displays; ""
    when the file is not a readable nbformat-4 notebook (a missing output is reported by
    the output check, not here). A cell that raised contributes nothing (see the module
    docstring: what it printed before raising is no result).
    """
    parts = []
    for cell in _notebook_cells(path):
        if _error_output(cell) is not None:
            continue
        for out in _outputs(cell):
            if not isinstance(out, dict):
                continue
            text = out.get("text")
            if text is None and isinstance(out.get("data"), dict):
                text = out["data"].get("text/plain")
            if isinstance(text, list):
                text = "".join(t for t in text if isinstance(t, str))
            if isinstance(text, str) and text:
                parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts)


def metric_log(spec: Mapping[str, Any], log_text: str, workdir: str) -> str:
    """What regex sources search: ``log_text``, then the text outputs of each declared
    ``.ipynb`` output found under ``workdir`` (in the order the outputs are declared)."""
    extra = [notebook_text(Path(workdir, o["path"])) for o in _declared_notebooks(spec, workdir)]
    if not extra:
        return log_text
    sep = "" if not log_text or log_text.endswith("\n") else "\n"
    return log_text + sep + "".join(extra)


def extract_metric(source: Mapping[str, Any], log_text: str, workdir: str) -> float:
    """The value of a metric whose ``source`` is ``{"regex": ...}`` or ``{"file", "key"}``.

    ``log_text`` is the run's stdout and stderr; ``workdir`` is where file sources and
    outputs are relative to. Raises :class:`MetricError` (a ``ValueError``) with a one-line
    reason when the value is missing, not a number, not finite, or ambiguous; the subclass
    (:class:`MetricMissing`, :class:`MetricInvalid`, :class:`MetricAmbiguous`) says which,
    and ``lines`` quotes the log lines involved.
    """
    regex = source.get("regex")
    if regex is not None:
        select = source.get("select") or "last"
        if select not in SELECT:
            raise MetricInvalid(f"`select` is {select!r}; use one of: {', '.join(SELECT)}")
        return _regex_value(regex, log_text, select)
    path = source.get("file")
    key = source.get("key")
    if not path or not key:
        raise MetricInvalid("the source needs `regex`, or `file` and `key`")
    full = Path(workdir, path)
    where = f"{path}:{key}"
    if full.is_dir() or TFEVENTS in full.name:
        # A TensorBoard log directory (or one event file): `key` is the scalar's tag.
        try:
            return _to_number(_read_tfevents(full, key, where), where)
        except OSError as exc:
            raise MetricInvalid(f"{where}: cannot read ({exc})") from None
    if not full.is_file():
        raise MetricMissing(f"{where}: the file does not exist")
    try:
        if path.lower().endswith(".csv"):
            raw = _read_csv(full, key, where)
        else:
            raw = _lookup(_read_structured(full, where), key, where)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise MetricInvalid(f"{where}: cannot read ({exc})") from None
    return _to_number(raw, where)


# -- judging ------------------------------------------------------------------------------


def _num(spec: Mapping[str, Any], name: str) -> float | None:
    value = spec.get(name)
    return None if value is None else float(value)


def _fmt(value: float) -> str:
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.4g}"
    return f"{value:.4f}"


def _rules(metric_spec: Mapping[str, Any]) -> list[tuple[str, Callable[[float], str | None]]]:
    """Each threshold of ``metric_spec``: its text and a test giving the failure or None."""
    target = _num(metric_spec, "target")
    tol = _num(metric_spec, "tolerance")
    rel = _num(metric_spec, "relative_tolerance")
    low = _num(metric_spec, "min")
    high = _num(metric_spec, "max")
    rules: list[tuple[str, Callable[[float], str | None]]] = []
    if target is not None:
        t = target
        slack = _EPS * max(1.0, abs(t))
        if tol is not None or rel is not None:
            band = max(tol or 0.0, (rel or 0.0) * abs(t))
            shown = f"{tol:g}" if rel is None else f"{rel * 100:g}%"
            if tol is not None and rel is not None:
                shown = f"max({tol:g}, {rel * 100:g}%)"
            rules.append(
                (
                    f"target {t:g} ± {shown}",
                    lambda v: (
                        f"off target by {_fmt(abs(v - t))}" if abs(v - t) > band + slack else None
                    ),
                )
            )
        else:
            better = metric_spec.get("higher_is_better")
            if better is True:
                rules.append(
                    (f"target ≥ {t:g}", lambda v: "below target" if v < t - slack else None)
                )
            elif better is False:
                rules.append(
                    (f"target ≤ {t:g}", lambda v: "above target" if v > t + slack else None)
                )
            else:
                rules.append(
                    (
                        f"target {t:g} exactly",
                        lambda v: "not equal to target" if abs(v - t) > slack else None,
                    )
                )
    if low is not None:
        lo = low
        rules.append(
            (f"min {lo:g}", lambda v: "below min" if v < lo - _EPS * max(1.0, abs(lo)) else None)
        )
    if high is not None:
        hi = high
        rules.append(
            (f"max {hi:g}", lambda v: "above max" if v > hi + _EPS * max(1.0, abs(hi)) else None)
        )
    return rules


def has_thresholds(metric_spec: Mapping[str, Any]) -> bool:
    """Whether ``metric_spec`` declares a threshold (``target``, ``min`` or ``max``)."""
    return bool(_rules(metric_spec))


def describe_thresholds(metric_spec: Mapping[str, Any]) -> str:
    """The thresholds of ``metric_spec`` as :func:`judge_metric` states them.

    E.g. ``target 0.912 ± 0.005`` or ``min 0.8, max 1``; ``finite`` when there are none.
    """
    return ", ".join(text for text, _ in _rules(metric_spec)) or "finite"


def judge_metric(metric_spec: Mapping[str, Any], value: float) -> tuple[bool, str]:
    """Whether ``value`` meets the thresholds of ``metric_spec``, and the rule applied.

    The reason reads like ``target 0.912 ± 0.005`` or ``min 0.8, max 1``; when the value
    fails, it says by which bound. A spec without thresholds only needs a finite value.
    """
    if not math.isfinite(value):
        return False, "value is not finite"
    rules = _rules(metric_spec)
    failures = [f for f in (test(value) for _, test in rules) if f]
    reason = describe_thresholds(metric_spec)
    if failures:
        reason += "; " + ", ".join(failures)
    return not failures, reason


# -- one experiment -----------------------------------------------------------------------


def tier_metrics(spec: Mapping[str, Any], tier: str) -> tuple[dict[str, Any], bool]:
    """The metrics to check in ``tier`` and whether their thresholds apply.

    Returns ``(metrics, judged)``: for ``smoke`` without its own metrics, the experiment's
    metrics with ``judged`` false (they only need to exist and be finite).
    """
    tiers = spec.get("tiers") or {}
    own = (tiers.get(tier) or {}).get("metrics")
    if own is not None:
        return dict(own), True
    return dict(spec.get("metrics") or {}), tier != "smoke"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tree_sha256(directory: Path) -> str:
    """The tree hash of ``reprobridge.audit.datasets.tree_sha256`` (this file stays
    standalone): SHA-256 of ``<sha256 of the file>  <relative path>\n`` per regular file,
    sorted by the path's bytes."""
    lines = sorted(
        (p.relative_to(directory).as_posix().encode(), _sha256(p))
        for p in directory.rglob("*")
        if p.is_file()
    )
    digest = hashlib.sha256()
    for rel, file_hex in lines:
        digest.update(file_hex.encode() + b"  " + rel + b"\n")
    return digest.hexdigest()


def check_experiment(
    spec: Mapping[str, Any], tier: str, log_text: str, workdir: str
) -> list[CheckResult]:
    """Check every metric and declared output of one run; one result per line printed."""
    results: list[CheckResult] = []
    metrics, judged = tier_metrics(spec, tier)
    log_text = metric_log(spec, log_text, workdir)
    for name in sorted(metrics):
        mspec = metrics[name] or {}
        try:
            value = extract_metric(mspec.get("source") or {}, log_text, workdir)
        except MetricError as exc:
            results.append(CheckResult(name, False, f"FAIL {name}: {exc}"))
            continue
        if not judged or not has_thresholds(mspec):
            reason = SMOKE_UNJUDGED if not judged else NO_THRESHOLD
            line = f"UNJUDGED {name} = {_fmt(value)} ({reason})"
            results.append(CheckResult(name, True, line, value, judged=False))
            continue
        ok, reason = judge_metric(mspec, value)
        line = "{} {} = {} ({})".format("PASS" if ok else "FAIL", name, _fmt(value), reason)
        results.append(CheckResult(name, ok, line, value))
    for output in spec.get("outputs") or []:
        rel = output.get("path", "")
        full = Path(workdir, rel)
        is_dir = full.is_dir()
        if not (full.is_file() or is_dir):
            results.append(CheckResult(rel, False, f"FAIL output {rel}: missing"))
            continue
        if is_dir and not any(p.is_file() for p in full.rglob("*")):
            results.append(CheckResult(rel, False, f"FAIL output {rel}: an empty directory"))
            continue
        want = output.get("sha256")
        if want and tier == "full":
            got = _tree_sha256(full) if is_dir else _sha256(full)
            if got != want:
                line = f"FAIL output {rel}: sha256 {got} (expected {want})"
                results.append(CheckResult(rel, False, line))
                continue
        results.append(CheckResult(rel, True, f"PASS output {rel}: exists"))
    for rel, cells in sorted(unexpected_raises(spec, workdir).items()):
        # Neither a failure (the cell may raise on purpose) nor a pass: not judged.
        line = "INCOMPLETE output " + describe_raises(rel, cells)
        results.append(CheckResult(rel, True, line, judged=False))
    return results


# -- command line -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="check.py", description="Judge one experiment run against its thresholds."
    )
    parser.add_argument("--spec", required=True, help="JSON of the experiment from the manifest")
    parser.add_argument("--experiment", required=True, help="experiment id (for messages)")
    parser.add_argument("--tier", default="full", choices=TIERS)
    parser.add_argument("--log", required=True, help="stdout+stderr of the run")
    parser.add_argument("--workdir", default=".", help="where output files are relative to")
    return parser


def overall(results: Sequence[CheckResult], metric_names: Sequence[str]) -> str:
    """``PASS``, ``FAIL`` or ``INCOMPLETE`` for one run's check lines (see the docstring)."""
    if not all(r.ok for r in results):
        return "FAIL"
    metrics = [r for r in results if r.name in set(metric_names)]
    if not metrics or not all(r.judged for r in results):
        return "INCOMPLETE"
    return "PASS"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; returns the exit status (0 pass, 1 fail, 2 usage error, 20 incomplete)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 on --help
        return int(exc.code or 0)
    try:
        with open(args.spec, encoding="utf-8") as handle:
            spec = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"check.py: cannot read the spec {args.spec}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(spec, dict):
        print(f"check.py: the spec {args.spec} is not a JSON object", file=sys.stderr)
        return 2
    try:
        with open(args.log, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
    except OSError as exc:
        print(f"check.py: cannot read the log {args.log}: {exc}", file=sys.stderr)
        return 2
    tier_names = ["full", *sorted(t for t in spec.get("tiers") or {} if t != "full")]
    if args.tier not in tier_names:
        print(
            "check.py: {} has no tier {!r} (it has: {})".format(
                args.experiment, args.tier, ", ".join(tier_names)
            ),
            file=sys.stderr,
        )
        return 2
    results = check_experiment(spec, args.tier, log_text, args.workdir)
    print(f"check {args.experiment} (tier {args.tier}):")
    for result in results:
        print(result.line)
    names = sorted(tier_metrics(spec, args.tier)[0])
    if not names:
        print(
            f"INCOMPLETE: no metrics for tier {args.tier}: declare [experiments.{args.experiment}.metrics.<name>] "
            "with a source and a threshold"
        )
    verdict = overall(results, names)
    print(f"verdict: {verdict}")
    sys.stdout.flush()
    return {"PASS": 0, "FAIL": 1}.get(verdict, EXIT_INCOMPLETE)


if __name__ == "__main__":
    sys.exit(main())
