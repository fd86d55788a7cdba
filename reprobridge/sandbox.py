"""The bubblewrap argv that isolates one experiment run from the host.

Contract of :func:`wrap`: the returned argv runs ``argv`` with

* every namespace unshared (``--unshare-all``: user, IPC, PID, network, UTS, cgroup), the
  network shared back only when :attr:`SandboxSpec.network`; all capabilities dropped
  (as root, bubblewrap would otherwise keep them inside);
* a PID namespace whose init is bubblewrap's: when bubblewrap dies (``--die-with-parent``
  ties it to the auditor), every process of the run dies with it, double-forked
  ``setsid`` daemons included;
* a cleared environment holding exactly :attr:`SandboxSpec.env` (``--clearenv``);
* a new terminal session (``--new-session``: no ``TIOCSTI`` injection into the auditor's tty);
* a read-only view of the system (``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` links,
  ``/nix/store``, selected files of ``/etc``), fresh ``/proc``, ``/dev`` and ``/tmp``, the
  work directory read-write at its own path (also the working directory), and the extra
  binds of the spec;
* with :attr:`SandboxSpec.gpu`, the ``/dev/nvidia*`` devices and the host's NVIDIA driver
  libraries (see :func:`gpu_binds`, which records what was bound), each also linked from
  :data:`DRIVER_LIB_DIR` (the caller puts it first on ``LD_LIBRARY_PATH`` with
  :func:`driver_library_path`), and NixOS's ``/run/opengl-driver`` where the host has it.

Never bound: the user's home directory (a work directory *inside* it is fine), ``~/.ssh``,
``~/.gnupg``, ``~/.config/rb`` (the signing key) and other credential stores, all of ``/etc``
(it holds ``shadow`` and SSH host keys), and ``/nix/var`` (its daemon socket would let the
run ask the Nix daemon to fetch from the network: a Unix socket ignores both a read-only
bind and the network namespace). :func:`wrap` raises :class:`AuditError` for a bind that
would expose one of them.

Run the result with :func:`reprobridge._proc.monitored.run_monitored` and
``term_group=False``: bubblewrap does not forward SIGTERM, so the timeout's TERM must reach
the processes inside (found by ``RB_RUN_MARKER``, which must then be in ``spec.env``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reprobridge import _proc
from reprobridge._machine import BWRAP
from reprobridge.errors import AuditError, CommandFailed, MachineError

#: System directories bound read-only (or recreated as the same symlink, on merged-/usr).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc a program needs: users and groups (``getpwuid``), name service and hosts
#: (``localhost``), time zone, the dynamic loader's cache, Debian's alternatives symlinks,
#: TLS roots, MIME/protocol/service tables, locales, fonts (matplotlib), and NixOS's
#: ``/etc/static``. Nothing secret: no ``shadow``, ``ssh/``, ``sudoers``, ``machine-id``.
ETC_FILES = (
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "mime.types",
    "protocols",
    "services",
    "locale.alias",
    "locale.conf",
    "os-release",
    "fonts",
    "static",
)
#: Only with network: without it, DNS configuration is useless and leaks the host's setup.
ETC_NETWORK_FILES = ("resolv.conf",)
#: Credential stores under the home directory that no bind may expose.
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".config/rb",
    ".aws",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".cache/huggingface",
    ".huggingface",
)
#: Driver libraries a CUDA program loads from the host (their versions must match the
#: kernel module, so they cannot come from the Nix store).
GPU_LIBRARIES = (
    "libcuda.so",
    "libnvidia-ml.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
)
LDCONFIG = ("/sbin/ldconfig", "/usr/sbin/ldconfig")
#: Inside a GPU run's sandbox: a directory made per run holding one link per host driver
#: library (:func:`gpu_binds`), first on the run's ``LD_LIBRARY_PATH``. A Nix-built
#: program's glibc ignores the host's ``ld.so.cache`` and a venv's torch wheel finds
#: ``libcuda.so.1`` only through the cache: both find it here. Only the driver's own
#: libraries, never the host's whole library directory (that would mix the host's glibc
#: world into the Nix one).
DRIVER_LIB_DIR = "/run/rb-driver/lib"
#: NixOS's driver directory (``hardware.graphics``): bound where it exists, and searched after
#: :data:`DRIVER_LIB_DIR`, which nixpkgs' CUDA programs also carry in their RUNPATH.
OPENGL_DRIVER = "/run/opengl-driver"
PRLIMIT = ("/usr/bin/prlimit", "/bin/prlimit")


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed run may see.

    ``workdir`` is bound read-write at the same path and is the working directory;
    ``ro_binds``/``rw_binds`` are extra host paths bound at the same path (inputs from the
    content-addressed cache, an output directory). ``env`` is the run's whole environment.
    ``cwd`` is the working directory inside the sandbox (default ``workdir``); it must lie in
    ``workdir`` or one of the binds.
    """

    workdir: Path
    ro_binds: tuple[Path, ...] = ()
    rw_binds: tuple[Path, ...] = ()
    network: bool = False
    gpu: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    #: RLIMIT_NPROC inside the sandbox (``prlimit``), None for none. The kernel counts a
    #: user namespace's processes separately (5.14+), so the limit is per run; it does not
    #: bind root (exempt), for whom :mod:`reprobridge.audit.limits` adds a pids cgroup.
    max_processes: int | None = None


