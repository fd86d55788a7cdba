"""Hand-written inline SVG charts for the report (no JavaScript, no library).

Contract: every function returns one ``<svg>`` element as text, for inlining in HTML.
Every string that reaches the output passes through :func:`esc`; every number is written
with a fixed precision, so the same data gives the same bytes. Colours are CSS classes
(``band``, ``dot``, ``s0``..``s7``, ...) that the page's stylesheet defines for light and
dark themes; tooltips are SVG ``<title>`` elements (the browser shows them natively).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reprobridge.report.load import Band, MetricData, RunData
from reprobridge.report.numbers import fmt_bytes, fmt_ci, fmt_value

#: Series colour classes (s0..s7), reused cyclically.
SERIES = 8
WIDTH = 560


def esc(text: object) -> str:
    """``text`` safe inside an element or a double-quoted attribute (HTML and SVG)."""
    return html.escape(str(text), quote=True)


def num(value: float) -> str:
    """A coordinate: one decimal, no ``-0.0`` (so equal inputs give equal bytes)."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def byte_unit(value: float) -> float:
    """The binary unit (1 KiB, 1 MiB, 1 GiB) that ``value`` bytes read best in."""
    for size in (1 << 30, 1 << 20, 1 << 10):
        if value >= size:
            return float(size)
    return 1.0


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


@dataclass(frozen=True)
class _Scale:
    lo: float
    hi: float
    a: float  # pixel at lo
    b: float  # pixel at hi

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo
        return self.a + (value - self.lo) / span * (self.b - self.a) if span else self.a


def _domain(values: Sequence[float], pad: float = 0.08) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        width = abs(lo) * 0.05 or 1.0
        return lo - width, hi + width
    margin = (hi - lo) * pad
    return lo - margin, hi + margin


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(label)}"><title>{esc(label)}</title>' + "".join(body) + "</svg>"
    )


# -- metric strip plot --------------------------------------------------------------------


