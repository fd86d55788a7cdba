"""What this machine can do for ReproBridge: nix, flakes, sandboxing, uv, git, GPUs, disk.

Contract: :func:`run_checks` never raises for a missing or broken tool; every probe turns
what it finds into :class:`Check` rows (``ok``, ``warn`` or ``missing``), and every row that
is not ``ok`` carries a concrete ``fix``. Nothing here prints; ``rb doctor`` renders the rows.

Every side effect goes through :class:`Probes` (a command runner, ``which``, NVML, disk
usage), so tests inject fakes and never depend on the machine they run on. Commands run
through :mod:`reprobridge._proc`; NVML is read through a pynvml-shaped object (the real
``pynvml`` module by default) whose errors are mapped here, at one boundary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reprobridge import _machine, _proc, _tarsafe, sandbox
from reprobridge._machine import (
    BWRAP,
    MIN_NIX,
    NvmlErrors,
    Runner,
    nvml_errors,
    nvml_text,
    parse_version,
)
from reprobridge._machine import dotted as _dotted
from reprobridge._machine import last_error_line as _err_line
from reprobridge.audit.nixcalls import sandbox_problem

Status = Literal["ok", "warn", "missing"]

#: Checks whose absence makes ``rb doctor --strict`` fail: without them rb cannot do its job.
REQUIRED: frozenset[str] = frozenset({"python", "nix", "git"})
#: Each check's statuses that stop an audit (``rb doctor --strict`` fails on them too): a
#: Nix too old for current pins (``nix`` warn), one that cannot evaluate flakes, reach its
#: store or be made to build in its sandbox, no working bubblewrap (runs would not be
#: isolated), no uv (the host backend cannot make an environment).
BLOCKS_AUDIT: dict[str, frozenset[str]] = {
    "python": frozenset({"missing"}),
    "nix": frozenset({"missing", "warn"}),
    "flakes": frozenset({"missing"}),
    "nix-store": frozenset({"missing"}),
    "nix-sandbox": frozenset({"missing"}),
    "bubblewrap": frozenset({"missing", "warn"}),
    "uv": frozenset({"missing"}),
    "git": frozenset({"missing"}),
}
#: Below this much free space in the working directory a CUDA closure will not fit.
MIN_FREE_DISK_BYTES = 10 * 10**9

#: The Nix to install, in words: :data:`MIN_NIX` is the one place the number is.
_NIX_AT_LEAST = f"Nix >= {_dotted(MIN_NIX)}"
_NIX_UPGRADE_FIX = (
    f"install {_NIX_AT_LEAST}: the official installer "
    "(`curl -L https://nixos.org/nix/install | sh -s -- --daemon`), or on Debian 12 unpack "
    "Debian 13's nix-bin beside 2.8 with tools/nix-trixie-install.sh"
)


@dataclass(frozen=True)
class Check:
    """One row of the doctor's report.

    ``fix`` is a command or instruction for the user; it is set whenever ``status`` is not
    ``ok``. ``facts`` holds the structured values behind ``detail`` (versions, GPU memory)
    for ``--json`` readers; its keys are stable.
    """

    name: str
    status: Status
    detail: str
    fix: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (its fields, in order)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Probes:
    """The doctor's window on the machine; every field has a real default and a test fake.

    ``nvml`` is a pynvml-shaped object (``nvmlInit``, ``nvmlDeviceGetCount``, ... and
    raising ``pynvml.NVMLError`` subclasses); None means "import the real pynvml".
    """

    run: Runner = _machine.default_run
    which: Callable[[str], str | None] = _proc.which
    #: The ``uv`` package's binary (``_machine.uv_package_binary``); None: not installed.
    uv_package: Callable[[], str | None] = _machine.uv_package_binary
    is_executable: Callable[[str], bool] = lambda path: os.access(path, os.X_OK)
    nvml: _machine.Nvml | None = None
    disk_usage: Callable[[Path], Any] = shutil.disk_usage
    cwd: Path = field(default_factory=Path.cwd)
    python_version: tuple[int, int, int] = (
        sys.version_info.major,
        sys.version_info.minor,
        sys.version_info.micro,
    )
    python_executable: str = sys.executable
    tar_filters: bool = field(default_factory=_tarsafe.has_filters)
    timeout: float = 20.0
    #: The host's NVIDIA driver libraries (``ldconfig -p``: :func:`reprobridge.sandbox.gpu_binds`).
    driver_libraries: Callable[[], tuple[str, ...]] = lambda: sandbox.gpu_binds().libraries
    #: NixOS's driver directory (:data:`reprobridge.sandbox.OPENGL_DRIVER`).
    opengl_driver: Path = Path(sandbox.OPENGL_DRIVER)
    #: Who asks Nix to sandbox its builds, and with which ``NIX_REMOTE``
    #: (:func:`~reprobridge.audit.nixcalls.sandbox_problem`).
    uid: int = field(default_factory=os.geteuid)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def next_step_after_init(experiment: str, nix_checks: Sequence[Check]) -> str:
    """The command to suggest after `rb init`, one that works on this machine.

    ``nix_checks`` are :func:`nix_for_next_step`'s (or :func:`check_nix`'s) rows.
    ``nix run .#reproduce-<exp>`` only when this Nix can evaluate current nixpkgs (>= 2.18, :data:`MIN_NIX`), with
    the experimental-features flag spelled out when nix.conf does not enable flakes;
    otherwise the host run, which works everywhere, and how to get a Nix that does.
    """
    rows = {c.name: c for c in nix_checks}
    nix = rows.get("nix")
    version = parse_version(str(nix.facts.get("version") or "")) if nix and nix.facts else None
    if version is not None and version[:2] >= MIN_NIX:
        flakes = rows.get("flakes")
        if flakes is not None and flakes.facts.get("enabled"):
            return f"nix run .#reproduce-{experiment}   (or: less REPRODUCE.md)"
        if flakes is not None and flakes.facts.get("supported"):
            return (
                f"nix --extra-experimental-features 'nix-command flakes' run "
                f".#reproduce-{experiment}   (flakes are not enabled in nix.conf)"
            )
    have = (
        "no nix here"
        if version is None and (nix is None or nix.status == "missing")
        else f"nix {nix.facts.get('version') if nix else '?'} here cannot evaluate the pin"
    )
    return (
        f"rb run {experiment} --backend host   ({have}; for `nix run .#reproduce-{experiment}` "
        f"{_NIX_UPGRADE_FIX})"
    )


def run_checks(probes: Probes | None = None) -> list[Check]:
    """Every check, in report order. Never raises for what the machine lacks."""
    p = probes or Probes()
    checks: list[Check] = [check_python(p)]
    checks += check_nix(p)
    checks += [check_bwrap(p), check_uv(p), check_git(p)]
    checks += check_gpus(p)
    checks.append(check_nix_driver(p))
    checks.append(check_slurm(p))
    checks.append(check_disk(p))
    return checks


def missing_required(checks: Sequence[Check]) -> list[Check]:
    """The rows of :data:`REQUIRED` tools that are missing."""
    return [c for c in checks if c.name in REQUIRED and c.status == "missing"]


def audit_blockers(checks: Sequence[Check]) -> list[Check]:
    """The rows that would stop an audit here (:data:`BLOCKS_AUDIT`): what ``--strict``
    fails on."""
    return [c for c in checks if c.status in BLOCKS_AUDIT.get(c.name, frozenset())]


# -- helpers --------------------------------------------------------------------------------


def _try(p: Probes, argv: Sequence[str]) -> _proc.Result | str:
    """The result of ``argv``, or a one-line reason it could not run at all."""
    return _machine.try_run(p.run, argv, p.timeout)


def _run_ok(p: Probes, argv: Sequence[str]) -> _proc.Result | str:
    """The result of ``argv`` when it ran and exited 0, else a one-line reason why not."""
    got = _try(p, argv)
    return got if isinstance(got, str) or got.returncode == 0 else _err_line(got)


def _first_line(result: _proc.Result) -> str:
    text = (result.stdout or result.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else f"exit {result.returncode}"


# -- probes ---------------------------------------------------------------------------------


#: The oldest Python rb runs on: every 3.11 release, 3.11.0-3.11.3 (Debian 12's 3.11.2)
#: included, since rb's tar extraction needs no tarfile filters (reprobridge._tarsafe).
MIN_PYTHON = (3, 11)


def check_python(p: Probes) -> Check:
    """The interpreter rb runs on (the experiments' Python comes from the flake, not this).

    ``missing`` below :data:`MIN_PYTHON` (rb cannot run there); else ``ok``, noting when
    tarfile has no extraction filters (before 3.11.4), which rb does not need.
    """
    version = _dotted(p.python_version)
    minimum = _dotted(MIN_PYTHON)
    facts: dict[str, Any] = {
        "version": version,
        "executable": p.python_executable,
        "minimum": minimum,
        "tar_filters": p.tar_filters,
    }
    if p.python_version[:2] < MIN_PYTHON:
        return Check(
            "python",
            "missing",
            f"{version}: rb needs Python {minimum} or newer",
            f"install rb with Python {minimum}+ (any {minimum}.x release works)",
            facts,
        )
    note = "" if p.tar_filters else "; no tarfile filters (before 3.11.4): rb checks members itself"
    return Check("python", "ok", f"{version} ({p.python_executable}){note}", None, facts)


def check_nix(p: Probes) -> list[Check]:
    """``nix`` and its version, then flakes, the store and the sandbox setting."""
    first = _nix_row(p)
    if isinstance(first, list):
        return first
    nix, version = first
    return [nix, *_nix_config_checks(p, version or (0, 0))]


def nix_for_next_step(p: Probes) -> list[Check]:
    """The rows :func:`next_step_after_init` reads: ``nix``, and ``flakes`` only where this
    nix is new enough (:data:`MIN_NIX`) for the suggestion to be ``nix run``.

    :func:`check_nix` without the probes whose answers the suggestion never uses (the
    store, the sandbox setting; flakes under MIN_NIX): each is a nix start, and `rb init`
    on a small repository paid four of them to print one line.
    """
    first = _nix_row(p)
    if isinstance(first, list):
        return first
    nix, version = first
    if version is None or version[:2] < MIN_NIX:
        return [nix]
    return [nix, _flakes_check(p, _machine.nix_config(p.run, version, p.timeout))]


def _nix_row(p: Probes) -> list[Check] | tuple[Check, tuple[int, ...] | None]:
    """The ``nix`` row and the version it read; the final rows when nix is missing or
    does not run."""
    path = p.which("nix")
    if path is None:
        fix = (
            f"install {_NIX_AT_LEAST}: `curl -L https://nixos.org/nix/install | sh -s -- --daemon`"
        )
        return [
            Check("nix", "missing", "nix is not on PATH (rb can still write the flake)", fix),
            Check("flakes", "missing", "needs nix", fix),
            Check("nix-store", "missing", "needs nix", fix),
        ]
    got = _run_ok(p, ["nix", "--version"])
    if isinstance(got, str):
        reason = got
        return [Check("nix", "missing", f"{path} does not run: {reason}", _NIX_UPGRADE_FIX)]
    line = _first_line(got)
    version = parse_version(line)
    facts: dict[str, Any] = {"path": path, "version": _dotted(version) if version else None}
    if version is None:
        nix = Check("nix", "warn", f"cannot read a version in {line!r}", _NIX_UPGRADE_FIX, facts)
    elif version[:2] < MIN_NIX:
        newer = p.which("nix-trixie")
        also = f"; {newer} is a newer Nix beside it" if newer else ""
        nix = Check(
            "nix",
            "warn",
            f"{_dotted(version)} ({path}): nixpkgs 25.11+ needs {_NIX_AT_LEAST}, so only flakes "
            f"pinned to nixos-25.05 or older evaluate with it{also}",
            _NIX_UPGRADE_FIX,
            facts,
        )
    else:
        nix = Check("nix", "ok", f"{_dotted(version)} ({path})", None, facts)
    return nix, version


def _flakes_check(p: Probes, config: dict[str, str] | str) -> Check:
    """The ``flakes`` row: enabled in nix.conf, else whether this nix evaluates them when
    asked to (``--extra-experimental-features``)."""
    enable = "add `experimental-features = nix-command flakes` to ~/.config/nix/nix.conf"
    features = config.get("experimental-features", "").split() if isinstance(config, dict) else []
    if "flakes" in features:
        return Check("flakes", "ok", "enabled in nix.conf", None, {"enabled": True})
    # Not enabled by config: does this nix support them at all when asked to?
    got = _try(
        p,
        [
            "nix",
            "--extra-experimental-features",
            "nix-command flakes",
            "eval",
            "--expr",
            "builtins ? getFlake",
        ],
    )
    if not isinstance(got, str) and got.returncode == 0 and got.text.strip() == "true":
        return Check(
            "flakes",
            "warn",
            "supported but not enabled in nix.conf; rb passes "
            "--extra-experimental-features itself, `nix run .#...` by hand needs them",
            enable,
            {"enabled": False, "supported": True},
        )
    reason = got if isinstance(got, str) else _err_line(got)
    return Check(
        "flakes",
        "missing",
        f"this nix cannot evaluate flakes: {reason}",
        _NIX_UPGRADE_FIX,
        {"enabled": False, "supported": False},
    )


def _nix_config_checks(p: Probes, version: tuple[int, ...]) -> list[Check]:
    config = _machine.nix_config(p.run, version, p.timeout)
    rows: list[Check] = [_flakes_check(p, config)]
    rows.append(_nix_store_check(p, version))
    if isinstance(config, dict) and "sandbox" in config:
        sandbox = config["sandbox"]
        problem = sandbox_problem(config, uid=p.uid, environ=p.environ)
        if sandbox == "true":
            rows.append(Check("nix-sandbox", "ok", "sandbox = true", None, {"sandbox": sandbox}))
        elif problem is not None:
            # The nix backend refuses to build a repository's derivations here.
            rows.append(
                Check(
                    "nix-sandbox",
                    "missing",
                    problem,
                    "set `sandbox = true` in /etc/nix/nix.conf and restart the daemon, or "
                    "audit with --backend host",
                    {"sandbox": sandbox},
                )
            )
        else:
            rows.append(
                Check(
                    "nix-sandbox",
                    "warn",
                    f"sandbox = {sandbox}: builds can read host paths, so they are less "
                    "hermetic (Debian's nix-bin ships it off)",
                    "set `sandbox = true` in /etc/nix/nix.conf where the kernel allows it "
                    "(multi-user install); rb audits record the setting either way",
                    {"sandbox": sandbox},
                )
            )
    elif isinstance(config, str):
        # The nix backend refuses when it cannot tell whether builds are sandboxed.
        rows.append(
            Check("nix-sandbox", "missing", f"cannot read nix config: {config}", _NIX_UPGRADE_FIX)
        )
    return rows


def _nix_store_check(p: Probes, version: tuple[int, ...]) -> Check:
    # `nix store info` replaced `nix store ping` in 2.19.
    sub = "info" if version[:2] >= (2, 19) else "ping"
    got = _run_ok(p, ["nix", "--extra-experimental-features", "nix-command", "store", sub])
    if isinstance(got, str):
        reason = got
        return Check(
            "nix-store",
            "missing",
            f"the Nix store is not reachable: {reason}",
            "start the daemon (`sudo systemctl start nix-daemon`) or check /nix permissions",
        )
    # 2.8 logs "Store URL: ..." on stderr, newer versions print it on stdout.
    both = (got.text + "\n" + got.stderr.decode("utf-8", "replace")).splitlines()
    url = next((ln.split(":", 1)[1].strip() for ln in both if ln.startswith("Store URL:")), "?")
    kind = "through the daemon" if url == "daemon" or url.startswith("unix:") else "directly"
    return Check("nix-store", "ok", f"{url} (reached {kind})", None, {"url": url})


def check_bwrap(p: Probes) -> Check:
    """bubblewrap by absolute path (PATH may hold a wrapper), and whether namespaces work."""
    if not p.is_executable(BWRAP):
        return Check(
            "bubblewrap",
            "missing",
            f"{BWRAP} not found: audits cannot isolate runs from the host",
            "apt-get install bubblewrap (or your distribution's bubblewrap package)",
        )
    got = _run_ok(p, [BWRAP, "--ro-bind", "/", "/", "true"])
    if isinstance(got, str):
        reason = got
        return Check(
            "bubblewrap",
            "warn",
            f"{BWRAP} cannot create a sandbox (user namespaces?): {reason}",
            "allow unprivileged user namespaces: `sysctl kernel.unprivileged_userns_clone=1`, "
            "or on Ubuntu 24.04+ `sysctl kernel.apparmor_restrict_unprivileged_userns=0`",
            {"path": BWRAP, "works": False},
        )
    return Check("bubblewrap", "ok", f"{BWRAP} (user namespaces work)", None, {"path": BWRAP})


def check_slurm(p: Probes) -> Check:
    """Slurm's client commands and what ``sinfo`` reports: partitions, their state and GPUs
    (``%G``: the generic resources ``--gres=gpu:N`` asks for). Optional: only
    ``rb audit --executor slurm`` needs it."""
    if p.which("sbatch") is None or p.which("sinfo") is None:
        return Check(
            "slurm",
            "warn",
            "sbatch/sinfo not on PATH: `rb audit --executor slurm` is unavailable here",
            "run rb on a cluster login node (or install slurm-client for a configured cluster)",
            {"available": False},
        )
    got = _run_ok(p, ["sinfo", "-h", "-o", "%P %a %D %G"])
    if isinstance(got, str):
        reason = got
        return Check(
            "slurm",
            "warn",
            f"sinfo fails: {reason}",
            "check that slurmctld is reachable (`scontrol ping`) and munge runs",
            {"available": False},
        )
    partitions: list[dict[str, str]] = []
    for line in got.text.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            partitions.append(
                {"name": parts[0], "state": parts[1], "nodes": parts[2], "gres": parts[3]}
            )
    gpus = [x["name"] for x in partitions if "gpu" in x["gres"]]
    detail = (
        ", ".join(
            f"{x['name']} ({x['state']}, {x['nodes']} node(s), gres {x['gres']})"
            for x in partitions
        )
        or "no partitions"
    )
    detail += "; GPUs configured in: " + (", ".join(gpus) if gpus else "none")
    return Check("slurm", "ok", detail, None, {"available": True, "partitions": partitions})


def check_uv(p: Probes) -> Check:
    """The uv rb runs (:func:`reprobridge._machine.uv_binary`'s rule): the ``uv`` package's
    binary, else ``uv`` on PATH."""
    path = p.uv_package() or p.which("uv")
    got = _run_ok(p, [path, "--version"]) if path else "not found"
    if path is None or isinstance(got, str):
        return Check(
            "uv",
            "missing",
            "uv is neither rb's `uv` package nor on PATH: `rb init` cannot lock and the host "
            "backend cannot build Python environments",
            "reinstall rb (it depends on the `uv` package), or `pip install uv`",
        )
    line = _first_line(got)
    version = parse_version(line)
    facts = {"path": path, "version": _dotted(version) if version else None}
    return Check("uv", "ok", f"{facts['version'] or line} ({path})", None, facts)


def check_git(p: Probes) -> Check:
    """git, which rb needs to index a repository and record its commit."""
    got = _run_ok(p, ["git", "--version"])
    if isinstance(got, str):
        return Check(
            "git",
            "missing",
            "git is not installed: rb indexes repositories with `git ls-files`",
            "apt-get install git (or your distribution's git package)",
        )
    version = parse_version(_first_line(got))
    text = _dotted(version) if version else _first_line(got)
    return Check("git", "ok", text, None, {"version": text})


def check_disk(p: Probes) -> Check:
    """Free space where rb runs: a CUDA-enabled closure alone is several GB."""
    try:
        usage = p.disk_usage(p.cwd)
    except OSError as exc:
        return Check("disk", "warn", f"cannot read free space of {p.cwd}: {exc}", "check the path")
    free_gb = usage.free / 1e9
    facts = {"path": str(p.cwd), "free_bytes": int(usage.free), "total_bytes": int(usage.total)}
    detail = f"{free_gb:.1f} GB free of {usage.total / 1e9:.0f} GB in {p.cwd}"
    if usage.free < MIN_FREE_DISK_BYTES:
        return Check(
            "disk",
            "warn",
            f"{detail}: under {MIN_FREE_DISK_BYTES / 1e9:.0f} GB",
            "free space (`nix-collect-garbage -d`, `uv cache clean`) or work on a larger disk",
            facts,
        )
    return Check("disk", "ok", detail, None, facts)


# -- NVML -----------------------------------------------------------------------------------


def check_gpus(p: Probes) -> list[Check]:
    """The NVIDIA driver (and CUDA driver API version), then one row per GPU.

    No NVML library or no loaded driver is a ``missing`` row ("CPU only"), never an
    exception; an NVML error part-way through keeps the GPUs read so far and adds a warning.
    """
    nvml = _machine.load_nvml(p.nvml)
    if nvml is None:
        return [_no_driver("the pynvml module is not installed")]
    errors = nvml_errors(nvml)
    try:
        nvml.nvmlInit()
    except errors.unavailable as exc:
        return [_no_driver(nvml_text(exc))]
    except errors.base as exc:
        return [_no_driver(f"NVML failed to start: {nvml_text(exc)}")]
    try:
        return _query_gpus(nvml, errors)
    finally:
        # The report is complete; a failing shutdown changes nothing in it.
        with contextlib.suppress(*errors.base):
            nvml.nvmlShutdown()


def check_nix_driver(p: Probes) -> Check:
    """Whether a Nix-built program on this host can load the NVIDIA driver (``libcuda.so.1``).

    Nix's glibc ignores the host's library cache: such a program finds the driver only in
    ``/run/opengl-driver/lib`` (NixOS) or on ``LD_LIBRARY_PATH``. ``ok`` with the NixOS
    directory; ``warn`` with only ``ldconfig``'s libraries (``rb audit`` puts them on its GPU
    runs' ``LD_LIBRARY_PATH``, a plain ``nix run`` needs them supplied); ``missing`` with no
    driver at all, which a CPU-only machine needs nothing for.
    """
    facts: dict[str, Any] = {"opengl_driver": None, "libraries": [], "audit_library_path": None}
    opengl_lib = p.opengl_driver / "lib"
    if any(opengl_lib.glob("libcuda.so*")):
        facts["opengl_driver"] = str(opengl_lib)
    libraries = list(p.driver_libraries())
    facts["libraries"] = libraries
    if libraries or facts["opengl_driver"]:
        facts["audit_library_path"] = sandbox.DRIVER_LIB_DIR
    if facts["opengl_driver"]:
        return Check(
            "nix-gpu-driver",
            "ok",
            f"{opengl_lib} holds libcuda.so: Nix-built programs find the driver there",
            None,
            facts,
        )
    if not any(Path(lib).name.startswith("libcuda.so") for lib in libraries):
        return Check(
            "nix-gpu-driver",
            "missing",
            "no NVIDIA driver libraries: Nix-built programs run on the CPU only",
            "nothing to do for CPU-only experiments; on a GPU machine install the NVIDIA driver",
            facts,
        )
    return Check(
        "nix-gpu-driver",
        "warn",
        f"{len(libraries)} driver librar{'y' if len(libraries) == 1 else 'ies'} in ldconfig's "
        f"cache, no {opengl_lib}: rb audit links them into {sandbox.DRIVER_LIB_DIR}, first on "
        "each GPU run's LD_LIBRARY_PATH; a plain `nix run` does not find them",
        "for `nix run`, use nix-gl-host or put a directory of links to the driver's "
        "libraries on LD_LIBRARY_PATH (REPRODUCE.md, Hardware)",
        facts,
    )


def _no_driver(reason: str) -> Check:
    return Check(
        "nvidia",
        "missing",
        "no NVIDIA driver (CPU only)",
        "on a GPU machine install the NVIDIA driver (nvidia-smi must work); "
        f"CPU-only experiments need nothing ({reason})",
        {"gpus": [], "reason": reason},
    )


def _query_gpus(nvml: _machine.Nvml, errors: NvmlErrors) -> list[Check]:
    facts: dict[str, Any] = {"driver_version": None, "cuda_driver_version": None, "gpus": []}
    gpu_rows: list[Check] = []
    try:
        facts["driver_version"] = nvml_text(nvml.nvmlSystemGetDriverVersion())
        cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
        # NVML encodes CUDA 12.4 as 12040.
        facts["cuda_driver_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        count = int(nvml.nvmlDeviceGetCount())
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml_text(nvml.nvmlDeviceGetName(handle))
            memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            uuid = nvml_text(nvml.nvmlDeviceGetUUID(handle))
            gpu = {
                "index": index,
                "name": name,
                "memory_bytes": memory,
                "compute_capability": f"{major}.{minor}",
                "uuid": uuid,
            }
            facts["gpus"].append(gpu)
            gpu_rows.append(
                Check(
                    f"gpu{index}",
                    "ok",
                    f"{name}, {memory / 2**30:.1f} GiB, sm_{major}{minor}, {uuid}",
                    None,
                    gpu,
                )
            )
    except errors.base as exc:
        done = len(facts["gpus"])
        facts["error"] = nvml_text(exc)
        return [
            Check(
                "nvidia",
                "warn",
                f"NVML failed after {done} GPU(s) ({nvml_text(exc)}); driver "
                f"{facts['driver_version'] or '?'}",
                "check `nvidia-smi`; a GPU that fails here usually needs a driver reload or reset",
                facts,
            ),
            *gpu_rows,
        ]
    detail = (
        f"driver {facts['driver_version']}, CUDA driver API {facts['cuda_driver_version']}, "
        f"{len(gpu_rows)} GPU(s)"
    )
    if not gpu_rows:
        return [
            Check("nvidia", "warn", detail, "the driver sees no GPU: check `nvidia-smi`", facts)
        ]
    return [Check("nvidia", "ok", detail, None, facts), *gpu_rows]
