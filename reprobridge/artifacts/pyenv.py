"""repro/python/: the uv project that pins the experiment's Python packages.

The flake's devShell and apps (``python_env = "uv"``) make ``repro/python/.venv`` from
``uv.lock`` with ``uv sync --frozen`` when the lock exists, else from ``requirements.txt``.
:func:`render_python_project` writes both inputs from the manifest; :func:`lock_python_project`
asks uv for the lock, which needs the package index, so it may legitimately not happen
(offline, no matching interpreter): the result says why, and ``requirements.txt`` remains.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from reprobridge import _machine, _proc, sandbox
from reprobridge.artifacts.datebound import (
    Relaxation,
    compile_probe,
    relaxation_flags,
    resolve_within_bound,
)
from reprobridge.constants import PYTHON_DIR, REGENERATE_COMMAND
from reprobridge.data import load_packages
from reprobridge.errors import CommandFailed
from reprobridge.manifest.schema import Manifest

PYPROJECT = f"{PYTHON_DIR}/pyproject.toml"
REQUIREMENTS = f"{PYTHON_DIR}/requirements.txt"
LOCK = f"{PYTHON_DIR}/uv.lock"

#: uv's messages when the index cannot be reached (DNS, connect, --offline with a cold cache).
_NETWORK_ERRORS = re.compile(
    r"dns error|failed to fetch|error sending request|connect(ion)? (refused|error|timed out)"
    r"|network is unreachable|offline mode|because network connectivity is disabled"
    r"|not found in the cache",
    re.IGNORECASE,
)
_NO_PYTHON = re.compile(r"no interpreter found|failed to inspect python interpreter", re.I)


def _toml_str(value: str) -> str:
    """A TOML basic string; JSON's escaping is valid TOML when everything non-ASCII is escaped."""
    return json.dumps(value, ensure_ascii=True)


def project_name(manifest: Manifest) -> str:
    """``<project>-repro`` as a valid, normalised distribution name."""
    base = re.sub(r"[^a-z0-9]+", "-", manifest.project.name.lower()).strip("-") or "project"
    return f"{base}-repro"


def _index_name(url: str, position: int) -> str:
    """A stable uv index name from its URL: ``download.pytorch.org/whl/cu121`` -> ``cu121``."""
    parts = urlsplit(url)
    tail = [p for p in parts.path.split("/") if p and p != "simple"]
    stem = tail[-1] if tail else parts.hostname or "index"
    return f"{re.sub(r'[^a-z0-9._-]+', '-', stem.lower()).strip('-') or 'index'}-{position}"


#: The distributions PyTorch publishes per-CUDA (and CPU) builds of on its own indexes.
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
PYTORCH_INDEX = "https://download.pytorch.org/whl/"


@dataclass(frozen=True)
class TorchRouting:
    """Where the torch family comes from: a PyTorch index (``name``/``url``) for
    ``packages``, and why; ``bound`` is a version bound replacing exclude-newer there."""

    name: str
    url: str
    packages: tuple[str, ...]
    why: str
    bound: str | None = None
    #: The repository's own CUDA builds (``+cu121``) are replaced by this index's: their
    #: local version labels are dropped (``torch==2.1.0`` matches ``2.1.0+cpu``).
    drops_local: bool = False

    def requirement(self, text: str) -> str:
        """``text`` as routed: ``torch==2.1.0+cu121`` -> ``torch==2.1.0`` when the routed
        index replaces the repository's build; anything else unchanged."""
        if not self.drops_local:
            return text
        try:
            req = Requirement(text)
        except InvalidRequirement:
            return text
        if canonicalize_name(req.name) not in self.packages:
            return text
        return _LOCAL_LABEL_RE.sub("", text)


#: A local version label in a requirement (``+cu121``, ``+cu118``), up to the next separator.
_LOCAL_LABEL_RE = re.compile(r"\+[A-Za-z0-9.]+(?=\s*(?:[,;\])]|$))")


def _requirements(manifest: Manifest) -> dict[str, Requirement]:
    out: dict[str, Requirement] = {}
    for text in manifest.environment.python_requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        out[canonicalize_name(req.name)] = req
    return out


def _torch_bound(exclude_newer: str | None) -> str | None:
    """``torch<2.2`` for a date bound before 2.2's release (None without a bound)."""
    if exclude_newer is None:
        return None
    day = exclude_newer[:10]
    releases = load_packages()["pytorch_releases"]
    out = [v for v, date in releases.items() if str(date) <= day]
    later = [v for v, date in releases.items() if str(date) > day]
    if not out or not later:
        return None  # before the table starts, or after its newest release: no bound known
    return f"torch<{later[0]}"


