"""CUDA: whether CUDA sources are compiled (``nvcc``) and which CUDA version the packages need.

``nvcc``: ``.cu``/``.cuh`` sources, or a Python file using ``torch.utils.cpp_extension``
with ``CUDAExtension`` or ``.cu`` sources (a CPU-only ``CppExtension`` needs no nvcc).

``cuda``: derived from the earlier ``python_requirement`` and ``python_index`` findings,
never by re-reading files. Rules, strongest first:

=============================================  =====================  ==========
evidence                                       version                confidence
=============================================  =====================  ==========
index URL ``.../whl/cu121``, ``.../cu113/...``  12.1, 11.3             high
local version ``torch==2.0.1+cu118``            11.8                   high
``cupy-cuda117`` (one wheel per CUDA minor)     11.7                   medium
``nvidia-cuda-runtime-cu12==12.1.105``          12.1                   medium
torch pinned ``==2.1.2`` (default PyPI wheel)   [torch_cuda] of pins   medium
tensorflow pinned ``==2.15.*``                  [tensorflow_cuda]      medium
``jax[cuda12]``, ``cupy-cuda12x``, ``*-cu12``   12 (major only)        low
=============================================  =====================  ==========

One finding per distinct version, carrying all its evidence and rules; the merge chooses.
A major-only version is reported as ``{"version": "12"}``. A CPU build (``+cpu``, a
``/whl/cpu`` index) suppresses the torch default-wheel rule, and so does a torch from a conda
environment (conda's own ``cuda`` finding covers it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from reprobridge.data import load_pins
from reprobridge.detect._text import skip_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding, rank_of
from reprobridge.detect.findings import CudaValue, IndexValue, NvccValue, RequirementValue

# "/whl/cu121", "/cu113/torch1.11/", "+cu118", "%2Bcu118" — not "-cu12" (a wheel's name).
_CU_TAG_RE = re.compile(r"(?:/|\+|%2B)cu(\d{2,3})(?!\d)", re.I)
_CPU_TAG_RE = re.compile(r"(?:/whl/cpu\b|\+cpu\b|%2Bcpu\b)", re.I)
_NVIDIA_WHEEL_RE = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d{2})$")
_CUPY_RE = re.compile(r"^cupy-cuda(\d{2,3}|\d{2}x)$")
_JAX_EXTRA_RE = re.compile(r"^cuda(\d{2})")
_JAXLIB_LOCAL_RE = re.compile(r"\+cuda(\d{2,3})")
_CU_SOURCE_RE = re.compile(r"""CUDAExtension|\.cu["']""")
#: add(version, confidence, evidence, rule) — records one piece of CUDA evidence.
_Add = Callable[[str, Confidence, tuple[Evidence, ...], str], None]

#: Default CUDA of plain PyPI torch wheels before the pins data starts (1.12); from the
#: PyTorch "Previous Versions" page (doc-knowledge, like the data file).
_OLD_TORCH_DEFAULT = {
    "1.4": "10.1",
    "1.5": "10.2",
    "1.6": "10.2",
    "1.7": "10.2",
    "1.8": "10.2",
    "1.9": "10.2",
    "1.10": "10.2",
    "1.11": "10.2",
}


def cu_tag_version(digits: str) -> str:
    """``"118"`` -> ``"11.8"``, ``"92"`` -> ``"9.2"`` (the last digit is the minor)."""
    return f"{int(digits[:-1])}.{digits[-1]}"


def _pinned(req: Requirement) -> Version | None:
    """The version of an ``==``/``===`` pin (``==2.1.*`` counts as 2.1), else None."""
    for spec in req.specifier:
        if spec.operator in ("==", "==="):
            try:
                return Version(spec.version.removesuffix(".*"))
            except InvalidVersion:
                return None
    return None


@dataclass
class _Candidate:
    version: str
    confidence: Confidence
    evidence: list[Evidence] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)


