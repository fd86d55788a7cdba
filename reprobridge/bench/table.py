"""Totals with Wilson 95% intervals, and the bench as Markdown, JSON and one HTML page.

Contract: every renderer is a pure function of the :class:`BenchReport` (records in suite
order, no clock of its own), so the same records give the same bytes. The HTML page reuses
:mod:`reprobridge.report.html`'s escaping, tables, stylesheet and Content-Security-Policy:
everything a repository could influence (causes, names, metric names) is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from reprobridge._fs import write_atomic
from reprobridge.bench.records import LEVEL_TITLES, LEVELS, BenchReport, RepoRecord
from reprobridge.report.html import Raw, _badge, _table, page
from reprobridge.report.markdown import md_escape
from reprobridge.report.svg import esc
from reprobridge.stats import wilson


@dataclass(frozen=True)
class Proportion:
    """k of n, the rate, and its Wilson 95% interval."""

    k: int
    n: int
    rate: float | None
    low: float
    high: float

    @classmethod
    def of(cls, k: int, n: int) -> Proportion:
        low, high = wilson(k, n)
        return cls(k, n, k / n if n else None, low, high)

    def text(self) -> str:
        if not self.n:
            return "— (0 of 0)"
        return f"{self.k}/{self.n} = {100 * (self.rate or 0):.0f}% [{100 * self.low:.0f}–{100 * self.high:.0f}%]"


@dataclass(frozen=True)
class Totals:
    """The bench's totals: per level over all repositories and over the CPU-runnable ones,
    pooled dependency recall, repositories with a local module declared, time and cost."""

    levels: dict[str, Proportion]
    cpu_levels: dict[str, Proportion]
    dependency_recall: Proportion
    local_module_repos: list[str]
    wall_s: float
    agent_cost_usd: float | None


def totals(records: Sequence[RepoRecord]) -> Totals:
    """Count each level over the records where it applies (``target``: only where the
    suite gives expected values)."""

    def count(recs: Sequence[RepoRecord]) -> dict[str, Proportion]:
        out: dict[str, Proportion] = {}
        for lvl in LEVELS:
            applies = [r for r in recs if r.levels.get(lvl) is not None]
            out[lvl] = Proportion.of(sum(1 for r in applies if r.levels[lvl]), len(applies))
        return out

    found = sum(len(r.dependencies.found) for r in records)
    needed = sum(len(r.dependencies.needed) for r in records)
    costs = [r.agent_cost_usd for r in records if r.agent_cost_usd is not None]
    return Totals(
        levels=count(records),
        cpu_levels=count([r for r in records if r.cpu_runnable]),
        dependency_recall=Proportion.of(found, needed),
        local_module_repos=[r.name for r in records if r.dependencies.local],
        wall_s=sum(r.wall_s for r in records),
        agent_cost_usd=sum(costs) if costs else None,
    )


def _mark(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _recall(r: RepoRecord) -> str:
    d = r.dependencies
    return f"{len(d.found)}/{len(d.needed)}" if d.needed else "—"


def _cost(value: float | None) -> str:
    return "—" if value is None else f"${value:.2f}"


#: Longest cause shown in a table cell (the JSON keeps it whole).
CAUSE_CHARS = 240


def _cell(text: str) -> str:
    """Markdown table cell text: one line, no markup and no HTML (a suite's names and a
    run's stderr are whatever the repositories printed)."""
    return md_escape(" ".join(text.split()))


def _short(text: str) -> str:
    return text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"


HEADERS = (
    "repository",
    "shape",
    *(LEVEL_TITLES[lvl] for lvl in LEVELS),
    "claims",
    "deps found",
    "wall",
    "probe (its runs)",
    "agent",
    "cause of the first miss",
)


def rows(report: BenchReport) -> list[list[str]]:
    """One row of plain text per repository, in suite order (the table's body)."""
    out = []
    for r in report.records:
        out.append(
            [
                r.name,
                r.shape + ("" if r.cpu_runnable else " (not CPU-runnable offline)"),
                *(_mark(r.levels.get(lvl)) for lvl in LEVELS),
                f"{r.claims_holding}/{r.claims_total}" if r.claims_total else "—",
                _recall(r),
                f"{r.wall_s:.0f} s",
                _probe(r),
                _cost(r.agent_cost_usd),
                _short(r.cause or ""),
            ]
        )
    return out


def _probe(r: RepoRecord) -> str:
    """The probe's time beside the time of the trial runs it wraps, and its repairs."""
    if r.probe_s is None:
        return "—"
    repairs = f", {len(r.probe_decisions)} repair(s)" if r.probe_decisions else ""
    return f"{r.probe_s:.0f} s ({r.probe_run_s or 0:.0f} s){repairs}"


def total_lines(report: BenchReport) -> list[str]:
    """The totals as lines of text (shared by Markdown and the terminal)."""
    t = totals(report.records)
    lines = ["Totals (k/n = rate [Wilson 95% interval]):"]
    for lvl in LEVELS:
        lines.append(
            f"- {LEVEL_TITLES[lvl]}: all {t.levels[lvl].text()}; "
            f"CPU-runnable {t.cpu_levels[lvl].text()}"
        )
    lines.append(f"- dependency recall (pooled): {t.dependency_recall.text()}")
    lines.append(
        "- a local module declared as a dependency: "
        + (", ".join(t.local_module_repos) if t.local_module_repos else "none")
    )
    lines.append(f"- wall time: {t.wall_s:.0f} s; agent cost: {_cost(t.agent_cost_usd)}")
    probed = [r for r in report.records if r.probe_s is not None]
    if probed:
        probe_s = sum(r.probe_s or 0 for r in probed)
        run_s = sum(r.probe_run_s or 0 for r in probed)
        ratio = f"{probe_s / run_s:.2f}x its runs" if run_s else "no run"
        lines.append(
            f"- probe: {len(probed)} repositories, {probe_s:.0f} s in all against {run_s:.0f} s "
            f"of trial runs ({ratio}); "
            f"{sum(len(r.probe_decisions) for r in probed)} decision(s)"
        )
    raised = [
        f"{r.name} ({e.id}: {e.reason})"
        for r in report.records
        for e in r.experiments
        if e.cells_raised
    ]
    if raised:
        # Counted above as "procedure ran" (its metrics, read from cells that did not
        # raise, as extracted); the audit's verdict for them is never a pass.
        lines.append(
            "- counted with notebook cells that raised unmarked (audit procedure incomplete): "
            + "; ".join(raised)
        )
        # The same rates without them, so nobody has to subtract by hand.
        strict = [
            r for r in report.records if r.cpu_runnable and r.levels.get("metric") is not None
        ]
        ran = Proportion.of(sum(1 for r in strict if _strictly(r, "procedure")), len(strict))
        got = Proportion.of(sum(1 for r in strict if _strictly(r, "metric")), len(strict))
        lines.append(
            "- without them (only runs whose procedure passed), CPU-runnable: "
            f"procedure ran {ran.text()}; metric extracted {got.text()}"
        )
    return lines


def _strictly(record: RepoRecord, level: str) -> bool:
    """Whether ``record`` reaches ``level`` through an experiment whose procedure passed
    (a run with notebook cells that raised unmarked does not count here: its procedure is
    ``incomplete``, see ``runner._judge``)."""
    return any(
        e.environment == "pass"
        and e.procedure == "pass"
        and (level == "procedure" or e.metric_extracted)
        for e in record.experiments
    )


def note_lines(report: BenchReport) -> list[str]:
    """The suite's notes on its repositories (a snapshot's missing files, why one is not
    CPU-runnable), one line each, in suite order; none when no entry has one. A noted
    repository stays in every total: a note explains a miss, it does not excuse it."""
    noted = [r for r in report.records if r.notes.strip()]
    if not noted:
        return []
    return [
        "Notes from the suite (counted in every total above):",
        *(f"- {r.name}: {' '.join(r.notes.split())}" for r in noted),
    ]


def _comparison_rows(report: BenchReport) -> list[list[str]]:
    base = {r.name: r for r in report.baseline or []}
    out = []
    for r in report.records:
        b = base.get(r.name)
        out.append(
            [
                r.name,
                *(
                    f"{_mark(b.levels.get(lvl)) if b else '?'} → {_mark(r.levels.get(lvl))}"
                    for lvl in LEVELS[1:]
                ),
                _short((b.cause if b else "") or ""),
                _short(r.cause or ""),
            ]
        )
    return out


_COMPARISON_HEADERS = (
    "repository",
    *(f"{LEVEL_TITLES[lvl]} (raw → refined)" for lvl in LEVELS[1:]),
    "raw cause",
    "refined cause",
)


def render_markdown(report: BenchReport) -> str:
    """The table, the totals and (with a baseline) the raw-vs-refined comparison."""

    def table(headers: Sequence[str], body: list[list[str]]) -> list[str]:
        return [
            "| " + " | ".join(headers) + " |",
            "|" + "---|" * len(headers),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in body),
        ]

    out = [
        md_escape(_headline(report)),
        "",
        *table(HEADERS, rows(report)),
        "",
        *total_lines(report),
    ]
    if notes := note_lines(report):
        out += ["", notes[0], *(f"- {_cell(line.removeprefix('- '))}" for line in notes[1:])]
    if report.baseline is not None:
        out += ["", "Raw (first pass) against refined (this pass):", ""]
        out += table(_COMPARISON_HEADERS, _comparison_rows(report))
        base = totals(report.baseline)
        now = totals(report.records)
        out.append("")
        for lvl in LEVELS[1:]:
            out.append(
                f"- {LEVEL_TITLES[lvl]}: raw {base.levels[lvl].text()} → refined {now.levels[lvl].text()}"
            )
    return "\n".join(out) + "\n"


