"""`rb audit --plan`: what an audit would run, and for about how long, without running it.

:func:`preview_audit` selects the experiments as the audit does
(:func:`~reprobridge.audit.plan.select_experiments`), plans their runs, and says what the
audit would refuse (artifacts out of sync with the manifest, uncommitted changes). It
writes nothing, starts no environment and runs nothing of the repository (git only reads).

Estimates come from runs recorded earlier (:func:`recorded_wall_times`): the newest sealed
bundle under ``repro/evidence/`` (or a probe's under ``.reprobridge/probe/``) with finished
runs of the experiment at the tier gives the mean wall time of a run; the time to set up
the environment is not in it. Without such a run the estimate is unknown (None).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reprobridge._machine import MIN_NIX, dotted, nix_version
from reprobridge.audit.dirty import dirty_tree
from reprobridge.audit.insync import stale_artifacts
from reprobridge.audit.plan import Tier, plan_runs, select_experiments
from reprobridge.constants import EVIDENCE_DIR, MANIFEST_FILE
from reprobridge.evidence.layout import RUNS_DIR, STATUS_FILE
from reprobridge.evidence.records import RecordError, RunStatus
from reprobridge.evidence.store import EvidenceStore
from reprobridge.manifest.io import read_manifest

#: Where recorded runs are looked for, newest bundle first within each.
RECORD_DIRS = (EVIDENCE_DIR, ".reprobridge/probe")
#: A status.json larger than this is not read for an estimate.
_MAX_STATUS_BYTES = 4 * 2**20


@dataclass(frozen=True)
class Estimate:
    """The mean wall time of a recorded run (``seconds``) and the bundle it came from."""

    seconds: float
    source: str


@dataclass(frozen=True)
class ExperimentPlan:
    """One experiment of the plan: its runs' seeds, each run's timeout, and the estimate."""

    id: str
    seeds: tuple[int, ...]
    timeout_s: float
    estimate: Estimate | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "runs": len(self.seeds),
            "seeds": list(self.seeds),
            "timeout_s": self.timeout_s,
            "estimate_s": None
            if self.estimate is None
            else self.estimate.seconds * len(self.seeds),
            "estimate_from": None if self.estimate is None else self.estimate.source,
        }


@dataclass(frozen=True)
class AuditPreview:
    """What ``rb audit`` with the same options would do (see the module docstring)."""

    tier: str
    backend: str
    experiments: tuple[ExperimentPlan, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    #: What would stop the audit before any run: stale artifacts, uncommitted changes.
    refusals: tuple[str, ...] = ()

    @property
    def estimate_s(self) -> float | None:
        """The runs' estimated total, None when an experiment has no estimate."""
        parts = [
            e.estimate.seconds * len(e.seeds) if e.estimate else None for e in self.experiments
        ]
        return None if None in parts else sum(p for p in parts if p is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "backend": self.backend,
            "experiments": [e.to_json() for e in self.experiments],
            "runs": sum(len(e.seeds) for e in self.experiments),
            "estimate_s": self.estimate_s,
            "skipped": dict(self.skipped),
            "refusals": list(self.refusals),
        }


def recorded_wall_times(root: Path, tier: str) -> dict[str, Estimate]:
    """Experiment id -> :class:`Estimate` from the newest bundle that has finished runs
    of it at ``tier`` (runs that ended with exit status 0). Unreadable records are skipped."""
    found: dict[str, Estimate] = {}
    for rel in RECORD_DIRS:
        for bundle in reversed(EvidenceStore(root / rel).bundles()):
            runs = bundle / RUNS_DIR
            if runs.is_symlink() or not runs.is_dir():
                continue
            for exp_dir in sorted(runs.iterdir()):
                if exp_dir.name in found or exp_dir.is_symlink() or not exp_dir.is_dir():
                    continue
                walls = list(_wall_times(exp_dir.iterdir(), tier))
                if walls:
                    found[exp_dir.name] = Estimate(sum(walls) / len(walls), f"{rel}/{bundle.name}")
    return found


def _wall_times(run_dirs: Iterable[Path], tier: str) -> Iterable[float]:
    """The wall times of the finished runs among ``run_dirs`` at ``tier``."""
    for run_dir in run_dirs:
        status = run_dir / STATUS_FILE
        try:
            if status.is_symlink() or status.stat().st_size > _MAX_STATUS_BYTES:
                continue
            record = RunStatus.from_json(json.loads(status.read_bytes())).record
        except (OSError, ValueError, RecordError):
            continue
        term = record.termination
        ok = term is not None and term.kind == "exit" and term.returncode == 0
        if ok and record.tier == tier and record.wall_s is not None:
            yield record.wall_s


def _backend(requested: str, nix: str = "nix") -> str:
    """The backend the audit would use, as far as it is known without building anything."""
    if requested != "auto":
        return requested
    version = nix_version(nix)
    if version is None:
        return "auto: host (nix is not installed)"
    if version < MIN_NIX:
        return f"auto: host (nix {dotted(version)} < {dotted(MIN_NIX)})"
    return f"auto: nix {dotted(version)} (the host if its environment cannot be built)"


def preview_audit(
    root: Path,
    *,
    experiments: list[str] | None,
    runs: int,
    tier: Tier,
    backend: str,
    everything: bool = False,
) -> AuditPreview:
    """The :class:`AuditPreview` of an audit of ``root`` with these options. Raises the
    audit's own errors for what it could not plan (an unknown experiment, a missing tier,
    an invalid manifest); what would stop it later is listed in ``refusals``."""
    root = root.resolve()
    manifest = read_manifest(root / MANIFEST_FILE)
    selection = select_experiments(manifest, experiments, tier, root=root, everything=everything)
    plan = plan_runs(manifest, list(selection.ids), runs=runs, tier=tier)
    estimates = recorded_wall_times(root, tier)
    planned = tuple(
        ExperimentPlan(
            exp_id,
            tuple(r.seed for r in plan if r.experiment == exp_id),
            next(r.timeout_s for r in plan if r.experiment == exp_id),
            estimates.get(exp_id),
        )
        for exp_id in selection.ids
    )
    refusals: list[str] = []
    stale = stale_artifacts(root, manifest, selection.ids)
    if stale:
        refusals.append(f"not in sync with {MANIFEST_FILE} (run `rb init`): {', '.join(stale)}")
    dirty = dirty_tree(root)
    if dirty.dirty:
        refusals.append(f"uncommitted changes (commit them, or --allow-dirty): {dirty.files()}")
    return AuditPreview(tier, _backend(backend), planned, selection.skipped, tuple(refusals))
