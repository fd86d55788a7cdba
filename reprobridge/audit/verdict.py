"""The overall verdict of an audit: PASS, FAIL, NOT JUDGED or INCOMPLETE, and what is missing.

Contract (``design.md``, "Verdict levels"; ``docs/audit.md``):

* ``FAIL`` when any experiment failed at any level (environment, procedure, metric) or
  an evaluated claim does not hold;
* otherwise ``NOT JUDGED`` when a level of some experiment is ``not-judged``: this machine
  could not judge it (Nix too old or offline for the pin, no GPU for a GPU experiment, a
  driver older than the pinned CUDA, not the manifest's Python). It says nothing about the
  paper; ``rb audit`` exits with the machine code (11). A failure found elsewhere in the
  same audit is still a FAIL: it was judged;
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

Overall = Literal["PASS", "FAIL", "INCOMPLETE", "NOT JUDGED"]


@dataclass(frozen=True)
class OverallVerdict:
    """``verdict`` and, for INCOMPLETE and NOT JUDGED, one line per gap (``incomplete``;
    a level this machine could not judge reads ``<exp>: <level> not-judged: <reason>``)."""

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
        machine = False
        for level, verdict in exp.levels.items():
            if machine and verdict.status == "skipped":
                continue  # not reached because of the machine, which is said once
            machine = machine or verdict.status == "not-judged"
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
    if any(v.status == "not-judged" for exp in experiments.values() for v in exp.levels.values()):
        return OverallVerdict("NOT JUDGED", gaps)
    if gaps or not experiments:
        return OverallVerdict("INCOMPLETE", gaps or ["no experiment was judged"])
    return OverallVerdict("PASS")
