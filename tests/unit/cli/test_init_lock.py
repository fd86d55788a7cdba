"""A failed `uv lock` is a visible warning in `rb init`, and the guide claims no lock."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from reprobridge import _machine
from reprobridge.cli._render import print_init_summary
from reprobridge.initializer import init_repository

ROOT = Path(__file__).resolve().parents[3]


def test_uv_is_a_runtime_dependency() -> None:
    """After the README's install (no extras), `rb audit --backend host` needs uv."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("=")[0].strip() for d in meta["dependencies"]]
    assert "uv" in names
    # The locator finds the binary of that package, not only a uv on PATH.
    assert _machine.uv_binary() is not None


@pytest.fixture
def failing_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    uv = tmp_path / "bin" / "uv"
    uv.parent.mkdir()
    uv.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "uv 0.0.0"; exit 0; fi\n'
        'echo "error: resolution failed: no such package boom" >&2\nexit 2\n'
    )
    uv.chmod(0o755)
    monkeypatch.setattr(_machine, "uv_binary", lambda: str(uv))
    return uv


def test_failed_lock_is_a_warning_in_the_summary(
    make_repo, failing_uv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_repo({"train.py": "import numpy\n", "requirements.txt": "numpy==1.26.4\n"})
    result = init_repository(root, lock="auto")
    assert result.lock_warning is not None
    assert "uv lock exited 2" in result.lock_warning
    assert not (root / "repro/python/uv.lock").exists()
    print_init_summary(result)
    out = capsys.readouterr().out
    assert "warning: Python packages could not be locked: uv lock exited 2" in out
    assert "requirements.txt unpinned" in out
    guide = (root / "REPRODUCE.md").read_text()
    assert "uv venv from `repro/python/uv.lock`" not in guide
    assert "uv venv from `repro/python/requirements.txt` (not locked)" in guide


def test_no_lock_is_also_said(make_repo, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_repo({"train.py": "import numpy\n", "requirements.txt": "numpy==1.26.4\n"})
    result = init_repository(root, lock="never")
    print_init_summary(result)
    assert "warning: Python packages not locked (`--no-lock`)" in (capsys.readouterr().out)
