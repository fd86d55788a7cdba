"""Totals, Wilson intervals and the three renderings of a bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reprobridge.bench.records import BenchReport, Dependencies, RepoRecord
from reprobridge.bench.table import render_html, render_json, render_markdown, totals, wilson
from reprobridge.cli import cli


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (18, 20, 0.6990, 0.9721),
    ],
)
def test_wilson_matches_published_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_of_nothing_is_uninformative_and_bad_counts_raise() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def _rec(
    name: str, reached: int, *, cpu: bool = True, cause: str = "", target: bool | None = None
) -> RepoRecord:
    levels: dict[str, bool | None] = {
        lvl: i < reached for i, lvl in enumerate(("init", "environment", "procedure", "metric"))
    }
    levels["target"] = target
    return RepoRecord(
        name=name,
        source=f"path /x/{name}",
        cpu_runnable=cpu,
        levels=levels,
        cause=cause,
        wall_s=10.0,
        dependencies=Dependencies(needed=["torch", "numpy"], found=["torch"], missing=["numpy"]),
    )


def _report(records: list[RepoRecord]) -> BenchReport:
    return BenchReport(
        suite="s.toml",
        rb_version="0.1.0",
        tier="smoke",
        runs=1,
        backend="host",
        agent="static",
        time_limit_s=60,
        jobs=1,
        records=records,
    )


def test_totals_count_cpu_runnable_separately_and_target_only_where_expected() -> None:
    recs = [_rec("a", 4, target=True), _rec("b", 2, cause="exit(1)"), _rec("c", 1, cpu=False)]
    t = totals(recs)
    assert (t.levels["metric"].k, t.levels["metric"].n) == (1, 3)
    assert (t.cpu_levels["environment"].k, t.cpu_levels["environment"].n) == (2, 2)
    assert (t.levels["target"].k, t.levels["target"].n) == (1, 1)
    assert (t.dependency_recall.k, t.dependency_recall.n) == (3, 6)


def test_renderings_are_deterministic_and_escape_what_a_repository_controls() -> None:
    hostile = "<script>alert(1)</script> | pipe"
    report = _report([_rec("a", 4), _rec("b", 2, cause=hostile)])
    assert render_markdown(report) == render_markdown(report)
    md = render_markdown(report)
    # One cell, and no HTML: bench.md is rendered wherever it is shown (a forge's page).
    assert "&lt;script&gt;alert(1)&lt;/script&gt; \\| pipe" in md
    assert "<script" not in md
    assert "metric extracted: all 1/2 = 50% [9–91%]" in md
    page = render_html(report)
    assert page == render_html(report)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "Content-Security-Policy" in page
    doc = json.loads(render_json(report))
    assert doc["totals"]["levels"]["metric"]["k"] == 1
    assert doc["records"][1]["cause"] == hostile


def test_cli_bench_is_registered_and_a_bad_suite_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = CliRunner()
    assert "bench" in runner.invoke(cli, ["--help"]).output
    bad = tmp_path / "s.toml"
    bad.write_text('[[repo]]\nname = "a"\n')
    from reprobridge.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bench", str(bad)])
    assert info.value.code == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {bad}: repo.0: needs `path` (a local checkout) or `url` and `commit`"]


def test_a_suite_note_is_shown_and_the_repository_stays_in_the_totals() -> None:
    """A limit of the benched copy (a snapshot without its large files) is said under the
    table, escaped, and does not take the repository out of any denominator."""
    noted = _rec("b", 2, cause="Dataset not found").model_copy(
        update={"notes": "snapshot lacks\n files >= 4 MiB <b>"}
    )
    report = _report([_rec("a", 4), noted])
    md = render_markdown(report)
    assert "- b: snapshot lacks files &gt;= 4 MiB &lt;b&gt;" in md.splitlines()
    assert "metric extracted: all 1/2 = 50%" in md
    page = render_html(report)
    assert "snapshot lacks files &gt;= 4 MiB &lt;b&gt;" in page
    assert json.loads(render_json(report))["records"][1]["notes"].startswith("snapshot")
    assert "Notes from the suite" not in render_markdown(_report([_rec("a", 4)]))


def test_a_long_cause_is_shortened_in_the_table_and_whole_in_json() -> None:
    cause = "x" * 1000
    report = _report([_rec("a", 2, cause=cause)])
    row = next(line for line in render_markdown(report).splitlines() if line.startswith("| a |"))
    assert row.endswith("x… |") and "x" * 240 not in row
    assert json.loads(render_json(report))["records"][0]["cause"] == cause


def test_bench_md_escapes_suite_names_notes_and_the_suite_title() -> None:
    """A suite's strings and a run's stderr reached bench.md as raw HTML."""
    hostile = '<img src=x onerror="alert(1)">'
    rec = _rec(hostile, 2, cause=f"stderr: {hostile}").model_copy(update={"notes": hostile})
    report = _report([rec]).model_copy(update={"suite_name": hostile})
    md = render_markdown(report)
    assert "<img" not in md and md.count("&lt;img src=x onerror=") == 5, (
        md
    )  # title, name, cause, note line
    page = render_html(report)
    assert "<img" not in page
    assert "&amp;lt;" not in page  # the HTML title is escaped once, not from the Markdown


def test_the_probe_s_cost_is_shown_beside_the_runs_it_wraps() -> None:
    """`rb bench` prints the probe's time against its trial runs' (and none when unprobed)."""
    from reprobridge.bench.runner import _read_probe

    probed = _rec("a", 4)
    _read_probe(
        probed,
        {
            "wall_s": 30.0,
            "run_wall_s": 20.0,
            "stopped": "every chosen experiment reached a metric",
            "decisions": [{"repair": "metric-from-output", "target": "experiments.e.metrics.loss"}],
        },
    )
    plain = _rec("b", 4)
    text = render_markdown(_report([probed, plain]))
    assert "| 30 s (20 s), 1 repair(s) |" in text
    assert (
        "- probe: 1 repositories, 30 s in all against 20 s of trial runs (1.50x its runs); 1 decision(s)"
        in text
    )
    assert plain.probe_s is None and probed.probe_decisions == [
        "metric-from-output: experiments.e.metrics.loss"
    ]
