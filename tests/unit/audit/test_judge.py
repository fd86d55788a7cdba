"""The auditor's judging: per-run metrics and outputs, statistics, stability policies, levels.

Adversarial cases 10-13 of reliability.md are marked ``case N``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from reprobridge.artifacts import check
from reprobridge.audit import judge
from reprobridge.audit.judge import (
    MetricResult,
    RunJudgement,
    claim_values,
    extract_run_metrics,
    judge_experiment,
    judge_run,
)
from reprobridge.errors import AuditError
from reprobridge.manifest.schema import Experiment

ACC = r"(?<!\w)acc=(\S+)"


def experiment(**extra: Any) -> Experiment:
    data: dict[str, Any] = {
        "command": "python train.py --seed {seed}",
        "metrics": {
            "acc": {"source": {"regex": ACC}, "target": 0.9, "tolerance": 0.02},
        },
    }
    data.update(extra)
    return Experiment.model_validate(data)


def run(
    exp: Experiment, log: str, tmp_path: Path, *, ok: bool = True, tier: str = "full"
) -> RunJudgement:
    return judge_run(
        exp,
        tier,
        termination_ok=ok,
        termination_description="exit(0)" if ok else "exit(1)",
        log_text=log,
        workdir=tmp_path,
    )


def verdict(
    exp: Experiment, runs: list[RunJudgement], tier: str = "full"
) -> judge.ExperimentVerdict:
    return judge_experiment(
        exp, tier, runs, environment_ok=True, environment_reason="devShell entered"
    )


# -- one run ------------------------------------------------------------------------------


def test_ok_metric(tmp_path: Path) -> None:
    [result] = extract_run_metrics(
        experiment(), "full", "epoch=1 acc=0.5\nacc=0.91\n", tmp_path
    ).values()
    assert result == MetricResult(
        name="acc",
        value=0.91,
        status="ok",
        reason="target 0.9 ± 0.02",
        threshold="target 0.9 ± 0.02",
        source=f"regex {ACC!r}",
        claimed=None,
    )


def test_case10_exit0_metric_missing_fails(tmp_path: Path) -> None:
    exp = experiment()
    r = run(exp, "training done\n", tmp_path)
    assert r.procedure_ok and r.procedure_reason == "exit(0)"
    assert r.metrics["acc"].status == "missing"
    v = verdict(exp, [r])
    assert v.procedure.status == "pass"
    assert v.metric.status == "fail"
    assert "metric-missing" in v.metric.reason
    assert v.failed_level == "metric"


@pytest.mark.parametrize(
    ("log", "status", "quoted"),
    [
        ("loss=1\nacc=nan\n", "invalid", "line 2: 'acc=nan'"),
        ("acc=inf\n", "invalid", "line 1: 'acc=inf'"),
        ("acc=0.9x\n", "invalid", "line 1: 'acc=0.9x'"),
        # printed twice with different values where the value is read: which one is meant?
        ("x\nbest acc=0.91 last acc=0.85\n", "ambiguous", "line 2: 'best acc=0.91 last acc=0.85'"),
    ],
)
def test_case11_invalid_and_ambiguous_quote_the_lines(
    tmp_path: Path, log: str, status: str, quoted: str
) -> None:
    exp = experiment()
    r = run(exp, log, tmp_path)
    assert r.metrics["acc"].status == status
    assert r.metrics["acc"].value is None
    assert quoted in r.metrics["acc"].reason
    v = verdict(exp, [r])
    assert v.metric.status == "fail"
    assert f"metric-{status}" in v.metric.reason
    assert quoted in v.metric.reason


def test_case12_distinct_reasons(tmp_path: Path) -> None:
    exp = experiment()
    low = verdict(exp, [run(exp, "acc=0.70\n", tmp_path, ok=True)])
    crashed = verdict(exp, [run(exp, "acc=0.90\n", tmp_path, ok=False)])
    assert low.metric.status == crashed.metric.status == "fail"
    assert low.procedure.status == "pass" and crashed.procedure.status == "fail"
    assert "out-of-band" in low.metric.reason and "off target by 0.2000" in low.metric.reason
    assert crashed.metric.reason.startswith("procedure failed (run 1: exit(1))")
    assert "out-of-band" not in crashed.metric.reason
    assert low.metric.reason != crashed.metric.reason
    assert (low.failed_level, crashed.failed_level) == ("metric", "procedure")
    # the crashed run's good number is recorded, not counted
    assert crashed.per_metric["acc"]["values"] == [0.9]
    assert crashed.per_metric["acc"]["counted"] == [False]
    assert crashed.per_metric["acc"]["stats"] is None
    assert crashed.per_metric["acc"]["reason"] == "run 1: procedure failed"
    assert low.per_metric["acc"]["reason"] == "run 1: out-of-band"


def test_case13_claimed_never_decides(tmp_path: Path) -> None:
    exp = experiment(
        metrics={
            "acc": {"source": {"regex": ACC}, "target": 0.8, "tolerance": 0.05, "claimed": 0.95}
        }
    )
    r = run(exp, "acc=0.80\n", tmp_path)
    assert r.metrics["acc"].value == 0.80 and r.metrics["acc"].claimed == 0.95
    v = verdict(exp, [r])
    assert v.metric.status == "pass"
    entry = v.per_metric["acc"]
    assert entry["stats"]["mean"] == 0.80
    assert entry["claimed_vs_measured"] == pytest.approx(
        {"claimed": 0.95, "measured": 0.80, "difference": -0.15}
    )
    # and a claim inside the band does not rescue a measured value outside it
    exp2 = experiment(
        metrics={
            "acc": {"source": {"regex": ACC}, "target": 0.95, "tolerance": 0.01, "claimed": 0.95}
        }
    )
    v2 = verdict(exp2, [run(exp2, "acc=0.80\n", tmp_path)])
    assert v2.metric.status == "fail" and "0.8" in v2.metric.reason


def test_outputs_exist_and_sha256_in_full_only(tmp_path: Path) -> None:
    data = b"weights"
    good = hashlib.sha256(data).hexdigest()
    exp = experiment(
        outputs=[
            {"path": "out/model.pt", "sha256": good},
            {"path": "out/other.bin", "sha256": "0" * 64},
            {"path": "out/missing.json"},
        ],
        tiers={"smoke": {"params": {}}},
    )
    (tmp_path / "out").mkdir()
    (tmp_path / "out/model.pt").write_bytes(data)
    (tmp_path / "out/other.bin").write_bytes(b"x")
    r = run(exp, "acc=0.9\n", tmp_path)
    assert r.outputs["out/model.pt"] == {
        "exists": True,
        "sha256": good,
        "size": 7,
        "expected_sha256": good,
        "ok": True,
        "reason": "sha256 matches",
    }
    assert not r.outputs["out/other.bin"]["ok"]
    assert r.outputs["out/missing.json"]["exists"] is False
    assert not r.procedure_ok
    assert r.procedure_reason.startswith("output out/other.bin sha256 ")
    assert "output out/missing.json missing" in r.procedure_reason
    smoke = run(exp, "acc=0.9\n", tmp_path, tier="smoke")
    assert smoke.outputs["out/other.bin"]["ok"]  # sha256 compared in full only
    assert smoke.procedure_reason == "output out/missing.json missing"
    # a non-zero exit is the reason, before any output problem
    assert run(exp, "", tmp_path, ok=False).procedure_reason == "exit(1)"


def test_fifo_output_is_not_opened(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe")
    exp = experiment(outputs=[{"path": "pipe"}])
    r = run(exp, "acc=0.9\n", tmp_path)
    assert r.outputs["pipe"]["exists"] is False and not r.procedure_ok


def test_smoke_without_tier_metrics_needs_finite_values(tmp_path: Path) -> None:
    exp = experiment(tiers={"smoke": {"params": {}}})
    [res] = extract_run_metrics(exp, "smoke", "acc=0.1\n", tmp_path).values()
    assert res.status == "ok" and res.threshold.startswith("none (smoke")
    [res] = extract_run_metrics(exp, "smoke", "acc=nan\n", tmp_path).values()
    assert res.status == "invalid"


def test_smoke_tier_metrics_are_judged(tmp_path: Path) -> None:
    exp = experiment(
        tiers={
            "smoke": {"metrics": {"acc": {"source": {"regex": ACC}, "min": 0.2, "claimed": 0.3}}}
        }
    )
    [res] = extract_run_metrics(exp, "smoke", "acc=0.1\n", tmp_path).values()
    assert res.status == "out-of-band" and res.reason == "min 0.2; below min"
    assert res.claimed == 0.3


def test_unknown_tier_is_a_caller_error(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="no tier 'smoke'"):
        extract_run_metrics(experiment(), "smoke", "", tmp_path)


def test_file_source(tmp_path: Path) -> None:
    exp = experiment(metrics={"acc": {"source": {"file": "m.json", "key": "eval.acc"}, "min": 0.5}})
    (tmp_path / "m.json").write_text('{"eval": {"acc": 0.75}}')
    [res] = extract_run_metrics(exp, "full", "", tmp_path).values()
    assert (res.value, res.status, res.source) == (0.75, "ok", "m.json:eval.acc")


def test_extraction_agrees_with_check_py(tmp_path: Path) -> None:
    """Both paths, one rule: the auditor's status equals check.py's verdict line."""
    exp = experiment()
    spec = exp.model_dump(mode="json", exclude_none=True)
    for log in [
        "acc=0.91\n",
        "acc=0.5\n",
        "nothing\n",
        "acc=0.9\nacc=0.91\n",
        "e1 acc=0.1\nacc=0.9\n",
        "acc=0.9 acc=0.8\n",
        "acc=nan\n",
    ]:
        [line] = check.check_experiment(spec, "full", log, str(tmp_path))
        [res] = extract_run_metrics(exp, "full", log, tmp_path).values()
        assert line.ok == (res.status == "ok"), (log, line.line, res)


# -- stability policies -------------------------------------------------------------------


def runs_with(
    exp: Experiment, tmp_path: Path, logs: list[str], ok: list[bool] | None = None
) -> list[RunJudgement]:
    ok = ok or [True] * len(logs)
    return [run(exp, log, tmp_path, ok=good) for log, good in zip(logs, ok, strict=True)]


def test_policy_all(tmp_path: Path) -> None:
    exp = experiment()
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.90\n", "acc=0.91\n", "acc=0.89\n"]))
    assert (v.environment.status, v.procedure.status, v.metric.status) == ("pass", "pass", "pass")
    assert v.runs == 3 and v.failed_level is None
    assert v.per_metric["acc"]["stats"]["n"] == 3
    assert v.per_metric["acc"]["outcome"] == "pass"
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.90\n", "acc=0.80\n", "acc=0.89\n"]))
    assert v.metric.status == "fail" and "in run 2" in v.metric.reason
    assert v.per_metric["acc"]["statuses"] == ["ok", "out-of-band", "ok"]


def test_policy_k_of_n(tmp_path: Path) -> None:
    exp = experiment(stability={"policy": "k_of_n", "k": 2})
    logs = ["acc=0.90\n", "acc=0.50\n", "acc=0.91\n"]
    v = verdict(exp, runs_with(exp, tmp_path, logs))
    assert v.metric.status == "pass" and v.metric.reason.startswith("2 of 3 run(s) pass")
    # a crashed run is not among the passing ones, but k_of_n tolerates it
    v = verdict(exp, runs_with(exp, tmp_path, logs, ok=[True, True, False]))
    assert v.metric.status == "fail"
    assert "1 of 3 run(s) pass, k_of_n needs 2" in v.metric.reason
    assert "procedure failed (run 3: exit(1))" in v.metric.reason
    assert v.procedure.status == "pass"  # 2 of 3 completed, k = 2
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.9\n"] * 3, ok=[True, False, True]))
    assert v.metric.status == "pass" and v.procedure.status == "pass"
    assert "run 2: exit(1)" in v.procedure.reason
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.9\n"] * 3, ok=[False, False, True]))
    assert v.procedure.status == "fail" and v.metric.status == "fail"


def test_policy_k_of_n_more_than_runs(tmp_path: Path) -> None:
    exp = experiment(stability={"policy": "k_of_n", "k": 5})
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.9\n"] * 2))
    assert v.metric.status == "fail" and "only 2 run(s) were made" in v.metric.reason


def test_policy_mean_within(tmp_path: Path) -> None:
    exp = experiment(stability={"policy": "mean_within"})
    # one run outside the band (0.87), the mean (0.9) inside: passes
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.87\n", "acc=0.92\n", "acc=0.91\n"]))
    assert v.metric.status == "pass"
    assert v.per_metric["acc"]["reason"].startswith("mean 0.9 over 3 run(s): target 0.9 ± 0.02")
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.85\n", "acc=0.86\n"]))
    assert v.metric.status == "fail" and "out-of-band mean 0.855" in v.metric.reason
    # the mean is judged by check.py's own function
    assert check.judge_metric({"target": 0.9, "tolerance": 0.02}, 0.855)[1] in v.metric.reason
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.9\n", "no metric\n"]))
    assert v.metric.status == "fail" and "metric-missing in run 2" in v.metric.reason
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.9\n", "acc=0.9\n"], ok=[True, False]))
    assert v.metric.status == "fail" and v.metric.reason.startswith("procedure failed")


def test_no_metrics_is_not_applicable_never_pass(tmp_path: Path) -> None:
    exp = experiment(metrics={})
    v = verdict(exp, [run(exp, "done\n", tmp_path)])
    assert v.metric.status == "not-applicable"
    assert "declare" in v.metric.reason and "metrics" in v.metric.reason
    assert v.procedure.status == "pass"


def test_no_runs_and_environment_failure(tmp_path: Path) -> None:
    exp = experiment()
    v = judge_experiment(
        exp, "full", [], environment_ok=False, environment_reason="nix build failed"
    )
    assert v.environment.status == "fail" and v.environment.reason == "nix build failed"
    assert v.procedure.status == v.metric.status == "skipped"
    assert "environment failed" in v.procedure.reason
    assert v.failed_level == "environment" and v.runs == 0


def test_environment_failure_with_runs_still_judges_them(tmp_path: Path) -> None:
    exp = experiment()
    v = judge_experiment(
        exp,
        "full",
        [run(exp, "acc=0.9\n", tmp_path)],
        environment_ok=False,
        environment_reason="host backend",
    )
    assert v.environment.status == "fail" and v.metric.status == "pass"
    assert v.failed_level == "environment"


def test_claim_values_count_completed_runs_only(tmp_path: Path) -> None:
    exp = experiment()
    runs = runs_with(exp, tmp_path, ["acc=0.9\n", "acc=0.5\n", "x\n"], ok=[True, False, True])
    assert claim_values(runs) == {"acc": [0.9]}


def test_verdict_is_json_ready(tmp_path: Path) -> None:
    """What audit.json stores round-trips through strict JSON unchanged and reads back, in
    the typed view the report and the CLI use, as the same numbers and states."""
    import json

    from reprobridge.evidence.records import ExperimentSummary, jsonable

    exp = experiment()
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.9\n", "acc=0.91\n"]))
    doc = jsonable(v)
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc
    back = ExperimentSummary.from_json(doc, "audit.json.experiments.x")
    assert {k: lv.status for k, lv in back.levels.items()} == {
        "environment": "pass",
        "procedure": "pass",
        "metric": "pass",
    }
    acc = back.per_metric["acc"]
    assert acc.values == (0.9, 0.91) and acc.outcome == "pass"
    assert acc.stats is not None and acc.stats.mean == pytest.approx(0.905) and acc.stats.n == 2
    assert acc.threshold == "target 0.9 ± 0.02"
    assert acc.tolerance_source == "not stated (the manifest's value)"


def test_a_directory_output_is_valid_and_hashed_by_its_files(tmp_path: Path) -> None:
    """Issue 9: a directory declared as an output failed the run ("output png missing")."""
    from reprobridge.audit.datasets import tree_sha256

    (tmp_path / "png" / "sub").mkdir(parents=True)
    (tmp_path / "png" / "a.png").write_bytes(b"a")
    (tmp_path / "png" / "sub" / "b.png").write_bytes(b"bb")
    (tmp_path / "empty").mkdir()
    digest, _, _ = tree_sha256(tmp_path / "png")
    exp = experiment(outputs=[{"path": "png", "sha256": digest}, {"path": "empty"}])
    r = run(exp, "acc=0.9\n", tmp_path)
    assert r.outputs["png"]["ok"] and r.outputs["png"]["reason"] == "sha256 matches"
    assert (r.outputs["png"]["kind"], r.outputs["png"]["files"]) == ("directory", 2)
    assert r.outputs["empty"]["exists"] and not r.outputs["empty"]["ok"]
    assert r.procedure_reason == "output empty an empty directory"
    # check.py (the flake's judge) agrees, tree hash included
    lines = check.check_experiment(exp.model_dump(mode="json"), "full", "acc=0.9\n", str(tmp_path))
    by_name = {c.name: c for c in lines}
    assert by_name["png"].ok and not by_name["empty"].ok
    (tmp_path / "png" / "a.png").write_bytes(b"changed")
    assert not check.check_experiment(
        exp.model_dump(mode="json"), "full", "acc=0.9\n", str(tmp_path)
    )[1].ok


# -- the edges of a band ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bounds", "value", "ok"),
    [
        ({"min": 0.5}, 0.5, True),
        ({"min": 0.5}, 0.499999, False),  # just outside: a min widened even by 1e-5 passes it
        ({"min": 0.5}, 0.496, False),
        ({"max": 1.0}, 1.0, True),
        ({"max": 1.0}, 1.000001, False),
        ({"max": 1.0}, 1.004, False),
        ({"min": -2.0, "max": -1.0}, -2.00001, False),
        ({"min": -2.0, "max": -1.0}, -0.99999, False),
        ({"target": 0.9, "tolerance": 0.02}, 0.92, True),
        ({"target": 0.9, "tolerance": 0.02}, 0.920001, False),
        ({"target": 0.9, "tolerance": 0.02}, 0.879999, False),
        ({"target": 0.9, "relative_tolerance": 0.1}, 0.990001, False),
        ({"target": 0.9, "higher_is_better": True}, 0.899999, False),
        ({"target": 0.9, "higher_is_better": False}, 0.900001, False),
    ],
)
def test_a_value_just_outside_a_bound_fails_in_every_judge(
    tmp_path: Path, bounds: dict[str, Any], value: float, ok: bool
) -> None:
    """Probes at and just outside `min`, `max` and a target's band, through check.py's
    judge (the flake's) and the auditor's run and experiment levels: a bound loosened even
    slightly lets the outside probe pass and this fails."""
    exp = experiment(metrics={"acc": {"source": {"regex": ACC}, **bounds}})
    assert check.judge_metric(exp.metrics["acc"].model_dump(exclude_none=True), value)[0] is ok
    one = run(exp, f"acc={value!r}\n", tmp_path)
    assert (one.metrics["acc"].status == "ok") is ok
    v = verdict(exp, [one])
    assert v.metric.status == ("pass" if ok else "fail")
    assert v.per_metric["acc"]["outcome"] == ("pass" if ok else "fail")


def _k_of_n(k: int, tmp_path: Path, logs: list[str]) -> judge.ExperimentVerdict:
    exp = experiment(
        stability={"policy": "k_of_n", "k": k},
        metrics={
            "acc": {"source": {"regex": ACC}, "min": 0.5},
            "b": {"source": {"regex": r"(?<!\w)b=(\S+)"}, "min": 0.5},
        },
    )
    return verdict(exp, runs_with(exp, tmp_path, logs))


def test_exactly_k_passing_runs_pass_the_metric_and_its_level(tmp_path: Path) -> None:
    good, bad = "acc=0.9 b=0.9\n", "acc=0.1 b=0.9\n"
    v = _k_of_n(2, tmp_path, [good, bad, good])
    assert v.metric.status == "pass" and v.metric.reason.startswith("2 of 3 run(s) pass")
    assert [v.per_metric[m]["outcome"] for m in ("acc", "b")] == ["pass", "pass"]
    short = _k_of_n(2, tmp_path, [good, bad, bad])
    assert short.metric.status == "fail" and short.per_metric["acc"]["outcome"] == "fail"


def test_a_metric_never_reads_pass_beside_a_failed_k_of_n_level(tmp_path: Path) -> None:
    """acc passes in runs 1 and 3, b in runs 1 and 2: each metric meets k = 2 alone, but only
    run 1 meets both; the level fails, and so must every metric's outcome."""
    v = _k_of_n(2, tmp_path, ["acc=0.9 b=0.9\n", "acc=0.1 b=0.9\n", "acc=0.9 b=0.1\n"])
    assert v.metric.status == "fail"
    for name in ("acc", "b"):
        entry = v.per_metric[name]
        assert entry["outcome"] == "fail", entry
        assert "only 1 run(s) meet every metric; k_of_n needs 2" in entry["reason"]


def _precision(tmp_path: Path, logs: list[str], **extra: Any) -> judge.ExperimentVerdict:
    """A paper's 81.0 read as 0.810, no spread stated: a band of its rounding."""
    spec = {"source": {"regex": ACC}, "target": 0.81, "tolerance": 0.0005}
    exp = experiment(metrics={"acc": {**spec, "tolerance_source": "paper-precision"}}, **extra)
    return verdict(exp, runs_with(exp, tmp_path, logs))


def test_a_paper_precision_band_is_widened_by_the_runs_own_spread(tmp_path: Path) -> None:
    logs = ["acc=0.80\n", "acc=0.82\n", "acc=0.81\n"]  # sample std 0.01
    v = _precision(tmp_path, logs)
    acc = v.per_metric["acc"]
    assert v.metric.status == "pass", v.metric.reason
    assert acc["threshold"] == "target 0.81 ± 0.0205"  # 0.0005 + 2 x 0.01
    assert acc["tolerance_source"] == (
        "the rounding of the value the paper prints ± 0.0005 + 2 x the runs' "
        "standard deviation 0.01"
    )
    assert acc["statuses"] == ["ok", "ok", "ok"]
    # a run outside the widened band still fails it
    far = _precision(tmp_path, ["acc=0.81\n"] * 4 + ["acc=0.85\n"])  # band ± 0.0363
    assert far.metric.status == "fail" and far.per_metric["acc"]["statuses"][4] == "out-of-band"
    # under mean_within the mean is judged against the widened band too
    mean = _precision(tmp_path, ["acc=0.80\n", "acc=0.81\n"], stability={"policy": "mean_within"})
    assert mean.metric.status == "pass" and "± 0.0146" in mean.per_metric["acc"]["reason"]


def test_one_run_is_judged_on_the_papers_rounding_and_says_so(tmp_path: Path) -> None:
    v = _precision(tmp_path, ["acc=0.80\n"])
    assert v.metric.status == "fail"
    assert v.per_metric["acc"]["threshold"] == "target 0.81 ± 0.0005"
    assert v.per_metric["acc"]["tolerance_source"].endswith(
        "(one run: no run-to-run spread to add)"
    )
    assert _precision(tmp_path, ["acc=0.8104\n"]).metric.status == "pass"


def test_a_paper_spread_band_is_not_widened(tmp_path: Path) -> None:
    spec = {"source": {"regex": ACC}, "target": 0.79, "tolerance": 0.171}
    exp = experiment(metrics={"acc": {**spec, "tolerance_source": "paper-spread"}})
    v = verdict(exp, runs_with(exp, tmp_path, ["acc=0.5\n", "acc=0.9\n"]))
    assert v.per_metric["acc"]["threshold"] == "target 0.79 ± 0.171"
    assert v.per_metric["acc"]["tolerance_source"] == "3 x the spread the paper states"
    assert v.metric.status == "fail"
