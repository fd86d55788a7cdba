"""repo2docker's precedence rules for environment files, and the repository's own locks."""

from __future__ import annotations

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.registry import detectors
from reprobridge.errors import DetectionError
from reprobridge.recovery.merge import merge_findings


def _index(make_repo, files: dict[str, str]) -> RepoIndex:
    return RepoIndex.from_directory(make_repo(files, git=False))


def test_binder_dir_replaces_root_files_and_says_so(make_repo) -> None:
    index = _index(
        make_repo,
        {
            "binder/environment.yml": "dependencies:\n  - python=3.9\n",
            "environment.yml": ":\n  - [broken\n",
            "setup.py": "from setuptools import setup\nsetup(install_requires=['torch'])\n",
            "train.py": "print(1)\n",
        },
    )
    scope = env_scope(index)
    assert scope.config_dir == "binder"
    assert scope.ignores("environment.yml") and scope.ignores("setup.py")
    assert scope.declared("binder/environment.yml") and not scope.declared("train.py")
    ctx = detect_repo(index)
    assert any(
        w.path == "environment.yml" and "binder/ takes precedence" in w.message
        for w in ctx.warnings
    )
    assert not [f for f in ctx.of_kind("python_requirement") if f.key == "torch"]


def test_a_broken_config_dir_file_is_still_an_error(make_repo) -> None:
    index = _index(make_repo, {"binder/environment.yml": ":\n  - [broken\n", "a.py": ""})
    with pytest.raises(DetectionError, match=r"binder/environment\.yml"):
        detect_repo(index, only=detectors({"conda"}))


def test_precedence_inside_a_directory(make_repo) -> None:
    scope = env_scope(
        _index(
            make_repo,
            {
                "Pipfile": "[packages]\n",
                "Pipfile.lock": "{}",
                "requirements.txt": "numpy\n",
                "runtime.txt": "python-3.11\n",
            },
        )
    )
    assert scope.config_dir == ""
    assert sorted(scope.ignored) == ["requirements.txt", "runtime.txt"]
    assert not scope.ignores("Pipfile") and not scope.ignores("Pipfile.lock")


def test_malformed_lock_names_the_file(make_repo) -> None:
    index = _index(make_repo, {"uv.lock": "[[package]\nname=", "a.py": ""})
    with pytest.raises(DetectionError, match=r"uv\.lock"):
        detect_repo(index, only=detectors({"lockfiles"}))


def test_a_requirement_that_excludes_the_locked_version_is_kept_and_reported(make_repo) -> None:
    index = _index(
        make_repo,
        {
            "requirements.txt": "numpy>=2\n",
            "poetry.lock": '[[package]]\nname = "numpy"\nversion = "1.26.4"\n',
            "a.py": "import numpy\n",
        },
    )
    merged = merge_findings(detect_repo(index), repo_name="x")
    assert merged.manifest.environment.python_requirements == ["numpy>=2"]
    assert any("excludes the locked version" in str(c) for c in merged.notes.conflicts)
