"""Which runs an audit makes: experiments x repeats, with the seed each repeat uses."""

from __future__ import annotations

import contextlib
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from reprobridge.audit.claims import ClaimError, references
from reprobridge.constants import MANIFEST_FILE
from reprobridge.errors import AuditError, UnknownExperimentError
from reprobridge.evidence.records import PlannedRun
from reprobridge.manifest.schema import Experiment, Manifest, parse_duration

Tier = Literal["full", "smoke"]
__all__ = ["PlannedRun", "Selection", "Tier", "plan_runs", "select_experiments"]


@dataclass(frozen=True)
class Selection:
    """The experiments an audit runs (``ids``, in the manifest's order) and those it
    leaves out when none is named (``skipped``: id -> why)."""

    ids: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)


def not_expected_to_finish(
    manifest: Manifest, exp_id: str, tier: Tier, root: Path | None
) -> str | None:
    """Why rb expects a run of ``exp_id`` at ``tier`` not to finish, or None: its command
    loops until the timeout (``unbounded``, unless a reduced tier bounds it), or a dataset
    it reads is declared at a path that is not there (not ``generated``; only with
    ``root``: nothing is hashed, links are not followed)."""
    exp = manifest.experiments[exp_id]
    spec = exp.tiers.get(tier) if tier != "full" else None
    if exp.unbounded and not (spec is not None and spec.bounded):
        return f"unbounded: {exp.unbounded}"
    for ds_id in exp.datasets if root is not None else ():
        ds = manifest.datasets[ds_id]
        if ds.path and not ds.generated and not os.path.lexists(root / ds.path):  # type: ignore[operator]
            where = f" (download it from {ds.url})" if ds.url else ""
            return f"dataset {ds_id} is missing: {ds.path} not found{where}"
    return None


def _claimed(manifest: Manifest) -> set[str]:
    """The experiments the manifest's claims refer to (a claim that does not parse refers
    to none here: the audit refuses it with its own error)."""
    out: set[str] = set()
    for claim in manifest.claims:
        with contextlib.suppress(ClaimError):
            out |= {exp_id for exp_id, _ in references(claim.expr)}
    return out


def select_experiments(
    manifest: Manifest,
    selected: list[str] | None,
    tier: Tier,
    *,
    root: Path | None = None,
    everything: bool = False,
) -> Selection:
    """``selected`` as given (checked by :func:`plan_runs`), else the default: the
    experiments with the tier (every one for the full tier), of those the ones marked
    ``main`` or compared by a claim (every one when there is none: a hand-written
    manifest), of those
    the ones rb expects to finish (:func:`not_expected_to_finish`). ``everything``
    (``--all``) keeps every experiment with the tier. Raises AuditError when no experiment
    has the tier, or none is left (naming what was skipped and why)."""
    if selected:
        return Selection(tuple(selected))
    skipped: dict[str, str] = {}
    ids: list[str] = []
    for exp_id, exp in manifest.experiments.items():
        if tier == "full" or tier in exp.tiers:
            ids.append(exp_id)
        else:
            skipped[exp_id] = f"no {tier} tier"
    if not ids:
        raise AuditError(
            f"no experiment has a {tier} tier"
            if manifest.experiments
            else "the manifest has no experiments to audit",
            path=MANIFEST_FILE,
            field="experiments",
        )
    if everything:
        return Selection(tuple(ids), skipped)
    # A quick check of *the* experiment, not every tutorial of a repository in a row; the
    # experiments the paper's claims compare count as main, or the claims go unjudged.
    claimed = _claimed(manifest)
    main = [e for e in ids if manifest.experiments[e].main or e in claimed]
    for exp_id in ids:
        if main and exp_id not in main:
            skipped[exp_id] = "not a main experiment"
        elif why := not_expected_to_finish(manifest, exp_id, tier, root):
            skipped[exp_id] = why
    kept = tuple(e for e in ids if e not in skipped)
    if not kept:
        raise AuditError(
            "no experiment rb expects to finish: "
            + "; ".join(f"{e}: {why}" for e, why in skipped.items()),
            path=MANIFEST_FILE,
            hint="name the experiments to run, or pass --all",
        )
    return Selection(kept, skipped)


def tier_seeds(exp: Experiment, tier: str) -> list[int]:
    """The seeds an experiment's runs take in turn in ``tier`` (run ``k``: ``[k % len]``)."""
    chosen = exp.tiers.get(tier)  # type: ignore[call-overload]
    return list((chosen.seeds if chosen is not None else None) or exp.seeds)


def plan_runs(
    manifest: Manifest, selected: list[str] | None, *, runs: int, tier: Tier
) -> list[PlannedRun]:
    """Repeat ``k`` of an experiment uses its tier's seeds in turn (``seeds[k % len]``): with
    seeds [0, 1, 2] and three runs each seed runs once; with [0] the same seed runs three
    times, which checks determinism. Without ``selected``, :func:`select_experiments`'s
    default (without a root: datasets are not looked for). Raises AuditError for unknown ids or a missing tier."""
    if runs < 1:
        raise AuditError("--runs must be at least 1", field="runs")
    ids = selected or select_experiments(manifest, None, tier).ids
    plan: list[PlannedRun] = []
    for exp_id in ids:
        if exp_id not in manifest.experiments:
            close = difflib.get_close_matches(exp_id, list(manifest.experiments), n=1)
            raise UnknownExperimentError(
                f"no experiment {exp_id!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                path="reprobridge.toml",
                hint=f"experiments: {', '.join(manifest.experiments)}",
            )
        exp = manifest.experiments[exp_id]
        if tier != "full" and tier not in exp.tiers:
            raise AuditError(
                f"experiment {exp_id!r} has no {tier} tier",
                path="reprobridge.toml",
                field=f"experiments.{exp_id}.tiers",
            )
        t = exp.tier(tier)
        seeds = tier_seeds(exp, tier)
        timeout = parse_duration(t.timeout or exp.timeout)
        plan += [PlannedRun(exp_id, k, seeds[k % len(seeds)], timeout) for k in range(runs)]
    return plan
