"""repro/check.py: extraction, judging, the command line, and Python 3.8 compatibility."""

from __future__ import annotations

import ast
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from artifacts_helpers import sample_manifest_data

from reprobridge.artifacts import check
from reprobridge.artifacts.check import MetricError, extract_metric, judge_metric
from reprobridge.errors import EXIT_INCOMPLETE
from reprobridge.manifest.schema import Manifest

CHECK_PY = Path(check.__file__)


# -- extraction ---------------------------------------------------------------------------


def test_regex_last_match_wins() -> None:
    log = "epoch 1 acc=0.50\nepoch 2 acc=0.80\nfinal acc=0.91\n"
    assert extract_metric({"regex": r"acc=([0-9.]+)"}, log, ".") == 0.91


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        ("loss=1.0\n", "does not match"),
        ("acc=nan\n", "not finite"),
        ("acc=inf\n", "not finite"),
        ("acc=0.9\nacc=-inf\n", r"last of 2 matches.*not finite"),
        ("acc=0.9.1\n", "not a number"),
    ],
)
def test_regex_failures(log: str, reason: str) -> None:
    with pytest.raises(MetricError, match=reason):
        extract_metric({"regex": r"acc=(\S+)"}, log, ".")


@pytest.mark.parametrize(
    "log",
    [
        "acc=0.80\nacc=0.80\n",  # the same value twice (a logger teeing): fine
        "acc=0.5\nacc=0.7\nacc=0.80\n",  # running values: the last one wins
        "step 1 acc=0.5\r step 2 acc=0.6\r\nacc=0.80\n",  # a progress bar's \r lines
        "epoch 1 train acc=0.9 val acc=0.5\nacc=0.80\n",  # an earlier line with two values
        "acc=0.8 (acc=0.80)\n",  # equal numbers printed differently on one line
    ],
)
def test_regex_series_and_repeats_are_not_ambiguous(log: str) -> None:
    assert extract_metric({"regex": r"acc=([0-9.]+)"}, log, ".") == 0.8


def test_regex_two_values_on_the_result_line_is_ambiguous() -> None:
    log = "training...\ndone: train acc=0.99 val acc=0.85\n"
    with pytest.raises(check.MetricAmbiguous) as info:
        extract_metric({"regex": r"acc=(\S+)"}, log, ".")
    assert info.value.kind == "ambiguous"
    assert info.value.lines == ["line 2: 'done: train acc=0.99 val acc=0.85'"]
    assert "2 different values on one line" in str(info.value)


def test_select_only_requires_one_value() -> None:
    source = {"regex": r"acc=(\S+)", "select": "only"}
    log = "acc=0.95\nsaving\nacc=0.80\n"
    assert extract_metric({"regex": r"acc=(\S+)"}, log, ".") == 0.80  # default: last
    with pytest.raises(check.MetricAmbiguous) as info:
        extract_metric(source, log, ".")
    assert info.value.lines == ["line 1: 'acc=0.95'", "line 3: 'acc=0.80'"]
    assert "line 1: 'acc=0.95'; line 3: 'acc=0.80'" in str(info.value)
    assert extract_metric(source, "acc=0.8\nacc=0.80\n", ".") == 0.8  # one value, twice
    with pytest.raises(check.MetricInvalid, match="`select` is 'first'"):
        extract_metric({**source, "select": "first"}, log, ".")


@pytest.mark.parametrize(
    ("log", "kind", "quoted"),
    [
        ("loss=1\n", "missing", []),
        ("x\nacc=nan\n", "invalid", ["line 2: 'acc=nan'"]),
        ("acc=inf\n", "invalid", ["line 1: 'acc=inf'"]),
        ("a\nb\nacc=0.9x done\n", "invalid", ["line 3: 'acc=0.9x done'"]),
    ],
)
def test_failure_kinds_quote_the_line(log: str, kind: str, quoted: list[str]) -> None:
    with pytest.raises(MetricError) as info:
        extract_metric({"regex": r"acc=(\S+)"}, log, ".")
    assert info.value.kind == kind
    assert info.value.lines == quoted