@dataclass(frozen=True)
class GpuBinds:
    """The host GPU pieces a ``gpu`` sandbox gets: device nodes and driver libraries.

    ``libraries`` are absolute paths as ``ldconfig -p`` lists them (links included);
    the auditor records them (and may hash their targets) as part of the run's hardware.
    """

    devices: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()


def bwrap_path() -> str | None:
    """``/usr/bin/bwrap`` when it is an executable file, else None.

    Never looked up on PATH or relative to the working directory: a repository could plant
    a fake ``bwrap`` there that "sandboxes" nothing.
    """
    return BWRAP if Path(BWRAP).is_file() and os.access(BWRAP, os.X_OK) else None


@functools.cache
def sandbox_unusable() -> str | None:
    """Why bubblewrap cannot isolate a run on this machine, or None when it can.

    Probes once per process (cached) with the namespace and mount options :func:`wrap`
    relies on (``--unshare-all``, ``--die-with-parent``, fresh ``/proc``, ``/dev``,
    ``/tmp``): in containers ``--proc`` is the one that fails when ``/proc`` is masked.
    """
    bwrap = bwrap_path()
    if bwrap is None:
        return f"{BWRAP} not found (install bubblewrap)"
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "true",
    ]
    try:
        result = _proc.run(argv, env={"PATH": "/usr/bin:/bin"}, timeout=20, check=False)
    except (MachineError, CommandFailed) as exc:
        return f"bubblewrap probe failed: {exc}"
    if result.returncode != 0:
        err = result.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = err[-1] if err else f"exit {result.returncode}"
        return f"bubblewrap cannot create namespaces here (user namespaces?): {detail}"
    return None


def offline_env(workdir: Path | None = None) -> dict[str, str]:
    """Variables that keep common ML libraries from reaching the network (or trying to).

    The network namespace already blocks traffic; these make libraries fail fast and
    deterministically (or log locally) instead of retrying, timing out or silently falling
    back to a different code path:

    * ``HF_HUB_OFFLINE``: huggingface_hub makes no HTTP calls, serves from its cache only.
    * ``TRANSFORMERS_OFFLINE``: the same switch for older transformers releases.
    * ``HF_DATASETS_OFFLINE``: datasets loads only cached/local data.
    * ``HF_HUB_DISABLE_TELEMETRY``: no usage pings from huggingface_hub.
    * ``WANDB_MODE=offline``: wandb writes runs under ``./wandb`` for a later ``wandb sync``.
    * ``WANDB_DISABLED=true``: transformers' Trainer (older releases) skips its wandb hook.
    * ``MLFLOW_TRACKING_URI=file:...``: MLflow logs to a local ``mlruns`` directory in the
      work directory instead of a tracking server.
    * ``NEPTUNE_MODE=offline``: Neptune stores metadata under ``.neptune`` locally.
    * ``COMET_OFFLINE_DIRECTORY``: where Comet writes its offline archive when it cannot
      connect (Comet has no documented variable that forces offline mode).
    * ``CLEARML_OFFLINE_MODE=1``: ClearML records the task locally.
    * ``DO_NOT_TRACK=1``: the cross-tool opt-out of telemetry (consoledonottrack.com).
    * ``PIP_NO_INDEX=1``, ``UV_OFFLINE=1``: installers never consult an index mid-run.
    """
    base = f"{workdir}/" if workdir is not None else "./"
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "WANDB_MODE": "offline",
        "WANDB_DISABLED": "true",
        "MLFLOW_TRACKING_URI": f"file:{base}mlruns",
        "NEPTUNE_MODE": "offline",
        "COMET_OFFLINE_DIRECTORY": f"{base}.cometml-runs",
        "CLEARML_OFFLINE_MODE": "1",
        "DO_NOT_TRACK": "1",
        "PIP_NO_INDEX": "1",
        "UV_OFFLINE": "1",
    }


