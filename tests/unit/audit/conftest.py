"""Fixtures shared by the audit tests."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import tomlkit

from reprobridge.artifacts.pyenv import render_python_project
from reprobridge.audit import backends
from reprobridge.initializer import init_repository
from reprobridge.manifest.io import read_manifest


@pytest.fixture
def init_without_requirements() -> Callable[[Path], Path]:
    """``init(root)``: ``git init`` the folder, ``rb init`` it (no lock), empty its
    ``python_requirements`` (and its Python project's) and commit. For runs whose tools a stand-in on the runs' PATH
    replaces (``tool_on_run_path``), so the host backend installs nothing."""

    def init(root: Path) -> Path:
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        init_repository(root, lock="never")
        manifest_path = root / "reprobridge.toml"
        doc = tomlkit.parse(manifest_path.read_text())
        doc["environment"]["python_requirements"] = []  # type: ignore[index]
        manifest_path.write_text(tomlkit.dumps(doc))
        # The Python project rendered from the edited manifest, as `rb init` would: an
        # audit refuses artifacts out of sync with the manifest.
        for rel, text in render_python_project(read_manifest(manifest_path)).items():
            (root / rel).write_text(text)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)
        return root

    return init


@pytest.fixture
def tool_on_run_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Path]:
    """``put(name, text)``: an executable ``name`` with ``text`` in a bin dir put first on the
    host backend's runs' PATH (and bound into the sandbox read-only, as ``--ro-bind`` does
    for an operator's tools), standing in for a tool the tests do not depend on."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    prepare = backends.HostBackend.prepare

    def with_fake(self: backends.HostBackend, root: Path) -> backends.EnvironmentState:
        state = prepare(self, root)
        state.base_env["PATH"] = f"{bindir}:{state.base_env['PATH']}"
        state.ro_binds = (*state.ro_binds, bindir)
        return state

    monkeypatch.setattr(backends.HostBackend, "prepare", with_fake)

    def put(name: str, text: str) -> Path:
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
        return bindir

    return put