def test_json_duplicate_key_on_the_path(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text(
        '{"acc": 0.9, "acc": 0.8, "f1": 0.5, "f1": 0.5, "eval": {"x": 1}, "eval": {"x": 2}}'
    )
    src = {"file": "m.json"}
    with pytest.raises(check.MetricAmbiguous, match="key 'acc' appears 2 times"):
        extract_metric({**src, "key": "acc"}, "", str(tmp_path))
    assert extract_metric({**src, "key": "f1"}, "", str(tmp_path)) == 0.5  # same value twice
    with pytest.raises(check.MetricAmbiguous, match="key 'eval'"):
        extract_metric({**src, "key": "eval.x"}, "", str(tmp_path))
    with pytest.raises(check.MetricMissing):
        extract_metric({**src, "key": "top5"}, "", str(tmp_path))


def test_describe_thresholds_matches_judge() -> None:
    spec = {"target": 0.79, "tolerance": 0.171}
    assert check.describe_thresholds(spec) == "target 0.79 ± 0.171"
    assert judge_metric(spec, 0.5)[1].startswith(check.describe_thresholds(spec) + "; ")
    assert check.describe_thresholds({"min": 0.8, "max": 1}) == "min 0.8, max 1"
    assert check.describe_thresholds({}) == "finite"


def test_regex_without_group_or_broken() -> None:
    with pytest.raises(MetricError, match="no capture group"):
        extract_metric({"regex": "acc"}, "acc", ".")
    with pytest.raises(MetricError, match="does not compile"):
        extract_metric({"regex": "acc=(["}, "acc", ".")


def test_json_dotted_keys(tmp_path: Path) -> None:
    data = {
        "eval": {"acc": 0.9, "runs": [{"f1": "0.7"}]},
        "val.loss": 1.5,
        "flag": True,
        "nan": None,
    }
    (tmp_path / "m.json").write_text(json.dumps(data))
    src = {"file": "m.json"}
    assert extract_metric({**src, "key": "eval.acc"}, "", str(tmp_path)) == 0.9
    assert extract_metric({**src, "key": "eval.runs.0.f1"}, "", str(tmp_path)) == 0.7
    assert extract_metric({**src, "key": "val.loss"}, "", str(tmp_path)) == 1.5
    for key, reason in [
        ("eval.top5", "no key 'top5'"),
        ("eval.runs.3.f1", "no list index '3'"),
        ("flag", "True, not a number"),
        ("nan", "None, not a number"),
        ("eval", "dict, not a number"),
        ("eval.acc.x", "not inside a table"),
    ]:
        with pytest.raises(MetricError, match=reason):
            extract_metric({**src, "key": key}, "", str(tmp_path))


def test_json_nan_and_bad_files(tmp_path: Path) -> None:
    (tmp_path / "nan.json").write_text('{"acc": NaN}')
    with pytest.raises(MetricError, match="not finite"):
        extract_metric({"file": "nan.json", "key": "acc"}, "", str(tmp_path))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(MetricError, match="not valid JSON"):
        extract_metric({"file": "bad.json", "key": "acc"}, "", str(tmp_path))
    with pytest.raises(MetricError, match="does not exist"):
        extract_metric({"file": "missing.json", "key": "acc"}, "", str(tmp_path))


def test_csv_last_row(tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_text("epoch,acc\n1,0.5\n2,0.75\n\n")
    assert extract_metric({"file": "log.csv", "key": "acc"}, "", str(tmp_path)) == 0.75
    with pytest.raises(MetricError, match="no column 'f1'"):
        extract_metric({"file": "log.csv", "key": "f1"}, "", str(tmp_path))
    (tmp_path / "empty.csv").write_text("epoch,acc\n")
    with pytest.raises(MetricError, match="no row has a value in column 'acc'"):
        extract_metric({"file": "empty.csv", "key": "acc"}, "", str(tmp_path))


def test_csv_reads_a_columns_last_value_where_later_rows_leave_it_empty(tmp_path: Path) -> None:
    """Lightning's CSVLogger writes a row per logging event: the training rows leave the
    validation columns empty, so the last row of the file has no `val_acc`."""
    (tmp_path / "metrics.csv").write_text(
        "epoch,step,train_loss,val_acc\n0,9,0.9,\n0,9,,0.61\n1,19,0.5,\n1,19,,0.72\n2,29,0.4,\n"
    )
    source = {"file": "metrics.csv", "key": "val_acc"}
    assert extract_metric(source, "", str(tmp_path)) == 0.72
    assert extract_metric({**source, "key": "train_loss"}, "", str(tmp_path)) == 0.4


def test_yaml(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    (tmp_path / "m.yaml").write_text("eval:\n  acc: 0.8\n")
    assert extract_metric({"file": "m.yaml", "key": "eval.acc"}, "", str(tmp_path)) == 0.8


# -- judging ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "value", "ok", "reason"),
    [
        ({"target": 0.912, "tolerance": 0.005}, 0.912, True, "target 0.912 ± 0.005"),
        ({"target": 0.912, "tolerance": 0.005}, 0.917, True, "target 0.912 ± 0.005"),
        ({"target": 0.912, "tolerance": 0.005}, 0.918, False, "off target by 0.0060"),
        ({"target": 100, "relative_tolerance": 0.01}, 101, True, "target 100 ± 1%"),
        ({"target": 100, "relative_tolerance": 0.01}, 98.9, False, "off target"),
        ({"target": 100, "tolerance": 2, "relative_tolerance": 0.01}, 98.5, True, "max(2, 1%)"),
        ({"min": 0.8}, 0.8, True, "min 0.8"),
        ({"min": 0.8, "max": 0.9}, 0.95, False, "above max"),
        ({"max": 2.0}, 1.0, True, "max 2"),
        ({"target": 0.9, "higher_is_better": True}, 0.95, True, "target ≥ 0.9"),
        ({"target": 0.9, "higher_is_better": True}, 0.85, False, "below target"),
        ({"target": 1.5, "higher_is_better": False}, 1.6, False, "above target"),
        ({"target": 0.5}, 0.5, True, "target 0.5 exactly"),
        ({"target": 0.5}, 0.51, False, "not equal"),
        ({}, 3.0, True, "finite"),
        ({"min": 0}, math.nan, False, "not finite"),
    ],
)
def test_judge(spec: dict[str, Any], value: float, ok: bool, reason: str) -> None:
    got_ok, got_reason = judge_metric(spec, value)
    assert got_ok is ok
    assert reason in got_reason


def test_float_roundoff_at_the_band_edge() -> None:
    # 0.1 + 0.2 is 0.30000000000000004; a target 0.2 ± 0.1 must still include it
    assert judge_metric({"target": 0.2, "tolerance": 0.1}, 0.1 + 0.2)[0]


# -- the command line ---------------------------------------------------------------------


def spec_of(exp_id: str) -> dict[str, Any]:
    """An experiment as the flake renders it: the TOML table as JSON (no defaults filled)."""
    manifest = Manifest.model_validate(sample_manifest_data())
    dumped: dict[str, Any] = manifest.experiments[exp_id].model_dump(mode="json", exclude_none=True)
    return dumped


def run_check(
    tmp_path: Path, spec: dict[str, Any], log: str, *args: str, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "run.log").write_text(log)
    argv = [
        python,
        str(CHECK_PY),
        "--spec",
        "spec.json",
        "--experiment",
        "exp3",
        "--log",
        "run.log",
    ]
    return subprocess.run(
        [*argv, "--workdir", ".", *args], cwd=tmp_path, capture_output=True, text=True, check=False
    )


def test_cli_pass(tmp_path: Path) -> None:
    (tmp_path / "outputs/exp3").mkdir(parents=True)
    (tmp_path / "outputs/exp3/model.pt").write_bytes(b"weights")
    out = run_check(tmp_path, spec_of("exp3"), "top1_acc=0.5\ntop1_acc=0.912\n")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "check exp3 (tier full):",
        "PASS top1_acc = 0.9120 (target 0.912 ± 0.005)",
        "PASS output outputs/exp3/model.pt: exists",
        "verdict: PASS",
    ]


def test_cli_fail_missing_value_and_output(tmp_path: Path) -> None:
    out = run_check(tmp_path, spec_of("exp3"), "loss=0.1\n")
    assert out.returncode == 1
    assert "FAIL top1_acc: regex 'top1_acc=([0-9.]+)' does not match the log" in out.stdout
    assert "FAIL output outputs/exp3/model.pt: missing" in out.stdout
    assert out.stdout.splitlines()[-1] == "verdict: FAIL"


def test_cli_two_values_on_the_result_line_fails(tmp_path: Path) -> None:
    (tmp_path / "outputs/exp3").mkdir(parents=True)
    (tmp_path / "outputs/exp3/model.pt").write_bytes(b"weights")
    log = "top1_acc=0.5\nbest top1_acc=0.93 last top1_acc=0.912\n"
    out = run_check(tmp_path, spec_of("exp3"), log)
    assert out.returncode == 1
    assert "FAIL top1_acc: ambiguous:" in out.stdout
    assert "line 2: 'best top1_acc=0.93 last top1_acc=0.912'" in out.stdout


def test_cli_smoke_without_thresholds_is_incomplete(tmp_path: Path) -> None:
    """Smoke without its own thresholds judges nothing: never PASS (issue 8, item 8)."""
    (tmp_path / "outputs/exp3").mkdir(parents=True)
    (tmp_path / "outputs/exp3/model.pt").write_bytes(b"")
    out = run_check(tmp_path, spec_of("exp3"), "top1_acc=0.1\n", "--tier", "smoke")
    assert out.returncode == 20 == EXIT_INCOMPLETE, out.stdout
    assert "UNJUDGED top1_acc = 0.1000 (smoke: exists and is finite" in out.stdout
    assert out.stdout.rstrip().endswith("verdict: INCOMPLETE")
    spec = spec_of("exp3")
    spec["metrics"]["top1_acc"]["source"]["regex"] = r"top1_acc=(\S+)"
    out = run_check(tmp_path, spec, "top1_acc=nan\n", "--tier", "smoke")
    assert out.returncode == 1 and "not finite" in out.stdout


def test_cli_metric_without_threshold_or_no_metrics_is_incomplete(tmp_path: Path) -> None:
    """Issue 8, item 7: a value compared with nothing, or no metric at all, passes nothing."""
    spec = spec_of("exp3")
    spec["outputs"] = []
    spec["metrics"]["top1_acc"] = {"source": {"regex": r"top1_acc=(\S+)"}}
    out = run_check(tmp_path, spec, "top1_acc=0.5\n")
    assert out.returncode == 20, out.stdout
    assert "UNJUDGED top1_acc = 0.5000 (no threshold declared" in out.stdout
    spec["metrics"] = {}
    out = run_check(tmp_path, spec, "nothing\n")
    assert out.returncode == 20, out.stdout
    assert "INCOMPLETE: no metrics for tier full" in out.stdout
    # A failure still wins over a gap.
    spec["outputs"] = [{"path": "absent.txt"}]
    assert run_check(tmp_path, spec, "x\n").returncode == 1


def test_cli_smoke_with_own_metrics_and_sha256(tmp_path: Path) -> None:
    spec = spec_of("exp3")
    spec["tiers"]["smoke"]["metrics"] = {
        "top1_acc": {"source": {"regex": "top1_acc=(.*)"}, "min": 0.2}
    }
    spec["outputs"] = [{"path": "o.bin", "sha256": "0" * 64}]
    (tmp_path / "o.bin").write_bytes(b"x")
    out = run_check(tmp_path, spec, "top1_acc=0.1\n", "--tier", "smoke")
    assert out.returncode == 1 and "FAIL top1_acc = 0.1000 (min 0.2; below min)" in out.stdout
    assert "PASS output o.bin: exists" in out.stdout  # sha256 is compared in tier full only
    out = run_check(tmp_path, spec, "top1_acc=0.912\n")
    assert "FAIL output o.bin: sha256 2d711642" in out.stdout


def test_cli_usage_errors(tmp_path: Path) -> None:
    assert run_check(tmp_path, spec_of("exp3"), "", "--tier", "huge").returncode == 2
    baseline = spec_of("baseline")  # no smoke tier
    out = run_check(tmp_path, baseline, "", "--tier", "smoke")
    assert out.returncode == 2 and "has no tier 'smoke'" in out.stderr
    (tmp_path / "spec.json").write_text("[1]")
    out = subprocess.run(
        [
            sys.executable,
            str(CHECK_PY),
            "--spec",
            "spec.json",
            "--experiment",
            "x",
            "--log",
            "nope",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert (
        check.main(["--spec", str(tmp_path / "missing.json"), "--experiment", "x", "--log", "x"])
        == 2
    )
    assert check.main(["--experiment", "x"]) == 2


def test_check_is_stdlib_only_and_python38_syntax() -> None:
    source = CHECK_PY.read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    stdlib = set(sys.stdlib_module_names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in stdlib or top == "yaml", f"check.py imports {name}"
    assert not any(isinstance(n, ast.Match) for n in ast.walk(tree))


def find_python38() -> str | None:
    """A working Python 3.8 (PATH first, then pyenv's versions), or None."""
    candidates = [shutil.which("python3.8") or ""]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return None


def test_check_runs_on_python38(tmp_path: Path) -> None:
    python38 = find_python38()
    if python38 is None:
        pytest.skip("no working python3.8 on this machine")
    out = run_check(tmp_path, spec_of("baseline"), "", python=python38)
    assert (
        out.returncode == 1
        and "results/metrics.json:eval.acc: the file does not exist" in out.stdout
    )


def test_check_py_incomplete_code_is_rbs() -> None:
    # check.py is standalone (no reprobridge import); its constant must follow rb's.
    assert check.EXIT_INCOMPLETE == EXIT_INCOMPLETE