def torch_routing(manifest: Manifest) -> TorchRouting | None:
    """The PyTorch index the torch family is locked from, or None to leave it alone.

    CPU wheels (``/whl/cpu``) when no experiment needs a GPU (every ``hardware.gpus`` is 0):
    the default PyPI torch pulls gigabytes of CUDA wheels a CPU run never loads, and so does
    a CUDA build the repository chose (a ``+cu118`` local version, dropped by
    :meth:`TorchRouting.requirement`, or its own ``/whl/cu118`` index). The wheels of
    ``environment.cuda`` (``/whl/cu121``) otherwise. Left alone when the repository chose
    the build itself and an experiment needs a GPU, or it chose CPU wheels (``+cpu``, its
    own ``/whl/cpu`` index), when no torch package is a direct requirement (uv's sources
    apply to direct ones only), or when ``environment.torch_index`` is ``"pypi"``
    (PyTorch's index was out of reach).
    """
    if manifest.environment.torch_index == "pypi":
        return None
    reqs = _requirements(manifest)
    family = tuple(n for n in TORCH_FAMILY if n in reqs)
    if not family:
        return None
    locals_ = [
        str(s.version).split("+", 1)[1]
        for n in family
        for s in reqs[n].specifier
        if "+" in s.version
    ]
    own_index = [u for u in manifest.environment.python_indexes if u.startswith(PYTORCH_INDEX)]
    gpus = max((e.hardware.gpus for e in manifest.experiments.values()), default=0)
    bound = (
        None
        if "torch" in reqs and _pinned(reqs["torch"])
        else _torch_bound(manifest.environment.exclude_newer)
    )
    if gpus == 0:
        if any(u.rstrip("/").endswith("/cpu") for u in own_index) or (
            locals_ and all(label == "cpu" for label in locals_)
        ):
            return None  # the repository chose CPU wheels itself
        chosen = bool(locals_ or own_index)
        return TorchRouting(
            "pytorch-cpu",
            PYTORCH_INDEX + "cpu",
            family,
            "no experiment needs a GPU (hardware.gpus = 0): CPU wheels"
            + (", not the repository's CUDA build" if chosen else ""),
            bound,
            drops_local=bool(locals_),
        )
    if locals_ or own_index:
        return None
    cuda = manifest.environment.cuda
    if cuda is None:
        return None  # the default PyPI wheels carry CUDA already
    tag = "cu" + cuda.replace(".", "")
    return TorchRouting(
        f"pytorch-{tag}",
        PYTORCH_INDEX + tag,
        family,
        f"an experiment needs a GPU: the CUDA {cuda} wheels (environment.cuda)",
        bound,
    )


#: PyPI torch releases a universal lock cannot take: uv reads one wheel's metadata for all of
#: a release's wheels, and 2.0.0's (its aarch64 re-upload) declares none of the nvidia-*
#: packages the Linux x86_64 wheel loads, so the locked environment fails `import torch`
#: (``libcublas.so.*[0-9] not found``; seen on seungeunrho/minimalRL). 2.0.1 is whole.
PYPI_TORCH_BROKEN = ("2.0.0",)


def _pypi_torch_exclusions(manifest: Manifest, routing: TorchRouting | None) -> list[str]:
    """``torch!=2.0.0`` where the torch family resolves from PyPI: no PyTorch index routes
    it, the repository names none, and it does not pin torch itself (its pin stands)."""
    reqs = _requirements(manifest)
    if (
        routing is not None
        or not any(n in reqs for n in TORCH_FAMILY)
        or _names_pytorch_index(manifest)
        or ("torch" in reqs and _pinned(reqs["torch"]))
    ):
        return []
    return [f"torch!={v}" for v in PYPI_TORCH_BROKEN]


def _names_pytorch_index(manifest: Manifest) -> bool:
    """Whether the repository names a PyTorch index itself (``environment.python_indexes``):
    the torch family comes from the build it chose."""
    return any(u.startswith(PYTORCH_INDEX) for u in manifest.environment.python_indexes)


def _pinned(req: Requirement) -> bool:
    return any(s.operator in ("==", "===") for s in req.specifier)


