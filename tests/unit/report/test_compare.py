"""report.compare.run_differences: the spread of a metric's values over the runs."""

from __future__ import annotations

import pytest

from reprobridge.report.compare import run_differences
from reprobridge.report.load import ExperimentData, MetricData
from reprobridge.stats import Stats


def _metric(name: str, values: tuple[float | None, ...], stats: Stats | None) -> MetricData:
    n = len(values)
    return MetricData(
        values=values,
        statuses=("ok",) * n,
        reasons=("",) * n,
        counted=(True,) * n,
        stats=stats,
        threshold="none",
        source="",
        outcome="unjudged",
        reason="",
        policy="",
        claimed=None,
        claimed_vs_measured=None,
        tolerance_source="",
        name=name,
        band=None,
        higher_is_better=None,
        provenance="",
    )


def test_spread_is_over_the_runs_that_gave_a_value() -> None:
    stats = Stats(n=2, mean=0.875, std=0.035, min=0.85, max=0.9, ci95=None)
    exp = ExperimentData(
        id="train",
        description="",
        levels={},
        metrics=[_metric("acc", (0.9, None, 0.8, 0.85), stats), _metric("loss", (None,), None)],
        runs=[],
        policy="",
    )
    acc, loss = run_differences(exp).spreads
    assert (acc.experiment, acc.metric, acc.n, acc.low, acc.high) == ("train", "acc", 3, 0.8, 0.9)
    assert acc.range == pytest.approx(0.1)
    assert acc.std == 0.035  # the audit's statistics (counted runs), not recomputed
    assert (loss.n, loss.low, loss.high, loss.range, loss.std) == (0, None, None, None, None)
