"""The HTML report of real bundles: content, escaping of hostile strings, determinism,
self-containment, and the comparison of two audits."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

from report_helpers import Audits, hostile_bundle

from reprobridge.report.compare import compare_audits
from reprobridge.report.html import CSP, render_html
from reprobridge.report.load import load_audit
from reprobridge.report.markdown import render_markdown


def test_every_experiment_level_and_claim_is_shown(audits: Audits) -> None:
    data = load_audit(audits.first)
    page = render_html(data)
    summary = json.loads((audits.first / "audit.json").read_text())
    # Every level passes; the claim holds on two seeds' means, not significantly (see
    # tests/example_outcome.py): the page says INCOMPLETE, and why.
    assert '<div class="verdict" id="overall">INCOMPLETE</div>' in page
    assert "holds on the means, not significant" in page
    assert summary["audit_id"] in page
    for exp_id, verdict in summary["experiments"].items():
        assert f"Experiment {exp_id} " in page
        for level in ("environment", "procedure", "metric"):
            assert verdict[level]["reason"] in page
        for name, metric in verdict["per_metric"].items():
            assert f"<h4>{name} " in page
            assert metric["threshold"].replace("±", "±") in page
    claim = summary["claims"][0]
    assert claim["expr"].replace(">", "&gt;") in page
    assert "holds" in page
    # Timelines, fingerprints, differences are all there.
    for heading in ("Resources", "Environment and hardware", "Differences between runs", "Host"):
        assert heading in page
    assert page.count('<polyline class="line') >= 4  # CPU and RSS, 2 runs, 2 experiments
    # The GPU state the runs recorded is what the page says: a "no GPU readings" note
    # with the sampler's reason on a machine without one, a peak GPU column with one.
    record = json.loads((audits.first / "runs" / "baseline" / "0" / "status.json").read_text())
    gpu_state = record["record"]["peaks"]["gpu_state"]
    if gpu_state == "ok":
        assert "<th>Peak GPU</th>" in page and "No GPU readings" not in page
    else:
        assert f'<p class="muted">No GPU readings: {gpu_state}.</p>' in page


def test_page_is_self_contained(audits: Audits) -> None:
    page = render_html(load_audit(audits.first))
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    lowered = page.lower()
    for needle in ("<script", "<link", "<img", "<iframe", "@import", "url(", "src="):
        assert needle not in lowered, needle
    # The only URL is the SVG namespace (a name, never fetched); every href is an anchor.
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', page))


def test_same_bundle_same_bytes_wherever_it_lies(audits: Audits, tmp_path: Path) -> None:
    first = render_html(load_audit(audits.first))
    assert render_html(load_audit(audits.first)) == first
    # A copy elsewhere is not a bundle this operator started: it says so, and otherwise
    # renders the same bytes wherever it lies.
    moved = tmp_path / "elsewhere" / audits.first.name
    shutil.copytree(audits.first, moved)
    foreign = render_html(load_audit(moved))
    assert foreign.count("foreign") == 2  # the banner's audit fact and the warning
    assert foreign.replace(" (foreign)", "").replace(_FOREIGN_ITEM, "") == first
    again = tmp_path / "and-again" / audits.first.name
    shutil.copytree(audits.first, again)
    assert render_html(load_audit(again)) == foreign


_FOREIGN_ITEM = (
    "<li>foreign bundle: not started by this operator (no record of it in the rb state "
    "directory); not an audit this operator ran</li>"
)


def test_hostile_strings_are_escaped(bundle_copy: Path) -> None:
    hostile_bundle(bundle_copy)
    page = render_html(load_audit(bundle_copy))
    lowered = page.lower()
    assert "<script" not in lowered
    assert "<img" not in lowered
    assert "onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # Each hostile place made it into the page (escaped), so each was really tested.
    assert page.count("&lt;script&gt;") >= 7


def test_malformed_parts_leave_gaps_not_errors(bundle_copy: Path) -> None:
    (bundle_copy / "fingerprint" / "host.json").write_text("{not json")
    (bundle_copy / "runs" / "baseline" / "0" / "timeline.jsonl").write_text('{"t": 0}\nnope\n')
    (bundle_copy / "runs" / "mixup" / "1" / "metrics.json").unlink()
    (bundle_copy / "inputs" / "reprobridge.toml").write_text("= broken")
    page = render_html(load_audit(bundle_copy))
    assert "Experiment baseline" in page
    assert "no samples recorded" in page or "<polyline" in page


def test_compare_shows_the_verdict_change_and_metric_deltas(audits: Audits) -> None:
    before, after = load_audit(audits.first), load_audit(audits.second)
    comparison = compare_audits(before, after)
    changes = {(v.experiment, v.level): (v.before, v.after) for v in comparison.verdicts}
    assert changes == {("baseline", "metric"): ("pass", "fail")}
    deltas = {(m.experiment, m.metric): m for m in comparison.metrics}
    assert deltas[("baseline", "test_accuracy")].outcome_after == "fail"
    assert deltas[("mixup", "test_accuracy")].delta is not None
    keys = {(f.section, f.key) for f in comparison.fields}
    assert ("audit", "manifest sha256") in keys
    assert ("git", "commit") in keys
    page = render_html(after, comparison)
    assert '<section id="compare">' in page
    assert before.audit_id in page and after.audit_id in page
    assert '<div class="verdict" id="overall">FAIL</div>' in page
    assert "baseline at the metric level" in page


def test_compare_of_an_audit_with_itself_finds_nothing(audits: Audits) -> None:
    data = load_audit(audits.first)
    comparison = compare_audits(data, data)
    assert comparison.verdicts == [] and comparison.fields == [] and comparison.claims == []
    assert all(m.delta == 0 for m in comparison.metrics)
    page = render_html(data, comparison)
    assert comparison.plan == [] and "No verdict changed." in page
    assert 'class="plan-warning"' not in page


def test_compare_across_plans_warns_first(audits: Audits) -> None:
    before = load_audit(audits.first)
    # B: the smoke tier, on another backend, with one run of baseline instead of two.
    exps = [
        dataclasses.replace(e, runs=e.runs[:1]) if e.id == "baseline" else e
        for e in before.experiments
    ]
    after = dataclasses.replace(
        before,
        tier="smoke",
        backend="nix",
        summary=dataclasses.replace(before.summary, hermetic=True),
        experiments=exps,
    )
    comparison = compare_audits(before, after)
    assert comparison.verdicts == []  # no verdict changed...
    assert comparison.plan == [  # ...but the audits are not comparable as they stand
        "tier differs: full in A, smoke in B",
        "backend differs: host in A, nix in B",
        "hermetic differs: no in A, yes in B",
        "runs of baseline differ: 2 run(s) in A, 1 run(s) in B",
    ]
    page = render_html(after, comparison)
    assert '<div class="plan-warning" role="alert"><p><b>The audits ran different plans' in page
    assert "<li>tier differs: full in A, smoke in B</li>" in page
    assert "No verdict changed (but the plans differ, see above)." in page
    # The banner says it before any section does.
    assert page.index('<p class="plan-warning">Different plans: tier differs') < page.index(
        '<section id="summary">'
    )
    text = render_markdown(after, comparison)
    assert "> [!WARNING]\n> **The audits ran different plans" in text
    assert "> - tier differs: full in A, smoke in B" in text
    assert "No verdict changed (but the plans differ, see above)." in text
