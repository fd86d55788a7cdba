"""Which runs an audit makes: experiments x repeats, with the seed each repeat uses."""

from __future__ import annotations

import difflib
from typing import Literal

from reprobridge.errors import AuditError
from reprobridge.evidence.records import PlannedRun
from reprobridge.manifest.schema import Experiment, Manifest, parse_duration

Tier = Literal["full", "smoke"]
__all__ = ["PlannedRun", "Tier", "plan_runs"]


def default_reduced(manifest: Manifest, tier: Tier) -> list[str]:
    """The experiments a reduced tier audits when none is named: those marked ``main`` that
    have the tier, else every experiment that has it (a hand-written manifest without
    ``main``). A smoke audit is a quick check of *the* experiment; running every tutorial
    of a repository one after another is not quick. Raises AuditError when none has it."""
    with_tier = [e for e, exp in manifest.experiments.items() if tier in exp.tiers]
    if not with_tier:
        raise AuditError(
            f"no experiment has a {tier} tier", path="reprobridge.toml", field="experiments"
        )
    return [e for e in with_tier if manifest.experiments[e].main] or with_tier


def tier_seeds(exp: Experiment, tier: str) -> list[int]:
    """The seeds an experiment's runs take in turn in ``tier`` (run ``k``: ``[k % len]``)."""
    chosen = exp.tiers.get(tier)  # type: ignore[call-overload]
    return list((chosen.seeds if chosen is not None else None) or exp.seeds)


def plan_runs(
    manifest: Manifest, selected: list[str] | None, *, runs: int, tier: Tier
) -> list[PlannedRun]:
    """Repeat ``k`` of an experiment uses its tier's seeds in turn (``seeds[k % len]``): with
    seeds [0, 1, 2] and three runs each seed runs once; with [0] the same seed runs three
    times, which checks determinism. Without ``selected``, the full tier covers every
    experiment and a reduced one :func:`default_reduced`'s. Raises AuditError for unknown ids or a missing tier."""
    if runs < 1:
        raise AuditError("--runs must be at least 1", field="runs")
    ids = selected or list(manifest.experiments)
    if not selected and tier != "full":
        ids = default_reduced(manifest, tier)
    if not ids:
        raise AuditError(
            "the manifest has no experiments to audit", path="reprobridge.toml", field="experiments"
        )
    plan: list[PlannedRun] = []
    for exp_id in ids:
        if exp_id not in manifest.experiments:
            close = difflib.get_close_matches(exp_id, list(manifest.experiments), n=1)
            raise AuditError(
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
