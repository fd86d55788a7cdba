"""Fixtures shared by the audit tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reprobridge.audit import backends


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
