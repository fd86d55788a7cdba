"""Choose a nixpkgs release from the shipped pin data; never invent a rev or narHash.

Rule: among the known releases that carry the requested ``python3XY``, the requested
``cudaPackages_X_Y`` (when CUDA is needed) and a gcc the CUDA version accepts, prefer a
closed (``is_final``) release over an open one, stable channels over unstable ones, and
then the newest. Every choice comes with the reasons, including that the attribute lists
of the data file are *inferred* unless verified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reprobridge.data import load_pins
from reprobridge.errors import RenderError


@dataclass(frozen=True)
class PinChoice:
    """A nixpkgs release and why it was chosen."""

    release: str
    rev: str
    narHash: str
    lastModified: int
    python_attr: str
    cuda_attr: str | None
    gcc: str | None
    attrs_inferred: bool
    reasons: list[str] = field(default_factory=list)


def python_attr(version: str) -> str:
    """``"3.10"`` -> ``"python310"``."""
    return "python" + version.replace(".", "")


def cuda_attr(version: str) -> str:
    """``"12.1"`` -> ``"cudaPackages_12_1"``."""
    return "cudaPackages_" + version.replace(".", "_")


def nvcc_gcc_bounds(cuda: str) -> tuple[int | None, int | None, str]:
    """(min, max) host gcc major that nvcc of ``cuda`` accepts, and the data's status."""
    table: dict[str, Any] = load_pins().get("nvcc_max_gcc", {})
    row = table.get(cuda)
    if not isinstance(row, dict):
        return None, None, "unknown"
    return row.get("gcc_min"), row.get("gcc_max"), str(row.get("status", "unknown"))


def _releases() -> dict[str, dict[str, Any]]:
    releases: dict[str, dict[str, Any]] = load_pins()["release"]
    return releases


def version_key(version: str) -> tuple[int, ...]:
    """The sort key of a dotted version such as ``3.10`` or ``12.1`` (numeric parts)."""
    return tuple(int(p) for p in version.split("."))


def available_pythons() -> list[str]:
    """Every Python ``X.Y`` some known release carries, ascending."""
    found = {
        f"3.{attr[len('python3') :]}"
        for rel in _releases().values()
        for attr in rel.get("pythons", [])
        if attr.startswith("python3")
    }
    return sorted(found, key=version_key)


def available_cudas() -> list[str]:
    """Every CUDA ``X.Y`` some known release carries, ascending."""
    found = {
        s.removeprefix("cudaPackages_").replace("_", ".")
        for rel in _releases().values()
        for s in rel.get("cuda_sets", [])
    }
    return sorted(found, key=version_key)


def choose_pin(
    python: str, cuda: str | None = None, gcc: str | None = None, *, nvcc: bool = False
) -> PinChoice:
    """The best known release for these needs. Raises RenderError when none fits."""
    want_py = python_attr(python)
    want_cuda = cuda_attr(cuda) if cuda else None
    gcc_min, gcc_max, gcc_status = nvcc_gcc_bounds(cuda) if cuda else (None, None, "")
    candidates: list[tuple[tuple[int, int, int], str, dict[str, Any], str | None]] = []
    for name, rel in _releases().items():
        if want_py not in rel.get("pythons", []):
            continue
        if want_cuda and want_cuda not in rel.get("cuda_sets", []):
            continue
        chosen_gcc: str | None = None
        gccs = sorted((int(g[3:]) for g in rel.get("gccs", []) if g[3:].isdigit()), reverse=True)
        if gcc:
            if f"gcc{gcc}" not in rel.get("gccs", []):
                continue
            chosen_gcc = gcc
        elif cuda and nvcc and gcc_max is not None:
            fitting = [g for g in gccs if g <= gcc_max and (gcc_min is None or g >= gcc_min)]
            if not fitting:
                continue
            chosen_gcc = str(fitting[0])
        stable = 0 if "unstable" in name else 1
        rank = (int(bool(rel.get("is_final"))), stable, int(rel["lastModified"]))
        candidates.append((rank, name, rel, chosen_gcc))
    if not candidates:
        needs = [want_py] + ([want_cuda] if want_cuda else []) + ([f"gcc{gcc}"] if gcc else [])
        raise RenderError(
            f"no known nixpkgs release carries {' + '.join(needs)}",
            field="environment",
            hint="edit environment.python/cuda in reprobridge.toml to a version listed by "
            "`rb doctor --pins`, or add a verified pin to the pin data",
        )
    candidates.sort(key=lambda c: c[0], reverse=True)
    _, name, rel, chosen_gcc = candidates[0]
    reasons = [
        f"{name} is the newest {'closed ' if rel.get('is_final') else ''}release in the pin data "
        f"that carries {want_py}" + (f" and {want_cuda}" if want_cuda else ""),
        f"rev {rel['rev'][:12]} / {rel['narHash']} seen in {rel.get('confirmations', '?')} "
        "independent public lock files",
    ]
    newer = [
        r
        for n, r in _releases().items()
        if "unstable" not in n and r["lastModified"] > rel["lastModified"]
    ]
    if want_cuda and newer and all(want_cuda not in r.get("cuda_sets", []) for r in newer):
        reasons.append(
            f"newer releases dropped {want_cuda} (CUDA 11.x and 12.0-12.5 left nixpkgs on 2025-08-08)"
        )
    if chosen_gcc and cuda and nvcc:
        reasons.append(
            f"gcc{chosen_gcc}: nvcc {cuda} accepts host gcc <= {gcc_max} ({gcc_status}); "
            "the flake uses the CUDA set's backendStdenv compiler"
        )
    inferred = rel.get("attrs_status") != "verified-from-file"
    if inferred:
        reasons.append(
            "the attribute lists of this release in the pin data are inferred, not verified at "
            "the rev: the first `nix develop` proves them"
        )
    return PinChoice(
        release=name,
        rev=rel["rev"],
        narHash=rel["narHash"],
        lastModified=int(rel["lastModified"]),
        python_attr=want_py,
        cuda_attr=want_cuda,
        gcc=chosen_gcc,
        attrs_inferred=inferred,
        reasons=reasons,
    )


def default_cuda(major: str) -> str | None:
    """The CUDA ``X.Y`` that the newest closed release's ``cudaPackages_<major>`` points to."""
    finals = sorted(
        (r for r in _releases().values() if r.get("is_final")),
        key=lambda r: int(r["lastModified"]),
        reverse=True,
    )
    for rel in finals:
        m = re.match(r"cudaPackages_(\d+) \((\d+\.\d+)\)", str(rel.get("cuda_default", "")))
        if m and m.group(1) == major:
            return m.group(2)
    return None
