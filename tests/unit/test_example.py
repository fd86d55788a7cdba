"""The bundled example, examples/mixup-paper, does what its README and paper say.

It is the repository ReproBridge's end-to-end tests and docs run on, so it must run with
the standard library only, in seconds, deterministically, and mixup must beat the baseline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixup-paper"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "mixup-paper"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("results", "__pycache__"))
    return dest


def _train(cwd: Path, *args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _metric(stdout: str, name: str) -> float:
    match = re.search(rf"^{name}=([0-9.]+)$", stdout, re.M)
    assert match, f"no {name}= line in:\n{stdout}"
    return float(match.group(1))


def test_mixup_beats_baseline_seed0(example: Path) -> None:
    accs = {}
    for method in ("baseline", "mixup"):
        out = _train(example, "--method", method, "--seed", "0").stdout
        acc = _metric(out, "test_accuracy")
        loss = _metric(out, "train_loss")
        result = json.loads((example / "results" / f"{method}-seed0.json").read_text())
        assert result == {"test_accuracy": acc, "train_loss": loss}
        accs[method] = acc
    # The numbers paper.md reports for seed 0.
    assert accs == {"baseline": 0.827, "mixup": 0.935}
    assert accs["mixup"] > accs["baseline"]


def test_paper_table_matches_the_code() -> None:
    paper = (EXAMPLE / "paper.md").read_text()
    assert "| Baseline     | 79.0 ± 5.7" in paper
    assert "| Mixup (ours) | 88.0 ± 5.1" in paper


def test_deterministic_across_runs_and_hash_seeds(example: Path) -> None:
    args = ("--method", "mixup", "--seed", "1", "--epochs", "20")
    first = _train(example, *args, hash_seed="0").stdout
    blob = (example / "results" / "mixup-seed1.json").read_bytes()
    second = _train(example, *args, hash_seed="1").stdout
    assert first == second
    assert (example / "results" / "mixup-seed1.json").read_bytes() == blob


def test_smoke_setting_is_quick(example: Path) -> None:
    out = _train(example, "--method", "baseline", "--epochs", "2", "--out", "smoke").stdout
    assert 0.0 <= _metric(out, "test_accuracy") <= 1.0
    assert (example / "smoke" / "baseline-seed0.json").is_file()


def test_example_is_standard_library_only() -> None:
    allowed = set(sys.stdlib_module_names) | {"data", "model"}
    for script in EXAMPLE.glob("*.py"):
        imported = re.findall(r"^(?:from|import)\s+(\w+)", script.read_text(), re.M)
        assert set(imported) <= allowed, script
    reqs = (EXAMPLE / "requirements.txt").read_text().splitlines()
    assert all(not line.strip() or line.startswith("#") for line in reqs)


def test_detectors_read_the_example() -> None:
    from reprobridge.detect import detect_repo
    from reprobridge.detect.index import RepoIndex
    from reprobridge.detect.registry import detectors

    index = RepoIndex.from_directory(EXAMPLE)
    index = RepoIndex(index.root, [f for f in index.files if not f.path.startswith("results/")])
    ctx = detect_repo(index, paper_path="paper.md", only=detectors({"project", "paper"}))
    facts = {(f.kind, f.key): f.value.to_json() for f in ctx.findings}
    assert facts[("project", "license")] == {"value": "MIT"}
    assert facts[("project", "title")]["value"].startswith("Mixup Makes Small Networks")
    target = facts[("target", "Mixup (ours)::Test accuracy (%)")]
    assert (target["value"], target["spread"], target["higher_is_better"]) == (88.0, 5.1, True)
    assert facts[("target", "Baseline::Test accuracy (%)")]["value"] == 79.0
    assert facts[("claim", "Mixup (ours)>Baseline")]["metric"] == "Test accuracy (%)"
