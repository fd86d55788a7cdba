"""The SVG charts: bands, timelines, escaping, determinism."""

from __future__ import annotations

from reprobridge.report.load import Band, MetricData, RunData, Sample, band_of, thin
from reprobridge.report.numbers import fmt_bytes
from reprobridge.report.svg import (
    Series,
    metric_plot,
    nice_ticks,
    resource_charts,
    timeline_chart,
)
from reprobridge.stats import Stats


def _metric(**kw: object) -> MetricData:
    base: dict[str, object] = {
        "name": "acc<x>",
        "values": [0.8, None, 0.95],
        "statuses": ["ok", "missing", "out-of-band"],
        "reasons": ["", "", ""],
        "counted": [True, True, False],
        "stats": Stats(2, 0.875, 0.1, 0.8, 0.95, (0.2, 1.5)),
        "threshold": "target 0.9 ± 0.05",
        "source": "regex",
        "outcome": "fail",
        "reason": "r",
        "policy": "all",
        "claimed": None,
        "claimed_vs_measured": None,
        "tolerance_source": "",
        "band": Band(0.9, 0.05, None, 0.0, None),
        "higher_is_better": True,
        "provenance": "",
    }
    base.update(kw)
    return MetricData(**base)  # type: ignore[arg-type]


def test_metric_plot_marks_band_runs_and_mean() -> None:
    svg = metric_plot(_metric())
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('<rect class="band"') == 1
    assert svg.count('class="limit"') == 1  # min 0
    assert 'class="dot ok"' in svg and 'class="dot uncounted"' in svg
    assert svg.count("<circle") == 2  # the missing value is not drawn
    assert "acc&lt;x&gt;" in svg and "acc<x>" not in svg
    assert metric_plot(_metric()) == svg


def test_metric_plot_one_sided_and_empty() -> None:
    svg = metric_plot(_metric(band=band_of({"target": 0.9, "higher_is_better": True})))
    assert "target ≥ 0.9" in svg
    empty = metric_plot(_metric(values=[None], stats=None, band=None))
    assert "no values" in empty


def test_band_of_follows_check_rules() -> None:
    assert band_of({"target": 2.0, "tolerance": 0.1, "relative_tolerance": 0.1}) == Band(
        2.0, 0.2, None, None, None
    )
    assert band_of({"target": 1.0}) == Band(1.0, None, "eq", None, None)
    assert band_of({"min": 0.5}) == Band(None, None, None, 0.5, None)
    assert band_of({}) is None


def _run(k: int, gpus: bool) -> RunData:
    samples = [
        Sample(t / 2, 50.0 * t, (1 << 20) * (t + 1), ((0, 30.0 * t, 1 << 30),) if gpus else ())
        for t in range(4)
    ]
    return RunData(
        experiment="e",
        k=k,
        seed=k,
        sealed=True,
        not_started=None,
        termination="exit(0)",
        procedure_ok=True,
        procedure_reason="exit(0)",
        wall_s=2.0,
        cpu_s=1.0,
        started_at="",
        finished_at="",
        peaks={},
        timeline=samples,
        env={},
        packages={},
        python="",
        stdout_tail="",
        stderr_tail="",
        stdout_bytes=0,
        stderr_bytes=0,
        sandbox="bubblewrap",
    )


def test_resource_charts_with_and_without_gpu() -> None:
    cpu_only = resource_charts([_run(0, False), _run(1, False)])
    assert [h.split(" ")[0] for h, _ in cpu_only] == ["CPU", "Resident"]
    assert cpu_only[0][1].count("<polyline") == 2
    with_gpu = resource_charts([_run(0, True)])
    assert len(with_gpu) == 4 and "GPU" in with_gpu[2][0]
    assert "GiB" in with_gpu[3][1]


def test_timeline_edge_cases() -> None:
    assert "no samples recorded" in timeline_chart("x", [Series("a", [])], str)
    assert "<circle" in timeline_chart("x", [Series("a", [(0.0, 1.0)])], str)
    assert nice_ticks(0, 100, 4) == [0, 25, 50, 75, 100]
    assert fmt_bytes(20 * (1 << 20)) == "20 MiB"
    samples = [Sample(float(i), 0.0, 0) for i in range(1000)]
    thinned = thin(samples, 400)
    assert len(thinned) == 400 and thinned[0] is samples[0] and thinned[-1] is samples[-1]
