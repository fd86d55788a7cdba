"""The report as one self-contained HTML page.

Contract:

* Self-contained: inline CSS, inline SVG charts and the runs' image outputs as ``data:``
  URIs (:mod:`~reprobridge.report.images`: bounded; an SVG output only ever as an
  ``<img>``, never as markup); no script, no font, no link to anything outside the file. A Content-Security-Policy meta tag (``default-src 'none';
  style-src 'unsafe-inline'; img-src data:``) makes the browser refuse anything else, so a
  hostile string that slipped through could not load or run anything either.
* Every string from a bundle is untrusted and escaped: cells are plain ``str`` (escaped on
  output) unless wrapped in :class:`Raw`, which only this module's own markup uses.
* Deterministic: the page holds no time of its own (only the audit's recorded times) and
  iterates everything in a stable order, so the same bundle(s) give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reprobridge.audit.claims import references
from reprobridge.audit.dirty import listed, rb_own
from reprobridge.errors import ReproBridgeError
from reprobridge.evidence.records import LEVELS, ClaimResult
from reprobridge.report.compare import Comparison, RunDifferences, run_differences
from reprobridge.report.load import (
    AuditData,
    ExperimentData,
    MetricData,
    RunData,
    failure_excerpt,
    flatten,
    package_sets,
)
from reprobridge.report.numbers import (
    fmt_bytes,
    fmt_ci,
    fmt_delta,
    fmt_opt,
    fmt_value,
    round_numbers,
)
from reprobridge.report.states import PASS_NOT_HERMETIC, label, overall_state, shown_status
from reprobridge.report.svg import (
    ClaimSide,
    Series,
    claim_plot,
    curve_chart,
    esc,
    metric_plot,
    resource_charts,
)

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
#: Verdict words that have a colour; anything else a bundle says is shown as ``unknown``.
KNOWN_STATUS = frozenset(
    {"pass", PASS_NOT_HERMETIC, "fail", "incomplete", "skipped", "not-applicable", "not-judged"}
)


class Raw(str):
    """Markup this module built itself (already escaped); every other ``str`` is escaped."""

    __slots__ = ()


def _h(value: object) -> str:
    return value if isinstance(value, Raw) else esc(value)


def _badge(status: str | None, text: str | None = None) -> Raw:
    cls = status if status in KNOWN_STATUS else "unknown"
    default = label(status) if status == PASS_NOT_HERMETIC else status
    return Raw(f'<span class="badge {cls}">{esc(text or default or "—")}</span>')


def _holds_badge(holds: bool | None, skipped: bool = False, outcome: str = "") -> Raw:
    if outcome == "holds-not-significant":
        return _badge("skipped", "holds on the means, not significant")
    if holds is True:
        return _badge("pass", "holds")
    if holds is False:
        return _badge("fail", "does not hold")
    return _badge("skipped", "not evaluated" if skipped else "undecided")


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], cls: str = "") -> Raw:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in rows)
    klass = f' class="{esc(cls)}"' if cls else ""
    return Raw(f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _kv(rows: Iterable[tuple[str, object]]) -> Raw:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{_h(v)}</td></tr>" for k, v in rows)
    return Raw(f'<table class="kv"><tbody>{body}</tbody></table>')


def _code(text: str) -> Raw:
    return Raw(f"<code>{esc(text)}</code>")


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} s" if value < 0.1 else f"{value:.2f} s"


def _fp_rows(fingerprint: dict[str, object]) -> list[tuple[str, object]]:
    """A fingerprint's flattened rows; byte counts also in binary units."""
    rows: list[tuple[str, object]] = []
    for key, value in sorted(flatten(fingerprint).items()):
        if key.endswith("bytes") and value.isdigit():
            value = f"{fmt_bytes(int(value))} ({value} B)"
        rows.append((key, value))
    return rows


def _yes(value: bool | None) -> str:
    return "—" if value is None else "yes" if value else "no"


# -- the page -----------------------------------------------------------------------------


def render_html(audit: AuditData, comparison: Comparison | None = None) -> str:
    """The whole page for ``audit``; with ``comparison`` (whose ``after`` is ``audit``) a
    section comparing it with an earlier audit follows the summary."""
    exp_anchor = {e.id: f"exp-{i}" for i, e in enumerate(audit.experiments)}
    parts = [
        _banner(audit, comparison),
        _nav(audit, exp_anchor, comparison is not None),
        "<main>",
        _summary(audit, exp_anchor),
        _claims(audit),
        _warnings(audit),
    ]
    if comparison is not None:
        parts.append(_comparison(comparison))
    parts += [_experiment(e, exp_anchor[e.id], audit) for e in audit.experiments]
    parts += [_differences(audit), _environment(audit), "</main>", _footer(audit)]
    title = f"Reproduction report: {audit.project or audit.audit_id} ({audit.audit_id})"
    return page(title, parts)


