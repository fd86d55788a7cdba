"""Whether the experiments need a GPU: what decides if the CUDA toolkit is installed.

A CUDA version named by the packages (a ``+cu121`` build, a ``/whl/cu121`` index,
``pytorch-cuda=12.1``) says which wheels were built for it, not that a run needs a GPU. The
toolkit (``environment.cuda``, the flake's ``cudaPackages_X_Y``: gigabytes, unfree, mostly
not in the binary cache) is installed only when CUDA sources are compiled
(``environment.nvcc``) or some experiment needs a GPU (``hardware.gpus > 0``). The same rule
reads the merge's draft and the final manifest (after the agent's proposals and the probe's
decisions), so both take the same decision from the same values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reprobridge.manifest.schema import Manifest


@dataclass(frozen=True)
class GpuNeed:
    """``needed``: CUDA sources are compiled or an experiment needs a GPU; ``why``: one
    clause saying which, or that none is needed, with the sources (a probe's run, the code
    line without a CPU fallback, a hand edit)."""

    needed: bool
    why: str


def _cited(evidence: Sequence[str]) -> str:
    return f" ({', '.join(evidence)})" if evidence else ""


def gpu_need(
    gpus: Mapping[str, int],
    nvcc: Sequence[str] | None,
    sources: Callable[[str], Sequence[str]],
) -> GpuNeed:
    """The need of experiments with these GPU counts (id -> ``hardware.gpus``) and of
    compiled CUDA sources (``nvcc``: their sources; None when none are compiled);
    ``sources`` gives a manifest key's provenance (``[]``: none)."""
    if nvcc is not None:
        return GpuNeed(True, "CUDA sources are compiled" + _cited(nvcc))
    users = [i for i, n in gpus.items() if n > 0]
    keys = [f"experiments.{i}.hardware.gpus" for i in (users or list(gpus))]
    evidence = list(dict.fromkeys(s for k in keys for s in sources(k)))
    if users:
        who = "an experiment needs" if len(users) == 1 else "experiments need"
        return GpuNeed(True, f"{who} a GPU: {', '.join(users)}" + _cited(evidence))
    # No GPU count anywhere has a source when the code simply asked for none.
    return GpuNeed(
        False,
        "no experiment needs a GPU"
        + (_cited(evidence) or " (no code an experiment runs uses CUDA without a CPU fallback)"),
    )


def manifest_gpu_need(manifest: Manifest) -> GpuNeed:
    """:func:`gpu_need` of a manifest's final values (``derived`` gives the provenance)."""

    def sources(key: str) -> Sequence[str]:
        d = manifest.derived.get(key)
        return d.sources if d is not None else []

    gpus = {i: e.hardware.gpus for i, e in manifest.experiments.items()}
    nvcc = sources("environment.nvcc") if manifest.environment.nvcc else None
    return gpu_need(gpus, nvcc, sources)
