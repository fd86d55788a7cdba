"""A regex metric over time: every value a run's log printed for it, in order.

The audit judges the last match (check.py's rule); a running log prints a loss or an
accuracy at every step, and that sequence is what the report draws as a curve. Contract:

* the text is what regex metrics are read from: the run's ``output.log`` (both streams in
  the order written), or ``stdout.log`` then ``stderr.log`` in a bundle without it; a log
  that is not a regular file reads as empty; at most :data:`CURVE_LOG_BYTES` of each are
  read (``cut`` says so);
* the regex is compiled as check.py compiles it (``re.MULTILINE``); each match's first group
  that reads as a finite number is one value; anything else is skipped;
* at most :data:`MAX_CURVE_POINTS` points are kept, evenly spaced, the first and the last
  always, each with its 1-based position among all the values (the x axis).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from reprobridge._fs import open_regular
from reprobridge.constants import COMBINED_LOG

#: Points drawn per curve (evenly thinned beyond this).
MAX_CURVE_POINTS = 2000
#: Bytes of each log searched for curves.
CURVE_LOG_BYTES = 64 << 20

T = TypeVar("T")


@dataclass(frozen=True)
class Curve:
    """One metric's values in one run: ``points`` are ``(position, value)`` with positions
    counted from 1 over all ``count`` values found; ``cut``: the log was longer than what
    was searched."""

    points: tuple[tuple[int, float], ...]
    count: int
    cut: bool = False

    def describe(self) -> str:
        """``20 value(s)``; with ``, 2000 drawn`` when thinned, `` (log cut)`` when cut."""
        drawn = f", {len(self.points)} drawn" if len(self.points) < self.count else ""
        return f"{self.count} value(s){drawn}" + (" (log cut)" if self.cut else "")


def thin(items: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` items, evenly spaced, always keeping the first and the last."""
    if len(items) <= limit:
        return list(items)
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def _head(path: Path, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of the regular file at ``path`` and whether there was more;
    empty for anything else (never through a link, never waiting on a FIFO)."""
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return b"", False
    return data[:limit], len(data) > limit


def run_log(run_dir: Path) -> tuple[str, bool]:
    """The text regex metrics are read from (module docstring) and whether it was cut."""
    combined = run_dir / COMBINED_LOG
    names = (COMBINED_LOG,) if os.path.lexists(combined) else ("stdout.log", "stderr.log")
    parts = [_head(run_dir / name, CURVE_LOG_BYTES) for name in names]
    text = b"".join(data for data, _ in parts).decode("utf-8", "replace")
    return text, any(cut for _, cut in parts)


def values(regex: str, text: str) -> list[float]:
    """Every finite number ``regex``'s first group captures in ``text``, in order; [] for a
    regex that does not compile or has no group."""
    try:
        pattern = re.compile(regex, re.MULTILINE)
    except re.error:
        return []
    if pattern.groups < 1:
        return []
    out = []
    for match in pattern.finditer(text):
        try:
            number = float((match.group(1) or "").strip())
        except ValueError:
            continue
        if math.isfinite(number):
            out.append(number)
    return out


def run_curves(regexes: Mapping[str, str], run_dir: Path) -> dict[str, Curve]:
    """Each metric of ``regexes`` (name -> regex) with at least one value in the run at
    ``run_dir``, as a :class:`Curve`."""
    if not regexes:
        return {}
    text, cut = run_log(run_dir)
    out = {}
    for name, regex in sorted(regexes.items()):
        found = values(regex, text)
        if found:
            points = thin(list(enumerate(found, start=1)), MAX_CURVE_POINTS)
            out[name] = Curve(tuple(points), len(found), cut)
    return out
