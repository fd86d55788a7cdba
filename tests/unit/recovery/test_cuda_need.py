"""CUDA where the code needs a GPU, not where a torch pin points.

A CUDA version the packages name (a ``+cu121`` build, a ``/whl/cu121`` index,
``pytorch-cuda=12.1``) installs the CUDA toolkit only when an experiment needs a GPU or CUDA
sources are compiled; the guide states the decision and its evidence either way, and a
probe's run that changes the need changes the decision.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.artifacts.guide import GuideNotes, render_guide
from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.manifest.schema import Manifest
from reprobridge.recovery.merge import MergeResult, merge_findings

#: Falls back to the CPU: no experiment needs a GPU.
CPU_TRAIN = (
    "import torch\n\n"
    "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    "if __name__ == '__main__':\n"
    "    x = torch.zeros(3).to(device)\n"
    "    print('loss:', float(x.sum()))\n"
)
#: Calls .cuda() with no fallback: needs a GPU.
GPU_TRAIN = (
    "import torch\n\n"
    "if __name__ == '__main__':\n"
    "    x = torch.zeros(3).cuda()\n"
    "    print('loss:', float(x.sum()))\n"
)
README = "```bash\npython train.py\n```\n"

PINS = {
    "local version": {"requirements.txt": "numpy==1.26.4\ntorch==2.1.0+cu121\n"},
    "index URL": {
        "requirements.txt": (
            "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch==2.1.0\n"
        )
    },
    "conda": {
        "environment.yml": (
            "name: x\nchannels: [pytorch, nvidia]\n"
            "dependencies:\n  - python=3.10\n  - pytorch=2.1.0\n  - pytorch-cuda=12.1\n"
        )
    },
}


def _merge(root: Path) -> MergeResult:
    return merge_findings(detect_repo(RepoIndex.from_directory(root)), repo_name="x")


def _guide(merged: MergeResult) -> str:
    return render_guide(merged.manifest, GuideNotes(merged.notes), version="test")


@pytest.mark.parametrize("pins", PINS.values(), ids=list(PINS))
def test_a_cpu_only_repository_with_a_cuda_pin_gets_no_toolkit(make_repo, pins) -> None:
    """A CPU run never loads the toolkit: none is installed (the flake adds no
    ``cudaPackages``), the nixpkgs release need not carry one, and the guide says which file
    named CUDA 12.1 and why it is not installed."""
    merged = _merge(make_repo({**pins, "train.py": CPU_TRAIN, "README.md": README}, git=False))
    env = merged.manifest.environment
    assert env.cuda is None
    assert "environment.cuda" not in merged.manifest.derived
    assert all("cudaPackages" not in d for d in merged.notes.decisions)
    said = [d for d in merged.notes.decisions if d.startswith("CUDA 12.1 named by ")]
    assert len(said) == 1, merged.notes.decisions
    assert "not installed: no experiment needs a GPU" in said[0]
    guide = _guide(merged)
    assert "| CUDA | none (CPU only) |" in guide
    assert said[0].split(" named by ")[1].split(",")[0] in guide  # the file that named it


@pytest.mark.parametrize("pins", PINS.values(), ids=list(PINS))
def test_a_repository_whose_code_needs_a_gpu_keeps_the_named_toolkit(make_repo, pins) -> None:
    merged = _merge(make_repo({**pins, "train.py": GPU_TRAIN, "README.md": README}, git=False))
    assert merged.manifest.environment.cuda == "12.1"
    assert merged.manifest.experiments["train"].hardware.gpus == 1
    said = [d for d in merged.notes.decisions if d.startswith("CUDA 12.1 named by ")]
    assert len(said) == 1 and "installed: an experiment needs a GPU: train (train.py:4)" in said[0]
    assert "cudaPackages_12_1" in " ".join(merged.notes.decisions)  # the pin carries it
    assert merged.gpu_need.needed


def test_compiled_cuda_sources_keep_the_toolkit_without_a_gpu_experiment(make_repo) -> None:
    """nvcc needs the toolkit whatever the experiments need (the gpu detector also marks
    every experiment, at low confidence; the need reads nvcc first)."""
    merged = _merge(
        make_repo(
            {**PINS["local version"], "kernel.cu": "__global__ void k() {}\n", "README.md": README}
            | {"train.py": CPU_TRAIN},
            git=False,
        )
    )
    assert merged.manifest.environment.nvcc
    assert merged.manifest.environment.cuda == "12.1"
    assert any(
        "installed: CUDA sources are compiled (kernel.cu)" in d for d in merged.notes.decisions
    )


def test_no_named_version_and_a_gpu_keeps_todays_behaviour(make_repo) -> None:
    """A GPU experiment with nothing naming a CUDA version (unpinned torch) installs no
    toolkit: the PyPI wheels bring their own CUDA runtime; no decision is stated."""
    merged = _merge(
        make_repo(
            {"requirements.txt": "torch\n", "train.py": GPU_TRAIN, "README.md": README}, git=False
        )
    )
    assert merged.manifest.environment.cuda is None
    assert merged.manifest.experiments["train"].hardware.gpus == 1
    assert not any(d.startswith("CUDA ") for d in merged.notes.decisions)


def _init_with_probe(make_repo, train: str, gpus: int) -> tuple[Manifest, str]:
    """`rb init` (no lock, nothing written) of a cu121-pinned repository whose probe file
    sets the experiment's GPU count: the manifest and the guide."""
    from reprobridge.initializer import init_repository
    from reprobridge.probe.record import PROBE_FILE, Decision, render_decisions

    repair = "gpu-needed" if gpus else "gpu-not-needed"
    decision = Decision(
        repair=repair,
        target="experiments.train.hardware.gpus",
        value=gpus,
        why="the run showed it",
        evidence="RuntimeError: Found no NVIDIA driver on your system." if gpus else "",
    )
    root = make_repo(
        {
            **PINS["local version"],
            "train.py": train,
            "README.md": README,
            PROBE_FILE: render_decisions([decision]),
        }
    )
    result = init_repository(root, lock="never", dry_run=True, git_add=False)
    return result.manifest, result.files["REPRODUCE.md"].decode()


def test_a_probe_that_finds_a_gpu_needed_brings_the_toolkit_back(make_repo) -> None:
    """The code falls back to the CPU, but the run failed for want of a GPU (the probe's
    ``gpu-needed``): the named CUDA is installed, in a nixpkgs release that carries it."""
    manifest, guide = _init_with_probe(make_repo, CPU_TRAIN, 1)
    assert manifest.experiments["train"].hardware.gpus == 1
    assert manifest.environment.cuda == "12.1"
    assert "cudaPackages_12_1" in guide  # the pin's reason: a release that carries it
    assert "CUDA 12.1 named by requirements.txt:2, installed: an experiment needs a GPU" in guide


def test_a_probe_that_finds_no_gpu_needed_drops_the_toolkit(make_repo) -> None:
    manifest, guide = _init_with_probe(make_repo, GPU_TRAIN, 0)
    assert manifest.experiments["train"].hardware.gpus == 0
    assert manifest.environment.cuda is None
    assert "environment.cuda" not in manifest.derived
    assert "cudaPackages_12_1" not in guide
    assert (
        "CUDA 12.1 named by requirements.txt:2, not installed: no experiment needs a GPU "
        "(probe: gpu-not-needed)" in guide
    )