def page(title: str, parts: Sequence[str]) -> str:
    """A whole self-contained document: the CSP, the stylesheet, ``title`` (escaped) and
    ``parts`` (markup already built and escaped by the caller), one per line."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(parts)
        + "\n</body>\n</html>\n"
    )


def _overall(audit: AuditData) -> tuple[str, str]:
    state = overall_state(audit.summary.passed, audit.summary.hermetic, audit.verdict_word or None)
    return state, label(state).upper()


def _banner(audit: AuditData, comparison: Comparison | None) -> str:
    cls, word = _overall(audit)
    failed = [e for e in audit.experiments if e.failed_level]
    held = sum(1 for c in audit.claims if c.holds is True)
    if audit.summary.passed is True:
        line = "Every experiment passed at every level and every claim holds."
        if audit.summary.hermetic is False:
            line += (
                " The environment was not hermetic: the numbers held on this machine, "
                "but nothing pins what the system around the Python packages was."
            )
    else:
        bits = []
        if failed:
            bits.append(
                f"{len(failed)} of {len(audit.experiments)} experiment(s) failed: "
                + ", ".join(f"{e.id} at the {e.failed_level} level" for e in failed)
            )
        if audit.claims and held < len(audit.claims):
            bits.append(f"{len(audit.claims) - held} of {len(audit.claims)} claim(s) do not hold")
        if audit.verdict == "NOT JUDGED":
            bits.append("this machine could not judge the audit; nothing failed")
        if audit.verdict in {"INCOMPLETE", "NOT JUDGED"}:
            bits += [f"not judged: {gap}" for gap in audit.summary.incomplete]
        line = "; ".join(bits) + "." if bits else "The audit did not pass."
    facts = [
        ("audit", audit.audit_id + ("" if audit.foreign is None else " (foreign)")),
        ("tier", audit.tier),
        ("backend", audit.backend + ("" if audit.summary.hermetic else " (not hermetic)")),
        ("runs", f"{audit.run_count} in {len(audit.experiments)} experiment(s)"),
        # The operator's CPU thread setting (--threads); shown only when one was given.
        *(
            [("threads", f"{audit.summary.threads} CPU thread(s) per run")]
            if audit.summary.threads is not None
            else []
        ),
        ("claims", f"{held} of {len(audit.claims)} hold" if audit.claims else "none"),
        ("commit", audit.commit[:12] or "—"),
        ("started", audit.summary.started or "—"),
        ("finished", audit.summary.finished or "—"),
    ]
    dl = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts)
    title = esc(audit.project or "Reproduction report")
    paper = f'<p class="paper">{esc(audit.paper_title)}</p>' if audit.paper_title else ""
    compared = ""
    if comparison is not None:
        compared = (
            f'<p class="paper">compared with audit {esc(comparison.before.audit_id)} '
            f'(<a href="#compare">differences</a>)</p>'
        )
        if comparison.plan:
            compared += (
                f'<p class="plan-warning">Different plans: {esc("; ".join(comparison.plan))}.</p>'
            )
    return (
        f'<header class="banner {cls}"><div class="verdict" id="overall">{word}</div>'
        f'<div class="headline"><p class="kicker">ReproBridge reproduction report</p>'
        f'<h1>{title}</h1>{paper}{compared}<p class="line">{esc(line)}</p>'
        f'<dl class="facts">{dl}</dl></div></header>'
    )


def _level_status(audit: AuditData, level: str, status: str) -> str:
    """A level's display state: the environment level of a non-hermetic audit passes amber."""
    return (
        (shown_status(status, audit.summary.hermetic) or status)
        if level == "environment"
        else status
    )


def _nav(audit: AuditData, anchors: dict[str, str], compare: bool) -> str:
    links = [("summary", "Verdicts"), ("claims", "Claims"), ("warnings", "Warnings")]
    if compare:
        links.append(("compare", "Comparison"))
    links += [(anchors[e.id], e.id) for e in audit.experiments]
    links += [("differences", "Differences"), ("environment", "Environment")]
    items = "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in links)
    return f"<nav>{items}</nav>"


def _summary(audit: AuditData, anchors: dict[str, str]) -> str:
    rows = []
    for e in audit.experiments:
        name = Raw(f'<a href="#{anchors[e.id]}">{esc(e.id)}</a>')
        cells: list[object] = [name]
        for level in LEVELS:
            v = e.levels[level]
            badge = _badge(_level_status(audit, level, v.status))
            cells.append(Raw(f'{badge}<div class="reason">{esc(v.reason)}</div>'))
        cells.append(str(len(e.runs)))
        rows.append(cells)
    table = _table(["Experiment", "Environment", "Procedure", "Metric", "Runs"], rows, "verdicts")
    return (
        '<section id="summary"><h2>Verdicts</h2>'
        '<p class="lead">Each experiment is judged at three levels: its <b>environment</b> '
        "could be built, its <b>procedure</b> ran to completion in every run, and its "
        "<b>metrics</b> met their thresholds under the stability policy. Verdicts are the "
        f"bundle's own; <code>rb verify</code> re-derives them.</p>{table}</section>"
    )


def _claims(audit: AuditData) -> str:
    claims = audit.claims
    if not claims:
        return '<section id="claims"><h2>Claims</h2><p class="muted">The manifest states no claims.</p></section>'
    rows = [
        [
            _code(c.expr),
            _holds_badge(c.holds, c.skipped, c.outcome),
            _code(round_numbers(c.substituted)) if c.substituted else "—",
            round_numbers(c.reason),
            c.provenance or "—",
        ]
        for c in claims
    ]
    table = _table(["Claim", "Result", "With measured values", "Reason", "Source"], rows)
    figures = "".join(_claim_figure(c, audit) for c in claims)
    return (
        '<section id="claims"><h2>Claims</h2><p class="lead">Comparisons the paper makes, '
        "evaluated on the measured values of runs whose procedure passed.</p>"
        f'{table}<div class="charts">{figures}</div></section>'
    )


