"""The nix backend's pinning and trust gates, with real Nix (reliability.md cases 5, 6, 7).

An unpinned or self-configuring flake is an environment-level verdict: the audit records
the reason and no run starts. An argv spy on :func:`reprobridge._proc.run` (the one place
that starts short commands) proves what rb asks Nix to do: never ``--accept-flake-config``,
and every call that reads the flake carries ``--no-update-lock-file --no-write-lock-file``,
so ``flake.lock`` is byte-for-byte what the repository committed after any audit.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from artifacts_helpers import NixRunner, nix_env

from reprobridge import _proc
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.backends import NIX_LOCK_ARGS, lock_drift
from reprobridge.audit.nixcalls import SANDBOXED_BUILDS

#: nix invocations that only probe the binary or the machine, or read flake.nix as plain,
#: restricted Nix (the nixConfig gate): they evaluate no flake.
_PROBES = ("--version", "show-config", "--expr", "restrict-eval")


class ArgvSpy:
    """Records the argv of every command rb runs through ``_proc.run`` (then runs it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[list[str]] = []
        real = _proc.run

        def spy(argv: Sequence[str], **kwargs: Any) -> _proc.Result:
            self.calls.append([str(a) for a in argv])
            return real(argv, **kwargs)

        monkeypatch.setattr(_proc, "run", spy)

    def nix_calls(self, binary: str) -> list[list[str]]:
        return [a for a in self.calls if Path(a[0]).name == binary]

    def flake_calls(self, binary: str) -> list[list[str]]:
        """nix calls that evaluate the flake (everything but version/config/expr probes)."""
        return [
            a
            for a in self.nix_calls(binary)
            if not any(p in a for p in _PROBES) and a[-2:] != ["config", "show"]
        ]

    def assert_safe(self, binary: str) -> None:
        """No call ever accepts the flake's nixConfig; every flake call keeps the lock and
        requires Nix's sandbox."""
        for argv in self.calls:
            assert "--accept-flake-config" not in argv, argv
            for i, arg in enumerate(argv[:-1]):
                if arg == "accept-flake-config":
                    assert argv[i + 1] == "false", argv
        for argv in self.flake_calls(binary):
            for flag in NIX_LOCK_ARGS:
                assert flag in argv, argv
            # Nix's build sandbox, without fallback, on every command that reads the flake.
            assert " ".join(SANDBOXED_BUILDS) in " ".join(argv), argv


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True)


@pytest.fixture
def offline_nix(nix: NixRunner, monkeypatch: pytest.MonkeyPatch) -> NixRunner:
    """``nix`` with this process's NIX_* settings made offline (substituters off)."""
    for k, v in nix_env(binary=nix.binary).items():
        if k.startswith("NIX_"):
            monkeypatch.setenv(k, v)
    return nix


@pytest.fixture
def tiny(tiny_repo: Callable[..., Path]) -> Path:
    """A committed repository after `rb init`: one experiment printing ``acc=0.9``, no
    Python packages, the generated flake.nix and flake.lock."""
    root = tiny_repo()
    assert (root / "flake.lock").is_file()
    return root


