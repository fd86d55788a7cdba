"""Host probing shared by doctor, the auditor and the fingerprint (reprobridge._machine)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reprobridge import _machine, _proc
from reprobridge.errors import MachineError


def _result(stdout: bytes, returncode: int = 0, stderr: bytes = b"") -> _proc.Result:
    return _proc.Result(("x",), returncode, stdout, stderr)


def _nix(tmp_path: Path) -> str:
    """An executable file, so the lookup finds a `nix`; the fake runner answers for it."""
    nix = tmp_path / "nix"
    nix.write_text("#!/bin/sh\nexit 0\n")
    nix.chmod(0o755)
    return str(nix)


def test_nix_version_reads_the_last_version_like_doctor(tmp_path: Path) -> None:
    """A fork names itself first: the auditor's backend choice and doctor read the same
    version (the auditor used to take the first X.Y, 3.6 here)."""

    def run(argv: Sequence[str], *, timeout: float, **_: Any) -> _proc.Result:
        return _result(b"nix (Determinate Nix 3.6.2) 2.29.0\n")

    assert _machine.nix_version(_nix(tmp_path), run=run) == (2, 29)
    assert _machine.parse_version("nix (Nix) 2.8.0") == (2, 8, 0)


def test_nix_version_none_when_missing_broken_or_silent(tmp_path: Path) -> None:
    def fails(argv: Sequence[str], *, timeout: float, **_: Any) -> _proc.Result:
        raise MachineError("nix cannot be executed")

    def exits_1(argv: Sequence[str], *, timeout: float, **_: Any) -> _proc.Result:
        return _result(b"nix 2.20.0", returncode=1)

    def no_version(argv: Sequence[str], *, timeout: float, **_: Any) -> _proc.Result:
        return _result(b"nix")

    assert _machine.nix_version(str(tmp_path / "absent")) is None
    for run in (fails, exits_1, no_version):
        assert _machine.nix_version(_nix(tmp_path), run=run) is None


def test_nix_config_subcommand_by_version_and_parse() -> None:
    seen: list[list[str]] = []

    def run(argv: Sequence[str], *, timeout: float, **_: Any) -> _proc.Result:
        seen.append(list(argv))
        return _result(b"sandbox = false\nsubstituters = https://cache.nixos.org/\nnoise\n")

    got = _machine.nix_config(run, (2, 26, 0), 5.0)
    assert got == {"sandbox": "false", "substituters": "https://cache.nixos.org/"}
    _machine.nix_config(run, (2, 8), 5.0)
    assert seen[0][-2:] == ["config", "show"] and seen[1][-1] == "show-config"

    def refuses(argv: Sequence[str], *, timeout: float, **_: Any) -> _proc.Result:
        return _result(b"", returncode=1, stderr=b"warning\nerror: no such command\n")

    assert _machine.nix_config(refuses, (2, 26), 5.0) == "error: no such command"


def test_nvml_errors_from_the_module_in_use() -> None:
    class NVMLError(Exception):
        pass

    class NVMLError_DriverNotLoaded(NVMLError):
        pass

    class Fake:
        pass

    fake: Any = Fake()
    fake.NVMLError = NVMLError
    fake.NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    errors = _machine.nvml_errors(fake)
    assert errors.base == (NVMLError,) and errors.unavailable == (NVMLError_DriverNotLoaded,)
    # A module with no specific classes: every NVML error means "unavailable".
    bare: Any = Fake()
    bare.NVMLError = NVMLError
    assert _machine.nvml_errors(bare).unavailable == (NVMLError,)
    assert _machine.load_nvml(fake) is fake
    assert _machine.nvml_text(b"Tesla T4") == "Tesla T4"
