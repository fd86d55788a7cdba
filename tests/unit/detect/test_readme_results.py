"""README result tables as targets (reprobridge.detect.paper.readme_results) and how the
merge matches them: by the experiment's parameters and data, and after the paper's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reprobridge.initializer import init_repository

TRAIN = """import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", default="cora", choices=["cora", "citeseer"])
parser.add_argument("--epochs", type=int, default=5)
args = parser.parse_args()
print(f"Test set results: accuracy= {0.8:.4f}")
"""
README = """# Tiny GCN

    python train.py --dataset cora

| Dataset | Test accuracy |
|---|---|
| citeseer | 70.3 % |
| cora | 81.5 % |
"""


def test_the_row_of_the_experiment_s_dataset_is_its_target(make_repo: Callable[..., Path]) -> None:
    root = make_repo({"README.md": README, "train.py": TRAIN})
    m = init_repository(root, lock="never").manifest
    metric = next(iter(m.experiments.values())).metrics["accuracy"]
    assert metric.target == 0.815
    assert metric.provenance is not None and metric.provenance.startswith("README.md:8 ")
    assert "README's 81.5% read as the fraction" in metric.provenance


def test_the_paper_wins_over_the_readme(make_repo: Callable[..., Path]) -> None:
    paper = "# Paper\n\nTable 1: results.\n\n| Dataset | Accuracy |\n|---|---|\n| cora | 83.0 % |\n"
    root = make_repo({"README.md": README, "train.py": TRAIN, "paper.md": paper})
    m = init_repository(root, lock="never", paper=root / "paper.md").manifest
    metric = next(iter(m.experiments.values())).metrics["accuracy"]
    assert metric.target == 0.83
    assert metric.provenance is not None and metric.provenance.startswith("paper.md:")


def test_a_row_naming_another_method_is_not_the_only_experiment(
    make_repo: Callable[..., Path],
) -> None:
    readme = "    python train.py\n\n| Model | Accuracy |\n|---|---|\n| ResNet-18 | 91.0 |\n"
    train = "print(f'accuracy: {0.9}')\n"
    m = init_repository(make_repo({"README.md": readme, "train.py": train}), lock="never").manifest
    assert all(x.target is None for e in m.experiments.values() for x in e.metrics.values())
    ours = readme.replace("ResNet-18", "Ours")
    m = init_repository(make_repo({"README.md": ours, "train.py": train}), lock="never").manifest
    assert [x.target for e in m.experiments.values() for x in e.metrics.values()] == [91.0]
