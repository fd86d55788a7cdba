"""What differs between the runs of one audit, and between two audits.

Contract: differences are computed from what the bundles record (verdicts, statistics,
fingerprints, each run's ``env.json`` and ``packages.json``); nothing is re-judged. Rows
come in a stable order (experiment, level/metric, key), so the report is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

from reprobridge.evidence.records import LEVELS
from reprobridge.report.load import (
    VARYING_BY_DESIGN,
    AuditData,
    ExperimentData,
    differing,
    flatten,
    package_sets,
)

#: git.json keys compared between audits. Untracked files are left out: they include the
#: evidence bundles themselves, so they differ between any two audits.
GIT_KEYS = ("commit", "branch", "dirty", "changed", "diff_sha256")


def _minus(a: float | None, b: float | None) -> float | None:
    """``a - b``; None when either is missing."""
    return None if a is None or b is None else a - b


@dataclass(frozen=True)
class Spread:
    """How far one metric's values spread over an experiment's runs: ``values`` are those
    of every run that gave one, in run order; ``std`` is the audit's statistics', over
    the runs it counted (None without statistics)."""

    experiment: str
    metric: str
    values: tuple[float, ...]
    std: float | None

    @property
    def n(self) -> int:
        """How many runs gave a value."""
        return len(self.values)

    @property
    def low(self) -> float | None:
        """The smallest value; None without values."""
        return min(self.values, default=None)

    @property
    def high(self) -> float | None:
        """The largest value; None without values."""
        return max(self.values, default=None)

    @property
    def range(self) -> float | None:
        """``high - low``; None without values."""
        return _minus(self.high, self.low)


@dataclass(frozen=True)
class RunDifferences:
    """Between the runs of one experiment: metric spread, and the packages, environment
    variables and terminations that are not the same in every run (``None`` = absent)."""

    experiment: str
    labels: list[str]
    spreads: list[Spread]
    packages: dict[str, list[str | None]]
    env: dict[str, list[str | None]]
    terminations: list[str]


def run_differences(exp: ExperimentData) -> RunDifferences:
    """See :class:`RunDifferences`; variables that differ by design (a run's id, its
    scratch ``HOME``) are left out."""
    spreads = [
        Spread(
            exp.id,
            m.name,
            tuple(v for v in m.values if v is not None),
            m.stats.std if m.stats else None,
        )
        for m in exp.metrics
    ]
    sealed = [r for r in exp.runs if r.not_started is None]
    return RunDifferences(
        experiment=exp.id,
        labels=[r.label for r in sealed],
        spreads=spreads,
        packages=differing([r.packages for r in sealed]) if len(sealed) > 1 else {},
        env=differing([r.env for r in sealed], VARYING_BY_DESIGN) if len(sealed) > 1 else {},
        terminations=[r.termination for r in exp.runs],
    )


@dataclass(frozen=True)
class VerdictChange:
    """One experiment × level whose status differs (None: not in that audit)."""

    experiment: str
    level: str
    before: str | None
    after: str | None
    reason: str


@dataclass(frozen=True)
class MetricDelta:
    """One metric's mean in each audit and the difference (``after - before``)."""

    experiment: str
    metric: str
    before: float | None
    after: float | None
    outcome_before: str | None
    outcome_after: str | None

    @property
    def delta(self) -> float | None:
        """``after - before`` where both exist."""
        return _minus(self.after, self.before)


@dataclass(frozen=True)
class FieldDiff:
    """One fingerprint key whose value differs (``None``: absent on that side)."""

    section: str
    key: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class Comparison:
    """Audit ``before`` (A) against ``after`` (B)."""

    before: AuditData
    after: AuditData
    verdicts: list[VerdictChange]
    metrics: list[MetricDelta]
    claims: list[tuple[str, bool | None, bool | None]]
    fields: list[FieldDiff]
    plan: list[str]


