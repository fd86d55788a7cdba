"""The one statistics module: exact Student t quantiles, intervals, ranges, untrusted JSON."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobridge.audit.judge import judge_experiment
from reprobridge.errors import AuditError
from reprobridge.stats import Stats, betainc, summarize, t_975, t_cdf, t_quantile


# Published table values (e.g. NIST/SEMATECH e-Handbook, Table of t critical values), to
# 4 decimals. df > 30 are the rows a table that falls back to 1.96 gets wrong.
@pytest.mark.parametrize(
    ("p", "df", "t"),
    [
        (0.975, 1, 12.7062),
        (0.975, 2, 4.3027),
        (0.975, 4, 2.7764),
        (0.975, 10, 2.2281),
        (0.975, 30, 2.0423),
        (0.975, 31, 2.0395),
        (0.975, 40, 2.0211),
        (0.975, 60, 2.0003),
        (0.975, 100, 1.9840),
        (0.975, 120, 1.9799),
        (0.975, 1000, 1.9623),
        (0.95, 10, 1.8125),
        (0.995, 5, 4.0321),
        (0.9995, 3, 12.9240),
        (0.90, 1, 3.0777),
    ],
)
def test_t_quantile_matches_the_table(p: float, df: int, t: float) -> None:
    assert round(t_quantile(p, df), 4) == pytest.approx(t, abs=1e-12)
    assert t_quantile(1 - p, df) == pytest.approx(-t, abs=1e-4)


def test_t_quantile_tends_to_the_normal_and_inverts_the_cdf() -> None:
    z = statistics.NormalDist().inv_cdf(0.975)
    values = [t_975(df) for df in (29, 30, 31, 32, 50, 10_000)]
    assert all(a > b for a, b in itertools.pairwise(values))  # no jump at 30
    assert values[-1] == pytest.approx(z, abs=1e-3) and values[-1] > z
    for df in (1, 3, 7, 31, 250):
        assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-12)
    assert t_quantile(0.5, 3) == 0.0


def test_betainc_known_values_and_errors() -> None:
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)  # uniform
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248)  # 1 - (0.6^4 + 4*0.4*0.6^3)
    with pytest.raises(ValueError):
        betainc(0, 1, 0.5)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(AuditError):
        t_975(0)


def test_summarize_against_the_statistics_module() -> None:
    values = [0.91, 0.89, 0.93, 0.90, 0.92]
    s = summarize(values)
    assert (s.n, s.min, s.max) == (5, 0.89, 0.93)
    assert s.mean == pytest.approx(statistics.mean(values))
    assert s.std == pytest.approx(statistics.stdev(values))
    half = 2.776445105 * statistics.stdev(values) / math.sqrt(5)
    assert s.ci95 == pytest.approx((s.mean - half, s.mean + half))


def test_summarize_uses_the_exact_quantile_above_30_runs() -> None:
    values = [float(i % 7) for i in range(41)]  # df = 40: t = 2.0211, not 1.96
    s = summarize(values)
    assert s.ci95 is not None
    half = (s.ci95[1] - s.ci95[0]) / 2
    assert half / (s.std / math.sqrt(41)) == pytest.approx(2.0211, abs=1e-4)


def test_one_value_has_no_interval() -> None:
    s = summarize([0.5])
    assert s == Stats(1, 0.5, 0.0, 0.5, 0.5, None)
    assert s.ci95_clipped is None and not s.clipped
    assert s.to_json()["ci95"] is None
    with pytest.raises(AuditError):
        summarize([])
    with pytest.raises(AuditError):
        summarize([1.0, math.nan])


def test_interval_is_clipped_to_a_declared_range() -> None:
    s = summarize([0.99, 1.0, 0.97], value_range=(0, 1))
    assert s.ci95 is not None and s.ci95[1] > 1.0  # the raw interval runs past 1
    assert s.clipped and s.ci95_clipped == (s.ci95[0], 1.0)
    data = s.to_json()
    assert data["ci95"] == list(s.ci95) and data["ci95_clipped"] == [s.ci95[0], 1.0]
    assert data["range"] == [0.0, 1.0]
    assert Stats.from_json(data) == s
    inside = summarize([0.5, 0.52, 0.51], value_range=(0, 1))
    assert not inside.clipped and inside.ci95_clipped == inside.ci95
    assert not summarize([0.5, 0.6]).clipped  # no range declared: never clipped


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        {"n": "3"},
        {"n": True, "mean": 1, "std": 0, "min": 1, "max": 1},
        {"n": 2, "mean": math.inf, "std": 0, "min": 1, "max": 1, "ci95": [0, 1]},
        {"n": 0, "mean": 1, "std": 0, "min": 1, "max": 1},
    ],
)
def test_from_json_refuses_malformed_stats(raw: object) -> None:
    assert Stats.from_json(raw) is None


def test_from_json_reads_old_single_run_intervals_as_none() -> None:
    old = {"n": 1, "mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5, "ci95": [0.5, 0.5]}
    assert Stats.from_json(old) == Stats(1, 0.5, 0.0, 0.5, 0.5, None)
    bad_ci = {"n": 2, "mean": 0.5, "std": 0.1, "min": 0.4, "max": 0.6, "ci95": ["x", 1]}
    parsed = Stats.from_json(bad_ci)
    assert parsed is not None and parsed.ci95 is None


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40))
def test_summarize_properties(values: list[float]) -> None:
    s = summarize(values)
    assert s.std >= 0
    assert s.min <= s.mean <= s.max or math.isclose(s.mean, s.min) or math.isclose(s.mean, s.max)
    if s.ci95 is not None:
        assert s.ci95[0] <= s.mean <= s.ci95[1]


def test_the_judge_clips_to_the_manifest_range(tmp_path) -> None:
    from reprobridge.audit.judge import MetricResult, RunJudgement
    from reprobridge.manifest.schema import Experiment

    exp = Experiment.model_validate(
        {
            "command": "python train.py",
            "metrics": {
                "acc": {"source": {"regex": r"acc=(\S+)"}, "min": 0.5, "range": [0, 1]},
            },
        }
    )
    runs = [
        RunJudgement(
            True,
            "exit(0)",
            {"acc": MetricResult("acc", v, "ok", "ok", ">= 0.5", "regex", None)},
            {},
        )
        for v in (0.99, 1.0, 0.97)
    ]
    verdict = judge_experiment(exp, "full", runs, environment_ok=True, environment_reason="ok")
    stats = Stats.from_json(verdict.per_metric["acc"]["stats"])
    assert stats is not None and stats.range == (0.0, 1.0) and stats.clipped
    assert stats.ci95_clipped is not None and stats.ci95_clipped[1] == 1.0


def test_rb_init_declares_the_range_of_a_percentage_from_the_paper(tmp_path) -> None:
    """The example paper gives test accuracy in percent: rb init reads it as a fraction and
    declares range = [0, 1] (a loss gets none), so the demo's interval cannot run to 1.008."""
    from reprobridge.examples import copy_example
    from reprobridge.initializer import init_repository
    from reprobridge.manifest.io import load_manifest

    repo = copy_example(tmp_path / "mixup-paper")
    init_repository(repo, paper=repo / "paper.md", lock="never")
    manifest, _ = load_manifest(repo / "reprobridge.toml")
    metrics = manifest.experiments["mixup"].metrics
    assert metrics["test_accuracy"].range == [0.0, 1.0]
    assert metrics["train_loss"].range is None


