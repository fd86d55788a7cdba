"""`rb archive`'s processes on repository content get the audit's guarantees: the
closure's Nix calls on the repository's flake run with the allowlisted ``nix_env`` and Nix's
build sandbox required (refused where Nix would ignore it), and ``pip download`` of the
lock's wheels gets an allowlisted environment. Each process start is spied on (argv and
env), as in tests/unit/audit/test_nixcalls.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from reprobridge import _proc
from reprobridge.archive import wheels
from reprobridge.archive.closure import export_closure
from reprobridge.audit.nixcalls import NIX_ENV_PASSTHROUGH, SANDBOXED_BUILDS
from reprobridge.errors import ArchiveError

SECRET = "AKIA-not-for-nix-or-pip"


class Spy:
    """Stands in for :func:`reprobridge._proc.run`: records (argv, env) and answers Nix's
    probes with ``config``."""

    def __init__(self, config: str = "sandbox = true\n") -> None:
        self.config = config
        self.calls: list[tuple[list[str], dict[str, str] | None]] = []

    def __call__(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, **_: Any
    ) -> _proc.Result:
        self.calls.append((list(argv), dict(env) if env is not None else None))
        out = b""
        if "--version" in argv:
            out = b"nix (Nix) 2.26.3\n"
        elif "show" in argv or "show-config" in argv:
            out = self.config.encode()
        elif "--generate-binary-cache-key" in argv:
            Path(argv[-1]).write_text("rb-archive:" + "A" * 43 + "=\n")
        return _proc.Result(tuple(argv), 0, out, b"")

    def nix_calls(self, sub: str) -> list[tuple[list[str], dict[str, str] | None]]:
        return [(a, e) for a, e in self.calls if sub in a]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    it = Spy()
    monkeypatch.setattr(_proc, "run", it)
    return it


def _contains(argv: list[str], part: tuple[str, ...]) -> bool:
    return any(tuple(argv[i : i + len(part)]) == part for i in range(len(argv)))


def test_the_closure_builds_only_in_nix_sandbox_with_the_allowlisted_env(
    spy: Spy, tmp_path: Path
) -> None:
    export_closure(tmp_path, tmp_path / "cache", nix="nix")
    building = [*spy.nix_calls("archive"), *spy.nix_calls("develop"), *spy.nix_calls("copy")]
    assert len(building) == 3, spy.calls
    for argv, _env in building:
        assert _contains(argv, SANDBOXED_BUILDS), argv
    for argv in (spy.nix_calls("archive")[0][0], spy.nix_calls("develop")[0][0]):
        assert "--no-update-lock-file" in argv and "--no-write-lock-file" in argv, argv
    for argv, env in spy.calls:
        assert env is not None, argv
        assert set(env) <= set(NIX_ENV_PASSTHROUGH), (argv, set(env) - set(NIX_ENV_PASSTHROUGH))
        assert SECRET not in env.values(), argv


def test_the_closure_is_refused_where_nix_would_build_outside_its_sandbox(
    spy: Spy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NIX_REMOTE", "daemon")  # the daemon builds, and trusts nobody here
    spy.config = "sandbox = false\ntrusted-users = nobody-here\n"
    with pytest.raises(ArchiveError, match="sandbox") as exc:
        export_closure(tmp_path, tmp_path / "cache", nix="nix")
    assert "--with-closure" in str(exc.value.hint)
    assert not [*spy.nix_calls("archive"), *spy.nix_calls("develop"), *spy.nix_calls("copy")]


def test_pip_download_of_the_locks_wheels_gets_an_allowlisted_env(
    spy: Spy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.example/simple")
    dist = wheels.Dist(
        "demo", "1.0", "demo-1.0-py3-none-any.whl", "https://x/demo.whl", "0" * 64, None
    )
    wheels._pip_download([dist], (3, 11), "py", "none", "any", tmp_path)
    ((argv, env),) = spy.calls
    assert argv[1:4] == ["-m", "pip", "download"]
    assert env is not None, "pip download inherited the operator's whole environment"
    assert set(env) <= {*wheels.PIP_ENV_PASSTHROUGH, "PIP_NO_INPUT"}, env
    assert SECRET not in env.values()
    assert env["PIP_INDEX_URL"] == "https://index.example/simple"  # the operator's index
    assert env["PIP_NO_INPUT"] == "1"