def plan_differences(before: AuditData, after: AuditData) -> list[str]:
    """How the two audits' plans differ (tier, backend, hermeticity, sandbox, runs per
    experiment), one sentence each; [] when they ran the same plan.

    A comparison across plans is not like for like: a smoke tier applies other thresholds
    (or none), a host backend pins less than Nix, and fewer runs give wider intervals.
    "No verdict changed" between such audits says little, so the renderers put these first.
    """
    out: list[str] = []
    for what, a, b in (
        ("tier", before.tier, after.tier),
        ("backend", before.backend, after.backend),
        ("hermetic", _yes(before.summary.hermetic), _yes(after.summary.hermetic)),
        ("sandbox", before.summary.sandbox, after.summary.sandbox),
    ):
        if a != b:
            out.append(f"{what} differs: {a or '—'} in A, {b or '—'} in B")
    runs_a = {e.id: len(e.runs) for e in before.experiments}
    runs_b = {e.id: len(e.runs) for e in after.experiments}
    for exp_id in sorted(set(runs_a) | set(runs_b)):
        ra, rb = runs_a.get(exp_id), runs_b.get(exp_id)
        if ra != rb:
            shown = ["not audited" if r is None else f"{r} run(s)" for r in (ra, rb)]
            out.append(f"runs of {exp_id} differ: {shown[0]} in A, {shown[1]} in B")
    return out


def _fingerprint_rows(audit: AuditData) -> dict[str, dict[str, str]]:
    git = {k: audit.git[k] for k in GIT_KEYS if k in audit.git}
    nix = {k: v for k, v in audit.nix.items() if k != "flake_lock"}
    return {
        "audit": {
            "tier": audit.tier,
            "backend": audit.backend,
            "hermetic": _yes(audit.summary.hermetic),
            "sandbox": audit.summary.sandbox,
            "rb version": audit.rb_version,
            "manifest sha256": audit.manifest_sha256,
            "passed": _yes(audit.summary.passed),
        },
        "host": flatten(audit.host),
        "GPU": flatten(audit.gpu),
        "git": flatten(git),
        "nix": flatten(nix),
        "nix inputs": flatten(audit.flake_inputs),
        "python packages": package_sets(audit),
    }


def _yes(value: bool | None) -> str:
    return "—" if value is None else "yes" if value else "no"


def compare_audits(before: AuditData, after: AuditData) -> Comparison:
    """Verdict changes, metric mean deltas, claim changes and fingerprint differences."""
    a = {e.id: e for e in before.experiments}
    b = {e.id: e for e in after.experiments}
    verdicts: list[VerdictChange] = []
    metrics: list[MetricDelta] = []
    for exp_id in sorted(set(a) | set(b)):
        ea, eb = a.get(exp_id), b.get(exp_id)
        for level in LEVELS:
            sa = ea.levels[level].status if ea else None
            sb = eb.levels[level].status if eb else None
            if sa != sb:
                reason = eb.levels[level].reason if eb else "not in audit B"
                verdicts.append(VerdictChange(exp_id, level, sa, sb, reason))
        ma = {m.name: m for m in ea.metrics} if ea else {}
        mb = {m.name: m for m in eb.metrics} if eb else {}
        for name in sorted(set(ma) | set(mb)):
            xa, xb = ma.get(name), mb.get(name)
            metrics.append(
                MetricDelta(
                    exp_id,
                    name,
                    xa.stats.mean if xa and xa.stats else None,
                    xb.stats.mean if xb and xb.stats else None,
                    xa.outcome if xa else None,
                    xb.outcome if xb else None,
                )
            )
    ca = {c.expr: c.holds for c in before.claims}
    cb = {c.expr: c.holds for c in after.claims}
    claims = [
        (expr, ca.get(expr), cb.get(expr))
        for expr in sorted(set(ca) | set(cb))
        if expr not in ca or expr not in cb or ca[expr] != cb[expr]
    ]
    fields: list[FieldDiff] = []
    ra, rb = _fingerprint_rows(before), _fingerprint_rows(after)
    for section in ra:
        for key, values in differing([ra[section], rb[section]]).items():
            fields.append(FieldDiff(section, key, values[0], values[1]))
    return Comparison(
        before, after, verdicts, metrics, claims, fields, plan_differences(before, after)
    )
