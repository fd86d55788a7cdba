"""The date-bound relaxation against real uv and a local package index that publishes
upload times (PEP 691 JSON on an ephemeral port): `rb init`'s lock and the host backend's
resolution call the same function (artifacts/datebound.py)."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from artifacts_helpers import host_python, host_uv, sample_manifest_data
from pyindex import serve_index

from reprobridge.artifacts import pyenv
from reprobridge.manifest.schema import Manifest

BOUND = "2022-01-23T00:00:00Z"
#: (name, version, upload time): jaxlib has nothing before the bound (its old releases were
#: removed from PyPI); jax has a release before it and one in jaxlib's era.
RELEASES = [
    ("jax", "0.1", "2021-06-01T00:00:00Z"),
    ("jax", "0.3", "2023-05-01T00:00:00Z"),
    ("jax", "0.9", "2026-01-01T00:00:00Z"),
    ("jaxlib", "0.3", "2023-05-02T00:00:00Z"),
    ("jaxlib", "0.9", "2026-01-02T00:00:00Z"),
    ("numpy", "1.0", "2021-01-01T00:00:00Z"),
    ("numpy", "2.0", "2025-01-01T00:00:00Z"),
]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    """A PEP 691 index of :data:`RELEASES` on 127.0.0.1 (an ephemeral port)."""
    with serve_index(tmp_path / "index", RELEASES) as url:
        yield url


def _project(tmp_path: Path, url: str, moved: dict[str, str] | None = None) -> Path:
    data = sample_manifest_data()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    data["environment"].update(
        python=version,
        python_requirements=["jax", "jaxlib", "numpy"],
        python_indexes=[],
        exclude_newer=BOUND,
        exclude_newer_package=moved or {},
    )
    text = pyenv.render_python_project(Manifest.model_validate(data))["repro/python/pyproject.toml"]
    directory = tmp_path / "project"
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(
        text.replace("[tool.uv]\n", f'[tool.uv]\nindex-url = "{url}"\n', 1)
    )
    return directory


def _versions(lock: Path) -> dict[str, str]:
    return {p["name"]: p["version"] for p in tomllib.loads(lock.read_text())["package"]}


@pytest.mark.skipif(host_uv() is None, reason="uv is not installed")
@pytest.mark.parametrize("sandboxed", [False, True], ids=["host", "sandbox"])
def test_the_lock_moves_the_bound_for_jaxlib_and_jax_only(
    tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch, sandboxed: bool
) -> None:
    if sandboxed:
        from reprobridge.sandbox import sandbox_unusable

        if (why := sandbox_unusable()) is not None:
            pytest.skip(f"sandbox unusable: {why}")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    directory = _project(tmp_path, index)
    result = pyenv.lock_python_project(
        directory,
        offline=False,
        python=host_python(),
        sandboxed=sandboxed,
        exclude_newer=BOUND,
        python_label="3.x",
    )
    assert result.locked, result.reason
    moved = {r.package: r.bound for r in result.relaxed}
    assert sorted(moved) == ["jax", "jaxlib"]  # numpy keeps the bound
    # The oldest era that resolves (jaxlib 0.3, 2023-05), not the newest release; jax,
    # released in lock-step, moves with it instead of staying at 0.1.
    assert _versions(directory / "uv.lock") == {
        "jax": "0.3",
        "jaxlib": "0.3",
        "numpy": "1.0",
        "fastmix-repro": "0",
    }
    # The lock records the moved bounds as uv's own settings.
    options = tomllib.loads((directory / "uv.lock").read_text())["options"]
    assert options["exclude-newer-package"] == moved

    # Rendered into the pyproject (as `rb init` does), uv resolves the same without help.
    again = _project(tmp_path / "again", index, moved)
    second = pyenv.lock_python_project(
        again, offline=False, python=host_python(), exclude_newer=BOUND, kept_relaxations=moved
    )
    assert second.locked and second.relaxed == ()
    assert _versions(again / "uv.lock") == _versions(directory / "uv.lock")
