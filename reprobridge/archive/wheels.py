"""`rb archive --with-wheels`: the distributions of ``uv.lock`` a target machine installs.

Contract:

* :func:`plan_wheels` reads ``uv.lock`` (TOML; nothing runs) and walks the dependency
  graph from the project (its dependencies, every dependency group, the extras asked
  for), evaluating each edge's environment marker for every target machine. For each
  package reached it picks the best wheel the machine supports (``packaging.tags``
  order); a package with no such wheel but an sdist is listed in ``sdists`` (it would need
  building: the build runs the package's own code), one without either, or from git or a
  local path, in ``missing``. Nothing is silently left out.
* a target machine is a Python version (the manifest's) and a list of platform tags
  (default: this machine's; ``--platform manylinux_2_28_x86_64`` names another);
* :func:`fetch_wheels` puts each planned wheel in rb's cache
  (``$RB_CACHE_DIR``, else ``$XDG_CACHE_HOME/reprobridge``, else
  ``~/.cache/reprobridge``; ``wheels/<sha256>/<file>``), downloading what is not there
  with ``pip download`` (binary only, no dependencies, ``--require-hashes`` with the lock's
  sha256: pip picks exactly the locked file and runs no package code), then checks every
  file's sha256 against the lock itself. The archive stores them flat in ``wheels/``, a
  directory uv and pip use as ``--find-links``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from reprobridge import _proc
from reprobridge.constants import WHEELS_DIR
from reprobridge.errors import ArchiveError, CommandFailed, MachineError

_ROOT_SOURCES = frozenset({"virtual", "editable"})
#: The variables ``pip download`` gets, when set: where pip finds its index (and its
#: configuration, which may name one), caches, TLS roots and proxies. The requirement names
#: come from the repository's ``uv.lock``: the operator's other variables stay out.
PIP_ENV_PASSTHROUGH = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "PIP_CONFIG_FILE",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    "PIP_CLIENT_CERT",
    "PIP_PROXY",
    "PIP_TIMEOUT",
    "PIP_RETRIES",
    "PIP_CACHE_DIR",
    "REQUESTS_CA_BUNDLE",
    # TLS roots, proxies and the cache directory: the names uv gets.
    *(v for v in _proc.UV_PASSTHROUGH if not v.startswith("UV_")),
)


def pip_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of rb's ``pip download``: :data:`PIP_ENV_PASSTHROUGH` from
    ``environ`` (default: this process's), and pip never asks a question."""
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in PIP_ENV_PASSTHROUGH if k in source}
    env["PIP_NO_INPUT"] = "1"
    return env


@dataclass(frozen=True)
class Machine:
    """A target: Python ``major.minor`` and platform tags, best first."""

    python: tuple[int, int]
    platforms: tuple[str, ...]

    def tags(self) -> list[Any]:
        from packaging import tags

        plats = list(self.platforms)
        return [
            *tags.cpython_tags(python_version=self.python, platforms=plats),
            *tags.compatible_tags(python_version=self.python, platforms=plats),
        ]

    def marker_env(self) -> dict[str, str]:
        """The PEP 508 marker variables of this machine (from its platform tags)."""
        first = self.platforms[0] if self.platforms else "any"
        if first.startswith(("manylinux", "musllinux", "linux")):
            sys_platform, system, os_name = "linux", "Linux", "posix"
        elif first.startswith("macosx"):
            sys_platform, system, os_name = "darwin", "Darwin", "posix"
        elif first.startswith("win"):
            sys_platform, system, os_name = "win32", "Windows", "nt"
        else:
            sys_platform, system, os_name = sys.platform, "", os.name
        machine = first
        for arch in ("x86_64", "aarch64", "arm64", "amd64", "i686", "ppc64le", "s390x"):
            if first.endswith(arch):
                machine = "AMD64" if arch == "amd64" else arch
                break
        version = f"{self.python[0]}.{self.python[1]}"
        here = sys.version_info
        full = (
            f"{version}.{here.micro}" if (here.major, here.minor) == self.python else f"{version}.0"
        )
        return {
            "python_version": version,
            "python_full_version": full,
            "implementation_name": "cpython",
            "implementation_version": full,
            "platform_python_implementation": "CPython",
            "sys_platform": sys_platform,
            "platform_system": system,
            "os_name": os_name,
            "platform_machine": machine,
            "platform_release": "",
            "platform_version": "",
            "extra": "",
        }


def parse_python(version: str) -> tuple[int, int]:
    """``"3.11"`` as ``(3, 11)``; ArchiveError for anything else."""
    parts = version.strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ArchiveError(f"cannot read the Python version {version!r} (want e.g. 3.11)")
    return int(parts[0]), int(parts[1])