def _edit_lock(root: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads((root / "flake.lock").read_text())
    edit(data["nodes"]["nixpkgs"])
    (root / "flake.lock").write_text(json.dumps(data, indent=2) + "\n")


def _no_lock(root: Path) -> None:
    (root / "flake.lock").unlink()


def _no_narhash(root: Path) -> None:
    _edit_lock(root, lambda node: node["locked"].pop("narHash"))


def _indirect(root: Path) -> None:
    def edit(node: dict[str, Any]) -> None:
        node["original"] = {"id": "nixpkgs", "type": "indirect"}

    _edit_lock(root, edit)


def _nix_config(root: Path) -> None:
    flake = root / "flake.nix"
    text = flake.read_text()
    # A flake may ask Nix to trust another binary cache; with --accept-flake-config (or a
    # "yes" at the prompt) its builds could be substituted from there.
    hostile = (
        "{\n  nixConfig = {\n"
        '    extra-substituters = [ "https://cache.example.invalid" ];\n'
        '    extra-trusted-public-keys = [ "evil:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" ];\n'
        "  };\n"
    )
    flake.write_text(text.replace("{\n", hostile, 1))


def _nix_config_escaped(root: Path) -> None:
    """The same, spelled so that no text search finds it: Nix reads ``"nix\\Config"`` as
    ``nixConfig`` (an unknown escape is the character itself)."""
    flake = root / "flake.nix"
    hostile = (
        '{\n  "nix\\Config" = { extra-substituters = [ "https://cache.example.invalid" ]; };\n'
    )
    flake.write_text(flake.read_text().replace("{\n", hostile, 1))


GATES: dict[str, tuple[Callable[[Path], None], str]] = {
    "no-lock": (_no_lock, "environment not pinned: no flake.lock"),
    "no-narhash": (_no_narhash, "environment not pinned: input 'nixpkgs' has no narHash"),
    "indirect": (
        _indirect,
        "environment not pinned: input 'nixpkgs' is an indirect (registry) reference",
    ),
    "nixconfig": (_nix_config, "flake.nix sets nixConfig: refused"),
    "nixconfig-escaped": (_nix_config_escaped, "flake.nix sets nixConfig: refused"),
}


def _audit(root: Path, nix: NixRunner, **kw: Any) -> Any:
    return run_audit(
        root,
        AuditOptions(
            runs=1,
            backend="nix",
            nix_binary=nix.binary,
            nix_overrides={"nixpkgs": f"path:{nix.stub}"},
            **kw,
        ),
    )


@pytest.mark.parametrize("gate", sorted(GATES))
def test_unpinned_or_self_configuring_flake_is_refused_before_any_run(
    gate: str,
    offline_nix: NixRunner,
    tiny: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mutate, reason = GATES[gate]
    mutate(tiny)
    _git(tiny, "add", "-A")
    _git(tiny, "commit", "-qm", f"break the pin: {gate}")
    lock = tiny / "flake.lock"
    lock_before = lock.read_bytes() if lock.exists() else None
    spy = ArgvSpy(monkeypatch)

    result = _audit(tiny, offline_nix)

    v = result.summary["experiments"]["main"]
    assert not result.passed
    assert v["environment"]["status"] == "fail"
    assert reason in v["environment"]["reason"]
    env = json.loads((result.path / "environment.json").read_text())
    assert env["ok"] is False and reason in env["reason"]
    # No run started: the run is sealed as not started at the environment level, with no
    # logs and no timeline; and Nix was never asked to evaluate the flake.
    run = result.path / "runs/main/0"
    status = json.loads((run / "status.json").read_text())
    assert status["record"]["not_started"]["level"] == "environment"
    assert not (run / "stdout.log").exists() and not (run / "timeline.jsonl").exists()
    assert spy.flake_calls(offline_nix.binary) == []
    spy.assert_safe(offline_nix.binary)
    assert (lock.read_bytes() if lock.exists() else None) == lock_before


def test_stale_lock_fails_clearly_and_is_not_rewritten(
    offline_nix: NixRunner, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # flake.nix gains an input flake.lock does not have (a local one: no network needed).
    flake = tiny / "flake.nix"
    flake.write_text(
        flake.read_text().replace(
            "  inputs.nixpkgs.url",
            f'  inputs.extra = {{ url = "path:{offline_nix.stub}"; flake = false; }};\n'
            "  inputs.nixpkgs.url",
            1,
        )
    )
    _git(tiny, "commit", "-qam", "a new input, lock not updated")
    lock_before = (tiny / "flake.lock").read_bytes()
    spy = ArgvSpy(monkeypatch)

    result = _audit(tiny, offline_nix)

    v = result.summary["experiments"]["main"]
    assert v["environment"]["status"] == "fail"
    reason = v["environment"]["reason"]
    assert "flake.lock is stale against flake.nix (input 'extra' is not in flake.lock" in reason
    assert "\n" not in reason  # one line, for the report
    assert (tiny / "flake.lock").read_bytes() == lock_before
    assert (
        json.loads((result.path / "runs/main/0/status.json").read_text())["record"]["not_started"][
            "level"
        ]
        == "environment"
    )
    assert spy.flake_calls(offline_nix.binary), "nix was asked to evaluate the flake"
    spy.assert_safe(offline_nix.binary)


def test_pinned_flake_audits_and_every_nix_call_keeps_the_lock(
    offline_nix: NixRunner, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from artifacts_helpers import host_python

    lock_before = (tiny / "flake.lock").read_bytes()
    spy = ArgvSpy(monkeypatch)

    result = _audit(tiny, offline_nix, extra_ro_binds=(Path(host_python()).parents[1],))

    # The stub stands in for the locked nixpkgs: everything passes but the environment,
    # which is recorded as substituted (see test_artifacts_audit_nix.py).
    v = result.summary["experiments"]["main"]
    assert (v["procedure"]["status"], v["metric"]["status"]) == ("pass", "pass"), v
    assert v["environment"]["status"] == "incomplete", v
    assert result.summary["backend"] == "nix"
    calls = spy.flake_calls(offline_nix.binary)
    assert any("print-dev-env" in a for a in calls), spy.nix_calls(offline_nix.binary)
    spy.assert_safe(offline_nix.binary)
    assert (tiny / "flake.lock").read_bytes() == lock_before
    # The fingerprint describes the Nix that built the environment, not `nix` on PATH.
    version = subprocess.run(
        [offline_nix.binary, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    fingerprint = json.loads((result.path / "fingerprint/nix.json").read_text())
    assert fingerprint["version_line"] == version


def test_lock_drift_compares_nodes_except_overridden_inputs() -> None:
    def lock(**nodes: Any) -> dict[str, Any]:
        root = {"inputs": {k: k for k in nodes}}
        return {"nodes": {"root": root, **nodes}, "root": "root", "version": 7}

    pinned = {"locked": {"type": "github", "rev": "a" * 40, "narHash": "sha256-x"}}
    other = {"locked": {"type": "path", "path": "/nix/store/x", "narHash": "sha256-y"}}
    assert lock_drift(lock(nixpkgs=pinned), lock(nixpkgs=pinned)) == []
    assert lock_drift(lock(nixpkgs=pinned), lock(nixpkgs=other), ["nixpkgs"]) == []
    assert lock_drift(lock(nixpkgs=pinned), lock(nixpkgs=other)) == [
        "input 'nixpkgs' is locked differently"
    ]
    assert "input 'extra' is not in flake.lock" in lock_drift(
        lock(nixpkgs=pinned), lock(nixpkgs=pinned, extra=other)
    )
    assert "flake.lock has input 'extra', which flake.nix no longer declares" in lock_drift(
        lock(nixpkgs=pinned, extra=other), lock(nixpkgs=pinned)
    )


def _bundle_text(path: Path) -> str:
    """Every file of the bundle at ``path``, as one text (bytes decoded leniently)."""
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(path.rglob("*")) if p.is_file()
    )


def test_the_nixconfig_gate_reads_neither_the_environment_nor_host_files(
    offline_nix: NixRunner, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate evaluates flake.nix itself: impurely and with the operator's environment,
    a flake read secrets (``builtins.getEnv``) and host files, and a ``throw`` carried
    them into environment.json and audit.json as the verdict's reason. Now the evaluation
    is restricted, with an allowlisted environment, and its error is one bounded,
    redacted line."""
    secret = "sx-operator-value-0123456789"
    monkeypatch.setenv("SECRET_X", secret)
    host_file = tmp_path / "host-only.txt"
    host_file.write_text("HOSTFILE-CONTENT-42\n")
    flake = tiny / "flake.nix"
    hostile = (
        '{\n  nixConfig = { x = builtins.getEnv "SECRET_X"; };\n'
        '  "rb-${builtins.getEnv "SECRET_X"}" = 1;\n'
    )
    text = flake.read_text().replace("{\n", hostile, 1).rstrip()
    # The top level itself throws with what it read (forced by attrNames).
    flake.write_text(
        f'{text} // (throw "RBMARK ${{builtins.getEnv "SECRET_X"}} '
        f'${{builtins.readFile {host_file}}} {"x" * 1000}")\n'
    )
    _git(tiny, "commit", "-qam", "a flake that reads the environment and host files")

    result = _audit(tiny, offline_nix)

    reason = result.summary["experiments"]["main"]["environment"]["reason"]
    assert "could not be evaluated to check for nixConfig" in reason
    assert "\n" not in reason and len(reason) < 400, reason
    bundle = _bundle_text(result.path)
    assert secret not in bundle
    assert "HOSTFILE-CONTENT-42" not in bundle
    assert "x" * 300 not in bundle


def test_a_throw_from_the_nixconfig_gate_is_one_bounded_line(
    offline_nix: NixRunner, tiny: Path
) -> None:
    flake = tiny / "flake.nix"
    text = flake.read_text().rstrip()
    flake.write_text(f'{text} // (throw "RBMARK {"y" * 2000}\\nsecond line")\n')
    _git(tiny, "commit", "-qam", "a flake that throws a long message")

    result = _audit(tiny, offline_nix)

    reason = result.summary["experiments"]["main"]["environment"]["reason"]
    assert "RBMARK" in reason and "\n" not in reason and len(reason) < 400, reason
    assert "y" * 300 not in _bundle_text(result.path)