def metric_plot(metric: MetricData, runs: Sequence[RunData] = ()) -> str:
    """Run values of ``metric`` on a horizontal axis against its band: the target ±
    tolerance shaded (a one-sided target shades its side), ``min``/``max`` as lines, the
    target dashed, one dot per run (hollow where the run does not count: its procedure
    failed; red where the value is outside the thresholds), and the mean with its 95% CI
    below the dots. Runs without a value are not drawn (the page lists them)."""
    seeds = {r.k: r.seed for r in runs}
    points = [(i, v) for i, v in enumerate(metric.values) if v is not None]
    band = metric.band
    numbers = [v for _, v in points]
    if band is not None:
        numbers += band.edges()
    if metric.stats is not None:
        numbers += [metric.stats.mean, *(metric.stats.ci95_clipped or ())]
    label = f"{metric.name}: values per run against the target band"
    rows = max(1, min(len(metric.values), 10))
    top, row_h = 22, 13
    dots_bottom = top + rows * row_h
    mean_y = dots_bottom + 10
    axis_y = mean_y + 14
    height = axis_y + 22
    if not numbers:
        return _svg(
            WIDTH,
            40,
            label,
            [f'<text class="note" x="{WIDTH // 2}" y="24" text-anchor="middle">no values</text>'],
        )
    lo, hi = _domain(numbers)
    x = _Scale(lo, hi, 16, WIDTH - 16)
    body: list[str] = []
    if band is not None:
        body += _band_marks(band, x, lo, hi, top - 6, axis_y)
    for tick in nice_ticks(lo, hi):
        px = num(x(tick))
        body.append(f'<line class="tick" x1="{px}" y1="{axis_y}" x2="{px}" y2="{axis_y + 4}"/>')
        body.append(
            f'<text class="axis" x="{px}" y="{axis_y + 15}" text-anchor="middle">'
            f"{esc(fmt_value(tick))}</text>"
        )
    body.append(f'<line class="axisline" x1="16" y1="{axis_y}" x2="{WIDTH - 16}" y2="{axis_y}"/>')
    for i, value in points:
        status = metric.statuses[i] if i < len(metric.statuses) else ""
        counted = metric.counted[i] if i < len(metric.counted) else True
        kind = "uncounted" if not counted else "ok" if status == "ok" else "bad"
        seed = seeds.get(i)
        who = f"run {i + 1}" + (f" (seed {seed})" if seed is not None else "")
        note = status if counted else f"{status}; not counted: the run's procedure failed"
        cy = top + (i % rows) * row_h + row_h / 2
        body.append(
            f'<circle class="dot {kind}" cx="{num(x(value))}" cy="{num(cy)}" r="4.5">'
            f"<title>{esc(f'{who}: {fmt_value(value)} — {note}')}</title></circle>"
        )
    if metric.stats is not None:
        s = metric.stats
        # One run has no interval: the bar shrinks to the mean's mark.
        ci_low, ci_high = s.ci95_clipped or (s.mean, s.mean)
        a, b = num(x(ci_low)), num(x(ci_high))
        tip = f"mean {fmt_value(s.mean)}, 95% CI {fmt_ci(s)}, n = {s.n}"
        body.append(
            f'<g class="mean"><title>{esc(tip)}</title>'
            f'<line x1="{a}" y1="{mean_y}" x2="{b}" y2="{mean_y}"/>'
            f'<line x1="{a}" y1="{mean_y - 4}" x2="{a}" y2="{mean_y + 4}"/>'
            f'<line x1="{b}" y1="{mean_y - 4}" x2="{b}" y2="{mean_y + 4}"/>'
            f'<rect x="{num(x(s.mean) - 3)}" y="{mean_y - 5}" width="6" height="10"/></g>'
        )
        # The label goes right of the CI bar, else left of it; where neither side has room
        # it is left out (the table beside the plot states the mean and its CI).
        text = f"mean {fmt_value(s.mean)}"
        room = 7 * len(text) + 6
        right, left = x(ci_high) + 6, x(ci_low) - 6
        place = (
            (right, "start") if right + room < WIDTH else (left, "end") if left - room > 0 else None
        )
        if place is not None:
            body.append(
                f'<text class="meanlabel" x="{num(place[0])}" y="{mean_y + 4}" '
                f'text-anchor="{place[1]}">{esc(text)}</text>'
            )
    return _svg(WIDTH, height, label, body)


def _band_marks(band: Band, x: _Scale, lo: float, hi: float, y0: int, y1: int) -> list[str]:
    out: list[str] = []
    cls = "band" if band.applied else "band off"
    h = y1 - y0
    t = band.target
    if t is not None and band.half is not None:
        a, b = x(max(lo, t - band.half)), x(min(hi, t + band.half))
        tip = f"target {fmt_value(t)} ± {fmt_value(band.half)}"
        out.append(
            f'<rect class="{cls}" x="{num(a)}" y="{y0}" width="{num(b - a)}" height="{h}">'
            f"<title>{esc(tip)}</title></rect>"
        )
    elif t is not None and band.direction in {"ge", "le"}:
        a, b = (x(t), x(hi)) if band.direction == "ge" else (x(lo), x(t))
        tip = f"target {'≥' if band.direction == 'ge' else '≤'} {fmt_value(t)}"
        out.append(
            f'<rect class="{cls}" x="{num(a)}" y="{y0}" width="{num(max(0.0, b - a))}" '
            f'height="{h}"><title>{esc(tip)}</title></rect>'
        )
    if t is not None:
        px = num(x(t))
        out.append(f'<line class="target" x1="{px}" y1="{y0}" x2="{px}" y2="{y1}"/>')
        out.append(
            f'<text class="bandlabel" x="{px}" y="{y0 - 3}" text-anchor="middle">'
            f"target {esc(fmt_value(t))}</text>"
        )
    for name, value in (("min", band.low), ("max", band.high)):
        if value is None:
            continue
        px = num(x(value))
        out.append(f'<line class="limit" x1="{px}" y1="{y0}" x2="{px}" y2="{y1}"/>')
        anchor = "end" if name == "min" else "start"
        dx = -3 if name == "min" else 3
        out.append(
            f'<text class="bandlabel" x="{num(x(value) + dx)}" y="{y0 + 9}" '
            f'text-anchor="{anchor}">{name} {esc(fmt_value(value))}</text>'
        )
    return out