def _claim_sides(expr: str, audit: AuditData) -> list[ClaimSide]:
    """The metrics ``expr`` names, in the order it names them, each with the values of the
    runs a claim counts; [] when the expression does not parse (a hostile bundle's)."""
    try:
        refs = references(expr)
    except ReproBridgeError:
        return []
    metrics = {(e.id, m.name): m for e in audit.experiments for m in e.metrics}
    sides = []
    for exp_id, name in sorted(refs, key=lambda r: (expr.find(f"{r[0]}.{r[1]}"), r)):
        m = metrics.get((exp_id, name))
        values = [
            v
            for i, v in enumerate(m.values if m is not None else [])
            if v is not None and (m is None or i >= len(m.counted) or m.counted[i])
        ]
        sides.append(ClaimSide(f"{exp_id}.{name}", values))
    return sides


def _claim_figure(c: ClaimResult, audit: AuditData) -> str:
    """A claim as a picture: each side's run values and mean, the outcome as caption."""
    sides = _claim_sides(c.expr, audit)
    if not sides:
        return ""
    outcome = {
        "holds": "holds",
        "holds-not-significant": "holds on the means, not significant",
        "does-not-hold": "does not hold",
        "undecided": "undecided",
    }.get(c.outcome, "holds" if c.holds else "does not hold" if c.holds is False else "—")
    caption = f"{c.expr}: {outcome}" + (f" ({c.test})" if c.test else "")
    return (
        f"<figure><figcaption>{esc(round_numbers(caption))}</figcaption>"
        f"{claim_plot(f'claim {c.expr}: the values of each side', sides)}</figure>"
    )


def audit_warnings(audit: AuditData) -> list[str]:
    """The bundle's warnings, plus what its facts say about trust (not hermetic, not
    sandboxed, a dirty working tree)."""
    out = list(audit.summary.warnings)
    if audit.foreign is not None:
        # First: every other line of this page is the bundle's own word.
        out.insert(0, f"foreign bundle: {audit.foreign}; not an audit this operator ran")
    if audit.summary.hermetic is False and not any("hermetic" in w for w in out):
        out.append("not hermetic: the environment is not fully pinned by Nix")
    if audit.summary.sandboxed is False:
        out.append(f"runs were not sandboxed ({audit.summary.sandbox or 'reason not recorded'})")
    unused = _not_in_runs(audit.git)
    if unused:
        out.append(
            f"the working tree had {len(unused)} uncommitted change(s) the runs did not use "
            f"(they started from the commit): {listed(unused)}"
        )
    return out


def _not_in_runs(git: Mapping[str, Any]) -> list[str]:
    """The uncommitted changes of the audited work tree (its git fingerprint) that no run
    used: tracked files changed and untracked ones, but rb's own (the artifacts every
    workspace takes from the work tree, and files no run reads)."""
    changed, untracked = git.get("changed"), git.get("untracked")
    paths = [str(p) for p in changed if not rb_own(str(p))] if isinstance(changed, list) else []
    if isinstance(untracked, list):
        paths += [f"{p} (untracked)" for p in untracked if not rb_own(str(p))]
    return paths


def _warnings(audit: AuditData) -> str:
    items = audit_warnings(audit)
    if not items:
        return '<section id="warnings"><h2>Warnings</h2><p class="muted">None.</p></section>'
    lis = "".join(f"<li>{esc(w)}</li>" for w in items)
    return f'<section id="warnings"><h2>Warnings</h2><ul class="warnings">{lis}</ul></section>'


# -- one experiment -----------------------------------------------------------------------


def _experiment(e: ExperimentData, anchor: str, audit: AuditData) -> str:
    levels = "".join(
        f'<div class="level"><span class="lname">{esc(level)}</span>'
        f"{_badge(_level_status(audit, level, e.levels[level].status))}"
        f'<span class="reason">{esc(e.levels[level].reason)}</span></div>'
        for level in LEVELS
    )
    desc = f'<p class="muted">{esc(e.description)}</p>' if e.description else ""
    metrics = "".join(_metric(m, e.runs) for m in e.metrics) or (
        '<p class="muted">No metrics declared.</p>'
    )
    legend = (
        '<p class="legend"><span class="sw band"></span>target band '
        '<span class="sw target"></span>target <span class="sw limit"></span>min/max '
        '<span class="sw dot ok"></span>run within thresholds '
        '<span class="sw dot bad"></span>outside '
        '<span class="sw dot uncounted"></span>not counted (procedure failed) '
        '<span class="sw mean"></span>mean with 95% CI</p>'
    )
    charts = "".join(
        f"<figure><figcaption>{esc(h)}</figcaption>{svg}</figure>"
        for h, svg in resource_charts(e.runs)
    )
    gpu_note = ""
    if not any(s.gpus for r in e.runs for s in r.timeline):
        states = sorted({str(r.peaks.get("gpu_state") or "") for r in e.runs} - {""})
        gpu_note = f'<p class="muted">No GPU readings{": " + esc("; ".join(states)) if states else ""}.</p>'
    return (
        f'<section id="{anchor}" class="experiment"><h2>Experiment {esc(e.id)} '
        f"{_exp_badge(e, audit.summary.hermetic)}</h2>{desc}"
        f'<div class="levels">{levels}</div>'
        f"<h3>Metrics</h3>{legend}{metrics}"
        f"<h3>Runs</h3>{_runs_table(e)}"
        f"{_curves(e)}{_images(e.runs)}"
        f'<h3>Resources</h3><div class="charts">{charts}</div>{gpu_note}'
        f"{_logs(e.runs)}</section>"
    )


