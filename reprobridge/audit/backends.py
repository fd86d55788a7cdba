"""Where the audited environment comes from: a pinned Nix devShell, or the host.

Contract of a backend:

* ``prepare(root)`` checks the pinning gates and materializes the environment once, outside
  any sandbox, running no repository code (``nix print-dev-env`` evaluates and builds the
  pinned devShell; its ``shellHook`` is only read); it returns an :class:`EnvironmentState`
  whose ``ok``/``reason`` is the environment-level verdict (a gate that fails is a verdict,
  not an exception; ``not_judged`` when it failed because of this machine: Nix too old or
  offline for the pin, not the manifest's Python);
* ``setup_run(state, workspace, ctx)`` says how the run's environment is made: the run's
  variables, the paths it reads, and the :class:`SetupStep` s that may run repository-chosen
  code (a devShell's ``shellHook``; a PEP 517 build). The auditor runs those steps *in the
  run's sandbox* (cleared environment, no home, the run's binds, network only to fetch
  packages). The only thing ``setup_run`` itself runs on the host is uv installing wheels
  (``--no-build``: no package's code runs) with a cleared environment; it raises
  :class:`~reprobridge.errors.AuditError` with the reason when that fails;
* runs then execute with a *cleared* environment: these variables plus an allowlist.

The nix backend never passes ``--accept-flake-config``, refuses a flake with ``nixConfig``,
and never updates or writes the lock file. Every Nix command it runs gets
:func:`~reprobridge.audit.nixcalls.nix_env` (an allowlist, never the operator's whole
environment) and asks for Nix's build sandbox without fallback; where Nix would build
outside it anyway, ``prepare`` refuses with :class:`~reprobridge.errors.MachineError`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from packaging.utils import canonicalize_name

from reprobridge import _machine, _proc
from reprobridge.artifacts.datebound import (
    compile_probe,
    relaxation_flags,
    relaxation_notes,
    resolve_within_bound,
)
from reprobridge.artifacts.pyenv import sandboxed_uv
from reprobridge.audit.hostenv import (
    HostInstall,
    choose_index,
    pip_inputs,
    step_network_env,
)
from reprobridge.audit.nixcalls import (
    RESTRICTED_EVAL,
    SANDBOXED_BUILDS,
    error_line,
    machine_cause,
    nix_env,
    require_sandbox,
)
from reprobridge.audit.nixlock import Substitution, input_node, substitutions
from reprobridge.audit.offline import offline_install_argv, offline_requirements
from reprobridge.constants import FLAKE_FILE, FLAKE_LOCK_FILE, PYTHON_DIR
from reprobridge.errors import AuditError, CommandFailed, MachineError, ReproBridgeError
from reprobridge.manifest.schema import requirement_name

NIX_BASE_ARGS = ("--extra-experimental-features", "nix-command flakes")
#: Nix's system name of this machine's architecture (``uname -m``).
NIX_SYSTEMS = {"x86_64": "x86_64-linux", "aarch64": "aarch64-linux"}
NIX_LOCK_ARGS = ("--no-update-lock-file", "--no-write-lock-file")
SETUP_TIMEOUT = 1800.0
#: devShell variables that describe the build, not the environment a run needs.
_DEVSHELL_DENY = frozenset(
    {
        "HOME",
        "TMP",
        "TMPDIR",
        "TEMP",
        "TEMPDIR",
        "NIX_BUILD_TOP",
        "NIX_LOG_FD",
        "NIX_STORE",
        "NIX_BUILD_CORES",
        "out",
        "outputs",
        "builder",
        "shellHook",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "TERM",
        "name",
        "system",
        "args",
        "stdenv",
        "passAsFile",
        "IN_NIX_SHELL",
        "SSL_CERT_FILE",
    }
)


#: The flag that stops ``rb audit`` building packages without a wheel (in the run's sandbox).
NO_BUILD_FLAG = "--no-build"
#: Variables the environment a ``shellHook`` exports may not set for the run.
_HOOK_DENY = frozenset({"_", "RB_RUN_ID", "RB_RUN_MARKER"})
#: Most bytes of a ``shellHook``'s exported environment the auditor reads.
_HOOK_ENV_MAX = 1 << 20


@dataclass(frozen=True)
class SetupContext:
    """Where a run's environment is made: ``home`` is its empty HOME, ``scratch`` a
    directory for rb's own files of the run, ``cache`` the uv cache of sandboxed setup
    steps (private to the audit: a build in one run must not poison the operator's cache).
    All three lie next to the workspace, inside the directory the sandbox binds."""

    home: Path
    scratch: Path
    cache: Path


@dataclass(frozen=True)
class SetupStep:
    """A step of making the run's environment that may run repository-chosen code.

    Runs in the run's sandbox with exactly ``env``; ``network`` only to fetch packages;
    ``ro_binds``/``rw_binds`` add to the run's binds. With ``env_out``, the step writes
    the environment it ends with there (``env -0``), and the run continues from it, as
    ``nix develop`` runs the command in the shell its ``shellHook`` left.
    """

    what: str
    argv: tuple[str, ...]
    env: dict[str, str]
    network: bool
    ro_binds: tuple[Path, ...] = ()
    rw_binds: tuple[Path, ...] = ()
    env_out: Path | None = None
    #: A failure is recorded in the step's log and the run goes on (the repository's own
    #: project stays on PYTHONPATH only), instead of failing the run's environment.
    optional: bool = False
    #: Steps that run, in order, when this one fails (a different way to the same end);
    #: the run's environment fails only when one of them fails too. ``fallback_why`` says
    #: why they may succeed where the step did not (written to the step's log).
    fallback: tuple[SetupStep, ...] = ()
    fallback_why: str = ""


@dataclass(frozen=True)
class RunSetup:
    """The run's variables, the host paths it reads, and the steps that come first."""

    env: dict[str, str]
    ro_binds: tuple[Path, ...] = ()
    steps: tuple[SetupStep, ...] = ()
    #: Packages without a wheel that the steps build (in the sandbox), as far as known
    #: before they run (uv's log of the steps names every package it built).
    needs_build: tuple[str, ...] = ()


@dataclass
class EnvironmentState:
    """The materialized environment and the environment-level verdict."""

    backend: str
    ok: bool
    reason: str
    hermetic: bool
    base_env: dict[str, str] = field(default_factory=dict)
    setup_code: str | None = None
    ro_binds: tuple[Path, ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: Overridden flake inputs whose content is not the locked one (nix backend): the
    #: environment is then not the pinned one, never hermetic and never a pass.
    substituted: list[Substitution] = field(default_factory=list)
    #: Not ``ok`` because of this machine, not the repository (Nix missing, too old or
    #: offline for the pin; not the manifest's Python): the environment is not judged.
    not_judged: bool = False
    #: The Python the runs use when it is not the manifest's and the operator allowed it
    #: (``--python-mismatch-ok``): judged, but not in the environment asked for.
    python_mismatch: str = ""

    def not_judged_because(self, reason: str) -> EnvironmentState:
        """This state, not ok because this machine could not make it (``reason``)."""
        self.ok, self.not_judged, self.reason = False, True, reason
        return self


class AuditBackend(Protocol):
    """See the module docstring."""

    name: str

    def prepare(self, root: Path) -> EnvironmentState: ...

    def setup_run(
        self, state: EnvironmentState, workspace: Path, ctx: SetupContext
    ) -> RunSetup: ...

    def after_setup(
        self, setup: RunSetup, workspace: Path, ctx: SetupContext
    ) -> dict[str, str]: ...


def pinning_problems(root: Path) -> list[str]:
    """Why the flake at ``root`` is not pinned (empty when it is).

    Gates: flake.lock exists and parses; every input is locked with a narHash (and a rev
    for git/github); no indirect (registry) inputs; no path inputs outside the repository.
    (``nixConfig`` needs Nix to evaluate flake.nix: :meth:`NixBackend.nix_config_problem`.)
    """
    problems: list[str] = []
    flake = root / FLAKE_FILE
    if not flake.is_file():
        return [f"environment not pinned: no {FLAKE_FILE}"]
    lock = root / FLAKE_LOCK_FILE
    if not lock.is_file():
        return [*problems, f"environment not pinned: no {FLAKE_LOCK_FILE}"]
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
        nodes: dict[str, Any] = data["nodes"]
        root_node: object = data.get("root", "root")
    except (ValueError, KeyError, TypeError) as exc:
        return [*problems, f"{FLAKE_LOCK_FILE} is not a flake lock file ({exc})"]
    for name, node in sorted(nodes.items()):
        if name == root_node:
            continue
        locked = node.get("locked") if isinstance(node, dict) else None
        if not isinstance(locked, dict):
            problems.append(f"environment not pinned: input {name!r} is not locked")
            continue
        kind = locked.get("type")
        if kind == "indirect" or (node.get("original") or {}).get("type") == "indirect":
            problems.append(
                f"environment not pinned: input {name!r} is an indirect (registry) reference"
            )
        if "narHash" not in locked:
            problems.append(f"environment not pinned: input {name!r} has no narHash")
        if kind in {"github", "gitlab", "sourcehut", "git"} and "rev" not in locked:
            problems.append(f"environment not pinned: input {name!r} has no rev")
        if kind == "path":
            target = Path(str(locked.get("path", "")))
            if target.is_absolute() and not target.resolve().is_relative_to(root.resolve()):
                problems.append(f"input {name!r} is a path outside the repository: {target}")
    return problems


def _exported(variables: Mapping[str, object]) -> dict[str, str]:
    """The exported string variables of ``nix print-dev-env --json``'s ``variables``, in
    its order, but those in :data:`_DEVSHELL_DENY`."""
    env: dict[str, str] = {}
    for name, var in variables.items():
        if not isinstance(var, dict) or name in _DEVSHELL_DENY:
            continue
        fields = cast(Mapping[str, object], var)  # a JSON object: string keys
        value = fields.get("value")
        if fields.get("type") == "exported" and isinstance(value, str):
            env[name] = value
    return env


def lock_drift(committed: Any, resolved: Any, overridden: Iterable[str] = ()) -> list[str]:
    """How the lock Nix resolved differs from the committed one (empty: not stale).

    Compared: the set of nodes, each node's ``inputs`` and ``locked``. Nodes of inputs the
    auditor overrides (``--override-input``) are expected to differ and are skipped.
    """
    try:
        old: dict[str, Any] = committed["nodes"]
        new: dict[str, Any] = resolved["nodes"]
    except (KeyError, TypeError):
        return ["not a lock file"]
    skip = {input_node(resolved, name) for name in overridden} | {
        input_node(committed, name) for name in overridden
    }
    problems = [
        f"input {k!r} is not in {FLAKE_LOCK_FILE}" for k in sorted(set(new) - set(old) - skip)
    ]
    problems += [
        f"{FLAKE_LOCK_FILE} has input {k!r}, which {FLAKE_FILE} no longer declares"
        for k in sorted(set(old) - set(new) - skip)
    ]
    for key in sorted((set(old) & set(new)) - skip):
        a, b = old[key] or {}, new[key] or {}
        if a.get("inputs") != b.get("inputs"):
            problems.append(f"the inputs of {key!r} changed")
        elif a.get("locked") != b.get("locked"):
            problems.append(f"input {key!r} is locked differently")
    return problems


def operator_uv_cache() -> Path:
    """The operator's uv cache (``$UV_CACHE_DIR``, else ``~/.cache/uv``)."""
    return Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")


def _home_env(home: Path, uv_cache: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "UV_CACHE_DIR": str(uv_cache),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
    }


def read_env_dump(path: Path) -> dict[str, str]:
    """The variables of an ``env -0`` dump a setup step wrote (at most 1 MiB read; entries
    without ``=`` or that are not UTF-8 skipped; a missing file, a link or anything but a
    regular file: empty)."""
    # The file and its directory lie where the step (repository code) could write: never
    # follow a link it planted to a host file.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(path.parent, flags | os.O_DIRECTORY)
        try:
            fd = os.open(path.name, flags | os.O_NONBLOCK, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return {}
            raw = f.read(_HOOK_ENV_MAX)
    except OSError:
        return {}
    out: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if not sep or not name:
            continue
        try:
            out[name.decode()] = value.decode()
        except UnicodeDecodeError:
            continue
    return out


def merge_hook_env(
    env: dict[str, str], exported: dict[str, str], fixed: dict[str, str]
) -> dict[str, str]:
    """The run's environment after a ``shellHook``: what it ``exported`` over ``env``, minus
    build-only and auditor variables, with ``fixed`` (HOME, caches) the auditor's again."""
    kept = {
        k: v
        for k, v in exported.items()
        if k not in _DEVSHELL_DENY and k not in _HOOK_DENY and not k.startswith("RB_")
    }
    return {**env, **kept, **fixed}


class NixBackend:
    """The environment of the flake's devShell (``nix print-dev-env --json``)."""

    name = "nix"

    def __init__(
        self,
        *,
        overrides: dict[str, str] | None = None,
        nix: str = "nix",
        fetch_packages: bool = True,
        run: _machine.Runner = _machine.default_run,
    ) -> None:
        self.overrides = dict(overrides or {})
        self.nix = nix
        #: Runs ``nix config show`` for the sandbox check (a test's stand-in, or the real one).
        self.run = run
        #: Why the last :meth:`prepare` failed because of this machine ("" when it did not).
        self._machine_cause = ""
        #: The shellHook gets the network (to fetch the Python packages) only when the
        #: manifest lists some.
        self.fetch_packages = fetch_packages

    def nix_argv(self, command: str, *args: str) -> list[str]:
        """``nix <global flags> COMMAND <lock flags> <overrides> ARGS``: flakes on, the lock
        never updated or written, the operator's input overrides, never
        ``--accept-flake-config``, Nix's build sandbox required (:data:`SANDBOXED_BUILDS`).
        (Lock and override flags belong after the subcommand: Nix 2.8 rejects them before
        it.) ``COMMAND`` may be two words (``flake metadata``)."""
        argv = [self.nix, *NIX_BASE_ARGS, *SANDBOXED_BUILDS, *command.split(), *NIX_LOCK_ARGS]
        for name, url in sorted(self.overrides.items()):
            argv += ["--override-input", name, url]
        return [*argv, *args]

    def prepare(self, root: Path) -> EnvironmentState:
        if _proc.which(self.nix) is None:
            raise MachineError(
                f"{self.nix} is not installed", hint="use --backend host, or see `rb doctor`"
            )
        self.check_sandbox()
        state = EnvironmentState(self.name, ok=False, reason="", hermetic=True)
        self._machine_cause = ""
        state = self._materialize(root, state)
        if not state.ok and self._machine_cause:
            return state.not_judged_because(f"{self._machine_cause}: {state.reason}")
        return state

    def _nix_error(self, exc: CommandFailed) -> str:
        """:func:`error_line` of a failed Nix command; when the failure is this machine's
        (:func:`machine_cause`), the first such cause is kept for :meth:`prepare`."""
        if not self._machine_cause:
            self._machine_cause = machine_cause(exc, _machine.nix_version(self.nix)) or ""
        return error_line(exc)

    def _materialize(self, root: Path, state: EnvironmentState) -> EnvironmentState:
        """The pinning gates and the devShell (see the module docstring)."""
        if self.overrides:
            state.warnings.append(
                "inputs overridden by the auditor: "
                + ", ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
            )
        config = self.nix_config_problem(root) if (root / FLAKE_FILE).is_file() else None
        pinning = pinning_problems(root)
        if pinning:
            self._machine_cause = ""  # the pin itself is wrong, whatever this machine is
        problems = [*([config] if config else []), *pinning]
        if problems:
            state.reason = "; ".join(problems)
            return state
        lock_before = (root / FLAKE_LOCK_FILE).read_bytes()
        stale, resolved = self._stale_lock(root, lock_before)
        if stale:
            state.reason = stale
            return state
        state.substituted = substitutions(json.loads(lock_before), resolved, self.overrides)
        try:
            out = _proc.run(
                self.nix_argv("print-dev-env", "--json"),
                cwd=root,
                env=nix_env(),
                timeout=SETUP_TIMEOUT,
            )
        except CommandFailed as exc:
            state.reason = f"the devShell could not be built: {self._nix_error(exc)}"
            return state
        if (root / FLAKE_LOCK_FILE).read_bytes() != lock_before:
            state.reason = f"{FLAKE_LOCK_FILE} changed during evaluation"
            return state
        try:
            variables: dict[str, object] = json.loads(out.stdout)["variables"]
        except (ValueError, KeyError, TypeError) as exc:
            state.reason = f"unexpected `nix print-dev-env --json` output ({exc})"
            return state
        env = _exported(variables)
        if not env.get("PATH"):
            # A devShell without PATH: only the host's tools can run, so not hermetic.
            env["PATH"] = "/usr/bin:/bin"
            state.hermetic = False
            state.warnings.append("the devShell sets no PATH: runs use the host's /usr/bin:/bin")
        hook = variables.get("shellHook", {})
        state.setup_code = hook.get("value") if isinstance(hook, dict) else None
        state.base_env = env
        state.ro_binds = (Path("/nix/store"),)  # not /nix: the daemon socket lives there
        state.fingerprint = {
            "devshell_variables": sorted(env),
            "shellHook_present": bool(state.setup_code),
            "devshell_drv_path": self._devshell_drv_path(root),
        }
        state.ok, state.reason = True, "devShell materialized from the pinned flake"
        if state.substituted:
            state.hermetic = False
            state.reason = "devShell materialized with substituted inputs: " + "; ".join(
                s.describe() for s in state.substituted
            )
        return state

    def _devshell_drv_path(self, root: Path) -> str | None:
        """The devShell's ``drvPath`` (with the overrides): a fingerprint of the whole
        environment, unchanged by code edits. None when Nix cannot say (recorded as such)."""
        system = NIX_SYSTEMS.get(os.uname().machine)
        if system is None:
            return None
        attr = f".#devShells.{system}.default.drvPath"
        try:
            out = _proc.run(
                self.nix_argv("eval", "--raw", attr), cwd=root, env=nix_env(), timeout=SETUP_TIMEOUT
            )
        except CommandFailed:
            return None
        text = out.text.strip()
        return text if text.startswith("/nix/store/") and text.endswith(".drv") else None

    def check_sandbox(self) -> None:
        """Raise :class:`MachineError` when Nix would build the repository's derivations
        outside its sandbox although rb asks for it (:func:`sandbox_problem`)."""
        require_sandbox(self.run, self.nix, "see `rb doctor`, or use --backend host")

    def nix_config_problem(self, root: Path) -> str | None:
        """Why flake.nix is refused for its ``nixConfig`` (None when it has none).

        Nix itself decides by evaluating the file, so rb does too: the attribute names of
        the evaluated top level (``"nix\\Config"`` or ``${"nix" + "Config"}`` are
        ``nixConfig`` as well). The evaluation is restricted (:data:`RESTRICTED_EVAL`: only
        the repository's files, no environment, no URI, no build), with :func:`nix_env`;
        a flake.nix that does not evaluate is refused too, with Nix's error reduced to one
        redacted line (:func:`error_line`).
        """
        path = str((root / FLAKE_FILE).absolute())
        if any(ord(c) < 32 for c in path):
            return f"{FLAKE_FILE}: its path has control characters"
        argv = [
            self.nix,
            *NIX_BASE_ARGS,
            "eval",
            "--json",
            *RESTRICTED_EVAL,
            "-I",
            f"rbflake={root.absolute()}",
            "--file",
            path,
            "--apply",
            "builtins.attrNames",
        ]
        try:
            out = _proc.run(argv, cwd=root, env=nix_env(), timeout=SETUP_TIMEOUT)
            names: object = json.loads(out.stdout)
        except CommandFailed as exc:
            return f"{FLAKE_FILE} could not be evaluated to check for nixConfig: {self._nix_error(exc)}"
        except ValueError as exc:
            return f"unexpected `nix eval` output for {FLAKE_FILE} ({exc})"
        if not isinstance(names, list) or "nixConfig" in names:
            return (
                f"{FLAKE_FILE} sets nixConfig: refused "
                "(it can change substituters and trusted keys)"
            )
        return None

    def _stale_lock(self, root: Path, lock_bytes: bytes) -> tuple[str | None, dict[str, Any]]:
        """Why flake.lock does not lock what flake.nix declares (None when it does), and the
        lock Nix resolved (with the overrides; empty when it could not).

        ``--no-update-lock-file`` alone does not catch a stale lock: together with
        ``--no-write-lock-file`` (which the auditor always passes) Nix computes the missing
        entries in memory, fetches them and goes on, because it checks the no-update flag
        only on its way to writing. So the lock Nix resolves (``nix flake metadata``) is
        compared with the committed one, overridden inputs excepted.
        """
        try:
            out = _proc.run(
                self.nix_argv("flake metadata", "--json"),
                cwd=root,
                env=nix_env(),
                timeout=SETUP_TIMEOUT,
            )
            resolved = json.loads(out.stdout)["locks"]
            if not isinstance(resolved, dict):
                raise TypeError("locks is not an object")
        except CommandFailed as exc:
            return f"the flake's inputs could not be resolved: {self._nix_error(exc)}", {}
        except (ValueError, KeyError, TypeError) as exc:
            return f"unexpected `nix flake metadata --json` output ({exc})", {}
        drift = lock_drift(json.loads(lock_bytes), resolved, self.overrides)
        if not drift:
            return None, resolved
        return (
            f"environment not pinned: {FLAKE_LOCK_FILE} is stale against {FLAKE_FILE} "
            f"({'; '.join(drift)}); run `nix flake lock` and commit the lock file"
        ), resolved

    def setup_run(self, state: EnvironmentState, workspace: Path, ctx: SetupContext) -> RunSetup:
        fixed = _home_env(ctx.home, ctx.cache)
        env = {**state.base_env, **fixed}
        binds = (*state.ro_binds, ctx.cache)
        if not state.setup_code:
            return RunSetup(_with_venv(env, workspace / PYTHON_DIR / ".venv"), binds)
        # The devShell's shellHook is the repository's code: it runs in the run's sandbox
        # as the first step, and the run continues from the environment it exported.
        hook = ctx.scratch / "shellHook.sh"
        hook.write_text(state.setup_code, encoding="utf-8")
        dump = ctx.scratch / "shellHook.env"
        step = SetupStep(
            what="the devShell's shellHook",
            argv=(
                "bash",
                "-c",
                '. "$1"; s=$?; env -0 > "$2"; exit "$s"',
                "shellHook",
                str(hook),
                str(dump),
            ),
            env=env,
            network=self.fetch_packages,
            rw_binds=(ctx.cache,),
            env_out=dump,
        )
        return RunSetup(env, binds, (step,))

    def after_setup(self, setup: RunSetup, workspace: Path, ctx: SetupContext) -> dict[str, str]:
        """The run's variables once the steps of ``setup`` ran (see :class:`SetupStep`)."""
        env = setup.env
        for step in setup.steps:
            if step.env_out is not None:
                env = merge_hook_env(
                    env, read_env_dump(step.env_out), _home_env(ctx.home, ctx.cache)
                )
        if "VIRTUAL_ENV" in env:
            return env
        # The shellHook made this venv in the run's sandbox; the host never runs it.
        return _with_venv(env, workspace / PYTHON_DIR / ".venv")


def run_venv(scratch: Path) -> Path:
    """Where the host backend makes a run's venv: in the auditor's directory of the run
    (``scratch``), never in the workspace, whose ``repro/python/.venv`` the repository
    could have committed (uv executes a venv's interpreter to inspect it)."""
    return scratch / "venv"


def uv_project_env(scratch: Path) -> dict[str, str]:
    """What makes ``uv sync`` use :func:`run_venv` instead of the project's ``.venv``."""
    return {"UV_PROJECT_ENVIRONMENT": str(run_venv(scratch))}


def _with_venv(env: dict[str, str], venv: Path) -> dict[str, str]:
    """``env`` with ``venv`` activated (VIRTUAL_ENV, its bin first on PATH) when it exists."""
    if (venv / "bin" / "python").exists():
        env = {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"}
    return env


@dataclass(frozen=True)
class BuildPolicy:
    """Whether the host backend may build a package that has no wheel: only in the run's
    sandbox (the same isolation the experiment itself gets), and ``why_not`` when not."""

    allowed: bool
    why_not: str = ""


#: The host backend's policy when nothing is known about the sandbox: refuse.
NO_BUILDS = BuildPolicy(False, "no sandbox to build in")
#: What a build without isolation needs in the venv (isolation would have provided it).
_BUILD_TOOLS = ("setuptools", "wheel")
#: At most this many packages without a wheel are set aside before the sandboxed build.
_MAX_SET_ASIDE = 8


class HostBackend:
    """No Nix: this machine's Python, packages from the manifest with uv. Not hermetic.

    uv installs wheels (``--no-build``) on the host, with a cleared environment, from the
    operator's uv cache and without reading uv configuration files of the checkout
    (``--no-config``): no package's code runs there. When a package has no wheel and
    builds are allowed (:class:`BuildPolicy`: the default when runs are sandboxed), the
    host installs everything else, then a :class:`SetupStep` in the run's sandbox installs
    the rest, building it, with a uv cache private to the audit (a build's code could
    otherwise write into a cache another audit, or the operator, installs from).

    A venv the host filled with hard links into the operator's cache is read-only to the
    run (a write through a link would change the cache); one a sandboxed step writes into
    is filled by copying instead.
    """

    name = "host"

    def __init__(
        self,
        python_version: str,
        *,
        has_requirements: bool,
        builds: BuildPolicy = NO_BUILDS,
        install: HostInstall | None = None,
        offline: Path | None = None,
        install_project: bool = False,
        python_mismatch_ok: bool = False,
    ) -> None:
        self.python_version = python_version
        #: Use this rb's own Python when the host has none of the manifest's version
        #: (``--python-mismatch-ok``); otherwise the environment is not judged.
        self.python_mismatch_ok = python_mismatch_ok
        self.has_requirements = has_requirements
        self.builds = builds
        #: environment.install_project: install the repository's project in each run's
        #: sandbox (its metadata), when builds are allowed.
        self.install_project = install_project
        self.install = install or HostInstall()
        #: ``rb audit --offline``: install only from this wheels directory
        #: (:mod:`reprobridge.audit.offline`); the pinned lines, checked in prepare.
        self.offline = offline
        self._offline_lines: list[str] = []
        #: Whether the torch family comes from its routed index (decided in prepare).
        self._routed = False
        #: Without a lock: the exact pins resolved in a sandbox (decided in prepare).
        self._pinned: list[str] | None = None

    def _python(self, state: EnvironmentState) -> str:
        """The interpreter the runs use: the first candidate that runs, as the executable it
        reports (a pyenv shim resolved to the interpreter it starts; the fingerprint's
        ``python_via`` names the shim), else this rb's own interpreter."""
        for candidate in _machine.interpreter_candidates(self.python_version):
            probe = _machine.probe_interpreter(str(candidate))
            if probe.problem is None:
                if probe.executable is None or probe.executable == str(candidate):
                    return str(candidate)
                state.fingerprint["python_via"] = str(candidate)
                return probe.executable
            state.warnings.append(f"{candidate} is not used: {probe.problem}")
        mine = f"{sys.version_info.major}.{sys.version_info.minor}"
        if mine != self.python_version:
            mismatch = (
                f"the manifest asks for Python {self.python_version}; this machine has {mine} only"
            )
            if not self.python_mismatch_ok:
                state.not_judged_because(
                    f"{mismatch} (install Python {self.python_version}, or pass "
                    "--python-mismatch-ok to judge the runs under another Python)"
                )
            else:
                state.python_mismatch = f"{mismatch}: runs use {mine} (--python-mismatch-ok)"
                state.warnings.append(state.python_mismatch)
        return os.path.realpath(sys.executable)

    def _uv(self) -> list[str]:
        found = _machine.uv_binary()
        if found is None:
            raise MachineError(
                "uv is not installed: the host backend builds the Python environment with it",
                hint="reinstall rb (it depends on the `uv` package), or put `uv` on PATH",
            )
        return [found]

    def prepare(self, root: Path) -> EnvironmentState:
        state = EnvironmentState(self.name, ok=True, reason="", hermetic=False)
        python = self._python(state)
        if state.not_judged:
            return state  # nothing to install for a Python the runs cannot have
        state.base_env = {"PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin"}
        locked = (root / PYTHON_DIR / "uv.lock").is_file()
        index = choose_index(self.install) if self.has_requirements and not locked else None
        state.fingerprint = {
            **state.fingerprint,  # python_via, from _python
            "python": python,
            "uv": " ".join(self._uv()) if self.has_requirements else None,
            "builds": (
                "in the run's sandbox (packages without a wheel)"
                if self.builds.allowed
                else f"refused: {self.builds.why_not}"
            ),
            "uv_cache": str(operator_uv_cache()),
        }
        if index is not None and index.url is not None:
            state.fingerprint["torch_index"] = {
                "url": index.url,
                "used": index.routed,
                "fallback": index.fallback,
            }
            if index.fallback:
                state.warnings.append(index.fallback)
        self._routed = bool(index is not None and index.routed)
        self._pinned = None
        if (
            self.has_requirements
            and not locked
            and self.builds.allowed
            and self.offline is None
            and not self._routed
        ):
            self._resolve_in_sandbox(python, state)
        if self.install_project:
            state.fingerprint["own_project"] = (
                "installed editable without dependencies in each run's sandbox (a failed "
                "install leaves it on PYTHONPATH only: see the run's setup logs); imports "
                "from environment.pythonpath"
                if self.builds.allowed and self.offline is None
                else "on PYTHONPATH only (environment.pythonpath), not installed: its build "
                f"backend would run ({'--offline' if self.offline else self.builds.why_not})"
            )
        if self.offline is not None and self.has_requirements:
            # Fail fast, before any run: everything must be in the wheels directory.
            self._offline_lines = offline_requirements(root, self.offline, self.python_version)
            state.fingerprint["offline_wheels"] = str(self.offline)
        state.reason = (
            "host environment (not hermetic: no Nix pin for Python, libraries or compilers)"
        ) + (f"; {state.python_mismatch}" if state.python_mismatch else "")
        state.warnings.append(
            "not hermetic: the host backend pins only the Python packages (uv.lock)"
        )
        return state

    def _resolve_in_sandbox(self, python: str, state: EnvironmentState) -> None:
        """Without a lock, resolve once per audit in a sandbox, sdists allowed, and install
        the exact pins (:attr:`_pinned`) instead. Wheels-only resolution on the host silently
        backtracks past a release that has no wheel and takes everything that depends on it
        back years (a 2019 notebook stack got ipykernel 4.0, which cannot start a kernel);
        with every package pinned, the host's ``--no-build`` install cannot backtrack: a pin
        without a wheel is refused, set aside and built in the run's sandbox as before.
        Where the date bound leaves a package no release usable on this interpreter, the
        bound moves for that package (and its lock-step family) only, as in `rb init`'s
        lock (:func:`~reprobridge.artifacts.datebound.resolve_within_bound`); the evidence
        says which and why. On failure the audit goes on with the wheels-only resolution,
        and says so."""
        scratch = Path(tempfile.mkdtemp(prefix="rb-resolve-"))
        try:
            inputs = pip_inputs(self.install, scratch, routed=False)
            # `uv pip compile` takes its source file as an argument, not `-r`.
            if inputs[:1] == ["-r"]:
                inputs = inputs[1:]
            argv = [
                *self._uv(),
                "pip",
                "compile",
                "--quiet",
                "--no-progress",
                "--no-header",
                "--no-annotate",
                *inputs,
                "--python",
                python,
                "-o",
                str(scratch / "pinned.txt"),
            ]
            if len(argv) > 1 and not Path(argv[0]).is_absolute():
                raise CommandFailed(f"the sandbox needs the uv binary, not `{argv[0]}`")
            cache = scratch / ".uv-cache"
            cache.mkdir()

            def run(full: list[str]) -> _proc.Result:
                return sandboxed_uv(
                    full, scratch, python, step_network_env(), SETUP_TIMEOUT, cache=cache
                )

            bound = self.install.exclude_newer
            indexes = [a for url in self.install.indexes for a in ("--extra-index-url", url)]
            bounded = resolve_within_bound(
                lambda relaxed: run([*argv, *relaxation_flags(relaxed)]),
                bound,
                python=self.python_version,
                kept=dict(self.install.exclude_newer_package),
                probe=compile_probe(argv[0], scratch, bound, python, run, flags=indexes)
                if bound
                else None,
            )
            result = bounded.result
            pinned = scratch / "pinned.txt"
            if result.returncode != 0 or not pinned.is_file():
                tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
                raise CommandFailed(
                    f"uv pip compile exited {result.returncode}: {' | '.join(tail)}"
                )
            self._pinned = [
                line.strip()
                for line in pinned.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.lstrip().startswith(("#", "-"))
            ]
            state.fingerprint["resolution"] = (
                "in a sandbox (sdists allowed for their metadata); runs install the exact pins"
            )
            if bounded.relaxed and self.install.exclude_newer:
                notes = relaxation_notes(bounded.relaxed, self.install.exclude_newer)
                state.fingerprint["date_bound_relaxed"] = {
                    r.package: r.bound for r in bounded.relaxed
                }
                state.fingerprint["resolution_attempts"] = bounded.attempts
                state.warnings += notes
        except (CommandFailed, MachineError, AuditError, OSError) as exc:
            why = exc.message if isinstance(exc, ReproBridgeError) else str(exc)
            state.fingerprint["resolution"] = "wheels only, on the host"
            state.warnings.append(
                f"the requirements could not be resolved in a sandbox ({why}): resolved from "
                "wheels only, which picks an older release where the newest has no wheel"
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _pinned_inputs(self, scratch: Path, exclude: Iterable[str]) -> list[str]:
        """``-r pinned.txt --no-deps`` of :attr:`_pinned`, less ``exclude``d names."""
        assert self._pinned is not None
        skip = set(exclude)
        lines = [p for p in self._pinned if requirement_name(p) not in skip]
        scratch.mkdir(parents=True, exist_ok=True)
        path = scratch / "pinned.txt"
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        flags = ["-r", str(path), "--no-deps"]
        for url in self.install.indexes:
            flags += ["--extra-index-url", url]
        return flags

    def _uv_argv(
        self,
        uv: list[str],
        project: Path,
        python: str,
        scratch: Path,
        *,
        no_build: bool,
        exclude: Iterable[str] = (),
    ) -> list[list[str]]:
        """The uv commands that make the run's venv (:func:`run_venv` of ``scratch``):
        ``sync --frozen`` from ``project``'s uv.lock (run with :func:`uv_project_env`), else
        ``venv`` + ``pip install`` of the manifest's requirements (:func:`pip_inputs`,
        written to ``scratch``). ``exclude`` leaves packages out (set aside for a build).
        Every command names the interpreter: ``python`` (rb's choice) or the venv rb made
        from it, never one found in the workspace."""
        flags = ["--no-config", *(["--no-build"] if no_build else [])]
        if (project / "uv.lock").is_file():
            skip = [a for name in sorted(exclude) for a in ("--no-install-package", name)]
            return [
                [
                    *uv,
                    "sync",
                    *flags,
                    "--frozen",
                    *skip,
                    "--project",
                    str(project),
                    "--python",
                    python,
                ]
            ]
        venv = run_venv(scratch)
        inputs = (
            self._pinned_inputs(scratch, exclude)
            if self._pinned is not None
            else pip_inputs(self.install, scratch, routed=self._routed, exclude=exclude)
        )
        make = (
            []
            if (venv / "bin" / "python").exists()
            else [[*uv, "venv", "--quiet", "--no-config", "--python", python, str(venv)]]
        )
        return [
            *make,
            [*uv, "pip", "install", *flags, "--python", str(venv / "bin" / "python"), *inputs],
        ]

    def _host_install(
        self, uv: list[str], workspace: Path, scratch: Path, env: dict[str, str], **kw: Any
    ) -> None:
        """Run the uv commands of :meth:`_uv_argv` on the host (wheels only)."""
        python = str(kw.pop("python"))
        host_env = _proc.uv_env({**env, **uv_project_env(scratch)})
        project = workspace / PYTHON_DIR
        for argv in self._uv_argv(uv, project, python, scratch, no_build=True, **kw):
            _proc.run(argv, cwd=workspace, env=host_env, timeout=SETUP_TIMEOUT)

    def setup_run(self, state: EnvironmentState, workspace: Path, ctx: SetupContext) -> RunSetup:
        setup = self._packages(state, workspace, ctx)
        if not (self.install_project and self.builds.allowed and self.offline is None):
            return setup
        step, target = self._project_step(workspace, ctx, setup.env, state)
        env = {**setup.env, "PYTHONPATH": str(target)}
        return RunSetup(env, setup.ro_binds, (*setup.steps, step), setup.needs_build)

    def _project_step(
        self, workspace: Path, ctx: SetupContext, env: dict[str, str], state: EnvironmentState
    ) -> tuple[SetupStep, Path]:
        """The sandboxed uv command that installs the repository's own project, editable and
        without dependencies, into a directory of its own (``--target``): its metadata and
        editable hook only; the run imports the code from environment.pythonpath and finds
        the metadata on PYTHONPATH. It writes nothing into the venv, whose files may be
        hard links into the operator's uv cache."""
        uv = self._uv()
        if len(uv) != 1:
            raise AuditError(
                f"installing the project in the sandbox needs the uv binary (found only "
                f"`{' '.join(uv)}`)",
                hint="put uv on PATH, or pass --no-build",
            )
        binary = Path(os.path.realpath(uv[0]))
        target = ctx.scratch / "project"
        target.mkdir(parents=True, exist_ok=True)
        python = str(state.fingerprint.get("python"))
        argv = (str(binary), "pip", "install", "--no-config", "--no-deps", "--python", python,
                "--target", str(target), "--editable", str(workspace))  # fmt: skip
        step = SetupStep(
            what="uv (the repository's own project, editable, without dependencies)",
            argv=argv,
            env={
                **env,
                **step_network_env(),
                "UV_CACHE_DIR": str(ctx.cache),
                "UV_LINK_MODE": "copy",
            },
            network=True,
            ro_binds=(binary,),
            rw_binds=(ctx.cache, target),
            optional=True,
        )
        return step, target

    def _packages(self, state: EnvironmentState, workspace: Path, ctx: SetupContext) -> RunSetup:
        """The run's setup for the manifest's requirements (the venv)."""
        python = str(state.fingerprint.get("python"))
        prefix = Path(os.path.realpath(python)).parents[1]  # the interpreter's prefix
        cache = operator_uv_cache()
        env = {**state.base_env, **_home_env(ctx.home, cache), "UV_PYTHON_DOWNLOADS": "never"}
        binds = (*state.ro_binds, prefix, cache)
        if not self.has_requirements:
            return RunSetup(env, (*state.ro_binds, prefix))
        uv = self._uv()
        venv = run_venv(ctx.scratch)
        if self.offline is not None:
            self._offline_install(uv, workspace, ctx.scratch, env, python)
            return RunSetup(_with_venv(env, venv), (*binds, venv))
        try:
            self._host_install(uv, workspace, ctx.scratch, env, python=python)
            # Hard links into the operator's cache: read-only to the run.
            return RunSetup(_with_venv(env, venv), (*binds, venv))
        except CommandFailed as exc:
            refused = _proc.uv_refused_build(f"{exc.message}\n{exc.stderr_tail}")
            if refused is None or not self.builds.allowed:
                raise AuditError(_uv_failure(exc, self.builds)) from exc
        aside = self._set_aside(uv, workspace, ctx.scratch, env, python, refused)
        step = self._build_step(uv, workspace, ctx, env, python, aside)
        return RunSetup(_with_venv(env, venv), binds, (step,), needs_build=tuple(aside))

    def _offline_install(
        self, uv: list[str], workspace: Path, scratch: Path, env: dict[str, str], python: str
    ) -> None:
        """``--offline``: the venv from the wheels directory only (see audit/offline.py)."""
        assert self.offline is not None
        reqs = scratch / "offline-requirements.txt"
        reqs.write_text("".join(f"{line}\n" for line in self._offline_lines), encoding="utf-8")
        host_env = _proc.uv_env({**env, "UV_OFFLINE": "1"})
        venv = run_venv(scratch)
        for argv in offline_install_argv(uv, venv, python, self.offline, reqs):
            try:
                _proc.run(argv, cwd=workspace, env=host_env, timeout=SETUP_TIMEOUT)
            except CommandFailed as exc:
                raise AuditError(
                    f"--offline: the Python environment could not be made from "
                    f"{self.offline}: {exc.message}"
                ) from exc

    def _set_aside(
        self,
        uv: list[str],
        workspace: Path,
        scratch: Path,
        env: dict[str, str],
        python: str,
        first: str,
    ) -> list[str]:
        """Install on the host, from wheels and by copying, everything but the packages that
        have no wheel (found one uv refusal at a time); return those packages. What cannot
        be set aside (a dependency of a requirement) is left to the sandboxed step."""
        aside = [canonicalize_name(first)]
        copy_env = {**env, "UV_LINK_MODE": "copy"}
        while len(aside) <= _MAX_SET_ASIDE:
            try:
                self._host_install(uv, workspace, scratch, copy_env, python=python, exclude=aside)
                break
            except CommandFailed as exc:
                more = _proc.uv_refused_build(f"{exc.message}\n{exc.stderr_tail}")
                if more is None or canonicalize_name(more) in aside:
                    break
                aside.append(canonicalize_name(more))
        return sorted(aside)

    def _build_step(
        self,
        uv: list[str],
        workspace: Path,
        ctx: SetupContext,
        env: dict[str, str],
        python: str,
        aside: Iterable[str] = (),
    ) -> SetupStep:
        """The sandboxed uv command that installs everything, building what has no wheel.

        Its fallback, when that fails, builds the set-aside packages without build
        isolation, against the venv the host filled: a build that imports a runtime package
        its metadata does not declare (an sdist whose ``setup.py`` imports torch: "PyTorch
        is not installed, and must be installed prior to installing ...") fails in uv's
        isolated build environment and needs the venv's. setuptools and wheel, which
        isolation would have provided, are installed into the venv first. Both stay in
        the run's sandbox.
        """
        if len(uv) != 1:
            raise AuditError(
                f"building in the sandbox needs the uv binary (found only `{' '.join(uv)}`)",
                hint="put uv on PATH, or pass --no-build",
            )
        binary = Path(os.path.realpath(uv[0]))
        project = workspace / PYTHON_DIR
        venv = run_venv(ctx.scratch)
        commands = self._uv_argv([str(binary)], project, python, ctx.scratch, no_build=False)
        # Not --quiet: uv's `Built X` lines are the evidence of what was built.
        argv = [a for a in commands[-1] if a != "--quiet"]
        step = SetupStep(
            what="uv (building packages without a wheel)",
            argv=tuple(argv),
            env={
                **env,
                **step_network_env(),
                **uv_project_env(ctx.scratch),
                "UV_CACHE_DIR": str(ctx.cache),
                "UV_LINK_MODE": "copy",
            },
            network=True,
            ro_binds=(binary,),
            rw_binds=(ctx.cache, venv),
        )
        names = sorted(aside)
        if not names:
            return step
        venv_python = str(venv / "bin" / "python")
        tools = (str(binary), "pip", "install", "--no-config", "--python", venv_python)
        unisolated = [a for n in names for a in ("--no-build-isolation-package", n)]
        return dataclasses.replace(
            step,
            fallback=(
                dataclasses.replace(
                    step,
                    what="uv (setuptools and wheel, for builds without isolation)",
                    argv=(*tools, *_BUILD_TOOLS),
                    optional=True,
                ),
                dataclasses.replace(
                    step,
                    what="uv (building packages without a wheel, without build isolation)",
                    argv=(*argv, *unisolated),
                ),
            ),
            fallback_why=(
                f"building {', '.join(names)} without build isolation, against the packages "
                "already in the venv (a build that imports one, such as torch, fails isolated)"
            ),
        )

    def after_setup(self, setup: RunSetup, workspace: Path, ctx: SetupContext) -> dict[str, str]:
        return _with_venv(setup.env, run_venv(ctx.scratch))


def _uv_failure(exc: CommandFailed, builds: BuildPolicy = NO_BUILDS) -> str:
    """One line for a failed uv command; names the package uv refused to build."""
    full = f"{exc.message}\n{exc.stderr_tail}"
    text = " ".join(str(exc.message).split())
    name = _proc.uv_refused_build(full)
    if name:
        return (
            f"{name} has no wheel and building it would run its build code: refused "
            f"({builds.why_not}); rb audit builds such packages in the run's sandbox when "
            f"runs are sandboxed and {NO_BUILD_FLAG} is not given"
        )
    return f"the Python environment could not be made with uv: {text}"