def render_python_project(manifest: Manifest) -> dict[str, str]:
    """The files of ``repro/python`` for ``manifest``: repository-relative path -> text.

    ``pyproject.toml`` is a uv project that is not a package (``[tool.uv] package =
    false``): name ``<project>-repro``, version ``"0"``, ``requires-python ==X.Y.*`` for the
    manifest's Python, the requirements verbatim (order kept), ``exclude-newer`` from
    ``environment.exclude_newer``, each extra index as a ``[[tool.uv.index]]``, and the
    torch family routed to a PyTorch index by :func:`torch_routing` (an explicit index plus
    ``[tool.uv.sources]``). ``requirements.txt`` holds the same requirements and indexes
    for ``uv pip install -r``. Deterministic.
    """
    env = manifest.environment
    header = (
        f"# Generated by ReproBridge from reprobridge.toml; regenerate with: {REGENERATE_COMMAND}"
    )
    routing = torch_routing(manifest)
    routed = [routing.requirement(r) if routing else r for r in env.python_requirements]
    deps = "".join(f"  {_toml_str(req)},\n" for req in routed)
    lines = [
        header,
        "# The Python packages of the experiments (environment.python_requirements).",
        "[project]",
        f"name = {_toml_str(project_name(manifest))}",
        'version = "0"',
        f'requires-python = "=={env.python}.*"',
        "dependencies = [\n" + deps + "]" if deps else "dependencies = []",
        "",
        "[tool.uv]",
        "# Not a package: uv only installs the dependencies into repro/python/.venv.",
        "package = false",
    ]
    if env.exclude_newer:
        lines += [
            "# Resolve as of the repository's last commit (environment.exclude_newer).",
            f"exclude-newer = {_toml_str(env.exclude_newer)}",
        ]
    if env.exclude_newer_package:
        items = ", ".join(
            f"{_toml_str(n)} = {_toml_str(d)}" for n, d in sorted(env.exclude_newer_package.items())
        )
        lines += [
            "# The bound moved for packages it left without a usable release",
            "# (environment.exclude_newer_package; see REPRODUCE.md).",
            f"exclude-newer-package = {{ {items} }}",
        ]
    constraints = list(env.python_constraints)
    if routing is not None and routing.bound:
        # The PyTorch index has no upload times: torch is bounded by release instead.
        constraints.append(routing.bound)
    constraints += _pypi_torch_exclusions(manifest, routing)
    if constraints:
        items = "".join(f"  {_toml_str(c)},\n" for c in constraints)
        lines += [
            "# The repository's own lock (environment.python_constraints) and release bounds.",
            "constraint-dependencies = [\n" + items + "]",
        ]
    for position, url in enumerate(env.python_indexes, start=1):
        lines += [
            "",
            "[[tool.uv.index]]",
            f"name = {_toml_str(_index_name(url, position))}",
            f"url = {_toml_str(url)}",
        ]
    if routing is not None:
        lines += [
            "",
            f"# {routing.why}.",
            "[[tool.uv.index]]",
            f"name = {_toml_str(routing.name)}",
            f"url = {_toml_str(routing.url)}",
            "explicit = true",
        ]
        if env.exclude_newer:
            lines.append("exclude-newer = false  # no upload times on this index")
        lines += ["", "[tool.uv.sources]"]
        lines += [f"{n} = {{ index = {_toml_str(routing.name)} }}" for n in routing.packages]
    requirements = [header]
    requirements += [f"--extra-index-url {url}" for url in env.python_indexes]
    requirements += env.python_requirements
    return {
        PYPROJECT: "\n".join(lines) + "\n",
        REQUIREMENTS: "\n".join(requirements) + "\n",
    }


def needs_build(requirements: list[str]) -> list[str]:
    """Names of ``requirements`` that point at something other than a wheel (a ``git+``
    URL, an sdist, a directory): resolving those may need their build code, which static
    recovery never runs. Unparsable requirements are left out (the manifest checks them)."""
    from packaging.requirements import InvalidRequirement, Requirement

    names: list[str] = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.url and not urlsplit(req.url).path.endswith(".whl"):
            names.append(req.name)
    return sorted(set(names))


@dataclass(frozen=True)
class LockResult:
    """What :func:`lock_python_project` did.

    ``locked`` is true when ``uv.lock`` was written (``lock`` is its path). Otherwise
    ``reason`` says why in one line, and ``offline`` tells whether the cause was that the
    package index could not be reached (so ``requirements.txt`` has to do until a machine
    with access runs ``rb init`` again).
    """

    locked: bool
    lock: Path | None = None
    reason: str | None = None
    offline: bool = False
    uv_version: str | None = None
    #: The package uv would have had to build (no wheel) to resolve; never built.
    needs_build: str | None = None
    #: Packages whose date bound was moved so that the lock resolves (see datebound.py).
    relaxed: tuple[Relaxation, ...] = ()


