"""What the merge rules share: the result type, the builder that records provenance, and
the ranking of findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from reprobridge.detect.base import Finding, rank_of
from reprobridge.detect.findings import FindingValue
from reprobridge.manifest.notes import RecoveryNotes
from reprobridge.manifest.schema import Manifest
from reprobridge.recovery.gpuneed import GpuNeed

V = TypeVar("V", bound=FindingValue)


@dataclass(frozen=True)
class MergeResult:
    """A validated manifest plus what a person should know about how it was made."""

    manifest: Manifest
    notes: RecoveryNotes = field(default_factory=RecoveryNotes)
    #: Whether the CUDA toolkit was installed for the experiments' need, and why.
    gpu_need: GpuNeed = field(default_factory=lambda: GpuNeed(False, "no experiment needs a GPU"))


class Builder:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.prov: dict[str, tuple[list[str], str]] = {}

    def put(self, path: str, value: Any, sources: list[str], confidence: str = "high") -> None:
        cur = self.data
        parts = path.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = value
        self.prov[path] = (sorted(set(sources)) or ["rb default"], confidence)

    def has(self, path: str) -> bool:
        cur: Any = self.data
        for p in path.split("."):
            if not isinstance(cur, dict) or p not in cur:
                return False
            cur = cur[p]
        return True


def best(findings: list[Finding[V]], priority: dict[str, int]) -> list[Finding[V]]:
    """Findings ordered strongest first: confidence, then source priority, then evidence."""
    return sorted(
        findings,
        key=lambda f: (rank_of(f.confidence), priority.get(f.detector, 99), f.sources()),
    )
