"""PyprojectDetector: PEP 621, Poetry, PDM, uv."""

from __future__ import annotations

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.declared.pyproject import poetry_constraint
from reprobridge.detect.findings import PythonVersionValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.errors import DetectionError


def run(make_repo, files: dict[str, str]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"pyproject"}))


@pytest.mark.parametrize(
    ("poetry", "pep440"),
    [
        ("^1.2", ">=1.2,<2.0"),
        ("^1.2.3", ">=1.2.3,<2.0.0"),
        ("^0.2.3", ">=0.2.3,<0.3.0"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),
        ("^1", ">=1,<2.0"),
        ("~1.2", ">=1.2,<1.3"),
        ("~1.2.3", ">=1.2.3,<1.3.0"),
        ("~=1.4", "~=1.4"),
        ("1.2.3", "==1.2.3"),
        ("1.2.*", "==1.2.*"),
        (">=1.2 <2", ">=1.2,<2"),
        (">= 1.2, < 2.0", ">=1.2,<2.0"),
        ("*", ""),
        ("^1.0 || ^2.0", ">=1.0,<3.0"),
    ],
)
def test_poetry_constraints(poetry: str, pep440: str) -> None:
    assert poetry_constraint(poetry) == pep440


def test_toml_error_has_the_line(make_repo) -> None:
    with pytest.raises(DetectionError, match=r"^pyproject\.toml: line 2: is not valid TOML"):
        run(make_repo, {"pyproject.toml": "[project]\nname = \n"})


def test_nested_broken_pyproject_is_a_warning(make_repo) -> None:
    ctx = run(make_repo, {"vendor2/x/pyproject.toml": "[[[\n"})
    assert ctx.findings == []
    assert ctx.warnings[0].path == "vendor2/x/pyproject.toml"


def test_dependencies_must_be_strings(make_repo) -> None:
    with pytest.raises(DetectionError, match=r"project\.dependencies must be a list of strings"):
        run(make_repo, {"pyproject.toml": "[project]\ndependencies = [1]\n"})


def test_dynamic_dependencies_from_a_file(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "pyproject.toml": (
                '[project]\nname = "x"\ndynamic = ["dependencies"]\n\n'
                "[tool.setuptools.dynamic]\n"
                'dependencies = {file = ["deps.txt"]}\n'
            ),
            "deps.txt": "lightning>=2\n",
        },
    )
    (dep,) = ctx.of_kind("python_requirement")
    assert dep.value.requirement == "lightning>=2"
    assert dep.sources() == ["deps.txt:1"]


def test_uv_index_url_and_extra(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "pyproject.toml": (
                "[tool.uv]\n"
                'index-url = "https://mirror.example/simple"\n'
                'extra-index-url = ["https://download.pytorch.org/whl/cu124"]\n'
            )
        },
    )
    assert [(f.key, f.value.role) for f in ctx.of_kind("python_index")] == [
        ("https://mirror.example/simple", "index"),
        ("https://download.pytorch.org/whl/cu124", "extra"),
    ]


def test_poetry_markers_and_url(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "pyproject.toml": (
                "[tool.poetry.dependencies]\n"
                'python = ">=3.9,<3.12"\n'
                'pywin32 = { version = "^306", markers = "sys_platform == \'win32\'" }\n'
                'wheelpkg = { url = "https://example.org/wheelpkg-1.0-py3-none-any.whl" }\n'
            )
        },
    )
    got = {f.key: f.value.requirement for f in ctx.of_kind("python_requirement")}
    assert got == {
        "pywin32": 'pywin32<307.0,>=306; sys_platform == "win32"',
        "wheelpkg": "wheelpkg @ https://example.org/wheelpkg-1.0-py3-none-any.whl",
    }
    (python,) = ctx.of_kind("python_version")
    assert python.value == PythonVersionValue(specifier="<3.12,>=3.9")