# -- resource timelines -------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One polyline: a legend label and ``(t seconds, value)`` points."""

    label: str
    points: Sequence[tuple[float, float]]


def timeline_chart(
    title: str,
    series: Sequence[Series],
    fmt: Callable[[float], str],
    *,
    y_max: float | None = None,
    scale: float = 1.0,
) -> str:
    """Line chart of ``series`` over time (seconds since each run's start): a legend row,
    y gridlines labelled with ``fmt``, one polyline per series (class ``s<i>``). A series
    with one sample is drawn as a dot. ``y_max`` fixes the top (e.g. 100 for a utilisation
    %) unless the data go higher; ``scale`` is the unit ticks are rounded in (e.g. 1 MiB)."""
    xs = [t for s in series for t, _ in s.points]
    ys = [v for s in series for _, v in s.points]
    if not xs:
        return _no_points(title, "no samples recorded")
    t_hi = max(xs) or 1.0
    v_hi = max([*ys, y_max or 0.0]) / scale or 1.0
    y_ticks = nice_ticks(0.0, v_hi, 4)
    if len(y_ticks) > 1 and y_ticks[-1] < v_hi:  # end the axis on a labelled tick
        y_ticks.append(round(2 * y_ticks[-1] - y_ticks[-2], 12))
    v_top = max(v_hi, y_ticks[-1]) * scale
    frame = _Frame(
        x=_Scale(0.0, t_hi, _LEFT, WIDTH - _RIGHT),
        y=_Scale(0.0, v_top, _PLOT_B, _TOP),
        y_ticks=[t * scale for t in y_ticks],
        x_ticks=nice_ticks(0.0, t_hi, 6),
        x_unit=" s",
        x_label="time since run start",
    )

    def tip(s: Series) -> str:
        return f"{s.label}: peak {fmt(max(v for _, v in s.points))}"

    return _line_chart(title, series, fmt, frame, tip)


def curve_chart(title: str, series: Sequence[Series], *, label: str = "") -> str:
    """A metric's values over one log per series, in the order printed: x is each value's
    position (1 = the first printed), y spans the values (not from zero: a loss that
    falls from 0.52 to 0.48 is the curve to see). A series with one value is a dot."""
    xs = [t for s in series for t, _ in s.points]
    ys = [v for s in series for _, v in s.points]
    if not xs:
        return _no_points(title, "no values printed")
    lo, hi = _domain(ys)
    y_ticks = [t for t in nice_ticks(lo, hi, 4) if lo <= t <= hi]
    x_hi = max(xs)
    frame = _Frame(
        x=_Scale(1.0, max(x_hi, 2.0), _LEFT, WIDTH - _RIGHT),
        y=_Scale(lo, hi, _PLOT_B, _TOP),
        y_ticks=y_ticks,
        x_ticks=[t for t in nice_ticks(1.0, max(x_hi, 2.0), 6) if t == int(t) and t >= 1],
        x_unit="",
        x_label=label or "value number, in the order the log printed them",
    )

    def tip(s: Series) -> str:
        last = s.points[-1]
        return f"{s.label}: {last[0]:g} values, last {fmt_value(last[1])}"

    return _line_chart(title, series, fmt_value, frame, tip)


_LEFT, _RIGHT, _LEGEND_H, _BOTTOM, _HEIGHT = 62, 12, 20, 30, 180
_TOP = _LEGEND_H + 8
_PLOT_B = _HEIGHT - _BOTTOM