def _uv_argv() -> list[str] | None:
    uv = _machine.uv_binary()
    return [uv] if uv else None


def lock_python_project(
    directory: str | Path,
    *,
    offline: bool,
    python: str | None = None,
    timeout: float = 600,
    sandboxed: bool = False,
    network_env: Mapping[str, str] | None = None,
    exclude_newer: str | None = None,
    kept_relaxations: Mapping[str, str] | None = None,
    python_label: str | None = None,
) -> LockResult:
    """Run ``uv lock`` in ``directory`` (which holds the rendered ``pyproject.toml``).

    ``exclude_newer`` is the pyproject's date bound: where it leaves a package no usable
    release, the bound is moved for that package (and its lock-step family) only, by
    :func:`reprobridge.artifacts.datebound.resolve_within_bound`; ``kept_relaxations`` are
    the ones the pyproject already carries, ``python_label`` (``X.Y``) words the reasons.
    The result's ``relaxed`` lists what was moved (the caller records it in the manifest).

    uv runs with ``--no-build`` always (metadata from wheels and the index only: no
    package's build code runs during `rb init`) and the cleared environment of
    :func:`reprobridge._proc.uv_env`. With ``sandboxed`` (the caller checked
    :func:`reprobridge.sandbox.sandbox_unusable`) it runs in bubblewrap besides
    (:func:`sandboxed_uv`): the operator's TLS/proxy/index settings ``network_env`` only, a
    fresh uv cache of its own, ``directory`` the only writable host path, the interpreter's
    own prefixes read-only. A requirement that only an sdist provides is not built: the
    result names it (``needs_build``) and the guide says so. Wheels-only resolution is not
    neutral: where the newest release of a package has no wheel, uv takes an older one.

    ``offline`` passes ``--offline`` (only uv's cache is used; on the host). ``python`` is
    the interpreter uv resolves for; by default uv looks for one matching
    ``requires-python`` and never downloads one. uv is
    :func:`reprobridge._machine.uv_binary`. Never raises for an unreachable index, a
    missing interpreter or a resolution failure: those come back as ``locked=False`` with
    the reason.
    """
    directory = Path(directory)
    base = _uv_argv()
    if base is None:
        return LockResult(
            False,
            reason="uv is not installed (rb depends on the `uv` package; reinstall rb, or put `uv` on PATH)",
        )
    # Static recovery runs no repository code: uv resolves from wheels and index metadata
    # only (--no-build), and sees no secret of the operator's environment.
    env = _proc.uv_env()
    version = _proc.run([*base, "--version"], env=env, check=False, timeout=30).text.strip()
    in_sandbox = sandboxed and not offline
    argv = [*base, "lock", "--quiet", "--no-progress", "--no-build"]
    if offline:
        argv.append("--offline")
    if python:
        argv += ["--python", python]
    try:
        with tempfile.TemporaryDirectory(prefix="rb-lock-cache-") as cache:

            def run(full: list[str]) -> _proc.Result:
                if in_sandbox:
                    return sandboxed_uv(
                        full, directory, python, network_env or {}, timeout, cache=Path(cache)
                    )
                return _proc.run(full, cwd=directory, env=env, check=False, timeout=timeout)

            probe = (
                compile_probe(
                    base[0],
                    directory,
                    exclude_newer,
                    python,
                    run,
                    flags=["--no-build"],
                )
                if exclude_newer and python and len(base) == 1
                else None
            )
            bounded = resolve_within_bound(
                lambda relaxed: run([*argv, *relaxation_flags(relaxed)]),
                exclude_newer,
                python=python_label,
                kept=kept_relaxations,
                probe=probe,
            )
    except CommandFailed as exc:  # only a timeout reaches here (check=False)
        return _failed(str(exc), version)
    result = bounded.result
    lock = directory / "uv.lock"
    if result.returncode == 0 and lock.is_file():
        return LockResult(True, lock=lock, uv_version=version or None, relaxed=bounded.relaxed)
    stderr = result.stderr.decode("utf-8", "replace").strip()
    tail = " | ".join(line.strip() for line in stderr.splitlines()[-4:] if line.strip())
    refused = _proc.uv_refused_build(stderr)
    if refused:
        reason = (
            f"{refused} cannot be resolved without building it, and a build runs the "
            "package's own code, which `rb init` never does; kept requirements.txt"
        )
        return _failed(reason, version, needs_build=refused)
    if _NETWORK_ERRORS.search(stderr):
        reason = f"the package index could not be reached, kept requirements.txt ({tail})"
        return _failed(reason, version, offline=True)
    if _NO_PYTHON.search(stderr):
        return _failed(f"no Python interpreter matching requires-python for uv ({tail})", version)
    return _failed(f"uv lock exited {result.returncode}: {tail}", version)


