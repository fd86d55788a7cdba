"""The manifest (reprobridge.toml): pydantic models, tomlkit round-trip, JSON Schema."""

from __future__ import annotations

from reprobridge.manifest.schema import (
    Claim,
    Dataset,
    Derivation,
    Environment,
    Experiment,
    Manifest,
    Metric,
    MetricSource,
    NixpkgsPin,
    Output,
    Project,
    Tier,
)

__all__ = [
    "Claim",
    "Dataset",
    "Derivation",
    "Environment",
    "Experiment",
    "Manifest",
    "Metric",
    "MetricSource",
    "NixpkgsPin",
    "Output",
    "Project",
    "Tier",
]