@dataclass(frozen=True)
class _Frame:
    """A line chart's axes: the scales, the ticks and how the x axis is labelled."""

    x: _Scale
    y: _Scale
    y_ticks: Sequence[float]
    x_ticks: Sequence[float]
    x_unit: str
    x_label: str


def _no_points(title: str, note: str) -> str:
    return _svg(
        WIDTH,
        _HEIGHT,
        title,
        [
            f'<text class="note" x="{WIDTH // 2}" y="{_HEIGHT // 2}" text-anchor="middle">'
            f"{esc(note)}</text>"
        ],
    )


def _line_chart(
    title: str,
    series: Sequence[Series],
    fmt: Callable[[float], str],
    frame: _Frame,
    tip: Callable[[Series], str],
) -> str:
    """The axes of ``frame`` (y gridlines labelled with ``fmt``), a legend row, and one
    polyline per series (class ``s<i>``, its tooltip ``tip``); one point is a dot."""
    width, left, right, plot_b = WIDTH, _LEFT, _RIGHT, _PLOT_B
    x, y = frame.x, frame.y
    body: list[str] = []
    for tick in frame.y_ticks:
        py = num(y(tick))
        body.append(f'<line class="grid" x1="{left}" y1="{py}" x2="{width - right}" y2="{py}"/>')
        body.append(
            f'<text class="axis" x="{left - 5}" y="{num(y(tick) + 3.5)}" text-anchor="end">'
            f"{esc(fmt(tick))}</text>"
        )
    for tick in frame.x_ticks:
        px = num(x(tick))
        body.append(f'<line class="tick" x1="{px}" y1="{plot_b}" x2="{px}" y2="{plot_b + 4}"/>')
        body.append(
            f'<text class="axis" x="{px}" y="{plot_b + 15}" text-anchor="middle">'
            f"{esc(f'{tick:g}')}{frame.x_unit}</text>"
        )
    body.append(
        f'<line class="axisline" x1="{left}" y1="{plot_b}" x2="{width - right}" y2="{plot_b}"/>'
    )
    body.append(
        f'<text class="axis" x="{width - right}" y="{_HEIGHT - 2}" text-anchor="end">'
        f"{esc(frame.x_label)}</text>"
    )
    lx = left
    for i, s in enumerate(series):
        cls = f"s{i % SERIES}"
        body.append(
            f'<line class="line {cls}" x1="{lx}" y1="10" x2="{lx + 14}" y2="10"/>'
            f'<text class="legend" x="{lx + 18}" y="14">{esc(s.label)}</text>'
        )
        lx += 26 + 7 * len(s.label)
        if not s.points:  # a run without samples keeps its legend entry only
            continue
        if len(s.points) == 1:
            t, v = s.points[0]
            body.append(f'<circle class="pt {cls}" cx="{num(x(t))}" cy="{num(y(v))}" r="2.5"/>')
            continue
        coords = " ".join(f"{num(x(t))},{num(y(v))}" for t, v in s.points)
        body.append(
            f'<polyline class="line {cls}" points="{coords}">'
            f"<title>{esc(tip(s))}</title></polyline>"
        )
    return _svg(width, _HEIGHT, title, body)


def percent(value: float) -> str:
    """An axis label for a percentage."""
    return f"{value:g}%"


