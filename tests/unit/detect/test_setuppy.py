"""SetupPyDetector: static reading of setup.py, never executing it."""

from __future__ import annotations

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.findings import PythonVersionValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.errors import DetectionError


def run(make_repo, files: dict[str, str], *names: str):
    root = make_repo(files, git=False)
    return root, detect_repo(
        RepoIndex.from_directory(root), only=detectors(set(names or ("setuppy",)))
    )


def reqs(ctx) -> dict[str, str]:
    return {f.key: f.value.requirement for f in ctx.of_kind("python_requirement")}


def test_setup_py_is_never_executed(make_repo) -> None:
    setup = (
        "import pathlib\n"
        "pathlib.Path('EXECUTED').write_text('x')\n"
        "from setuptools import setup\n"
        "setup(install_requires=['numpy'])\n"
    )
    root, ctx = run(make_repo, {"setup.py": setup})
    assert reqs(ctx) == {"numpy": "numpy"}
    assert not (root / "EXECUTED").exists()


def test_keywords_from_a_dict_splat_and_multiline_string(make_repo) -> None:
    setup = (
        "import setuptools\n"
        "KW = dict(python_requires='>=3.8', install_requires='''\n"
        "    numpy\n"
        "    scipy>=1.10  # comment\n"
        "''')\n"
        "setuptools.setup(name='x', **KW)\n"
    )
    _, ctx = run(make_repo, {"setup.py": setup})
    assert reqs(ctx) == {"numpy": "numpy", "scipy": "scipy>=1.10"}
    numpy = next(f for f in ctx.of_kind("python_requirement") if f.key == "numpy")
    assert numpy.sources() == ["setup.py:3"]
    (python,) = ctx.of_kind("python_version")
    assert python.value == PythonVersionValue(specifier=">=3.8")


def test_reading_a_requirements_file_defers_without_duplicates(make_repo) -> None:
    setup = (
        "from setuptools import setup\n"
        "setup(install_requires=open('requirements.txt').read().splitlines())\n"
    )
    _, ctx = run(
        make_repo,
        {"setup.py": setup, "requirements.txt": "torch==2.1.2\n"},
        "requirements",
        "setuppy",
    )
    found = ctx.of_kind("python_requirement")
    assert [(f.key, f.detector) for f in found] == [("torch", "requirements")]
    assert ctx.warnings == []


def test_reading_a_missing_file_is_a_warning(make_repo) -> None:
    setup = "from setuptools import setup\nsetup(install_requires=open('deps.txt').readlines())\n"
    _, ctx = run(make_repo, {"setup.py": setup})
    assert ctx.of_kind("python_requirement") == []
    assert [w.message for w in ctx.warnings] == [
        "install_requires reads deps.txt, which is not in the repository"
    ]


def test_extras_are_warned_not_added(make_repo) -> None:
    setup = "from setuptools import setup\nsetup(extras_require={'gpu': ['cupy'], 'dev': []})\n"
    _, ctx = run(make_repo, {"setup.py": setup})
    assert ctx.findings == []
    assert "dev, gpu" in ctx.warnings[0].message


def test_nested_broken_setup_py_is_skipped_with_a_warning(make_repo) -> None:
    _, ctx = run(
        make_repo,
        {
            "setup.py": "from setuptools import setup\nsetup(install_requires=['numpy'])\n",
            "third/apex/setup.py": "print 'python 2'\n",
        },
    )
    assert reqs(ctx) == {"numpy": "numpy"}
    assert ctx.warnings[0].path == "third/apex/setup.py"


def test_invalid_python_requires_names_the_line(make_repo) -> None:
    setup = "from setuptools import setup\nsetup(\n    python_requires='3.8+',\n)\n"
    with pytest.raises(DetectionError, match=r"^setup\.py: line 3: python_requires '3\.8\+'"):
        run(make_repo, {"setup.py": setup})


def test_no_setup_call_gives_nothing(make_repo) -> None:
    _, ctx = run(make_repo, {"setup.py": "print('hello')\n"})
    assert ctx.findings == []