def test_values_near_the_float_limit_do_not_crash_the_summary() -> None:
    """A run controls the numbers it prints: finite values whose sum or spread leaves the
    float range (fsum and stdev raise OverflowError) still get finite statistics, and an
    interval past the float range is not stated (evidence JSON allows no infinity)."""
    import dataclasses
    import json

    from reprobridge.stats import summarize

    big = 1.7e308
    s = summarize([big, big, big / 2])
    assert s.mean == pytest.approx(big / 6 * 5)
    assert s.std == pytest.approx(statistics.stdev([1.0, 1.0, 0.5]) * big)
    assert s.ci95 is None
    json.dumps(dataclasses.asdict(s), allow_nan=False)


# -- Welch's t test -----------------------------------------------------------------------


def test_welch_matches_the_t_table() -> None:
    """Two samples of variance 1 and n = 3: se² = 2/3 and df = 4 exactly; a difference of
    t_{0.975,4} = 2.776 (the printed table value) standard errors has one-sided p = 0.025,
    one of t_{0.95,4} = 2.132 has p = 0.05."""
    from reprobridge.stats import welch

    se = math.sqrt(2 / 3)
    for table_t, p in ((2.776, 0.025), (2.132, 0.05)):
        d = table_t * se
        result = welch([d - 1, d, d + 1], [-1.0, 0.0, 1.0])
        assert result.df == pytest.approx(4.0)
        assert result.t == pytest.approx(table_t)
        assert result.p == pytest.approx(p, abs=2e-4)


def test_welch_degrees_of_freedom_for_unequal_variances() -> None:
    from reprobridge.stats import welch

    # va = var([0, 2]) / 2 = 1, vb = var([0, 1, 2, 3]) / 4 = 5/12:
    # df = (1 + 5/12)² / (1/1 + (5/12)²/3)
    result = welch([0.0, 2.0], [0.0, 1.0, 2.0, 3.0])
    assert result.df == pytest.approx((1 + 5 / 12) ** 2 / (1 + (5 / 12) ** 2 / 3))
    assert result.t == pytest.approx((1.0 - 1.5) / math.sqrt(1 + 5 / 12))


def test_welch_margin_no_spread_and_refusals() -> None:
    from reprobridge.stats import welch

    # margin: a - b > 0.2 is the test of (a - 0.2) - b > 0
    shifted = welch([1.0, 1.3, 1.1], [0.5, 0.6, 0.4], 0.2)
    assert shifted.p == pytest.approx(welch([0.8, 1.1, 0.9], [0.5, 0.6, 0.4]).p)
    exact = welch([1.0, 1.0], [0.5, 0.5])
    assert (exact.t, exact.p, exact.significant()) == (None, 0.0, True)
    assert welch([1.0, 1.0], [1.0, 1.0]).p == 1.0
    with pytest.raises(AuditError, match="two values"):
        welch([1.0], [0.5, 0.6])


def test_paired_t_against_the_t_table() -> None:
    """Differences 1, 2, 3 (mean 2, sd 1, n 3): t = 2 / (1 / sqrt 3) = 3.464, df = 2; the
    t table's one-sided 0.05 point at df 2 is 2.920 and 0.025 is 4.303."""
    from reprobridge.stats import paired_t

    r = paired_t([11.0, 12.0, 13.0], [10.0, 10.0, 10.0])
    assert r.t is not None and abs(r.t - 3.4641) < 1e-3 and r.df == 2.0
    assert 0.025 < r.p < 0.05 and r.significant() and r.paired
    # a margin moves H0: gains of 1, 2, 3 do not show a gain above 2
    assert not paired_t([11.0, 12.0, 13.0], [10.0, 10.0, 10.0], margin=2.0).significant()
    # identical gains: exact, no t
    exact = paired_t([2.0, 3.0], [1.0, 2.0])
    assert (exact.t, exact.p) == (None, 0.0)
    with pytest.raises(AuditError):
        paired_t([1.0], [0.0])
    with pytest.raises(AuditError):
        paired_t([1.0, 2.0], [0.0])
