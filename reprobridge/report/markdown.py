"""The report as GitHub-flavoured Markdown, for a pull-request comment or an artifact
evaluation form.

Contract: the same facts as the HTML page's summary (overall verdict, experiments × levels,
metric statistics against thresholds, claims, warnings, and with a comparison its verdict
changes and metric deltas), no charts. Strings from the bundle are untrusted: table cells
are escaped so that they cannot break the table, start HTML, or mention/link anything
(``|``, ``<``, ``>``, backticks, ``[``, ``]``, ``@`` and newlines are neutralised).
Deterministic, like the HTML page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from reprobridge.evidence.records import LEVELS
from reprobridge.report.compare import Comparison
from reprobridge.report.html import audit_warnings
from reprobridge.report.load import AuditData, failure_excerpt
from reprobridge.report.numbers import fmt_ci, fmt_delta, fmt_opt, fmt_value, round_numbers
from reprobridge.report.states import PASS_NOT_HERMETIC, overall_state, shown_status

_ICON = {
    "pass": "✅ pass",
    PASS_NOT_HERMETIC: "🟡 pass, not hermetic",
    "fail": "❌ fail",
    "incomplete": "⚠️ incomplete",
    "skipped": "⏭️ skipped",
    "not-applicable": "➖ n/a",
    "not-judged": "🖥️ not judged",
}
_OVERALL = {
    "pass": "✅ PASS",
    PASS_NOT_HERMETIC: "🟡 PASS, NOT HERMETIC",
    "fail": "❌ FAIL",
    "incomplete": "⚠️ INCOMPLETE",
    "not-judged": "🖥️ NOT JUDGED (this machine)",
}
_ESCAPE = str.maketrans(
    {
        "&": "&amp;",
        "|": "\\|",
        "<": "&lt;",
        ">": "&gt;",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "*": "\\*",
        "_": "\\_",
        "@": "@\u200b",  # no @-mentions from a bundle
        "\\": "\\\\",
        "\r": " ",
        "\n": " ",
    }
)


def md_escape(text: object) -> str:
    """``text`` safe as inline Markdown (one line, no markup, no HTML)."""
    return str(text).translate(_ESCAPE)


def _status(status: str | None) -> str:
    if status is None:
        return "absent"
    return _ICON.get(status, md_escape(status))


def _shown(audit: AuditData, level: str, status: str) -> str:
    """The environment level of a non-hermetic audit passes amber (as in the HTML page)."""
    return (
        (shown_status(status, audit.summary.hermetic) or status)
        if level == "environment"
        else status
    )


def _failures(audit: AuditData) -> list[str]:
    """Each failed run with the last lines of its stderr, in a code block whose fence is
    longer than any backtick run in the text (a log cannot close it and add Markdown)."""
    out: list[str] = []
    for e in audit.experiments:
        for r in e.runs:
            excerpt = failure_excerpt(r)
            if not excerpt:
                continue
            text = "\n".join(excerpt)
            longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
            fence = "`" * max(3, longest + 1)
            why = md_escape(r.procedure_reason or r.termination)
            out += [
                f"**{md_escape(e.id)} {md_escape(r.label)}** failed ({why}); "
                "the last lines of its stderr:",
                "",
                fence + "text",
                text,
                fence,
                "",
            ]
    return ["### Failed runs", "", *out] if out else []


def _holds(holds: bool | None, outcome: str = "") -> str:
    if outcome == "holds-not-significant":
        return "⚠️ holds on the means, not significant"
    return (
        "✅ holds" if holds is True else "❌ does not hold" if holds is False else "⏭️ not decided"
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return [*out, ""]


def render_markdown(audit: AuditData, comparison: Comparison | None = None) -> str:
    """The Markdown report of ``audit`` (optionally with a comparison section)."""
    word = _OVERALL.get(
        overall_state(audit.summary.passed, audit.summary.hermetic, audit.verdict_word or None),
        "❔ UNKNOWN",
    )
    held = sum(1 for c in audit.claims if c.holds is True)
    title = md_escape(audit.project or "Reproduction report")
    lines = [
        f"## {word}: {title}",
        "",
        f"Audit {md_escape(audit.audit_id)}{'' if audit.foreign is None else ' (foreign)'} · tier {md_escape(audit.tier)} · "
        f"backend {md_escape(audit.backend)}{'' if audit.summary.hermetic else ' (not hermetic)'} · "
        f"{audit.run_count} run(s) · "
        + (
            f"{audit.summary.threads} CPU thread(s) per run · "
            if audit.summary.threads is not None
            else ""
        )
        + f"claims {held}/{len(audit.claims)} hold · "
        f"commit {md_escape(audit.commit[:12] or '—')} · {md_escape(audit.summary.started)} → "
        f"{md_escape(audit.summary.finished)}",
        "",
        "### Verdicts",
        "",
    ]
    lines += _table(
        ["Experiment", "Environment", "Procedure", "Metric", "Runs"],
        (
            [
                f"**{md_escape(e.id)}**",
                *(
                    f"{_status(_shown(audit, lv, e.levels[lv].status))}: "
                    f"{md_escape(e.levels[lv].reason)}"
                    for lv in LEVELS
                ),
                str(len(e.runs)),
            ]
            for e in audit.experiments
        ),
    )
    lines += ["### Metrics", ""]
    rows = []
    for e in audit.experiments:
        for m in e.metrics:
            values = ", ".join("—" if v is None else fmt_value(v) for v in m.values)
            mean = fmt_ci(m.stats, mean=True) if m.stats else "—"
            rows.append(
                [
                    md_escape(e.id),
                    md_escape(m.name),
                    md_escape(
                        (m.threshold or "—")
                        + (f" (tolerance from: {m.tolerance_source})" if m.tolerance_source else "")
                    ),
                    md_escape(values or "—"),
                    md_escape(mean),
                    f"{_status(m.outcome)}: {md_escape(m.reason)}",
                ]
            )
    lines += (
        _table(
            ["Experiment", "Metric", "Threshold", "Values per run", "Mean [95% CI]", "Outcome"],
            rows,
        )
        if rows
        else ["No metrics declared.", ""]
    )
    lines += _failures(audit)
    lines += ["### Claims", ""]
    if audit.claims:
        lines += _table(
            ["Claim", "Result", "With measured values", "Source"],
            (
                [
                    md_escape(c.expr),
                    _holds(c.holds, c.outcome),
                    md_escape(round_numbers(c.substituted or c.reason) or "—"),
                    md_escape(c.provenance or "—"),
                ]
                for c in audit.claims
            ),
        )
    else:
        lines += ["The manifest states no claims.", ""]
    warnings = audit_warnings(audit)
    if warnings:
        lines += ["### Warnings", "", *(f"- {md_escape(w)}" for w in warnings), ""]
    if comparison is not None:
        lines += _comparison(comparison)
    lines += [
        f"<sub>ReproBridge {md_escape(audit.rb_version)} · evidence bundle "
        f"{md_escape(audit.audit_id)} · re-check with rb verify</sub>",
        "",
    ]
    return "\n".join(lines)


def _comparison(c: Comparison) -> list[str]:
    lines = [
        f"### Compared with audit {md_escape(c.before.audit_id)}",
        "",
    ]
    if c.plan:
        lines += [
            "> [!WARNING]",
            "> **The audits ran different plans: this is not a like-for-like comparison.**",
            *(f"> - {md_escape(p)}" for p in c.plan),
            "",
        ]
    if c.verdicts:
        lines += _table(
            ["Experiment", "Level", "Before", "After", "Reason now"],
            (
                [
                    md_escape(v.experiment),
                    v.level,
                    _status(v.before),
                    _status(v.after),
                    md_escape(v.reason),
                ]
                for v in c.verdicts
            ),
        )
    else:
        lines += [
            "No verdict changed" + (" (but the plans differ, see above)." if c.plan else "."),
            "",
        ]
    if c.claims:
        lines += _table(
            ["Claim", "Before", "After"],
            ([md_escape(e), _holds(a), _holds(b)] for e, a, b in c.claims),
        )
    rows = []
    for m in c.metrics:
        shown = fmt_delta(m.delta)
        rows.append(
            [
                md_escape(m.experiment),
                md_escape(m.metric),
                fmt_opt(m.before),
                fmt_opt(m.after),
                shown,
                f"{_status(m.outcome_before)} → {_status(m.outcome_after)}",
            ]
        )
    if rows:
        lines += _table(["Experiment", "Metric", "Mean before", "Mean now", "Δ", "Outcome"], rows)
    if c.fields:
        sections = sorted({f.section for f in c.fields})
        lines += [
            f"Fingerprint differences: {md_escape(', '.join(sections))} (see the HTML report).",
            "",
        ]
    else:
        lines += ["Same host, GPU, git commit, Nix inputs and Python packages.", ""]
    return lines