def headless_env() -> dict[str, str]:
    """Variables that let drawing code run with no display, as every audited run has (the
    sandbox binds no X or Wayland socket): without them a window fails at its first frame.

    * ``SDL_VIDEODRIVER=dummy``: pygame (gym's classic-control ``env.render()``, games)
      draws off screen instead of stopping with "No available video device".
    * ``SDL_AUDIODRIVER=dummy``: ``pygame.mixer`` without a sound device.
    * ``QT_QPA_PLATFORM=offscreen``: Qt windows (PyQt, PySide) off screen.

    matplotlib needs nothing: with no display it chooses a non-interactive backend itself.
    """
    return {"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy", "QT_QPA_PLATFORM": "offscreen"}


_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


@functools.cache
def gpu_binds() -> GpuBinds:
    """The ``/dev/nvidia*`` nodes and NVIDIA driver libraries on this host (cached): what
    :func:`find_gpu_binds` finds under ``/dev`` and with the system's ``ldconfig``."""
    return find_gpu_binds(Path("/dev"), LDCONFIG)


def find_gpu_binds(dev: Path, ldconfigs: Sequence[str]) -> GpuBinds:
    """The ``nvidia*`` nodes under ``dev`` (and ``dev/nvidia-caps/*``) and the NVIDIA driver
    libraries ``ldconfig -p`` lists.

    ``ldconfig`` is the first executable of ``ldconfigs`` (absolute paths, never PATH);
    only 64-bit x86 or aarch64 entries whose name starts with one of
    :data:`GPU_LIBRARIES` and whose file exists are kept. Empty on a machine without an
    NVIDIA driver.
    """
    devices = sorted(str(p) for p in dev.glob("nvidia*") if p.exists())
    caps = dev / "nvidia-caps"
    if caps.is_dir():
        devices += sorted(str(p) for p in caps.iterdir())
    libraries: list[str] = []
    ldconfig = next((p for p in ldconfigs if os.access(p, os.X_OK)), None)
    if ldconfig is not None:
        try:
            listing = _proc.run([ldconfig, "-p"], timeout=20, check=False).text
        except (MachineError, CommandFailed):
            listing = ""
        for line in listing.splitlines():
            m = _LDCONFIG_LINE.match(line)
            if m is None or not m.group(1).startswith(GPU_LIBRARIES):
                continue
            if "64" not in m.group(2):  # skip the 32-bit copies a multilib driver installs
                continue
            if Path(m.group(3)).exists() and m.group(3) not in libraries:
                libraries.append(m.group(3))
    return GpuBinds(tuple(dict.fromkeys(devices)), tuple(libraries))