def resource_charts(runs: Sequence[RunData]) -> list[tuple[str, str]]:
    """``(heading, svg)`` for an experiment's runs: CPU % and resident memory over time,
    and GPU utilisation and memory when any sample has a GPU reading."""
    cpu = [Series(r.label, [(s.t, s.cpu_percent) for s in r.timeline]) for r in runs]
    rss = [Series(r.label, [(s.t, float(s.rss_bytes)) for s in r.timeline]) for r in runs]
    rss_max = max((v for s in rss for _, v in s.points), default=0.0)
    out = [
        ("CPU (% of one core, summed over the process tree)", timeline_chart("CPU", cpu, percent)),
        (
            "Resident memory (RSS, summed over the process tree)",
            timeline_chart("RSS", rss, fmt_bytes, scale=byte_unit(rss_max)),
        ),
    ]
    gpu_ids = sorted({g[0] for r in runs for s in r.timeline for g in s.gpus})
    if gpu_ids:
        util: list[Series] = []
        mem: list[Series] = []
        for r in runs:
            for gid in gpu_ids:
                name = f"{r.label} GPU {gid}" if len(gpu_ids) > 1 else r.label
                util.append(
                    Series(name, [(s.t, g[1]) for s in r.timeline for g in s.gpus if g[0] == gid])
                )
                mem.append(
                    Series(
                        name,
                        [(s.t, float(g[2])) for s in r.timeline for g in s.gpus if g[0] == gid],
                    )
                )
        out.append(("GPU utilisation", timeline_chart("GPU utilisation", util, percent, y_max=100)))
        mem_max = max((v for s in mem for _, v in s.points), default=0.0)
        out.append(
            (
                "GPU memory used",
                timeline_chart("GPU memory", mem, fmt_bytes, scale=byte_unit(mem_max)),
            )
        )
    return out


# -- a claim's two sides --------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimSide:
    """One metric a claim compares: its label (``experiment.metric``) and the values of the
    runs the claim counts (those whose procedure passed)."""

    label: str
    values: Sequence[float]


def claim_plot(title: str, sides: Sequence[ClaimSide]) -> str:
    """Each side of a claim on one shared horizontal axis: a row per metric with a dot per
    run and its mean as a bar (labelled), so the reader sees the two distributions the
    claim's test compared. A side without values says so in its row."""
    label_w, row_h, top = 150, 30, 8
    axis_y = top + row_h * max(1, len(sides)) + 4
    height = axis_y + 22
    numbers = [v for side in sides for v in side.values]
    if not numbers:
        return _no_points(title, "no values to compare")
    lo, hi = _domain(numbers)
    x = _Scale(lo, hi, label_w, WIDTH - 16)
    body: list[str] = []
    for tick in nice_ticks(lo, hi):
        px = num(x(tick))
        body.append(f'<line class="grid" x1="{px}" y1="{top}" x2="{px}" y2="{axis_y}"/>')
        body.append(
            f'<text class="axis" x="{px}" y="{axis_y + 15}" text-anchor="middle">'
            f"{esc(fmt_value(tick))}</text>"
        )
    body.append(
        f'<line class="axisline" x1="{label_w}" y1="{axis_y}" x2="{WIDTH - 16}" y2="{axis_y}"/>'
    )
    for i, side in enumerate(sides):
        cy = top + i * row_h + row_h / 2
        cls = f"s{i % SERIES}"
        body.append(
            f'<text class="legend" x="{label_w - 8}" y="{num(cy + 4)}" text-anchor="end">'
            f"{esc(side.label)}</text>"
        )
        if not side.values:
            body.append(f'<text class="note" x="{label_w + 4}" y="{num(cy + 4)}">no values</text>')
            continue
        for k, value in enumerate(side.values):
            body.append(
                f'<circle class="pt {cls}" cx="{num(x(value))}" cy="{num(cy)}" r="4">'
                f"<title>{esc(f'{side.label}, value {k + 1}: {fmt_value(value)}')}</title>"
                "</circle>"
            )
        mean = sum(side.values) / len(side.values)
        mx = x(mean)
        tip = f"{side.label}: mean {fmt_value(mean)} of {len(side.values)} value(s)"
        body.append(
            f'<g class="mean"><title>{esc(tip)}</title><rect x="{num(mx - 1.5)}" '
            f'y="{num(cy - 10)}" width="3" height="20"/></g>'
        )
        text = f"mean {fmt_value(mean)}"
        right = mx + 6 + 7 * len(text) < WIDTH
        body.append(
            f'<text class="meanlabel" x="{num(mx + 6 if right else mx - 6)}" y="{num(cy - 6)}" '
            f'text-anchor="{"start" if right else "end"}">{esc(text)}</text>'
        )
    return _svg(WIDTH, height, title, body)