def expand_platform(tag: str) -> tuple[str, ...]:
    """The platform tags a machine named by ``tag`` installs: a ``manylinux_2_Y_ARCH``
    machine also takes older manylinux wheels (and their legacy aliases) and
    ``linux_ARCH``, a ``macosx_X_Y_ARCH`` one older macOS wheels and universal ones; any
    other tag stands for itself."""
    parts = tag.split("_")
    if tag.startswith("macosx_") and len(parts) >= 4 and parts[1].isdigit() and parts[2].isdigit():
        from packaging import tags

        arch = "_".join(parts[3:])
        return tuple(tags.mac_platforms((int(parts[1]), int(parts[2])), arch))
    if tag.startswith("manylinux_") and len(parts) >= 4 and parts[1] == "2" and parts[2].isdigit():
        arch = "_".join(parts[3:])
        glibc = int(parts[2])
        out = [f"manylinux_2_{y}_{arch}" for y in range(glibc, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        out += [f"{name}_{arch}" for y, name in legacy.items() if y <= glibc]
        return (*out, f"linux_{arch}")
    return (tag,)


def this_machine(python: tuple[int, int]) -> Machine:
    """The machine rb runs on, for ``python``."""
    from packaging import tags

    return Machine(python, tuple(tags.platform_tags()))


@dataclass(frozen=True)
class Dist:
    """One locked distribution file."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None


@dataclass
class WheelPlan:
    """What ``--with-wheels`` carries, and what it cannot."""

    wheels: list[Dist] = field(default_factory=list)
    #: ``name version``: only an sdist exists for a target; installing it means a build.
    sdists: list[str] = field(default_factory=list)
    #: ``name version: why``: nothing installable can be carried.
    missing: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(d.size or 0 for d in self.wheels)


def _filename(entry: dict[str, Any]) -> str:
    if isinstance(entry.get("filename"), str):
        return str(entry["filename"])
    where = entry.get("url") or entry.get("path") or ""
    return unquote(urlsplit(str(where)).path.rsplit("/", 1)[-1])


def _dist(pkg: dict[str, Any], entry: dict[str, Any]) -> Dist | None:
    digest = str(entry.get("hash", ""))
    if not digest.startswith("sha256:"):
        return None
    size = entry.get("size")
    return Dist(
        name=str(pkg["name"]),
        version=str(pkg.get("version", "")),
        filename=_filename(entry),
        url=str(entry.get("url", "")),
        sha256=digest.removeprefix("sha256:"),
        size=size if isinstance(size, int) else None,
    )


def _best_wheel(pkg: dict[str, Any], machine: Machine) -> Dist | None:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    rank = {t: i for i, t in enumerate(machine.tags())}
    best: tuple[int, Dist] | None = None
    for entry in pkg.get("wheels") or []:
        if not isinstance(entry, dict):
            continue
        try:
            _, _, _, wheel_tags = parse_wheel_filename(_filename(entry))
        except InvalidWheelFilename:
            continue
        score = min((rank[t] for t in wheel_tags if t in rank), default=None)
        dist = _dist(pkg, entry)
        if score is not None and dist is not None and (best is None or score < best[0]):
            best = (score, dist)
    return best[1] if best else None


def _marker_holds(marker: Any, env: dict[str, str]) -> bool:
    if not marker:
        return True
    from packaging.markers import InvalidMarker, Marker, UndefinedEnvironmentName

    try:
        return bool(Marker(str(marker)).evaluate(env))
    except (InvalidMarker, UndefinedEnvironmentName):
        return True  # an unreadable marker: carry the package rather than drop it


def load_lock(data: bytes) -> list[dict[str, Any]]:
    """The ``[[package]]`` tables of a uv.lock; ArchiveError when it is not one."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ArchiveError(f"not a uv lock file ({exc})", path="repro/python/uv.lock") from exc
    packages = doc.get("package")
    if not isinstance(packages, list):
        raise ArchiveError("no [[package]] tables", path="repro/python/uv.lock")
    return [p for p in packages if isinstance(p, dict) and isinstance(p.get("name"), str)]


def plan_wheels(lock: bytes, machines: Sequence[Machine]) -> WheelPlan:
    """See the module doc."""
    packages = load_lock(lock)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for p in packages:
        by_name.setdefault(p["name"], []).append(p)
    plan = WheelPlan()
    chosen: dict[str, Dist] = {}
    for machine in machines:
        env = machine.marker_env()
        roots = [p for p in packages if set(p.get("source") or {}) & _ROOT_SOURCES]
        seen: set[tuple[str, str]] = set()
        extras_seen: set[tuple[str, str, str]] = set()
        todo: list[tuple[dict[str, Any], Iterable[Any]]] = []
        for root in roots:
            seen.add((root["name"], str(root.get("version", ""))))
            edges = list(root.get("dependencies") or [])
            for group in (root.get("dev-dependencies") or {}).values():
                edges += list(group or [])
            todo.append((root, edges))
        while todo:
            _, pending = todo.pop()
            for dep in pending:
                if not isinstance(dep, dict) or not _marker_holds(dep.get("marker"), env):
                    continue
                candidates = by_name.get(str(dep.get("name")), [])
                if "version" in dep:
                    candidates = [c for c in candidates if c.get("version") == dep["version"]]
                for pkg in candidates:
                    key = (pkg["name"], str(pkg.get("version", "")))
                    for extra in dep.get("extra") or []:
                        if (*key, extra) not in extras_seen:
                            extras_seen.add((*key, extra))
                            opt = (pkg.get("optional-dependencies") or {}).get(extra) or []
                            todo.append((pkg, opt))
                    if key in seen:
                        continue
                    seen.add(key)
                    todo.append((pkg, pkg.get("dependencies") or []))
                    _place(pkg, machine, plan, chosen)
    plan.wheels = sorted(chosen.values(), key=lambda d: (d.name, d.version, d.filename))
    plan.sdists = sorted(set(plan.sdists))
    plan.missing = sorted(set(plan.missing))
    return plan


def _place(pkg: dict[str, Any], machine: Machine, plan: WheelPlan, chosen: dict[str, Dist]) -> None:
    label = f"{pkg['name']} {pkg.get('version', '?')}"
    source = pkg.get("source") or {}
    if not ({"registry", "url"} & set(source)):
        kind = next(iter(source), "unknown")
        plan.missing.append(f"{label}: from a {kind} source, not an index; not carried")
        return
    wheel = _best_wheel(pkg, machine)
    if wheel is not None:
        chosen[wheel.filename] = wheel
    elif isinstance(pkg.get("sdist"), dict):
        plan.sdists.append(label)
    elif pkg.get("wheels"):
        plan.missing.append(f"{label}: no wheel for {machine.platforms[0]} and no sdist")
    else:
        plan.missing.append(f"{label}: the lock has no file with a sha256 for it")


def cache_dir() -> Path:
    """rb's download cache (see the module doc)."""
    explicit = os.environ.get("RB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "reprobridge"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def cached(dist: Dist, cache: Path) -> Path:
    """Where ``dist`` lives in the cache (it may not be there yet)."""
    return cache / WHEELS_DIR / dist.sha256 / dist.filename


def _pip_target(dist: Dist, python: tuple[int, int]) -> tuple[str, str, str]:
    """(implementation, abi, platform) pip must target to accept ``dist``'s file."""
    from packaging.utils import parse_wheel_filename

    _, _, _, wheel_tags = parse_wheel_filename(dist.filename)
    tag = sorted(wheel_tags, key=str)[0]
    impl = "cp" if tag.interpreter.startswith("cp") else "py"
    return impl, tag.abi, tag.platform


def fetch_wheels(plan: WheelPlan, python: tuple[int, int], cache: Path) -> list[Path]:
    """Every wheel of ``plan`` in ``cache``, checked against the lock's sha256 (see the
    module doc); ArchiveError naming the first that cannot be had."""
    want = [d for d in plan.wheels if not _good(cached(d, cache), d)]
    groups: dict[tuple[str, str, str], list[Dist]] = {}
    for d in want:
        groups.setdefault(_pip_target(d, python), []).append(d)
    for (impl, abi, platform), dists in sorted(groups.items()):
        _pip_download(dists, python, impl, abi, platform, cache)
    out = []
    for d in plan.wheels:
        path = cached(d, cache)
        if not _good(path, d):
            raise ArchiveError(
                f"{d.filename}: not fetched, or its sha256 differs from uv.lock's",
                path=str(path),
                hint="check that PyPI (or your index) is reachable and serves the locked file",
            )
        out.append(path)
    return out


def _good(path: Path, dist: Dist) -> bool:
    return path.is_file() and _sha256(path) == dist.sha256


def _pip_download(
    dists: list[Dist], python: tuple[int, int], impl: str, abi: str, platform: str, cache: Path
) -> None:
    with tempfile.TemporaryDirectory(prefix="rb-wheels-") as tmp:
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text("".join(f"{d.name}=={d.version} --hash=sha256:{d.sha256}\n" for d in dists))
        dest = Path(tmp) / "dl"
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--python-version",
            f"{python[0]}.{python[1]}",
            "--implementation",
            impl,
            "--abi",
            abi,
            "--platform",
            platform,
            "--dest",
            str(dest),
            "-r",
            str(reqs),
        ]
        try:
            _proc.run(argv, env=pip_env(), timeout=1800)
        except (CommandFailed, MachineError) as exc:
            raise ArchiveError(
                f"could not download {', '.join(d.filename for d in dists)}: {exc}",
                hint="rb fetches wheels with `pip download` from your index (PyPI by default)",
            ) from exc
        for d in dists:
            got = dest / d.filename
            if got.is_file() and _sha256(got) == d.sha256:
                target = cached(d, cache)
                target.parent.mkdir(parents=True, exist_ok=True)
                part = target.with_name(f".{target.name}.{os.getpid()}.part")
                shutil.copyfile(got, part)
                os.replace(part, target)  # whole or absent, for a concurrent reader