def _curves(e: ExperimentData) -> str:
    """Each regex metric printed more than once in some run, as a line per run over the
    order the log printed its values (a single run's curve is a line, not one dot)."""
    names = sorted({n for r in e.runs for n, c in r.curves.items() if c.count > 1})
    if not names:
        return ""
    figures = []
    for name in names:
        series = [
            Series(r.label, [(float(x), v) for x, v in r.curves[name].points])
            if name in r.curves
            else Series(r.label, [])
            for r in e.runs
        ]
        counts = "; ".join(
            f"{r.label}: {r.curves[name].describe()}" for r in e.runs if name in r.curves
        )
        figures.append(
            f"<figure><figcaption>{esc(f'{name} as printed over each run ({counts})')}"
            f"</figcaption>{curve_chart(f'{name} over each run', series)}</figure>"
        )
    return f'<h3>Metric curves</h3><div class="charts">{"".join(figures)}</div>'


def _images(runs: Sequence[RunData]) -> str:
    """The image outputs of each run: embedded as data: URIs (an SVG too: as an image it
    runs nothing), or named with the reason it is not."""
    out = []
    for r in runs:
        if not r.images:
            continue
        seed = f" (seed {r.seed})" if r.seed is not None else ""
        items = []
        for img in r.images:
            caption = f"{img.path}, {fmt_bytes(img.size)}"
            if img.data_uri is None:
                items.append(f'<li class="muted">{esc(caption)}: {esc(img.reason)}</li>')
            else:
                items.append(
                    f'<figure class="image"><img src="{esc(img.data_uri)}" alt="{esc(img.path)}">'
                    f"<figcaption>{esc(caption)}</figcaption></figure>"
                )
        shown = "".join(i for i in items if i.startswith("<figure"))
        named = "".join(i for i in items if i.startswith("<li"))
        out.append(
            f"<h4>{esc(r.label + seed)}</h4>"
            + (f'<div class="images">{shown}</div>' if shown else "")
            + (f'<ul class="images">{named}</ul>' if named else "")
        )
    return ("<h3>Image outputs</h3>" + "".join(out)) if out else ""


def _all_status(e: ExperimentData) -> str:
    statuses = {e.levels[level].status for level in LEVELS}
    return "pass" if statuses == {"pass"} else "skipped" if "skipped" in statuses else "unknown"


def _exp_badge(e: ExperimentData, hermetic: bool | None) -> Raw:
    if e.failed_level:
        return _badge("fail", f"fails at {e.failed_level}")
    machine = next((n for n in LEVELS if e.levels[n].status == "not-judged"), None)
    if machine:
        return _badge("not-judged", f"not judged at {machine} (this machine)")
    status = _all_status(e)
    if status != "pass":
        return _badge(status, "incomplete")
    shown = shown_status(status, hermetic) or status
    return _badge(shown, "passes" if shown == "pass" else "passes, not hermetic")


def _metric(m: MetricData, runs: Sequence[RunData]) -> str:
    facts: list[tuple[str, object]] = [
        ("threshold", m.threshold or "—"),
        ("tolerance from", m.tolerance_source or "—"),
        ("policy", m.policy or "—"),
        ("result", m.reason),
    ]
    if m.stats is not None:
        s = m.stats
        facts.append(
            (
                "mean (95% CI)",
                fmt_ci(s, mean=True),
            )
        )
        facts.append(
            (
                "std · min · max · n",
                f"{fmt_value(s.std)} · {fmt_value(s.min)} · {fmt_value(s.max)} · {s.n}",
            )
        )
    if m.claimed is not None:
        facts.append(("claimed (not judged)", fmt_value(m.claimed)))
    if m.claimed_vs_measured:
        diff = m.claimed_vs_measured.get("difference")
        if isinstance(diff, int | float):
            facts.append(("measured − claimed", fmt_value(float(diff))))
    if m.band is not None and not m.band.applied:
        facts.append(("note", "thresholds are not applied in this tier"))
    if m.provenance:
        facts.append(("target from", m.provenance))
    facts.append(("read from", _code(m.source) if m.source else "—"))
    missing = [
        f"run {i + 1}: {m.statuses[i] if i < len(m.statuses) else 'no value'}"
        for i, v in enumerate(m.values)
        if v is None
    ]
    if missing:
        facts.append(("no value", "; ".join(missing)))
    return (
        f'<div class="metric"><h4>{esc(m.name)} {_badge(m.outcome)}</h4>'
        f'<div class="mgrid"><div class="plot">{metric_plot(m, runs)}</div>{_kv(facts)}</div></div>'
    )