def driver_library_path(env: Mapping[str, str]) -> str:
    """The ``LD_LIBRARY_PATH`` of a GPU run whose environment is ``env``: :data:`DRIVER_LIB_DIR`
    first, then NixOS's ``/run/opengl-driver/lib`` when this host has it, then what ``env``
    already has (a devShell's ``shellHook`` may have put ``/run/opengl-driver/lib`` there
    too; it is not repeated)."""
    parts = [DRIVER_LIB_DIR]
    if Path(OPENGL_DRIVER).is_dir():
        parts.append(f"{OPENGL_DRIVER}/lib")
    parts += [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    return ":".join(dict.fromkeys(parts))


def _driver_binds(binds: GpuBinds) -> list[str]:
    """bubblewrap options that make :data:`DRIVER_LIB_DIR` (a link per library of ``binds``,
    the first of each file name winning) and bind :data:`OPENGL_DRIVER` when it exists."""
    args = ["--dir", DRIVER_LIB_DIR]
    names: set[str] = set()
    for lib in binds.libraries:
        name = Path(lib).name
        if name not in names:
            names.add(name)
            args += ["--symlink", lib, f"{DRIVER_LIB_DIR}/{name}"]
    if Path(OPENGL_DRIVER).is_dir():  # a link into /nix/store on NixOS: bound as its target
        args += ["--ro-bind", OPENGL_DRIVER, OPENGL_DRIVER]
    return args


def _homes() -> set[Path]:
    homes = {Path.home()}
    with contextlib.suppress(KeyError):  # a uid without a passwd entry: $HOME is all we have
        homes.add(Path(pwd.getpwuid(os.getuid()).pw_dir))
    return {h.resolve() for h in homes}


def check_bind(path: Path) -> Path:
    """``path`` resolved, after refusing the home directory, its ancestors and secrets."""
    resolved = path.resolve()
    for home in _homes():
        if resolved == home or home.is_relative_to(resolved):
            raise AuditError(
                f"refusing to expose {path} in the sandbox: it is the home directory {home} "
                "or contains it",
                hint="bind a project directory, not the home directory or a parent of it",
            )
        for rel in HOME_SECRETS:
            secret = home / rel
            if resolved.is_relative_to(secret) or secret.is_relative_to(resolved):
                raise AuditError(
                    f"refusing to expose {path} in the sandbox: it holds or is inside {secret}"
                )
    return resolved


def _system_binds(network: bool) -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        path = Path(d)
        if path.is_symlink():  # merged /usr: recreate the link rather than bind its target
            args += ["--symlink", str(path.readlink()), d]
        elif path.is_dir():
            args += ["--ro-bind", d, d]
    for name in ETC_FILES + (ETC_NETWORK_FILES if network else ()):
        etc = f"/etc/{name}"
        if Path(etc).exists():
            args += ["--ro-bind", etc, etc]
    if Path("/nix/store").is_dir():
        args += ["--ro-bind", "/nix/store", "/nix/store"]
    return args


def wrap(
    argv: Sequence[str],
    spec: SandboxSpec,
    *,
    gpu: GpuBinds | None = None,
    hostname: str = "rb-audit",
) -> list[str]:
    """The bubblewrap argv that runs ``argv`` isolated as ``spec`` says (module docstring).

    ``gpu`` overrides what :func:`gpu_binds` finds (tests, or a recorded set). Raises
    :class:`MachineError` without bubblewrap and :class:`AuditError` for a forbidden or
    missing bind; it does not probe namespaces (see :func:`sandbox_unusable`).
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise MachineError(
            f"{BWRAP} not found: audits cannot isolate runs", hint="apt-get install bubblewrap"
        )
    if not argv:
        raise ValueError("argv is empty")
    workdir = check_bind(spec.workdir)
    if not workdir.is_dir():
        raise AuditError(f"sandbox work directory {spec.workdir} does not exist")
    out = [bwrap, "--unshare-all"]
    if spec.network:
        out.append("--share-net")
    out += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", hostname]
    out.append("--clearenv")
    for key in sorted(spec.env):
        if not key or "=" in key or "\0" in key or "\0" in spec.env[key]:
            raise AuditError(f"invalid environment variable name or value for {key!r}")
        out += ["--setenv", key, spec.env[key]]
    out += _system_binds(spec.network)
    # Fresh /proc (this PID namespace only), a minimal /dev, an empty /tmp.
    out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    if spec.gpu:
        binds = gpu if gpu is not None else gpu_binds()
        # After --dev: the device nodes go into the fresh /dev.
        for dev in binds.devices:
            out += ["--dev-bind", dev, dev]
        for lib in binds.libraries:
            out += ["--ro-bind", lib, lib]
        out += _driver_binds(binds)
        # CUDA and NVML read PCI topology and NUMA placement from sysfs.
        if Path("/sys").is_dir():
            out += ["--ro-bind", "/sys", "/sys"]
    out += ["--bind", str(workdir), str(workdir)]
    bound = [workdir]
    for flag, paths in (("--ro-bind", spec.ro_binds), ("--bind", spec.rw_binds)):
        for p in paths:
            resolved = check_bind(p)
            if not resolved.exists():
                raise AuditError(f"sandbox bind {p} does not exist")
            out += [flag, str(resolved), str(resolved)]
            bound.append(resolved)
    chdir = workdir if spec.cwd is None else spec.cwd.resolve()
    if not any(chdir.is_relative_to(p) for p in bound):
        raise AuditError(f"sandbox working directory {spec.cwd} is not inside a bind")
    if spec.max_processes is not None:
        argv = [*_prlimit(spec.max_processes), *argv]
    out += ["--chdir", str(chdir), "--", *argv]
    return out


def _prlimit(limit: int) -> list[str]:
    """``prlimit --nproc=N:N --`` from util-linux (in /usr/bin, which the sandbox binds),
    by absolute path; AuditError when this machine has none."""
    if limit < 1:
        raise AuditError(f"the process limit must be at least 1, not {limit}")
    for candidate in PRLIMIT:
        if os.access(candidate, os.X_OK):
            return [candidate, f"--nproc={limit}:{limit}", "--"]
    raise AuditError(
        "prlimit (util-linux) is not installed: the sandbox cannot limit the process count",
        hint="apt-get install util-linux",
    )