def _failed(
    reason: str, version: str, *, offline: bool = False, needs_build: str | None = None
) -> LockResult:
    """A lock not written, and why (``version``: what ``uv --version`` printed)."""
    return LockResult(
        False, reason=reason, offline=offline, uv_version=version or None, needs_build=needs_build
    )


#: Prints the interpreter's real path, then its prefix and base prefix, resolved.
_PREFIXES = (
    "import os, sys; print(os.path.realpath(sys.executable)); "
    "print(os.path.realpath(sys.prefix)); print(os.path.realpath(sys.base_prefix))"
)


def interpreter_prefixes(python: str) -> tuple[str, list[Path]]:
    """``python``'s real path and the folders it needs, for a sandbox's read-only binds:
    its ``sys.prefix`` (a venv) and ``sys.base_prefix`` (the installation), resolved, less
    those the sandbox binds anyway (``/usr``, ``/nix/store``). Asks the interpreter (the
    operator's own, which :func:`reprobridge._machine.first_working_interpreter` already
    ran); when it cannot say, the folder above its real path's ``bin``."""
    real = os.path.realpath(python)
    found = [Path(real).parents[1]]
    result = _proc.run(
        [real, "-I", "-c", _PREFIXES],
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        check=False,
        timeout=_machine.INTERPRETER_CHECK_TIMEOUT,
    )
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    if result.returncode == 0 and len(lines) == 3 and all(Path(x).is_absolute() for x in lines):
        real, found = lines[0], [Path(lines[1]), Path(lines[2])]
    system = [Path(d) for d in (*sandbox.SYSTEM_DIRS, "/nix/store")]
    binds = [p for p in dict.fromkeys(found) if not any(p.is_relative_to(d) for d in system)]
    return real, binds


def sandboxed_uv(
    argv: list[str],
    directory: Path,
    python: str | None,
    network_env: Mapping[str, str],
    timeout: float,
    *,
    cache: Path | None = None,
) -> _proc.Result:
    """Run uv's ``argv`` (a resolution that may build sdists for their metadata) in
    bubblewrap: network on, ``network_env`` (TLS/proxy/index settings) only, an empty HOME
    and a uv cache of its own (``cache``, shared by the attempts of one resolution; a fresh
    one by default), ``directory`` (its working directory) the only writable host path,
    the interpreter's prefix read-only. Used by :func:`lock_python_project` and by the host
    backend's resolution without a lock. Never raises for uv's own failure (check=False)."""
    if cache is None:
        with tempfile.TemporaryDirectory(prefix="rb-lock-cache-") as fresh:
            return sandboxed_uv(argv, directory, python, network_env, timeout, cache=Path(fresh))
    binary = Path(os.path.realpath(argv[0]))
    ro: list[Path] = [binary]
    if python:
        # uv gets the interpreter by a path that exists in the sandbox, whose own prefixes
        # (a venv's and the installation's: pyenv, conda, uv's, under the home directory)
        # are bound read-only; never the home directory itself.
        real, prefixes = interpreter_prefixes(python)
        ro += prefixes
        argv = [real if word == python else word for word in argv]
    home = directory / ".home"
    home.mkdir(exist_ok=True)
    env = {
        **network_env,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "UV_CACHE_DIR": str(cache),
        "UV_PYTHON_DOWNLOADS": "never",
        # No UV_NO_CONFIG: the rendered pyproject's [tool.uv] (exclude-newer, the
        # PyTorch index) is rb's own; no other uv.toml is visible in the sandbox.
        "LC_ALL": "C.UTF-8",
    }
    spec = sandbox.SandboxSpec(
        workdir=directory,
        ro_binds=tuple(ro),
        rw_binds=(cache,),
        network=True,
        env=env,
    )
    wrapped = sandbox.wrap([str(binary), *argv[1:]], spec, hostname="rb-lock")
    try:
        return _proc.run(wrapped, cwd=directory, env={}, check=False, timeout=timeout)
    finally:
        # uv.lock is the only output; the build home must not reach the artifacts.
        shutil.rmtree(home, ignore_errors=True)