def _runs_table(e: ExperimentData) -> str:
    if not e.runs:
        return '<p class="muted">No runs recorded.</p>'
    names = [m.name for m in e.metrics]
    by_name = {m.name: m for m in e.metrics}
    has_gpu = any(r.peaks.get("gpu") for r in e.runs)
    headers = ["Run", "Seed", "Termination", "Procedure", "Wall", "CPU", "Peak CPU", "Peak RSS"]
    headers += ["Peak GPU"] if has_gpu else []
    headers += names
    rows = []
    for r in e.runs:
        proc = (
            _badge("pass", "ok")
            if r.procedure_ok
            else Raw(
                f'{_badge("fail", "failed")}<div class="reason">{esc(r.procedure_reason)}</div>'
            )
            if r.procedure_ok is False
            else _badge(None, "—")
        )
        cpu_peak = r.peaks.get("cpu_percent_max")
        rss_peak = r.peaks.get("rss_bytes_max")
        row: list[object] = [
            r.label,
            "—" if r.seed is None else str(r.seed),
            r.termination,
            proc,
            _seconds(r.wall_s),
            _seconds(r.cpu_s),
            f"{cpu_peak:.0f}%" if isinstance(cpu_peak, int | float) else "—",
            fmt_bytes(rss_peak) if isinstance(rss_peak, int | float) else "—",
        ]
        if has_gpu:
            row.append(_gpu_peaks(r))
        for name in names:
            m = by_name[name]
            value = m.values[r.k] if r.k < len(m.values) else None
            status = m.statuses[r.k] if r.k < len(m.statuses) else ""
            cls = "ok" if status == "ok" else "bad"
            shown = fmt_value(value) if value is not None else "—"
            extra = "" if status == "ok" else f'<div class="reason">{esc(status)}</div>'
            row.append(Raw(f'<span class="val {cls}">{esc(shown)}</span>{extra}'))
        rows.append(row)
    return str(_table(headers, rows, "runs")) + _failures(e.runs)


def _failures(runs: Sequence[RunData]) -> str:
    """Under the runs table, each failed run's last lines of stderr: where the real cause
    (``python: not found``) is, rather than only ``exit(127)``."""
    out = []
    for r in runs:
        excerpt = failure_excerpt(r)
        if excerpt:
            out.append(
                f'<div class="failure"><p><b>{esc(r.label)}</b> failed '
                f"({esc(r.procedure_reason or r.termination)}); the last lines of its "
                f"stderr:</p><pre>{esc(chr(10).join(excerpt))}</pre></div>"
            )
    return "".join(out)


def _gpu_peaks(r: RunData) -> str:
    out = []
    for g in r.peaks.get("gpu") or []:
        if isinstance(g, dict):
            util, mem = g.get("util_max"), g.get("mem_used_max")
            util_s = f"{util:.0f}%" if isinstance(util, int | float) else "—"
            mem_s = fmt_bytes(mem) if isinstance(mem, int | float) else "—"
            out.append(f"GPU {g.get('index', '?')}: {util_s}, {mem_s}")
    return "; ".join(out) or "—"


def _logs(runs: Sequence[RunData]) -> str:
    out = []
    for r in runs:
        for stream, text, size in (
            ("stdout", r.stdout_tail, r.stdout_bytes),
            ("stderr", r.stderr_tail, r.stderr_bytes),
        ):
            if not text:
                continue
            sized = f", {fmt_bytes(size)} in all" if size is not None else ""
            out.append(
                f"<details><summary>{esc(r.label)} {stream} (last lines{esc(sized)})</summary>"
                f"<pre>{esc(text)}</pre></details>"
            )
    return ('<h3>Logs</h3><div class="logs">' + "".join(out) + "</div>") if out else ""


# -- differences, environment, comparison --------------------------------------------------


def _differences(audit: AuditData) -> str:
    parts = [
        '<section id="differences"><h2>Differences between runs</h2>'
        '<p class="lead">What was not the same in every run of an experiment. Seeds, a '
        "run's own id and its scratch <code>HOME</code> differ by design and are not listed.</p>"
    ]
    for e in audit.experiments:
        parts.append(_run_diff(run_differences(e)))
    parts.append("</section>")
    return "".join(parts)


def _run_diff(d: RunDifferences) -> str:
    rows = [
        [
            s.metric,
            str(s.n),
            fmt_opt(s.low),
            fmt_opt(s.high),
            fmt_opt(s.range),
            fmt_opt(s.std),
        ]
        for s in d.spreads
    ]
    out = [f"<h3>{esc(d.experiment)}</h3>"]
    if rows:
        out.append("<h4>Spread of metric values</h4>")
        out.append(_table(["Metric", "Values", "Min", "Max", "Range", "Std"], rows))
    if len(d.labels) < 2:
        out.append('<p class="muted">Fewer than two runs ran: nothing to compare.</p>')
        return "".join(out)
    for what, diff in (("Python packages", d.packages), ("Environment variables", d.env)):
        if diff:
            out.append(f"<h4>{esc(what)} that differ</h4>")
            out.append(
                _table(
                    ["Name", *d.labels],
                    [
                        [k, *(v if v is not None else "(absent)" for v in vals)]
                        for k, vals in diff.items()
                    ],
                )
            )
        else:
            out.append(f'<p class="same">{esc(what)}: the same in all {len(d.labels)} runs.</p>')
    if len(set(d.terminations)) > 1:
        out.append(
            '<p class="same">Terminations: '
            + esc("; ".join(f"run {i + 1}: {t}" for i, t in enumerate(d.terminations)))
            + "</p>"
        )
    return "".join(out)


