"""The Markdown report: what a pull-request comment needs, and nothing that breaks it."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import Audits, hostile_bundle

from reprobridge.report.compare import compare_audits
from reprobridge.report.load import load_audit
from reprobridge.report.markdown import md_escape, render_markdown


def test_markdown_summary_metrics_claims_and_warnings(audits: Audits) -> None:
    data = load_audit(audits.first)
    text = render_markdown(data)
    # Every level passes (host backend: not hermetic, and the environment level says so);
    # the claim holds on two seeds' means, not significantly: INCOMPLETE overall.
    assert text.startswith("## ⚠️ INCOMPLETE: mixup-paper\n")
    assert "| **baseline** | 🟡 pass, not hermetic: " in text
    assert "| **mixup** | 🟡 pass, not hermetic: " in text
    assert "| ✅ pass: all 2 run(s) completed |" in text  # the procedure level stays green
    summary = json.loads((audits.first / "audit.json").read_text())
    values = summary["experiments"]["baseline"]["per_metric"]["test_accuracy"]["values"]
    row = next(
        line for line in text.splitlines() if line.startswith("| baseline | test\\_accuracy")
    )
    assert "target 0.79 ± 0.171 (tolerance from: 3 x the spread the paper states)" in row
    for v in values:
        assert f"{v:.4g}" in row
    assert (
        "mixup.test\\_accuracy &gt; baseline.test\\_accuracy | ⚠️ holds on the means, not "
        "significant" in text
    )
    assert "### Warnings" in text and "not hermetic" in text
    assert render_markdown(data) == text  # deterministic


def test_markdown_compare(audits: Audits) -> None:
    before, after = load_audit(audits.first), load_audit(audits.second)
    text = render_markdown(after, compare_audits(before, after))
    assert text.startswith("## ❌ FAIL")
    assert f"### Compared with audit {md_escape(before.audit_id)}" in text
    assert "| baseline | metric | ✅ pass | ❌ fail |" in text


def test_markdown_escapes_hostile_strings(bundle_copy: Path) -> None:
    hostile_bundle(bundle_copy)
    text = render_markdown(load_audit(bundle_copy))
    assert "<script" not in text and "<img" not in text
    columns = None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        # No cell can add columns: every | inside a cell is escaped.
        count = line.replace("\\|", "").count("|")
        columns = count if columns is None else columns
        assert count == columns, line


def test_md_escape() -> None:
    assert md_escape("a|b\n<c> `d` [e](f) @g *h* _i_") == (
        "a\\|b &lt;c&gt; \\`d\\` \\[e\\](f) @\u200bg \\*h\\* \\_i\\_"
    )
