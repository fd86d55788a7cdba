"""`rb init`'s sandboxed lock with the interpreters people have: a venv (rb's own, activated),
a pyenv/conda/uv Python under the home directory. The sandbox binds the interpreter's own
prefixes read-only, never the home directory, and builds nothing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from artifacts_helpers import host_python, host_uv, sample_manifest_data
from pep517 import backend_source, write_sdist
from pyindex import serve_index

from reprobridge.artifacts import pyenv
from reprobridge.manifest.schema import Manifest
from reprobridge.sandbox import sandbox_unusable

pytestmark = [
    pytest.mark.skipif(host_uv() is None, reason="uv is not installed"),
    pytest.mark.skipif(sandbox_unusable() is not None, reason=f"sandbox: {sandbox_unusable()}"),
]

RELEASES = [("numpy", "1.0", "2021-01-01T00:00:00Z")]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    with serve_index(tmp_path / "index", RELEASES) as url:
        yield url


def _project(directory: Path, url: str, requirements: list[str], extra: str = "") -> Path:
    data = sample_manifest_data()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    data["environment"].update(python=version, python_requirements=requirements, python_indexes=[])
    text = pyenv.render_python_project(Manifest.model_validate(data))["repro/python/pyproject.toml"]
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(
        text.replace("[tool.uv]\n", f'[tool.uv]\nindex-url = "{url}"\n{extra}', 1)
    )
    return directory


@pytest.mark.parametrize("copies", [False, True], ids=["symlinked-venv", "copied-venv"])
def test_a_venv_under_a_home_directory_locks_in_the_sandbox(
    tmp_path: Path, index: str, copies: bool
) -> None:
    """A venv's interpreter under a directory the sandbox does not otherwise bind (the tests'
    tmp: the sandbox has a fresh /tmp), as with rb's venv activated."""
    venv = tmp_path / "home" / "someone" / ".venvs" / "rb"
    flags = ["--copies"] if copies else []
    subprocess.run([host_python(), "-m", "venv", "--without-pip", *flags, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    directory = _project(tmp_path / "project", index, ["numpy"])
    result = pyenv.lock_python_project(directory, offline=False, python=python, sandboxed=True)
    assert result.locked, result.reason
    assert 'name = "numpy"' in (directory / "uv.lock").read_text()


def test_the_sandboxed_lock_builds_nothing(tmp_path: Path, index: str) -> None:
    """A requirement whose only release is an sdist from the repository's index: its build
    backend never runs during the lock (it would write ``escape``), and the lock says which
    package it could not resolve without a build."""
    # Inside the project directory: the one host path the sandbox can write.
    directory = tmp_path / "project"
    links, escape = directory / "links", directory / "built"
    _project(directory, index, ["evil"], extra=f'find-links = ["{links}"]\n')
    links.mkdir()
    write_sdist(links, "evil", "1.0", backend_source("evil", "1.0", "'x'", escape=escape))
    result = pyenv.lock_python_project(
        directory, offline=False, python=host_python(), sandboxed=True
    )
    assert not escape.exists(), escape.read_text()
    assert not result.locked
    assert result.needs_build == "evil", result.reason
