"""Host probing shared by ``rb doctor``, the auditor and the agent: Nix, bubblewrap, NVML, uv.

One place for the facts about this machine that several packages read, so they cannot
disagree: the bubblewrap path, the oldest Nix current nixpkgs accepts, how a Nix version
is read, how ``nix config show`` is parsed, which uv runs, and how pynvml's errors are
classified.

Contract: nothing here raises for a missing or broken tool. A probe returns None or a
one-line reason; callers turn that into a doctor row, a fingerprint field or a backend
choice. Commands run through :mod:`reprobridge._proc` (or an injected :class:`Runner`
with the same contract, so tests never depend on the machine they run on). NVML is a
pynvml-shaped object (the real ``pynvml`` module by default, a fake in tests).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack

from reprobridge import _proc
from reprobridge.errors import CommandFailed, MachineError

#: bubblewrap by absolute path: a ``bwrap`` earlier on PATH may be a wrapper that drops
#: the isolation the sandbox's argv asks for.
BWRAP = "/usr/bin/bwrap"
#: nixpkgs 25.11 and later refuse older Nix (``lib/minfeatures.nix``).
MIN_NIX = (2, 18)


class Where(TypedDict, total=False):
    """Where a :class:`Runner` runs its command, each key optional: ``cwd`` (the working
    directory; the runner's own choice when absent or None) and ``env`` (the whole
    environment; the process's own when absent or None). Declared once, for the protocol,
    its implementations and what forwards to them."""

    cwd: Path | None
    env: Mapping[str, str] | None


class Runner(Protocol):
    """Runs ``argv`` like :func:`reprobridge._proc.run` with ``check=False``.

    Raises :class:`MachineError` when the program does not exist or cannot be executed and
    :class:`CommandFailed` on a timeout; a non-zero exit is a normal result.
    """

    def __call__(
        self, argv: Sequence[str], *, timeout: float, **where: Unpack[Where]
    ) -> _proc.Result: ...


def default_run(argv: Sequence[str], *, timeout: float, **where: Unpack[Where]) -> _proc.Result:
    """The real :class:`Runner`: :func:`reprobridge._proc.run`, stdin empty."""
    cwd, env = where.get("cwd"), where.get("env")
    try:
        # stdin is empty: nothing we run may stop to ask a question (nix asks about
        # nixConfig when stdin is a terminal).
        return _proc.run(argv, cwd=cwd, env=env, timeout=timeout, check=False, input=b"")
    except PermissionError as exc:  # _proc maps only FileNotFoundError; a non-executable is as bad
        raise MachineError(f"{argv[0]} cannot be executed: {exc.strerror}") from exc


def try_run(run: Runner, argv: Sequence[str], timeout: float) -> _proc.Result | str:
    """The result of ``argv``, or a one-line reason it could not run at all."""
    try:
        return run(argv, timeout=timeout)
    except (MachineError, CommandFailed) as exc:
        return str(exc)


def last_error_line(result: _proc.Result) -> str:
    """The last non-blank line of stderr (else stdout), at most 200 characters."""
    text = result.stderr.decode("utf-8", "replace").strip() or result.text.strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else f"exit {result.returncode}"


# -- Nix ------------------------------------------------------------------------------------


def parse_version(text: str) -> tuple[int, ...] | None:
    """The last ``X.Y[.Z]`` in ``text`` as a tuple: ``nix (Nix) 2.8.0`` -> ``(2, 8, 0)``.

    The last one, because forks name themselves first: ``nix (Determinate Nix 3.6.2) 2.29.0``.
    """
    found = re.findall(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not found:
        return None
    return tuple(int(part) for part in found[-1] if part != "")


def dotted(version: tuple[int, ...]) -> str:
    """``(2, 18, 1)`` -> ``"2.18.1"``."""
    return ".".join(map(str, version))


def nix_version(nix: str = "nix", run: Runner = default_run) -> tuple[int, int] | None:
    """(major, minor) of ``nix`` (a name on PATH or a path), or None when it is missing,
    does not answer, or prints no version."""
    if _proc.which(nix) is None:
        return None
    got = try_run(run, [nix, "--version"], 30.0)
    if isinstance(got, str) or got.returncode != 0:
        return None
    version = parse_version(got.text)
    return (version[0], version[1]) if version else None


def nix_config(run: Runner, version: tuple[int, ...], timeout: float) -> dict[str, str] | str:
    """``nix config show`` as a dict (the subcommand this ``version`` knows), or a one-line
    reason it could not be read. ``run`` is called with the program named ``nix``."""
    # `nix config show` replaced `nix show-config` in 2.20; 2.8 knows only the latter.
    sub = ["config", "show"] if version[:2] >= (2, 20) else ["show-config"]
    got = try_run(run, ["nix", "--extra-experimental-features", "nix-command", *sub], timeout)
    if isinstance(got, str):
        return got
    if got.returncode != 0:
        return last_error_line(got)
    config: dict[str, str] = {}
    for line in got.text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            config[key.strip()] = value.strip()
    return config


# -- uv -------------------------------------------------------------------------------------


def uv_package_binary() -> str | None:
    """The binary of the ``uv`` package rb depends on (``uv.find_uv_bin()``), or None."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return None


def uv_binary() -> str | None:
    """The uv executable rb uses: the one of the ``uv`` package rb depends on (its version is
    the one rb was installed and tested with), else ``uv`` on PATH; None when neither exists.

    One rule for every caller (``rb init``'s lock, the host backend, ``rb doctor`` through
    its probes), so they cannot disagree about which uv runs.
    """
    return uv_package_binary() or _proc.which("uv")


# -- NVML -----------------------------------------------------------------------------------


def nvml_text(value: Any) -> str:
    """A string NVML returned (older nvidia-ml-py returns bytes, newer str) or an error."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlMemory(Protocol):
    """``nvmlDeviceGetMemoryInfo``'s answer (bytes)."""

    @property
    def total(self) -> int: ...
    @property
    def used(self) -> int: ...


class NvmlUtilization(Protocol):
    """``nvmlDeviceGetUtilizationRates``'s answer (percent)."""

    @property
    def gpu(self) -> int: ...


class Nvml(Protocol):
    """The part of pynvml rb reads (the real module, or a test's fake). Strings may come
    back as bytes (older nvidia-ml-py): read them with :func:`nvml_text`. Optional
    queries (MIG, ECC, power limit) are looked up by name, as not every version has them."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str | bytes: ...
    def nvmlSystemGetCudaDriverVersion(self) -> int: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]: ...
    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetUUID(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> NvmlMemory: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> NvmlUtilization: ...
    def nvmlDeviceGetPowerUsage(self, handle: object) -> int: ...
    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int: ...


@dataclass(frozen=True)
class NvmlErrors:
    """pynvml's error classes: ``base`` catches every NVML error; ``unavailable`` the ones
    that mean "no usable driver here" (no library, driver not loaded, no permission)."""

    base: tuple[type[BaseException], ...]
    unavailable: tuple[type[BaseException], ...]


def nvml_errors(nvml: Nvml) -> NvmlErrors:
    """pynvml's error classes, looked up on the module (or fake) in use."""
    base: tuple[type[BaseException], ...] = (getattr(nvml, "NVMLError", Exception),)
    names = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded", "NVMLError_NoPermission")
    unavailable = tuple(getattr(nvml, n) for n in names if hasattr(nvml, n)) or base
    return NvmlErrors(base=base, unavailable=unavailable)


def load_nvml(nvml: Nvml | None = None) -> Nvml | None:
    """``nvml`` when given, else the real ``pynvml`` module, else None (not installed)."""
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError:
        return None
    module: Nvml = pynvml
    return module


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", path.name)[:3])


def interpreter_candidates(version: str, path_env: str | None = None) -> list[Path]:
    """Where a Python ``version`` (``X.Y``) may be, best first: ``pythonX.Y`` on PATH, then
    pyenv's installed versions (``$PYENV_ROOT/versions/X.Y.*``), then uv's managed ones
    (``$UV_PYTHON_INSTALL_DIR`` or ``~/.local/share/uv/python``), newest patch first."""
    out: list[Path] = []
    exe = f"python{version}"
    for d in (path_env if path_env is not None else os.environ.get("PATH", "")).split(":"):
        if d and (Path(d) / exe).is_file():
            out.append(Path(d) / exe)
    home = Path.home()
    pyenv = Path(os.environ.get("PYENV_ROOT") or home / ".pyenv") / "versions"
    uv_dir = Path(os.environ.get("UV_PYTHON_INSTALL_DIR") or home / ".local/share/uv/python")
    for root, pattern in ((pyenv, f"{version}.*"), (uv_dir, f"cpython-{version}.*")):
        try:
            found = sorted(root.glob(pattern), key=_version_key, reverse=True)
        except OSError:
            continue
        out += [p / "bin" / exe for p in found if (p / "bin" / exe).is_file()]
    return list(dict.fromkeys(out))


#: Seconds an interpreter gets to start and exit (``-c pass``) before it counts as broken.
INTERPRETER_CHECK_TIMEOUT = 20


@dataclass(frozen=True)
class InterpreterProbe:
    """What starting an interpreter once said: ``problem`` (None when it runs) and the
    ``executable`` it reports (``sys.executable``: what a pyenv shim or a wrapper script
    ends up running; None when it does not run or reports no usable path)."""

    problem: str | None
    executable: str | None = None


#: Prints the interpreter's own path (the probe's only output).
_PRINT_EXECUTABLE = "import sys; sys.stdout.write(sys.executable or '')"


def probe_interpreter(python: str) -> InterpreterProbe:
    """Start ``python`` once in a cleared environment (within
    :data:`INTERPRETER_CHECK_TIMEOUT`): whether it runs and which executable it is. A pyenv
    shim for a version that is not installed is found on PATH but exits non-zero; choosing
    it only fails later. A working shim resolves to the interpreter it starts, so whoever
    runs it again (every audited run, each package listing) need not pay the shim's
    process chain each time: about twenty processes, 0.5-1.2 s on a loaded machine."""
    try:
        result = _proc.run(
            [python, "-I", "-c", _PRINT_EXECUTABLE],
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            timeout=INTERPRETER_CHECK_TIMEOUT,
            check=False,
        )
    except (CommandFailed, MachineError) as exc:
        return InterpreterProbe(f"it does not run ({exc.message})")
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        return InterpreterProbe(
            f"`{python} -c pass` exited {result.returncode}" + (f" ({tail[0]})" if tail else "")
        )
    reported = result.stdout.decode("utf-8", "replace")
    path = Path(reported)
    usable = path.is_absolute() and path.is_file() and os.access(path, os.X_OK)
    return InterpreterProbe(None, str(path) if usable and "\n" not in reported else None)


def interpreter_problem(python: str) -> str | None:
    """Why ``python`` cannot be used (None when it runs: :func:`probe_interpreter`)."""
    return probe_interpreter(python).problem


def first_working_interpreter(version: str) -> str | None:
    """The first of :func:`interpreter_candidates` that runs (:func:`interpreter_problem`),
    or None: what the audit's host backend and `rb init`'s lock both use for ``X.Y``."""
    for candidate in interpreter_candidates(version):
        if interpreter_problem(str(candidate)) is None:
            return str(candidate)
    return None
