"""CudaDetector: nvcc and CUDA-version rules; the pins data loader."""

from __future__ import annotations

import pytest

from reprobridge.data import load_pins
from reprobridge.detect import detect_repo
from reprobridge.detect.derived.cuda import cu_tag_version
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str], *extra: str):
    root = make_repo(files, git=False)
    return detect_repo(
        RepoIndex.from_directory(root), only=detectors({"requirements", "cuda", *extra})
    )


def cuda(ctx) -> list[tuple[str, str]]:
    return [(f.value.version, f.confidence) for f in ctx.of_kind("cuda")]


def test_pins_data_ships_with_the_package() -> None:
    pins = load_pins()
    assert pins["torch_cuda"]["2.1"]["default"] == "cu121"
    assert "nixos-24.11" in pins["release"]


@pytest.mark.parametrize(("tag", "version"), [("118", "11.8"), ("121", "12.1"), ("92", "9.2")])
def test_cu_tags(tag: str, version: str) -> None:
    assert cu_tag_version(tag) == version


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        ("torch==2.0.1+cu118\n", [("11.8", "high")]),
        ("torch==1.10.2\n", [("10.2", "medium")]),
        ("torch==2.1.*\n", [("12.1", "medium")]),
        ("torch>=2.1\n", []),
        ("tensorflow==2.12.0\n", [("11.8", "medium")]),
        ("tensorflow-gpu==2.11.*\n", [("11.2", "medium")]),
        ("cupy-cuda117==10.6.0\n", [("11.7", "medium")]),
        ("nvidia-cuda-runtime-cu12==12.1.105\n", [("12.1", "medium")]),
        ("nvidia-cudnn-cu11==8.5.0.96\n", [("11", "low")]),
        ("jaxlib==0.4.13+cuda12.cudnn89\n", [("12", "low")]),
        ("jax[cuda11_pip]==0.4.20\n", [("11", "low")]),
        (
            "torch @ https://download.pytorch.org/whl/cu118/torch-2.0.1%2Bcu118-cp310-linux_x86_64.whl\n",
            [("11.8", "high")],
        ),
        ("--extra-index-url https://download.pytorch.org/whl/cpu\ntorch==2.1.2\n", []),
        (
            "-f https://download.openmmlab.com/mmcv/dist/cu113/torch1.11/index.html\n",
            [("11.3", "high")],
        ),
    ],
)
def test_rules(make_repo, requirements: str, expected: list[tuple[str, str]]) -> None:
    assert cuda(run(make_repo, {"requirements.txt": requirements})) == expected


def test_strongest_version_first_with_all_rules(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "requirements.txt": "--extra-index-url https://download.pytorch.org/whl/cu118\ntorch==2.1.2\n"
        },
    )
    assert cuda(ctx) == [("11.8", "high"), ("12.1", "medium")]
    assert "index URL" in ctx.of_kind("cuda")[0].note


def test_conda_cuda_is_not_repeated(make_repo) -> None:
    ctx = run(
        make_repo,
        {"environment.yml": "dependencies:\n  - cudatoolkit=11.3\n  - pytorch=1.12.1\n"},
        "conda",
    )
    # conda's pytorch follows cudatoolkit, not the PyPI wheel default (10.2 for 1.12)
    assert [(f.detector, f.value.version) for f in ctx.of_kind("cuda")] == [("conda", "11.3")]


def test_cpp_extension_without_cuda_needs_no_nvcc(make_repo) -> None:
    files = {
        "ext.py": "from torch.utils.cpp_extension import CppExtension\nCppExtension('x', ['x.cpp'])\n"
    }
    assert run(make_repo, files).of_kind("nvcc") == []
    files = {"setup.py": "from torch.utils.cpp_extension import CUDAExtension\n"}
    (nvcc,) = run(make_repo, files).of_kind("nvcc")
    assert nvcc.sources() == ["setup.py:1"]