class CudaDetector(Detector):
    """``nvcc`` and ``cuda`` findings (see the module docstring for the rules)."""

    name = "cuda"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        nvcc = self._nvcc(ctx)
        if nvcc:
            findings.append(
                Finding(
                    kind="nvcc",
                    key="nvcc",
                    value=NvccValue(),
                    evidence=tuple(nvcc),
                    detector=self.name,
                    note="CUDA sources are compiled",
                )
            )
        found: dict[str, _Candidate] = {}

        def add(version: str, conf: Confidence, evidence: tuple[Evidence, ...], rule: str) -> None:
            cand = found.setdefault(version, _Candidate(version, conf))
            if rank_of(conf) < rank_of(cand.confidence):
                cand.confidence = conf
            cand.evidence += [e for e in evidence if e not in cand.evidence]
            if rule not in cand.rules:
                cand.rules.append(rule)

        cpu_only = False
        for index in ctx.of(IndexValue):
            url = index.value.url
            match = _CU_TAG_RE.search(url)
            if match:
                add(cu_tag_version(match.group(1)), "high", index.evidence, f"index URL {url}")
            elif _CPU_TAG_RE.search(url):
                cpu_only = True
        requirements = []
        for f in ctx.of(RequirementValue):
            try:
                requirements.append((f, Requirement(f.value.requirement)))
            except InvalidRequirement:
                continue
        cpu_only = cpu_only or any(_CPU_TAG_RE.search(f.value.requirement) for f, _ in requirements)
        for f, req in requirements:
            self._requirement(f, req, add, cpu_only)
        ordered = sorted(
            found.values(), key=lambda c: (rank_of(c.confidence), -len(c.version), c.version)
        )
        for cand in ordered:
            major_only = "." not in cand.version
            findings.append(
                Finding(
                    kind="cuda",
                    key="cuda",
                    value=CudaValue(cand.version),
                    evidence=tuple(cand.evidence),
                    detector=self.name,
                    confidence=cand.confidence,
                    note="; ".join(cand.rules) + ("; major version only" if major_only else ""),
                )
            )
        return findings

    @staticmethod
    def _nvcc(ctx: DetectContext) -> list[Evidence]:
        evidence: list[Evidence] = []
        sources = [p for p in ctx.index.with_suffix(".cu", ".cuh") if not skip_path(p)]
        if sources:
            evidence.append(Evidence(sources[0]))
        for path in sorted(ctx.index.python_files_with("cpp_extension")):
            text = ctx.index.try_read_text(path)
            match = _CU_SOURCE_RE.search(text) if text else None
            if text and match:
                evidence.append(Evidence(path, text.count("\n", 0, match.start()) + 1))
                break
        return evidence

    @staticmethod
    def _requirement(
        f: Finding[RequirementValue], req: Requirement, add: _Add, cpu_only: bool
    ) -> None:
        name = f.key
        text = f.value.requirement
        ev = f.evidence
        tag = _CU_TAG_RE.search(text.split(";", 1)[0])
        if tag:
            add(cu_tag_version(tag.group(1)), "high", ev, f"CUDA build tag in {text}")
            return
        version = _pinned(req)
        # A conda pytorch build follows its cudatoolkit (which the conda detector reports),
        # not the PyPI wheel's default.
        if name == "torch" and version is not None and not cpu_only and f.detector != "conda":
            key = f"{version.major}.{version.minor}"
            row = load_pins().get("torch_cuda", {}).get(key)
            default = (
                cu_tag_version(str(row["default"]).removeprefix("cu"))
                if isinstance(row, dict) and "default" in row
                else _OLD_TORCH_DEFAULT.get(key)
            )
            if default:
                add(default, "medium", ev, f"default CUDA of the torch {key} wheel on PyPI")
        elif name in ("tensorflow", "tensorflow-gpu") and version is not None:
            key = f"{version.major}.{version.minor}"
            row = load_pins().get("tensorflow_cuda", {}).get(key)
            if isinstance(row, dict) and "cuda" in row:
                add(str(row["cuda"]), "medium", ev, f"tested CUDA of TensorFlow {key}")
        elif name in ("jax", "jaxlib"):
            for extra in sorted(req.extras):
                match = _JAX_EXTRA_RE.match(extra)
                if match:
                    add(match.group(1), "low", ev, f"jax[{extra}] extra")
            local = _JAXLIB_LOCAL_RE.search(text)
            if local:
                digits = local.group(1)
                found = cu_tag_version(digits) if len(digits) == 3 else digits
                add(found, "medium" if "." in found else "low", ev, f"jaxlib build {text}")
        elif match := _CUPY_RE.match(name):
            digits = match.group(1)
            if digits.endswith("x"):
                add(digits[:-1], "low", ev, f"{name} wheel")
            else:
                add(cu_tag_version(digits), "medium", ev, f"{name} wheel")
        elif match := _NVIDIA_WHEEL_RE.match(name):
            if name in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11") and version:
                add(f"{version.major}.{version.minor}", "medium", ev, f"{name} pinned")
            else:
                add(match.group(1), "low", ev, f"{name} wheel")
