"""CondaDetector: conda match specs, name mapping, errors."""

from __future__ import annotations

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.declared.conda import conda_version
from reprobridge.detect.findings import PythonVersionValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.errors import DetectionError


def run(make_repo, env: str, name: str = "environment.yml"):
    root = make_repo({name: env}, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"conda"}))


@pytest.mark.parametrize(
    ("rest", "spec"),
    [
        ("=1.21", "==1.21.*"),
        ("=1.21=py38h1234_0", "==1.21.*"),
        ("==1.21.5", "==1.21.5"),
        (">=1.20,<2", ">=1.20,<2"),
        (" 1.21 py38_0", "==1.21"),
        (" 1.21.*", "==1.21.*"),
        ("=1.21*", "==1.21.*"),
        ("", ""),
        (">=1.2|<0.5", ">=1.2"),
        ("[version='>=1.2']", ">=1.2"),
    ],
)
def test_conda_version_syntax(rest: str, spec: str) -> None:
    assert conda_version(rest) == spec


def test_top_level_must_be_a_mapping(make_repo) -> None:
    with pytest.raises(DetectionError, match=r"^environment\.yml: is not a conda environment"):
        run(make_repo, "- numpy\n- scipy\n")


def test_dependencies_must_be_a_list(make_repo) -> None:
    with pytest.raises(DetectionError, match=r"^conda\.yaml: line 2: dependencies must be a list"):
        run(make_repo, "name: x\ndependencies: numpy\n", "conda.yaml")


def test_bad_pip_line_names_the_environment_file(make_repo) -> None:
    env = "dependencies:\n  - pip:\n    - numpy\n    - torch=2.1\n"
    with pytest.raises(DetectionError, match=r"^environment\.yml: line 4: not a valid requirement"):
        run(make_repo, env)


def test_empty_file_gives_nothing(make_repo) -> None:
    assert run(make_repo, "").findings == []


def test_python_range_channel_cuda_and_unknown_native_library(make_repo) -> None:
    env = (
        "channels:\n"
        "  - nvidia/label/cuda-11.8.0\n"
        "dependencies:\n"
        "  - python>=3.9,<3.11\n"
        "  - libfoo=1.0\n"
        "  - conda-forge::scikit-learn\n"
        "  - pytorch-cuda=11.8\n"
    )
    ctx = run(make_repo, env)
    (python,) = ctx.of_kind("python_version")
    assert python.value == PythonVersionValue(specifier=">=3.9,<3.11")
    assert {f.value.version for f in ctx.of_kind("cuda")} == {"11.8"}
    assert [f.sources() for f in ctx.of_kind("cuda")] == [
        ["environment.yml:2"],
        ["environment.yml:7"],
    ]
    assert [f.key for f in ctx.of_kind("python_requirement")] == ["scikit-learn"]
    assert "libfoo" in ctx.warnings[0].message


def test_non_pep440_version_is_dropped_with_a_note(make_repo) -> None:
    ctx = run(make_repo, "dependencies:\n  - weirdpkg=1.0a.b\n")
    (req,) = ctx.of_kind("python_requirement")
    assert req.value.requirement == "weirdpkg"
    assert req.confidence == "medium"
    assert "not PEP 440" in req.note


def test_cuda_and_gcc_packages_give_their_versions(make_repo) -> None:
    # The conda names of the CUDA toolkit and of gcc are the [conda.cuda] and [conda.gcc]
    # tables of data/packages.toml; neither becomes a Python requirement.
    ctx = run(
        make_repo,
        "dependencies:\n  - cudatoolkit=11.3\n  - gxx_linux-64=9.3.0\n  - numpy=1.21\n",
    )
    assert [(f.kind, f.key) for f in ctx.findings] == [
        ("cuda", "cuda"),
        ("compiler", "gcc"),
        ("python_requirement", "numpy"),
    ]
    cuda, gcc = ctx.findings[0].value, ctx.findings[1].value
    assert (cuda.version, gcc.version) == ("11.3", "9")


def test_conda_bookkeeping_packages_are_no_requirements(make_repo) -> None:
    """`conda env export` lists `_libgcc_mutex`, `_openmp_mutex`, `_tflow_select`
    (aamini/evidential-deep-learning): no PyPI name, and rb init crashed on them."""
    env = (
        "dependencies:\n  - _libgcc_mutex=0.1=main\n  - _tflow_select=2.3.0=mkl\n"
        "  - _openmp_mutex=4.5\n  - numpy=1.19.2\n"
    )
    ctx = run(make_repo, env)
    assert [f.value.requirement for f in ctx.of_kind("python_requirement")] == ["numpy==1.19.2.*"]
