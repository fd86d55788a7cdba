"""The overall verdict of an audit: PASS, FAIL or INCOMPLETE, and what is missing.

Contract (``design.md``, "Verdict levels"; ``docs/audit.md``):

* ``FAIL`` when any experiment failed at any level (environment, procedure, metric) or
  an evaluated claim does not hold;
* otherwise ``INCOMPLETE`` when anything that should have been judged was not: an
  experiment whose metric level is not ``pass`` (no metrics: ``not-applicable``; a metric
  without a threshold, or a smoke tier without thresholds of its own: ``incomplete``;
  nothing ran: ``skipped``), or a claim in scope that could not be decided (a missing
  value) or that holds on the means without significance (``holds-not-significant``). Each gets one
  line naming the experiment or claim, what is missing and the manifest key to add;
* otherwise ``PASS``: every judged experiment had at least one metric compared with a
  threshold, all of them held, and every claim in scope holds.

Claims out of scope (over experiments a partial audit did not run, or describing another
tier) are listed with their reason and neither pass nor block anything: the verdict is
about what this audit was asked to judge. ``not-applicable`` is never a pass.

The same function decides for ``rb audit`` and for ``rb verify``'s re-derivation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from reprobridge.audit.judge import ExperimentVerdict
from reprobridge.evidence.records import ClaimResult

Overall = Literal["PASS", "FAIL", "INCOMPLETE"]


@dataclass(frozen=True)
class OverallVerdict:
    """``verdict`` and, for INCOMPLETE, one line per gap (``incomplete``)."""

    verdict: Overall
    incomplete: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"


def overall_verdict(
    experiments: Mapping[str, ExperimentVerdict], claims: Sequence[ClaimResult]
) -> OverallVerdict:
    """Decide from the verdicts of ``summarize``: each experiment's three levels, and each
    claim's ``holds`` (True/False/None), ``skipped`` and ``reason``."""
    failed = any(exp.failed_level is not None for exp in experiments.values()) or any(
        c.holds is False for c in claims
    )
    gaps: list[str] = []
    for exp_id, exp in experiments.items():
        for level, verdict in exp.levels.items():
            if verdict.status not in {"pass", "fail"}:
                gaps.append(f"{exp_id}: {level} {verdict.status}: {verdict.reason}")
    for claim in claims:
        if claim.outcome == "holds-not-significant":
            gaps.append(
                f"claim {claim.expr}: holds on the means, not significant ({claim.test}); "
                "more runs (seeds) of each experiment would decide it"
            )
        elif claim.holds is None and not claim.skipped:
            gaps.append(
                f"claim {claim.expr}: undecided ({claim.reason or 'no values'}); "
                "every metric it names needs a value in the runs of this audit"
            )
    if failed:
        return OverallVerdict("FAIL", gaps)
    if gaps or not experiments:
        return OverallVerdict("INCOMPLETE", gaps or ["no experiment was judged"])
    return OverallVerdict("PASS")
