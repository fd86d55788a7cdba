"""How rb calls Nix on a repository's flake: the sandbox is required, the environment is an
allowlist, and Nix's errors enter the evidence as one bounded, redacted line.

With Nix's sandbox off, a devShell's derivation (``stdenv = ./evil;``, sourced by ``nix
print-dev-env``'s builder) read ``/etc/shadow`` as root; rb recorded ``sandbox`` but built
anyway. Nix's configuration is simulated here with an injected runner answering ``nix
config show``, so the test does not depend on how this machine's Nix is set up.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Unpack

import pytest

from reprobridge import _proc
from reprobridge._machine import Where
from reprobridge.audit.backends import NixBackend
from reprobridge.audit.nixcalls import (
    SANDBOXED_BUILDS,
    error_line,
    nix_env,
    sandbox_problem,
)
from reprobridge.errors import CommandFailed, MachineError


class FakeNix:
    """Answers ``nix --version`` and ``nix config show`` with ``config``; records calls."""

    def __init__(self, config: str) -> None:
        self.config = config
        self.calls: list[tuple[list[str], dict[str, str] | None]] = []

    def __call__(
        self, argv: Sequence[str], *, timeout: float, **where: Unpack[Where]
    ) -> _proc.Result:
        env = where.get("env")
        self.calls.append((list(argv), dict(env) if env is not None else None))
        if "--version" in argv:
            return _proc.Result(tuple(argv), 0, b"nix (Nix) 2.26.3\n", b"")
        return _proc.Result(tuple(argv), 0, self.config.encode(), b"")


@pytest.mark.parametrize(
    ("config", "uid", "refused"),
    [
        ({"sandbox": "true"}, 1000, False),
        ({"sandbox": "false", "trusted-users": "root"}, 0, False),  # root, own store
        ({"sandbox": "false", "trusted-users": "root"}, 1000, True),  # the daemon decides
        ({"sandbox": "relaxed", "trusted-users": "root"}, 1000, True),
        ({"sandbox": "false", "trusted-users": "*"}, 1000, False),  # trusted: -o honoured
        ({"sandbox": "false", "store": "daemon", "trusted-users": "root"}, 0, False),
        ({"sandbox": "false", "store": "daemon", "trusted-users": "nobody-here"}, 0, True),
    ],
)
def test_sandbox_problem_refuses_only_where_the_sandbox_cannot_be_forced(
    config: dict[str, str], uid: int, refused: bool
) -> None:
    problem = sandbox_problem(config, uid=uid, environ={})
    assert (problem is not None) == refused, problem
    if problem is not None:
        assert "\n" not in problem and "sandbox = true" in problem


def test_with_the_sandbox_off_and_not_forceable_the_nix_backend_refuses_as_a_machine_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NIX_REMOTE", raising=False)
    monkeypatch.setenv("RB_TEST_SECRET_TOKEN", "do-not-pass-me-0123456789")
    fake = FakeNix("sandbox = false\nstore = daemon\ntrusted-users = nobody-here\n")
    backend = NixBackend(nix="/bin/true", run=fake)

    with pytest.raises(MachineError) as caught:
        backend.prepare(tmp_path)

    assert caught.value.exit_code == MachineError.exit_code
    assert "sandbox is off" in caught.value.message
    # It stopped at the check: Nix read no flake. Its probes got the allowlist only.
    assert fake.calls and all(
        not {"print-dev-env", "eval", "metadata"} & set(argv) for argv, _ in fake.calls
    )
    assert all(env is not None and "RB_TEST_SECRET_TOKEN" not in env for _, env in fake.calls)


def test_every_flake_command_asks_for_the_sandbox_without_fallback() -> None:
    backend = NixBackend(nix="nix")
    for command in ("print-dev-env", "flake metadata", "build", "develop"):
        argv = backend.nix_argv(command, "--json")
        joined = " ".join(argv)
        assert "--option sandbox true" in joined and "--option sandbox-fallback false" in joined
        assert argv.index(SANDBOXED_BUILDS[0]) < argv.index(command.split()[0])


def test_nix_env_is_an_allowlist() -> None:
    env = nix_env({"PATH": "/usr/bin", "NIX_CONFIG": "x", "AWS_SECRET_ACCESS_KEY": "k", "A": "b"})
    assert env == {"PATH": "/usr/bin", "NIX_CONFIG": "x"}


def test_error_line_is_the_last_error_one_line_redacted_and_bounded() -> None:
    tail = (
        "error:\n       … while evaluating\n        2| { x = 1; }\n"
        "       error: RBMARK ghp_" + "A" * 36 + " " + "z" * 500 + "\n\n"
    )
    line = error_line(CommandFailed("nix failed", returncode=1, stderr_tail=tail), environ={})
    assert line.startswith("error: RBMARK")
    assert "\n" not in line and len(line) <= 200
    assert "ghp_" + "A" * 36 not in line
    secret = "operator-secret-value-123456"
    leak = CommandFailed("x", returncode=1, stderr_tail=f"error: {secret}")
    assert secret not in error_line(leak, environ={"API_TOKEN": secret})
    assert error_line(CommandFailed("x", returncode=3, stderr_tail="2| code\n")) == (
        "nix exited with 3"
    )
