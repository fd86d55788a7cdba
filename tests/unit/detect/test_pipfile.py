"""PipfileDetector."""

from __future__ import annotations

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.findings import PythonVersionValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.errors import DetectionError


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"pipfile"}))


def test_malformed_pipfile_names_file_and_line(make_repo) -> None:
    with pytest.raises(DetectionError, match=r"^Pipfile: line 3: is not valid TOML"):
        run(make_repo, {"Pipfile": '[packages]\nnumpy = "*"\nbroken = \n'})


def test_git_dependency_and_full_python_version(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "Pipfile": (
                "[packages]\n"
                'foo = {git = "https://github.com/a/foo.git", ref = "v1"}\n'
                "[requires]\n"
                'python_full_version = "3.10.12"\n'
            )
        },
    )
    (foo,) = ctx.of_kind("python_requirement")
    assert foo.value.requirement == "foo @ git+https://github.com/a/foo.git@v1"
    (python,) = ctx.of_kind("python_version")
    assert python.value == PythonVersionValue(exact="3.10")
    assert python.sources() == ["Pipfile:4"]


def test_invalid_version_is_an_error(make_repo) -> None:
    with pytest.raises(DetectionError, match=r"^Pipfile: line 2: not a valid requirement"):
        run(make_repo, {"Pipfile": '[packages]\nnumpy = "=>1.0"\n'})
