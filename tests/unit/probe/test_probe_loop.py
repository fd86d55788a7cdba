"""`rb init` with the probe, end to end: real bubblewrap, real runs, real git (the shapes
seen in first-contact repositories, written here as small fixture repositories)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from rbcli import rb

from reprobridge import sandbox
from reprobridge.probe.loop import merge_decisions
from reprobridge.probe.record import PROBE_FILE, Decision, load_decisions

_WHY = sandbox.sandbox_unusable() if sandbox.bwrap_path() else "bwrap is not installed"
needs_bwrap = pytest.mark.skipif(_WHY is not None, reason=f"sandbox unusable: {_WHY}")

# Metrics named at run time (a dict logged key by key): static recovery cannot see them.
LOGGED = """import argparse
import logging

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=100)
args = parser.parse_args()
results = {}
for epoch in range(args.epochs):
    results = {"min_dist": 3.0 + 1.0 / (epoch + 1), "nll": 1.5 - 0.1 * epoch}
for key, value in results.items():
    logging.info("%s: %.6f", key, value)
"""
MISSING = """with open("data/cora/cora.content") as f:
    print(f.read())
print("accuracy: 0.8")
"""
GPU = """import sys

print("building the model")
sys.stderr.write("RuntimeError: Found no NVIDIA driver on your system.\\n")
sys.exit(1)
"""


def _init(root: Path, *more: str) -> tuple[dict[str, object], str]:
    got = rb("init", str(root), "--no-lock", "--probe", "--json", *more, env={"RB_PROBE": "1"})
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout), got.stderr


@needs_bwrap
def test_metrics_a_run_prints_become_metrics_and_the_audit_reads_them(
    make_repo: Callable[..., Path],
) -> None:
    root = make_repo({"README.md": "    python main.py --epochs 3\n", "main.py": LOGGED})
    doc, _ = _init(root)
    probe = doc["probe"]
    assert isinstance(probe, dict)
    assert probe["stopped"] == "every chosen experiment reached a metric"
    metrics = doc["manifest"]["experiments"]["main"]["metrics"]  # type: ignore[index]
    assert set(metrics) == {"min_dist", "nll"}
    decisions = load_decisions(root)
    assert {d.repair for d in decisions} == {"metric-from-output"}
    assert all("INFO" in d.evidence for d in decisions)
    # The decisions are an input of every later `rb init`: `rb check` is in sync, and a
    # plain re-run without the probe keeps them.
    assert rb("check", str(root)).returncode == 0
    again = rb("init", str(root), "--no-lock", "--no-probe", "--json")
    assert set(json.loads(again.stdout)["manifest"]["experiments"]["main"]["metrics"]) == {
        "min_dist",
        "nll",
    }
    # The guide lists each as a decision a person can undo.
    assert "probe (metric-from-output)" in (root / "REPRODUCE.md").read_text()
    # Trials are rb's local records, never the repository's evidence, and git ignores them.
    assert not (root / "repro" / "evidence").exists()
    assert any((root / ".reprobridge" / "probe").iterdir())
    untracked = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".reprobridge" not in untracked, untracked
    # The audit reads the proposed metrics from every run's log (no threshold yet: not PASS).
    audit = rb(
        "audit", "-C", str(root), "--backend", "host", "--tier", "smoke", "--runs", "1", "--json"
    )
    summary = json.loads(audit.stdout)
    per_metric = summary["experiments"]["main"]["per_metric"]
    assert per_metric["nll"]["values"] == [1.4] and summary["verdict"] != "PASS"


@needs_bwrap
def test_a_missing_data_file_is_named_and_the_audit_refuses_to_pass(
    make_repo: Callable[..., Path],
) -> None:
    root = make_repo(
        {
            "README.md": "Unzip dataset.zip into data/cora.\n\n    python train.py\n",
            "train.py": MISSING,
        }
    )
    doc, _ = _init(root)
    datasets = doc["manifest"]["datasets"]  # type: ignore[index]
    assert datasets["cora-content"]["path"] == "data/cora/cora.content"
    assert "README.md:1" in datasets["cora-content"]["description"]
    audit = rb("audit", "-C", str(root), "--backend", "host", "--tier", "smoke", "--runs", "1")
    assert audit.returncode != 0
    # The default audit skips it, naming the file; named, the run is refused naming it too.
    assert "data/cora/cora.content" in audit.stderr
    named = rb(
        "audit", "train", "-C", str(root), "--backend", "host", "--tier", "smoke", "--runs", "1"
    )
    assert named.returncode != 0
    assert "data/cora/cora.content does not exist" in named.stdout + named.stderr


@needs_bwrap
def test_a_gpu_the_run_asked_for_is_recorded_and_the_loop_ends(
    make_repo: Callable[..., Path],
) -> None:
    root = make_repo({"README.md": "    python run.py\n", "run.py": GPU})
    doc, _ = _init(root)
    assert doc["manifest"]["experiments"]["run"]["hardware"]["gpus"] == 1  # type: ignore[index]
    probe = doc["probe"]
    assert isinstance(probe, dict)
    # The second round (the GPU hidden in a trial) shows the same: nothing more to repair.
    assert probe["stopped"] == "no repair applies to what the runs showed"
    assert len(probe["rounds"]) == 2  # type: ignore[arg-type]


def test_no_probe_runs_nothing(make_repo: Callable[..., Path]) -> None:
    root = make_repo({"README.md": "    python run.py\n", "run.py": GPU})
    got = rb("init", str(root), "--no-lock", "--json", env={"RB_PROBE": "0"})
    assert got.returncode == 0 and "probe" not in json.loads(got.stdout)
    assert not (root / PROBE_FILE).exists()


def test_a_decision_is_never_repeated_only_replaced() -> None:
    a = Decision(repair="gpu-needed", target="experiments.e.hardware.gpus", value=1, why="w")
    b = Decision(repair="gpu-not-needed", target="experiments.e.hardware.gpus", value=0, why="w")
    kept, changed = merge_decisions((a,), [a])
    assert kept == (a,) and changed == []
    kept, changed = merge_decisions((a,), [b])
    assert kept == (b,) and changed == [b]


README_TABLE = """# Set model

    python main.py --epochs 3

| Model | min_dist | NLL |
|---|---|---|
| ours | 3.1 | 1.2 |
"""


@needs_bwrap
def test_a_readme_number_becomes_the_target_of_the_metric_the_run_printed(
    make_repo: Callable[..., Path],
) -> None:
    """Static recovery cannot name the metric (logged from a dict); the probe reads it from
    the run, and the README's table row for the only experiment gives its target."""
    root = make_repo({"README.md": README_TABLE, "main.py": LOGGED})
    doc, _ = _init(root)
    metrics = doc["manifest"]["experiments"]["main"]["metrics"]  # type: ignore[index]
    assert metrics["nll"]["target"] == 1.2 and metrics["min_dist"]["target"] == 3.1
    assert metrics["nll"]["provenance"].startswith("README.md:7 (")
