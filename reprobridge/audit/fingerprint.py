"""Fingerprints of what an audit ran on: host, GPUs, Nix, git, Python packages, environment.

Contract: every function returns a JSON-ready dict and never raises for a missing or
broken tool; what could not be read is recorded in the dict (``"error"`` keys, a GPU
``state``), because "NVML unavailable" or "nix not installed" is evidence, not a crash.
Commands run through :mod:`reprobridge._proc` (the one module that starts processes);
git through :func:`reprobridge._proc.git`, hardened against a hostile ``.git/config``,
which switches off the filter and diff drivers the repository's config names.
Runners and NVML are injectable for tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from reprobridge import _machine, _proc
from reprobridge._machine import Runner
from reprobridge.artifacts.flake import parse_flake_lock
from reprobridge.audit.nixcalls import SANDBOXED_BUILDS, nix_runner
from reprobridge.errors import CommandFailed, MachineError
from reprobridge.evidence.redact import scrub_env

#: Untracked files listed in the git fingerprint beyond which only the count is kept.
MAX_UNTRACKED_LISTED = 1000
#: nix config keys recorded (what decides how hermetic and trusted builds are).
NIX_CONFIG_KEYS = (
    "sandbox",
    "substituters",
    "trusted-public-keys",
    "system-features",
    "experimental-features",
)


def _err(result: _proc.Result) -> str:
    text = result.stderr.decode("utf-8", "replace").strip() or result.text.strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # nix ends with "(use '--show-trace' ...)" after the line that says what went wrong.
    errors = [line for line in lines if line.startswith("error:")]
    chosen = errors[-1] if errors else lines[-1] if lines else f"exit {result.returncode}"
    return chosen[:300]


# -- host ---------------------------------------------------------------------------------


def _cpu_model(cpuinfo: Path) -> str | None:
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or None
    # x86 says "model name", some ARM kernels "Model" or "Hardware" or "cpu model".
    for key in ("model name", "cpu model", "Model", "Hardware", "Processor"):
        match = re.search(rf"^{re.escape(key)}\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or None


def _os_release(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("PRETTY_NAME", "NAME", "ID", "VERSION_ID", "VERSION_CODENAME"):
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def host_fingerprint(
    *, cpuinfo: Path = Path("/proc/cpuinfo"), os_release: Path = Path("/etc/os-release")
) -> dict[str, Any]:
    """CPU model and cores (logical, physical), memory, OS, kernel and Python of this host."""
    import psutil  # type: ignore[import-untyped,unused-ignore]  # no stubs in the test extra

    cpu: dict[str, Any] = {"model": _cpu_model(cpuinfo)}
    out: dict[str, Any] = {"cpu": cpu}
    try:
        cpu["logical_cores"] = psutil.cpu_count(logical=True)
        cpu["physical_cores"] = psutil.cpu_count(logical=False)
    except Exception as exc:  # psutil raises its own errors in containers without /sys
        cpu["error"] = str(exc)
    try:
        out["memory_bytes"] = int(psutil.virtual_memory().total)
    except Exception as exc:
        out["memory_bytes"] = None
        out["memory_error"] = str(exc)
    out["os"] = _os_release(os_release) or {"name": platform.system()}
    uname = os.uname()
    out["kernel"] = {
        "sysname": uname.sysname,
        "release": uname.release,
        "version": uname.version,
        "machine": uname.machine,
    }
    out["python"] = {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }
    return out


# -- GPUs ---------------------------------------------------------------------------------


def _nvml_state(exc: BaseException, nvml: _machine.Nvml) -> tuple[str, str]:
    """A short state and a message for an error NVML raised while starting."""
    text = _machine.nvml_text(exc)
    mismatch: type[BaseException] | None = getattr(nvml, "NVMLError_LibRmVersionMismatch", None)
    if (mismatch is not None and isinstance(exc, mismatch)) or "mismatch" in text.lower():
        return "driver-library-mismatch", f"Driver/library version mismatch ({text})"
    for name, state in (
        ("NVMLError_LibraryNotFound", "no-driver"),
        ("NVMLError_DriverNotLoaded", "no-driver"),
        ("NVMLError_NoPermission", "no-permission"),
    ):
        cls: type[BaseException] | None = getattr(nvml, name, None)
        if cls is not None and isinstance(exc, cls):
            return state, f"no NVIDIA driver ({text})" if state == "no-driver" else text
    return "error", f"NVML failed to start: {text}"


def _optional(
    nvml: _machine.Nvml, errors: _machine.NvmlErrors, fn_name: str, *args: object
) -> object:
    """An NVML query that some GPUs or drivers do not support: the value, or None."""
    fn: Callable[..., object] | None = getattr(nvml, fn_name, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except errors.base:
        return None


def _mode(value: object) -> dict[str, int] | None:
    # MIG and ECC queries answer (current, pending).
    if isinstance(value, list | tuple) and len(value) == 2:
        return {"current": int(value[0]), "pending": int(value[1])}
    return None


def _cuda_tuple(text: str) -> tuple[int, ...] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def cuda_driver_problem(cuda: str | None, gpu: Mapping[str, Any]) -> str | None:
    """Why this host's driver cannot run a program built against CUDA ``cuda`` (the
    manifest's ``environment.cuda``), from :func:`gpu_fingerprint`'s ``gpu``: the driver
    supports CUDA up to its ``cuda_driver_version``, and a newer toolkit's programs fail at
    their first CUDA call. None when it can, when nothing is pinned, or when NVML could not
    tell (no driver is the GPU check's finding, not this one)."""
    if not cuda:
        return None
    pinned = _cuda_tuple(cuda)
    driver = gpu.get("cuda_driver_version")
    supported = _cuda_tuple(driver) if isinstance(driver, str) else None
    if pinned is None or supported is None or pinned <= supported:
        return None
    return (
        f"the NVIDIA driver {gpu.get('driver_version') or '(unknown version)'} supports CUDA "
        f'up to {driver}, but reprobridge.toml pins environment.cuda = "{cuda}"'
    )


def gpu_fingerprint(nvml: _machine.Nvml | None = None) -> dict[str, Any]:
    """NVIDIA driver, CUDA driver API version and every GPU, read through NVML.

    ``nvml`` is a pynvml-shaped object (:mod:`reprobridge._machine`'s injectable NVML boundary); None imports
    ``pynvml``. ``state`` is ``ok``, ``no-gpu`` (a driver but no GPU), ``no-pynvml``,
    ``no-driver``, ``driver-library-mismatch``, ``no-permission``, ``error`` (NVML failed
    to start) or ``partial`` (it failed part-way; what was read is kept). Per GPU: index,
    name, memory_bytes, compute_capability, uuid, and where the GPU and driver support them
    mig_mode, ecc_mode (``{current, pending}``, 1 = enabled) and power_limit_mw.
    """
    gpus: list[dict[str, Any]] = []
    out: dict[str, Any] = {
        "state": "ok",
        "error": None,
        "driver_version": None,
        "cuda_driver_version": None,
        "gpus": gpus,
    }
    nvml = _machine.load_nvml(nvml)
    if nvml is None:
        out.update(state="no-pynvml", error="the pynvml module (nvidia-ml-py) is not installed")
        return out
    errors = _machine.nvml_errors(nvml)
    try:
        nvml.nvmlInit()
    except errors.base as exc:
        state, message = _nvml_state(exc, nvml)
        out.update(state=state, error=message)
        return out
    try:
        out["driver_version"] = _machine.nvml_text(nvml.nvmlSystemGetDriverVersion())
        cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
        # NVML encodes CUDA 12.4 as 12040.
        out["cuda_driver_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            power = _optional(nvml, errors, "nvmlDeviceGetPowerManagementLimit", handle)
            gpus.append(
                {
                    "index": index,
                    "name": _machine.nvml_text(nvml.nvmlDeviceGetName(handle)),
                    "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                    "compute_capability": f"{major}.{minor}",
                    "uuid": _machine.nvml_text(nvml.nvmlDeviceGetUUID(handle)),
                    "mig_mode": _mode(_optional(nvml, errors, "nvmlDeviceGetMigMode", handle)),
                    "ecc_mode": _mode(_optional(nvml, errors, "nvmlDeviceGetEccMode", handle)),
                    "power_limit_mw": int(power) if isinstance(power, int | float) else None,
                }
            )
    except errors.base as exc:
        out.update(
            state="partial",
            error=f"NVML failed after {len(gpus)} GPU(s): {_machine.nvml_text(exc)}",
        )
    finally:
        # The fingerprint is complete; a failing shutdown changes nothing in it.
        with contextlib.suppress(*errors.base):
            nvml.nvmlShutdown()
    if out["state"] == "ok" and not gpus:
        out["state"] = "no-gpu"
    return out


# -- nix ----------------------------------------------------------------------------------


def _flake_lock(root: Path) -> dict[str, Any]:
    path = root / "flake.lock"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {"sha256": None, "error": "no flake.lock"}
    except OSError as exc:
        return {"sha256": None, "error": f"cannot read flake.lock: {exc.strerror or exc}"}
    out: dict[str, Any] = {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}
    try:
        out.update(parse_flake_lock(json.loads(raw)))
    except ValueError as exc:
        out["error"] = f"flake.lock is not valid JSON: {exc}"
    return out


def _nix_system(run: Runner, timeout: float) -> str | None:
    try:
        got = run(
            [
                "nix",
                "--extra-experimental-features",
                "nix-command",
                "eval",
                "--raw",
                "--impure",
                "--expr",
                "builtins.currentSystem",
            ],
            timeout=timeout,
        )
    except (MachineError, CommandFailed):
        return None
    return got.text.strip() or None if got.returncode == 0 else None


def nix_fingerprint(
    root: Path,
    run: Runner = _machine.default_run,
    *,
    devshell: bool = False,
    system: str | None = None,
    timeout: float = 30.0,
    devshell_timeout: float = 300.0,
    nix: str = "nix",
) -> dict[str, Any]:
    """Nix version and trust-relevant config, the flake.lock pins, and optionally the
    devShell's derivation path.

    ``nix`` is the binary the audit uses (``--nix-binary``): the fingerprint must describe
    the Nix that built the environment, not whichever ``nix`` comes first on PATH.

    ``flake_lock`` is always read (no nix needed): its sha256 and each input's pins.
    When ``nix`` is missing, ``available`` is False and no other nix command is tried. The
    devShell ``drvPath`` (``nix eval --raw .#devShells.<system>.default.drvPath``) is
    evaluated only with ``devshell=True``: it can be slow, or fail offline; the error is
    recorded. Nix is never told to accept the flake's ``nixConfig``.
    """
    out: dict[str, Any] = {"flake_lock": _flake_lock(root)}
    # Every call gets the allowlisted environment; the devShell's is an evaluation of the
    # repository's flake.
    run = nix_runner(run, nix)
    try:
        got = run(["nix", "--version"], timeout=timeout)
    except (MachineError, CommandFailed) as exc:
        out.update(available=False, error=str(exc))
        return out
    if got.returncode != 0:
        out.update(available=False, error=_err(got))
        return out
    line = got.text.strip().splitlines()[0] if got.text.strip() else ""
    version = _machine.parse_version(line)
    out.update(
        available=True, version=".".join(map(str, version)) if version else None, version_line=line
    )
    config = _machine.nix_config(run, version or (0, 0), timeout)
    if isinstance(config, str):
        out["config"] = {"error": config}
    else:
        out["config"] = {key: config.get(key) for key in NIX_CONFIG_KEYS}
    if devshell:
        out["devshell"] = _devshell(root, run, system, timeout, devshell_timeout)
    return out


def _devshell(
    root: Path, run: Runner, system: str | None, timeout: float, devshell_timeout: float
) -> dict[str, Any]:
    system = system or _nix_system(run, timeout)
    if system is None:
        return {"drv_path": None, "error": "cannot tell the nix system (builtins.currentSystem)"}
    attr = f".#devShells.{system}.default.drvPath"
    argv = [
        "nix",
        "--extra-experimental-features",
        "nix-command flakes",
        "--option",
        "accept-flake-config",
        "false",
        *SANDBOXED_BUILDS,
        "eval",
        "--raw",
        "--no-write-lock-file",
        attr,
    ]
    try:
        got = run(argv, timeout=devshell_timeout, cwd=root)
    except (MachineError, CommandFailed) as exc:
        return {"system": system, "drv_path": None, "error": str(exc)}
    if got.returncode != 0:
        return {"system": system, "drv_path": None, "error": _err(got)}
    return {"system": system, "drv_path": got.text.strip()}


# -- git ----------------------------------------------------------------------------------


def git_fingerprint(root: Path, *, timeout: float = 120) -> dict[str, Any]:
    """Commit, branch, dirty flag, a hash of uncommitted changes and the untracked files.

    ``diff_sha256`` is the SHA-256 of ``git diff HEAD --binary`` (tracked changes, staged
    or not; None when clean); ``untracked`` lists untracked, not-ignored files (at most
    :data:`MAX_UNTRACKED_LISTED`; ``untracked_count`` is the full count). ``dirty`` is true
    when either exists. Every git call goes through :func:`reprobridge._proc.git` (no
    fsmonitor, hooks, pager or external diff from the repository's config) and also
    disables the repository's filter and textconv drivers, so no repository-controlled
    program runs.
    """
    out: dict[str, Any] = {"commit": None, "branch": None, "dirty": None}
    try:
        inside = _proc.git(root, "rev-parse", "--is-inside-work-tree", check=False, timeout=timeout)
    except (MachineError, CommandFailed) as exc:
        out["error"] = str(exc)
        return out
    if inside.returncode != 0 or inside.text.strip() != "true":
        out["error"] = f"not a git work tree: {_err(inside)}"
        return out
    try:
        commit = out["commit"] = _proc.head_commit(root, timeout=timeout)
        branch = _proc.git(
            root, "symbolic-ref", "--short", "-q", "HEAD", check=False, timeout=timeout
        )
        out["branch"] = branch.text.strip() if branch.returncode == 0 else None  # None: detached
        changed: list[str]
        if commit is not None:
            diff_args = ["diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv", "--no-color"]
            diff = _proc.git(root, *diff_args, timeout=timeout)
            out["diff_sha256"] = hashlib.sha256(diff.stdout).hexdigest() if diff.stdout else None
            out["diff_bytes"] = len(diff.stdout)
            names = _proc.git(
                root,
                "diff",
                "HEAD",
                "--name-only",
                "-z",
                "--no-ext-diff",
                "--no-textconv",
                timeout=timeout,
            )
            changed = sorted(n for n in names.text.split("\0") if n)
        else:
            # No commit yet: everything staged is uncommitted; hash the index's view of it.
            staged = _proc.git(root, "ls-files", "-s", "-z", timeout=timeout)
            out["diff_sha256"] = (
                hashlib.sha256(staged.stdout).hexdigest() if staged.stdout else None
            )
            out["diff_bytes"] = len(staged.stdout)
            changed = sorted(
                entry.split("\t", 1)[1] for entry in staged.text.split("\0") if "\t" in entry
            )
        out["changed"] = changed
        untracked = _proc.git(
            root, "ls-files", "--others", "--exclude-standard", "-z", timeout=timeout
        )
        files = sorted(n for n in untracked.text.split("\0") if n)
        out["untracked"] = files[:MAX_UNTRACKED_LISTED]
        out["untracked_count"] = len(files)
        out["dirty"] = bool(changed or files)
    except (MachineError, CommandFailed) as exc:
        out["error"] = str(exc)
    return out


# -- Python packages ----------------------------------------------------------------------

#: Runs inside the experiment's Python (any Python 3 from 3.6: the syntax stays that old,
#: as date-bounded environments of 2018-2019 code run 3.7); prints one JSON object.
#: The current directory (the run's workspace) is taken off ``sys.path`` before anything
#: is imported, so that a file there cannot stand in for a module the listing imports; the
#: distributions are still looked for there, as the run's Python would find them.
#: Python 3.8+ finds them with importlib.metadata; an older one has no importlib.metadata,
#: so the listing reads what it would: each path entry's ``*.dist-info/METADATA`` and
#: ``*.egg-info`` (a directory's ``PKG-INFO``, or the file itself).
#: ``--search`` adds where it looked (:mod:`reprobridge.audit.pkglisting` keys on it).
_LIST_PACKAGES = """\
import sys
cwd = sys.path.pop(0) if sys.path and sys.path[0] == "" else None
import email, json, os
try:
    from importlib import metadata
except ImportError:
    metadata = None
path = sys.path if cwd is None else [cwd] + sys.path
def _read(where, name):
    try:
        with open(os.path.join(where, name) if name else where, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None
def _texts():
    if metadata is not None:
        for dist in metadata.distributions(path=path):
            yield dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("")
        return
    for entry in path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            where = os.path.join(entry or ".", name)
            if name.endswith(".dist-info"):
                yield _read(where, "METADATA")
            elif name.endswith(".egg-info"):
                yield _read(where, "PKG-INFO") if os.path.isdir(where) else _read(where, "")
seen = set()
for text in _texts():
    # What dist.metadata["Name"] and dist.version read (the same files, in the same
    # order), parsed by the same email parser, but only up to the blank line that ends the
    # headers: the long description after it made the listing 2-3x slower.
    text = text or ""
    end = text.find("\\n\\n")
    headers = email.message_from_string(text if end < 0 else text[: end + 1])
    name = headers["Name"]
    if name:
        seen.add((name, headers["Version"] or ""))
out = {
    "python": sys.version.split()[0],
    "executable": sys.executable,
    "prefix": sys.prefix,
    "packages": [{"name": n, "version": v} for n, v in sorted(seen, key=lambda p: (p[0].lower(), p[1]))],
}
if "--search" in sys.argv[1:]:
    import site
    out["search"] = {
        "path": [p or os.getcwd() for p in path],
        "cwd": os.getcwd(),
        "user_site": site.getusersitepackages() if site.ENABLE_USER_SITE else None,
    }
print(json.dumps(out))
"""


def python_packages(
    python: str,
    env: Mapping[str, str],
    *,
    run: Runner = _machine.default_run,
    timeout: float = 120.0,
    search: bool = False,
) -> dict[str, Any]:
    """Name and version of every distribution installed for ``python`` in ``env``.

    Runs ``python -c`` with exactly ``env`` (the run environment; ``python`` is looked up
    on its ``PATH``) from ``/``; the current directory's modules never stand in for the
    ones the listing imports. Packages are sorted by name (case-insensitive), then
    version. On failure the dict has ``error`` and an empty ``packages``. ``search``: the
    dict also has ``search``, where the interpreter looked (``path``: ``sys.path`` with the
    current directory as a path, ``cwd``, ``user_site``), which is not evidence.
    """
    base: dict[str, Any] = {"python": None, "executable": None, "packages": []}
    argv = [python, "-c", _LIST_PACKAGES, *(["--search"] if search else [])]
    try:
        got = run(argv, timeout=timeout, cwd=Path("/"), env=env)
    except (MachineError, CommandFailed) as exc:
        return {**base, "error": str(exc)}
    if got.returncode != 0:
        return {**base, "error": f"{python} exited {got.returncode}: {_err(got)}"}
    try:
        data: object = json.loads(got.text)
    except ValueError:
        return {**base, "error": f"unexpected output from {python}: {got.text[:200]!r}"}
    if not isinstance(data, dict):
        return {**base, "error": f"unexpected output from {python}: {got.text[:200]!r}"}
    return {**base, **data}


# -- environment --------------------------------------------------------------------------


def env_snapshot(env: Mapping[str, str], allowlist: Iterable[str]) -> dict[str, Any]:
    """The run's environment as stored: every name; values only where
    :func:`reprobridge.evidence.redact.scrub_env` keeps them (allowlisted by fnmatch
    pattern, not secret-looking, and with secret patterns redacted inside)."""
    return {"variables": scrub_env(env, tuple(allowlist)), "allowlist": sorted(set(allowlist))}