def _headline(report: BenchReport) -> str:
    """The report's first line, plain text (each format escapes it its own way)."""
    return (
        f"rb bench {report.suite_name or report.suite}: rb {report.rb_version}"
        + (f" ({report.rb_commit[:12]})" if report.rb_commit else "")
        + f", tier {report.tier}, {report.runs} run(s), backend {report.backend},"
        f" agent {report.agent}, limit {report.time_limit_s:g} s per repository"
        + f", {report.jobs} job(s) at once"
        + (
            f", {report.threads} CPU thread(s) per run ({report.threads_from})"
            if report.threads is not None
            else ""
        )
    )


def render_json(report: BenchReport) -> str:
    """The report and its totals as JSON (sorted keys)."""
    doc = report.model_dump(mode="json")
    doc["totals"] = asdict(totals(report.records))
    if report.baseline is not None:
        doc["baseline_totals"] = asdict(totals(report.baseline))
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def render_html(report: BenchReport) -> str:
    """One self-contained page (the report module's stylesheet and CSP)."""

    def level_cell(value: bool | None) -> Raw:
        if value is None:
            return _badge("not-applicable", "—")
        return _badge("pass", "yes") if value else _badge("fail", "no")

    body_rows: list[list[object]] = []
    for r, text in zip(report.records, rows(report), strict=True):
        body_rows.append(
            [
                *text[:2],
                *(level_cell(r.levels.get(lvl)) for lvl in LEVELS),
                *text[2 + len(LEVELS) :],
            ]
        )
    parts = [
        f"<header><h1>{esc('rb bench: ' + (report.suite_name or report.suite))}</h1>",
        f"<p>{esc(_headline(report))}</p></header>",
        "<main><section><h2>Repositories</h2>",
        _table(HEADERS, body_rows),
        "</section><section><h2>Totals</h2><ul>",
        *(f"<li>{esc(line.removeprefix('- '))}</li>" for line in total_lines(report)[1:]),
        "</ul></section>",
    ]
    if notes := note_lines(report):
        parts += [
            f"<section><h2>{esc(notes[0].removesuffix(':'))}</h2><ul>",
            *(f"<li>{esc(line.removeprefix('- '))}</li>" for line in notes[1:]),
            "</ul></section>",
        ]
    if report.baseline is not None:
        parts += [
            "<section><h2>Raw against refined</h2>",
            _table(_COMPARISON_HEADERS, _comparison_rows(report)),
            "</section>",
        ]
    parts.append("</main>")
    return page(f"rb bench: {report.suite_name or report.suite}", parts)


def write_outputs(report: BenchReport, out: Path) -> dict[str, Path]:
    """Write ``bench.md``, ``bench.json`` and ``bench.html`` under ``out`` (atomically)."""
    paths = {"markdown": out / "bench.md", "json": out / "bench.json", "html": out / "bench.html"}
    write_atomic(paths["markdown"], render_markdown(report).encode())
    write_atomic(paths["json"], render_json(report).encode())
    write_atomic(paths["html"], render_html(report).encode())
    return paths
