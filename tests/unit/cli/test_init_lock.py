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


def _fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lock_step: str) -> Path:
    """A uv script that answers --version and runs ``lock_step`` for `uv lock`."""
    uv = tmp_path / "bin" / "uv"
    uv.parent.mkdir()
    uv.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "uv 0.0.0"; exit 0; fi\n' + lock_step
    )
    uv.chmod(0o755)
    monkeypatch.setattr(_machine, "uv_binary", lambda: str(uv))
    return uv


@pytest.fixture
def failing_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return _fake_uv(
        tmp_path,
        monkeypatch,
        'echo "error: resolution failed: no such package boom" >&2\nexit 2\n',
    )


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


@pytest.fixture
def locking_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A uv that 'locks' offline: writes a fixed uv.lock in the directory it runs in."""
    return _fake_uv(tmp_path, monkeypatch, 'printf "version = 1\\n" > uv.lock\n')


def _count_merges(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    from reprobridge import initializer

    calls: list[object] = []
    real = initializer.merge_findings

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(kwargs.get("python_lock"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(initializer, "merge_findings", counting)
    return calls


def test_lock_is_recorded_with_one_merge(
    make_repo, locking_uv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rb init is one pass: the lock's path is in the manifest (provenance `uv lock`) and
    the findings were merged once (the old flow merged a second time to record it)."""
    root = make_repo({"train.py": "import numpy\n", "requirements.txt": "numpy==1.26.4\n"})
    calls = _count_merges(monkeypatch)
    result = init_repository(root, lock="auto")
    assert calls == ["repro/python/uv.lock"]
    assert result.manifest.environment.python_lock == "repro/python/uv.lock"
    assert result.manifest.derived["environment.python_lock"].sources == ["uv lock"]
    assert (root / "repro/python/uv.lock").read_text() == "version = 1\n"
    # A re-run with the lock kept (`--no-lock`) writes the same manifest.
    text = (root / "reprobridge.toml").read_bytes()
    again = init_repository(root, lock="never", dry_run=True)
    assert again.files["reprobridge.toml"] == text


def test_failed_lock_takes_the_record_back(
    make_repo, failing_uv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv failing after the lock's path was recorded: the manifest names no lock (as a
    merge without one gives it) and the merge still ran once."""
    root = make_repo({"train.py": "import numpy\n", "requirements.txt": "numpy==1.26.4\n"})
    calls = _count_merges(monkeypatch)
    result = init_repository(root, lock="auto")
    assert len(calls) == 1
    assert result.manifest.environment.python_lock is None
    assert "environment.python_lock" not in result.manifest.derived
    assert "python_lock" not in (root / "reprobridge.toml").read_text()
