"""`rb report`: an evidence bundle as one self-contained HTML page or as Markdown.

Contract: the report shows what a bundle (``repro/evidence/<audit-id>/``) records and never
re-judges it; :mod:`~reprobridge.report.load` reads the bundle into typed data,
:mod:`~reprobridge.report.svg` draws the charts, :mod:`~reprobridge.report.html` and
:mod:`~reprobridge.report.markdown` render. Same bundle(s) in, same bytes out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Format = Literal["html", "md"]

__all__ = ["Format", "render_report"]


def render_report(
    root: Path,
    audit: str | Path | None = None,
    *,
    compare: tuple[str | Path, str | Path] | None = None,
    fmt: Format = "html",
    plan_differences: list[str] | None = None,
) -> str:
    """The report text of one audit (``audit``: an id, a bundle path, or None for the newest
    finished one under ``root``), or with ``compare=(A, B)`` of audit B compared with A.
    With a comparison, ``plan_differences`` (when given) receives how the two audits' plans
    differ, for the caller to warn on the terminal too. Raises
    :class:`~reprobridge.errors.AuditError` when a bundle cannot be found or read."""
    from reprobridge.report.compare import compare_audits
    from reprobridge.report.html import render_html
    from reprobridge.report.load import load_audit, resolve_bundle
    from reprobridge.report.markdown import render_markdown

    comparison = None
    if compare is not None:
        before = load_audit(resolve_bundle(compare[0], root))
        data = load_audit(resolve_bundle(compare[1], root))
        comparison = compare_audits(before, data)
        if plan_differences is not None:
            plan_differences.extend(comparison.plan)
    else:
        data = load_audit(resolve_bundle(audit, root))
    return render_html(data, comparison) if fmt == "html" else render_markdown(data, comparison)