def _environment(audit: AuditData) -> str:
    env = audit.environment
    fingerprint = env.get("fingerprint") if isinstance(env.get("fingerprint"), dict) else {}
    run_env: list[tuple[str, object]] = [
        ("backend", audit.backend),
        ("environment", str(env.get("reason") or "—")),
        ("hermetic", _yes(audit.summary.hermetic)),
        ("sandbox", audit.summary.sandbox or "—"),
        ("rb version", audit.rb_version or "—"),
        ("manifest sha256", _code(audit.manifest_sha256) if audit.manifest_sha256 else "—"),
    ]
    run_env += [
        (f"tool: {k}", str(v) if v is not None else "—")
        for k, v in sorted((fingerprint or {}).items())
    ]
    git_rows = [
        ("commit", _code(str(audit.git.get("commit") or audit.commit or "—"))),
        ("branch", str(audit.git.get("branch") or "—")),
        (
            "dirty",
            _yes(audit.git.get("dirty") if isinstance(audit.git.get("dirty"), bool) else None),
        ),
        ("changed tracked files", flatten(audit.git.get("changed") or []).get("", "(none)")),
        ("untracked files", str(audit.git.get("untracked_count", "—"))),
    ]
    parts = [
        '<section id="environment"><h2>Environment and hardware</h2><div class="cols">',
        f"<div><h3>Audit environment</h3>{_kv(run_env)}</div>",
        f"<div><h3>Git</h3>{_kv(git_rows)}</div>",
        f"<div><h3>Host</h3>{_kv(_fp_rows(audit.host))}</div>",
        f"<div><h3>GPU</h3>{_kv(_fp_rows(audit.gpu))}</div>",
        "</div>",
    ]
    nix = {k: v for k, v in audit.nix.items() if k != "flake_lock"}
    parts.append("<h3>Nix</h3>")
    if nix:
        parts.append(_kv(sorted(flatten(nix).items())))
    else:
        parts.append(
            f'<p class="muted">No Nix fingerprint: the {esc(audit.backend)} backend ran.</p>'
        )
    if audit.flake_inputs:
        rows = [
            [
                name,
                str(pins.get("type", "—")),
                _code(str(pins.get("rev") or pins.get("path") or pins.get("url") or "—")),
                _code(str(pins.get("narHash") or "unpinned")),
            ]
            for name, pins in audit.flake_inputs.items()
        ]
        parts.append("<h4>Pinned flake inputs (flake.lock)</h4>")
        parts.append(_table(["Input", "Type", "Revision", "narHash"], rows))
    packages = package_sets(audit)
    parts.append(f"<h3>Python packages ({len(packages)})</h3>")
    if packages:
        parts.append(
            "<details><summary>The packages the runs' interpreter saw</summary>"
            + _table(["Package", "Version"], [[k, v] for k, v in packages.items()], "packages")
            + "</details>"
        )
    first = next((r for e in audit.experiments for r in e.runs if r.env), None)
    if first is not None:
        parts.append(
            f"<h3>Run environment variables</h3><details><summary>As recorded for "
            f"{esc(first.experiment)} {esc(first.label)} (secrets redacted by the auditor)"
            f"</summary>{_kv(sorted(first.env.items()))}</details>"
        )
    parts.append("</section>")
    return "".join(parts)


def _comparison(c: Comparison) -> str:
    a, b = c.before.audit_id, c.after.audit_id
    parts = [
        f'<section id="compare"><h2>Comparison with an earlier audit</h2>'
        f'<p class="lead">A = {_code(a)} ({esc(c.before.summary.started or "—")}, '
        f"{esc(_overall(c.before)[1])}); B = {_code(b)} ({esc(c.after.summary.started or '—')}, "
        f"{esc(_overall(c.after)[1])}). This page shows B.</p>",
    ]
    if c.plan:
        items = "".join(f"<li>{esc(p)}</li>" for p in c.plan)
        parts.append(
            '<div class="plan-warning" role="alert"><p><b>The audits ran different plans: '
            f"this is not a like-for-like comparison.</b></p><ul>{items}</ul></div>"
        )
    parts.append("<h3>Verdict changes</h3>")
    if c.verdicts:
        rows = [
            [
                v.experiment,
                v.level,
                _badge(v.before, v.before or "absent"),
                _badge(v.after, v.after or "absent"),
                v.reason,
            ]
            for v in c.verdicts
        ]
        parts.append(_table(["Experiment", "Level", "A", "B", "Reason in B"], rows))
    else:
        same = "No verdict changed" + (" (but the plans differ, see above)." if c.plan else ".")
        parts.append(f'<p class="same">{esc(same)}</p>')
    if c.claims:
        parts.append("<h3>Claim changes</h3>")
        parts.append(
            _table(
                ["Claim", "A", "B"],
                [[_code(expr), _holds_badge(ha), _holds_badge(hb)] for expr, ha, hb in c.claims],
            )
        )
    parts.append("<h3>Metric means</h3>")
    rows = []
    for m in c.metrics:
        shown = fmt_delta(m.delta)
        rows.append(
            [
                m.experiment,
                m.metric,
                fmt_opt(m.before),
                fmt_opt(m.after),
                Raw(f'<span class="delta">{esc(shown)}</span>'),
                _badge(m.outcome_before, m.outcome_before or "absent"),
                _badge(m.outcome_after, m.outcome_after or "absent"),
            ]
        )
    parts.append(_table(["Experiment", "Metric", "Mean A", "Mean B", "B − A", "A", "B"], rows))
    parts.append("<h3>Fingerprint differences</h3>")
    if c.fields:
        rows = [[f.section, f.key, f.before or "(absent)", f.after or "(absent)"] for f in c.fields]
        parts.append(_table(["Section", "Key", "A", "B"], rows, "diff"))
    else:
        parts.append(
            '<p class="same">Same host, GPU, git commit, Nix inputs and Python packages.</p>'
        )
    parts.append("</section>")
    return "".join(parts)


