"""What the host backend installs with uv, and with which interpreter.

Contract:

* :class:`HostInstall` is what a run's environment holds, taken from the manifest (the
  auditor's input), never from uv configuration files in the checkout: the requirements,
  extra indexes, constraints (the repository's own lock, torch's release bound), the date
  bound (``environment.exclude_newer``, moved per package by
  ``environment.exclude_newer_package``) and where the torch family comes from.
* :func:`pip_inputs` writes the inputs of ``uv pip install`` into a directory of the
  auditor's and returns the flags that use them. The requirements go into a
  ``pyproject.toml``: only there can the torch family be routed to the PyTorch CPU index
  (``[tool.uv.sources]``; the command line has no per-package index).
* :func:`index_problem` says fast (one DNS lookup and TCP connect) why an index cannot be
  reached, so the fallback to PyPI's torch costs seconds, not uv's retries.
* :func:`find_interpreter` finds a Python ``X.Y`` that runs: ``pythonX.Y`` on PATH, then
  pyenv's and uv's installed interpreters by path (a pyenv shim for a version that is not
  the global one exits 127 although the interpreter exists).
* :func:`built_from_source` reads the packages uv built from its log.
* :func:`step_network_env` is what of the operator's network settings a sandboxed uv step
  gets (TLS roots, proxies, indexes), never a credential: the step runs build code.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from reprobridge import _proc
from reprobridge.artifacts.datebound import package_bound_flags
from reprobridge.artifacts.pyenv import TorchRouting, torch_routing
from reprobridge.manifest.schema import Manifest, requirement_name

#: Seconds the reachability probe of an index may take (DNS plus TCP connect).
INDEX_PROBE_TIMEOUT = 5.0
#: Proxy variables under which a direct connection says nothing about reachability.
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
#: Network settings a sandboxed uv step may get (values with credentials are dropped): what
#: rb passes to uv on the host, less its cache (the step's is private) and local paths.
_STEP_NETWORK_VARS = tuple(
    v for v in _proc.UV_PASSTHROUGH if v not in ("UV_CACHE_DIR", "XDG_CACHE_HOME", "UV_FIND_LINKS")
)
#: A URL with a user (and password) in it: ``scheme://user:pass@host``.
_USERINFO = re.compile(r"://[^/@\s]*@")
#: uv's line for a package it built (``Built name==1.0``, ``Built name @ file:///...``).
_BUILT = re.compile(r"^\s*Built ([A-Za-z0-9][A-Za-z0-9._-]*)(?:==| @ )", re.M)


@dataclass(frozen=True)
class HostInstall:
    """What the host backend installs (see the module docstring)."""

    requirements: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    exclude_newer: str | None = None
    #: Per-package date bounds (``environment.exclude_newer_package``), sorted by name.
    exclude_newer_package: tuple[tuple[str, str], ...] = ()
    routing: TorchRouting | None = None

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> HostInstall:
        env = manifest.environment
        routing = torch_routing(manifest)
        bound = (routing.bound,) if routing is not None and routing.bound else ()
        return cls(
            requirements=tuple(env.python_requirements),
            indexes=tuple(env.python_indexes),
            constraints=(*env.python_constraints, *bound),
            exclude_newer=env.exclude_newer,
            exclude_newer_package=tuple(sorted(env.exclude_newer_package.items())),
            routing=routing,
        )


@dataclass
class IndexChoice:
    """Whether the torch family comes from its routed index, and why not (for the evidence)."""

    routed: bool
    url: str | None = None
    fallback: str | None = None
    notes: list[str] = field(default_factory=list)


def pip_inputs(
    install: HostInstall, directory: Path, *, routed: bool, exclude: Iterable[str] = ()
) -> list[str]:
    """Write ``directory/pyproject.toml`` (and ``constraints.txt``) for ``uv pip install``;
    return its flags. ``exclude`` names requirements left out (canonical names); ``routed``
    routes the torch family to :attr:`HostInstall.routing`'s index."""
    skip = set(exclude)
    routing = install.routing if routed else None
    deps = [
        routing.requirement(r) if routing else r
        for r in install.requirements
        if requirement_name(r) not in skip
    ]
    lines = [
        "[project]",
        'name = "rb-run-environment"',
        'version = "0"',
        "dependencies = [" + ", ".join(json.dumps(d) for d in deps) + "]",
    ]
    if routing is not None:
        lines += [
            "",
            "[[tool.uv.index]]",
            f"name = {json.dumps(routing.name)}",
            f"url = {json.dumps(routing.url)}",
            "explicit = true",
            *(["exclude-newer = false"] if install.exclude_newer else []),
            "",
            "[tool.uv.sources]",
            *(f"{n} = {{ index = {json.dumps(routing.name)} }}" for n in routing.packages),
        ]
    directory.mkdir(parents=True, exist_ok=True)
    pyproject = directory / "pyproject.toml"
    pyproject.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flags = ["-r", str(pyproject)]
    if install.constraints:
        constraints = directory / "constraints.txt"
        constraints.write_text("\n".join(install.constraints) + "\n", encoding="utf-8")
        flags += ["-c", str(constraints)]
    if install.exclude_newer:
        flags += ["--exclude-newer", install.exclude_newer]
        flags += package_bound_flags(install.exclude_newer_package)
    for url in install.indexes:
        flags += ["--extra-index-url", url]
    return flags


def index_problem(url: str, *, timeout: float = INDEX_PROBE_TIMEOUT) -> str | None:
    """Why the host of ``url`` cannot be reached (None when a TCP connection opens, or when
    a proxy is configured: then only uv can tell, and its failure triggers the fallback)."""
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return None
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return f"{url}: no host"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{host}:{port} cannot be reached ({exc.strerror or exc})"


def choose_index(install: HostInstall) -> IndexChoice:
    """Route the torch family to its index when that index answers; else PyPI, recorded."""
    routing = install.routing
    if routing is None:
        return IndexChoice(routed=False)
    why = index_problem(routing.url)
    if why is None:
        return IndexChoice(routed=True, url=routing.url, notes=[f"torch family: {routing.why}"])
    fallback = (
        f"the PyTorch index {routing.url} cannot be reached ({why}): the torch family comes "
        "from PyPI instead (its default build, with CUDA libraries on Linux)"
    )
    return IndexChoice(routed=False, url=routing.url, fallback=fallback, notes=[fallback])


def built_from_source(log: str) -> list[str]:
    """Canonical names of the packages uv says it built (``Built X==1.0``), sorted."""
    return sorted({canonicalize_name(m) for m in _BUILT.findall(log)})


def step_network_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The operator's TLS, proxy and index settings for a sandboxed uv step: without them a
    step behind a TLS-inspecting proxy fails (``invalid peer certificate``). A value that
    carries credentials (``user:pass@``) is left out: the step runs a package's build code.
    Certificate paths must lie where the sandbox binds them (``/etc/ssl``)."""
    source = os.environ if environ is None else environ
    return {
        k: source[k]
        for k in _STEP_NETWORK_VARS
        if source.get(k) and not _USERINFO.search(source[k])
    }
