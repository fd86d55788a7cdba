"""What the host backend installs, and with which interpreter (issue 9, items 3, 4, 7, 12)."""

from __future__ import annotations

import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from reprobridge import _proc
from reprobridge._machine import interpreter_candidates
from reprobridge.artifacts.pyenv import TorchRouting
from reprobridge.audit import hostenv
from reprobridge.audit.hostenv import (
    HostInstall,
    built_from_source,
    choose_index,
    pip_inputs,
)

CPU = TorchRouting("pytorch-cpu", "https://rb-test.invalid/whl/cpu", ("torch",), "gpus = 0")


def _install(**kw: object) -> HostInstall:
    base: dict[str, object] = {
        "requirements": ("torch", "numpy>=1.20", "gym==0.26.2"),
        "constraints": ("torch<2.0",),
        "exclude_newer": "2022-11-21T00:00:00Z",
        "routing": CPU,
    }
    return HostInstall(**{**base, **kw})  # type: ignore[arg-type]


def test_pip_inputs_carry_the_date_bound_the_constraints_and_the_routing(tmp_path: Path) -> None:
    flags = pip_inputs(_install(), tmp_path, routed=True)
    assert flags[flags.index("--exclude-newer") + 1] == "2022-11-21T00:00:00Z"
    assert Path(flags[flags.index("-c") + 1]).read_text() == "torch<2.0\n"
    project = tomllib.loads(Path(flags[flags.index("-r") + 1]).read_text())
    assert project["project"]["dependencies"] == ["torch", "numpy>=1.20", "gym==0.26.2"]
    assert project["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cpu"}}
    assert project["tool"]["uv"]["index"][0]["explicit"] is True


def test_routed_cpu_wheels_replace_the_repositorys_cuda_build(tmp_path: Path) -> None:
    """A ``+cu121`` pin routed to the CPU index loses its label (``==2.1.0`` matches
    ``2.1.0+cpu``); unrouted (the index unreachable), the repository's build stands."""
    routing = replace(CPU, drops_local=True)
    install = _install(requirements=("torch==2.1.0+cu121", "numpy==1.26.4"), routing=routing)
    for routed, torch in ((True, "torch==2.1.0"), (False, "torch==2.1.0+cu121")):
        flags = pip_inputs(install, tmp_path / str(routed), routed=routed)
        project = tomllib.loads(Path(flags[flags.index("-r") + 1]).read_text())
        assert project["project"]["dependencies"] == [torch, "numpy==1.26.4"]


def test_pip_inputs_move_the_date_bound_for_the_packages_the_manifest_names(
    tmp_path: Path,
) -> None:
    moved = (("jax", "2023-07-24T00:00:00Z"), ("jaxlib", "2023-07-24T00:00:00Z"))
    flags = pip_inputs(_install(exclude_newer_package=moved), tmp_path, routed=False)
    pairs = [flags[i + 1] for i, f in enumerate(flags) if f == "--exclude-newer-package"]
    assert pairs == ["jax=2023-07-24T00:00:00Z", "jaxlib=2023-07-24T00:00:00Z"]


def test_pip_inputs_leave_out_what_is_set_aside_and_the_unreachable_index(tmp_path: Path) -> None:
    flags = pip_inputs(_install(), tmp_path, routed=False, exclude=["gym"])
    project = tomllib.loads(Path(flags[flags.index("-r") + 1]).read_text())
    assert project["project"]["dependencies"] == ["torch", "numpy>=1.20"]
    assert "tool" not in project


def test_an_unreachable_pytorch_index_falls_back_to_pypi_fast_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    start = time.monotonic()
    choice = choose_index(_install())
    assert time.monotonic() - start < hostenv.INDEX_PROBE_TIMEOUT + 1
    assert not choice.routed
    assert choice.fallback is not None and "rb-test.invalid" in choice.fallback
    assert "from PyPI" in choice.fallback


def test_a_reachable_index_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostenv, "index_problem", lambda url, timeout=5.0: None)
    choice = choose_index(_install())
    assert choice.routed and choice.fallback is None
    assert not choose_index(_install(routing=None)).routed


def test_pyenv_and_uv_interpreters_are_found_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for version in ("3.77.1", "3.77.12", "3.78.0"):
        exe = home / ".pyenv/versions" / version / "bin/python3.77"
        exe.parent.mkdir(parents=True)
        exe.write_text("")
    managed = tmp_path / "uvpy/cpython-3.77.3-linux-x86_64-gnu/bin/python3.77"
    managed.parent.mkdir(parents=True)
    managed.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PYENV_ROOT", raising=False)
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uvpy"))
    found = interpreter_candidates("3.77", path_env="")
    assert found == [
        home / ".pyenv/versions/3.77.12/bin/python3.77",
        home / ".pyenv/versions/3.77.1/bin/python3.77",
        managed,
    ]


def test_a_pyenv_interpreter_is_chosen_past_a_broken_shim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shim for a version that is not pyenv's global one exits 127; the interpreter
    it would have run is there, and runs."""
    from reprobridge.audit.backends import HostBackend

    shims, version = tmp_path / "shims", "3.77"
    shims.mkdir()
    shim = shims / f"python{version}"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.77: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    real = tmp_path / f"pyenv/versions/{version}.2/bin/python{version}"
    real.parent.mkdir(parents=True)
    real.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    real.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:/usr/bin:/bin")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    state = HostBackend(version, has_requirements=False).prepare(tmp_path)
    # (``real`` stands in with a script; the runs use what it starts.)
    assert state.fingerprint["python_via"] == str(real)
    assert state.fingerprint["python"] == sys.executable
    assert any(str(shim) in w and "exited 127" in w for w in state.warnings)


def test_uvs_refusal_to_build_is_recognised() -> None:
    stderr = (
        "error: No solution found when resolving dependencies\n  cause: Because all versions "
        "of gym have no usable wheels and you require gym, we can conclude that your "
        "requirements are unsatisfiable.\n\nhint: Wheels are required for `gym` because "
        "building from source is disabled for all packages (i.e., with `--no-build`)\n"
    )
    assert _proc.uv_refused_build(stderr) == "gym"


def test_built_packages_are_read_from_uvs_log() -> None:
    log = (
        "Resolved 3 packages in 1s\n   Building gym==0.26.2\n      Built gym==0.26.2\n"
        "      Built Fire @ file:///tmp/fire-0.5.0.tar.gz\nInstalled 3 packages\n"
        " + numpy==1.26.4\n"
    )
    assert built_from_source(log) == ["fire", "gym"]


def test_a_sandboxed_step_gets_tls_and_proxy_settings_but_no_credentials() -> None:
    environ = {
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
        "HTTPS_PROXY": "http://proxy.internal:3128",
        "UV_INDEX_URL": "https://user:s3cret@pypi.internal/simple",
        "ALL_PROXY": "http://bob:pw@proxy.internal:1080",
        "ANTHROPIC_API_KEY": "sk-test",
        "HOME": "/root",
    }
    assert hostenv.step_network_env(environ) == {
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
        "HTTPS_PROXY": "http://proxy.internal:3128",
    }