def _footer(audit: AuditData) -> str:
    return (
        f"<footer>Generated by ReproBridge {esc(audit.rb_version)} from evidence bundle "
        f"{_code(audit.audit_id)}. The report shows what the bundle records; "
        f"<code>rb verify {esc(audit.audit_id)}</code> re-checks its hashes and verdicts."
        "</footer>"
    )


STYLE = (
    """
:root{--bg:#f7f8fa;--fg:#1d2330;--muted:#5d6678;--card:#fff;--line:#dfe3ea;--head:#eef1f5;
--pass:#137a3c;--pass-bg:#e3f4ea;--fail:#b42318;--fail-bg:#fdecea;--skip:#6b7280;--skip-bg:#eceef2;
--na:#8a5a00;--na-bg:#fdf3dc;--warn:#8a5a00;--warn-bg:#fdf3dc;--warn-line:#d89b1d;--accent:#2f5fb3;--band:rgba(19,122,60,.14);--target:#137a3c;
--limit:#b42318;--dot:#2f5fb3;--bad:#b42318;--mean:#1d2330;--grid:#e8ebf0;
--s0:#2f5fb3;--s1:#d9730d;--s2:#2e9e5b;--s3:#b42318;--s4:#7c4dbd;--s5:#0f8fa8;--s6:#a15c2e;--s7:#d1459a}
@media (prefers-color-scheme:dark){:root{--bg:#12151b;--fg:#e3e7ee;--muted:#9aa3b2;--card:#1a1e26;
--line:#2c323d;--head:#222833;--pass:#4cc38a;--pass-bg:#163326;--fail:#ff6b5e;--fail-bg:#3a1a18;
--skip:#a0a8b6;--skip-bg:#2a2f38;--na:#f0b84a;--na-bg:#3a2e14;--warn:#f0b84a;--warn-bg:#3a2e14;
--warn-line:#f0b84a;--accent:#7aa7ff;
--band:rgba(76,195,138,.18);--target:#4cc38a;--limit:#ff6b5e;--dot:#7aa7ff;--bad:#ff6b5e;
--mean:#e3e7ee;--grid:#2a303a;--s0:#7aa7ff;--s1:#f3a35c;--s2:#4cc38a;--s3:#ff6b5e;--s4:#b28cf0;
--s5:#4fc8e0;--s6:#d59a6a;--s7:#f07cc0}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",
Roboto,"Helvetica Neue",Arial,sans-serif}
code,pre{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
code{background:var(--head);padding:1px 4px;border-radius:4px;overflow-wrap:anywhere}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.banner{display:flex;gap:24px;align-items:flex-start;padding:28px 40px 22px;background:var(--card);
border-bottom:1px solid var(--line);border-top:6px solid var(--skip)}
.banner.pass{border-top-color:var(--pass)}.banner.fail{border-top-color:var(--fail)}
.verdict{font-size:26px;font-weight:800;letter-spacing:.06em;padding:14px 22px;border-radius:10px;
background:var(--skip-bg);color:var(--skip);min-width:124px;text-align:center}
.banner.pass .verdict{background:var(--pass-bg);color:var(--pass)}
.banner.pass-not-hermetic{border-top-color:var(--warn-line)}
.banner.pass-not-hermetic .verdict{background:var(--warn-bg);color:var(--warn);font-size:20px}
.banner.fail .verdict{background:var(--fail-bg);color:var(--fail)}
.banner.incomplete,.banner.not-judged{border-top-color:var(--na)}
.banner.incomplete .verdict,.banner.not-judged .verdict{background:var(--na-bg);color:var(--na)}
.headline{flex:1;min-width:0}.kicker{margin:0;color:var(--muted);font-size:12px;text-transform:uppercase;
letter-spacing:.08em}h1{margin:2px 0 2px;font-size:24px}.paper{margin:0;color:var(--muted)}
.line{margin:8px 0 10px;font-weight:600}
.facts{display:flex;flex-wrap:wrap;gap:6px 22px;margin:0}.facts div{display:flex;gap:6px}
.facts dt{color:var(--muted)}.facts dd{margin:0;font-variant-numeric:tabular-nums}
nav{position:sticky;top:0;z-index:1;display:flex;flex-wrap:wrap;gap:4px 16px;padding:8px 40px;
background:var(--head);border-bottom:1px solid var(--line);font-size:13px}
main{max-width:1180px;margin:0 auto;padding:8px 40px 24px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 22px;margin:18px 0}
h2{margin:0 0 10px;font-size:19px;display:flex;align-items:center;gap:10px}
h3{margin:18px 0 8px;font-size:15px}h4{margin:12px 0 6px;font-size:14px;display:flex;gap:8px;align-items:center}
.lead{margin:0 0 12px;color:var(--muted)}.muted{color:var(--muted)}.same{color:var(--muted);margin:6px 0}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{text-align:left;vertical-align:top;padding:6px 10px;border-bottom:1px solid var(--line)}
thead th{background:var(--head);font-weight:600;font-size:12.5px;color:var(--muted)}
table.kv th{width:34%;font-weight:500;color:var(--muted);white-space:nowrap}
table.kv td,table.kv th{padding:4px 8px;overflow-wrap:anywhere}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;font-size:12px;font-weight:700;
background:var(--skip-bg);color:var(--skip);white-space:nowrap;vertical-align:middle}
.badge.pass{background:var(--pass-bg);color:var(--pass)}.badge.fail{background:var(--fail-bg);color:var(--fail)}
.badge.not-applicable,.badge.incomplete,.badge.not-judged{background:var(--na-bg);color:var(--na)}
.badge.pass-not-hermetic{background:var(--warn-bg);color:var(--warn)}
.plan-warning{background:var(--warn-bg);color:var(--warn);border:1px solid var(--warn-line);
border-radius:8px;padding:8px 12px;margin:8px 0;font-weight:600}
.plan-warning ul{margin:4px 0 0;padding-left:20px;font-weight:400}
.reason{color:var(--muted);font-size:12.5px;margin-top:2px}
.levels{display:grid;gap:6px;margin:6px 0 4px}.level{display:flex;gap:10px;align-items:baseline}
.lname{width:96px;color:var(--muted);font-size:12.5px;text-transform:uppercase;letter-spacing:.04em}
.metric{border-top:1px solid var(--line);padding-top:6px;margin-top:8px}
.mgrid{display:grid;grid-template-columns:minmax(0,560px) minmax(260px,1fr);gap:16px;align-items:start}
.plot{overflow-x:auto}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}
figure{margin:0}figcaption{font-size:12.5px;color:var(--muted);margin-bottom:2px}
svg.chart{max-width:100%;height:auto;font:11px system-ui,sans-serif}
svg .axis,svg .legend,svg .note{fill:var(--muted)}svg .axisline,svg .tick{stroke:var(--muted);stroke-width:1}
svg .grid{stroke:var(--grid);stroke-width:1}svg .band{fill:var(--band)}svg .band.off{fill:var(--grid)}
svg .target{stroke:var(--target);stroke-width:1.5;stroke-dasharray:5 3}
svg .limit{stroke:var(--limit);stroke-width:1.5}svg .bandlabel{fill:var(--muted);font-size:10.5px}
svg .dot.ok{fill:var(--dot)}svg .dot.bad{fill:var(--bad)}
svg .dot.uncounted{fill:none;stroke:var(--muted);stroke-width:1.5}
svg .mean line{stroke:var(--mean);stroke-width:1.5}svg .mean rect{fill:var(--mean)}
svg .meanlabel{fill:var(--fg);font-size:11px}
svg .line{fill:none;stroke-width:1.8;stroke-linejoin:round}
"""
    + "".join(
        f"svg .line.s{i}{{stroke:var(--s{i})}}svg .pt.s{i}{{fill:var(--s{i})}}" for i in range(8)
    )
    + """
.legend{font-size:12px;color:var(--muted);margin:4px 0 0;display:flex;flex-wrap:wrap;gap:4px 6px;align-items:center}
.sw{display:inline-block;width:14px;height:10px;margin-left:8px;border-radius:2px;vertical-align:middle}
.sw.band{background:var(--band);border:1px solid var(--target)}
.sw.target{height:0;border-top:2px dashed var(--target)}.sw.limit{width:3px;height:12px;background:var(--limit)}
.sw.dot{width:10px;height:10px;border-radius:50%}.sw.dot.ok{background:var(--dot)}.sw.dot.bad{background:var(--bad)}
.sw.dot.uncounted{border:1.5px solid var(--muted)}.sw.mean{height:2px;background:var(--mean)}
.val.bad{color:var(--fail);font-weight:600}
.failure{border-left:4px solid var(--fail);padding:2px 0 2px 12px;margin:10px 0}
.failure p{margin:0 0 4px}
table.runs td{white-space:nowrap}table.runs td .reason{white-space:normal}
ul.warnings{margin:0;padding-left:20px}ul.warnings li{margin:3px 0}
details{margin:6px 0}summary{cursor:pointer;color:var(--accent)}
pre{background:var(--head);border:1px solid var(--line);border-radius:6px;padding:8px 10px;
max-height:320px;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:0 24px}
table.packages{max-width:560px}
.images{display:flex;flex-wrap:wrap;gap:10px;margin:4px 0}figure.image img{display:block;max-width:260px;
max-height:260px;border:1px solid var(--line);border-radius:4px;background:#fff}
ul.images{display:block;padding-left:20px}
table.diff td{overflow-wrap:anywhere;word-break:break-all}table.diff td:nth-child(-n+2){word-break:normal}
footer{max-width:1180px;margin:0 auto 28px;padding:0 40px;color:var(--muted);font-size:12.5px}
@media print{nav{position:static}section{break-inside:avoid-page}}
"""
)
