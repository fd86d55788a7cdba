"""The host backend checks that an interpreter runs before choosing it (issue 9, item 12)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from reprobridge._machine import interpreter_problem
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.backends import HostBackend


def _shim(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def test_a_broken_pyenv_shim_is_not_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What pyenv's shim does for a version that is not installed.
    shim = _shim(
        tmp_path / "bin",
        "python3.77",
        '#!/bin/sh\necho "pyenv: python3.77: command not found" >&2\nexit 127\n',
    )
    monkeypatch.setenv("PATH", f"{shim.parent}:{os.environ['PATH']}")
    # Without a 3.77, the runs may use rb's own Python only with the operator's leave.
    backend = HostBackend("3.77", has_requirements=False, python_mismatch_ok=True)
    state = backend.prepare(tmp_path)
    assert state.fingerprint["python"] == os.path.realpath(sys.executable)
    assert any(
        f"{shim} is not used" in w and "exited 127" in w and "command not found" in w
        for w in state.warnings
    )


def test_a_working_interpreter_is_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = _shim(tmp_path / "bin", "python3.77", f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    monkeypatch.setenv("PATH", f"{shim.parent}:{os.environ['PATH']}")
    state = HostBackend("3.77", has_requirements=False).prepare(tmp_path)
    # The shim is resolved to the interpreter it starts, which the runs then use directly.
    assert state.fingerprint["python"] == sys.executable
    assert state.fingerprint["python_via"] == str(shim)
    assert state.base_env["PATH"].startswith(f"{Path(sys.executable).parent}:")


def test_a_shim_is_started_once_per_audit_not_per_run(
    tiny_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyenv-style shim costs some twenty processes per start (0.5-1.2 s on a loaded
    machine). Its directory was the runs' PATH, so the package listing and every `python3`
    of every run went through it; now only the interpreter check does."""
    log = tmp_path / "shim.log"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    body = f'#!/bin/sh\necho "$0" >> "{log}"\nexec "{sys.executable}" "$@"\n'
    for name in (f"python{version}", "python3"):
        _shim(tmp_path / "shims", name, body)
    monkeypatch.setenv("PATH", f"{tmp_path / 'shims'}:{os.environ['PATH']}")
    root = tiny_repo("python3 -c 'print(\"acc=0.9\")'\n")
    result = run_audit(root, AuditOptions(runs=2, backend="host"))
    assert result.passed, result.summary
    assert log.read_text().splitlines() == [str(tmp_path / "shims" / f"python{version}")]


def test_the_check_runs_in_a_cleared_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an interpreter that only works with something from the caller's environment is broken
    shim = _shim(tmp_path / "bin", "py", '#!/bin/sh\n[ -n "$SECRET_TOKEN" ] || exit 3\n')
    monkeypatch.setenv("SECRET_TOKEN", "x")
    assert "exited 3" in (interpreter_problem(str(shim)) or "")
    assert interpreter_problem(sys.executable) is None
    assert "does not run" in (interpreter_problem(str(tmp_path / "missing")) or "")
