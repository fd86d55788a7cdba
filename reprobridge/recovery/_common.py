"""What the merge rules share: the result types, the builder that records provenance, and
the ranking of findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from reprobridge.detect.base import Finding
from reprobridge.detect.findings import FindingValue
from reprobridge.manifest.schema import Manifest
from reprobridge.recovery import pins

V = TypeVar("V", bound=FindingValue)

CONF_RANK = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Conflict:
    """Sources that disagree about one value, and which one won and why."""

    path: str
    chosen: str
    others: list[str]
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: chose {self.chosen} over {'; '.join(self.others)} ({self.rule})"


@dataclass
class MergeResult:
    """A validated manifest plus what a person should know about how it was made."""

    manifest: Manifest
    conflicts: list[Conflict] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    flagged_imports: list[str] = field(default_factory=list)
    unmatched_targets: list[str] = field(default_factory=list)
    dropped_experiments: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pin: pins.PinChoice | None = None


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
        key=lambda f: (CONF_RANK[f.confidence], priority.get(f.detector, 99), f.sources()),
    )
