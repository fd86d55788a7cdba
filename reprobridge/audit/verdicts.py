"""Verdicts from stored evidence: one run's judgement, and the audit's verdicts over runs.

The auditor calls these as it seals each run and at the end; ``rb verify`` calls the same
functions on a bundle's stored files to re-derive what ``audit.json`` says. Neither needs
the orchestrator: a judgement depends only on the manifest the audit used, the tier, the
run's record (:class:`~reprobridge.evidence.records.RunRecord`) and its stored logs and
output copies. :func:`overall_verdict` (below) is the audit's one word.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reprobridge._fs import read_regular
from reprobridge.audit.claims import evaluate_claim, references
from reprobridge.audit.judge import (
    ExperimentVerdict,
    RunJudgement,
    claim_seeds,
    claim_values,
    judge_experiment,
    judge_run,
)
from reprobridge.audit.plan import tier_seeds
from reprobridge.constants import COMBINED_LOG
from reprobridge.evidence.records import ClaimResult, RunRecord, jsonable
from reprobridge.manifest.schema import Experiment, Manifest

__all__ = ["judgement_json", "rejudge_run", "summarize"]


def rejudge_run(exp: Experiment, tier: str, run_dir: Path, record: RunRecord) -> RunJudgement:
    """The RunJudgement of a run from its stored evidence alone (``run_dir``'s logs and
    ``files/``, and its record)."""
    if record.not_started is not None:
        missing = record.not_started
        return judge_run(
            exp,
            tier,
            termination_ok=False,
            termination_description=f"not started: {missing.reason}",
            log_text="",
            workdir=run_dir / "files",
            not_judged=missing.reason if missing.machine else "",
        )
    term = record.termination
    # Regex metrics take the last value printed: that is defined only on both streams in
    # the order they were written (output.log). A bundle from before it existed has the
    # two streams alone; they are read one after the other, as then. A log that is not a
    # regular file (a FIFO, a link: never opened) reads as empty; `rb verify` reports it.
    combined = run_dir / COMBINED_LOG
    names = (COMBINED_LOG,) if os.path.lexists(combined) else ("stdout.log", "stderr.log")
    log = b"".join(_log_bytes(run_dir / name) for name in names)
    return judge_run(
        exp,
        tier,
        termination_ok=term is not None and term.ok,
        termination_description=term.description if term is not None else "unknown",
        log_text=log.decode("utf-8", "replace"),
        workdir=run_dir / "files",
        refused=record.files_refused or {},
    )


def judgement_json(judgement: RunJudgement) -> dict[str, Any]:
    """A run's ``metrics.json``: its judgement as JSON, ``not_judged`` only when set (a run
    this machine could not run), so that bundles from before it verify as they are."""
    out: dict[str, Any] = jsonable(judgement)
    if not judgement.not_judged:
        del out["not_judged"]
    return out


def _log_bytes(path: Path) -> bytes:
    """The bytes of the log at ``path``; empty when it is absent or not a regular file."""
    try:
        return read_regular(path)
    except OSError:
        return b""


def summarize(
    manifest: Manifest,
    tier: str,
    judgements: Mapping[str, Sequence[RunJudgement | None]],
    *,
    environment_ok: bool,
    environment_reason: str,
    environment_substituted: bool = False,
    environment_not_judged: bool = False,
) -> dict[str, Any]:
    """Per-experiment verdicts at each level, claims, and the overall verdict
    (:func:`reprobridge.audit.verdict.overall_verdict`: ``verdict``
    PASS/FAIL/INCOMPLETE/NOT JUDGED, ``incomplete`` lines, and ``passed``, true for PASS
    only), as the JSON that is the judged part of ``audit.json``
    (:class:`~reprobridge.evidence.records.AuditSummary`). ``environment_not_judged``: this
    machine could not make the environment (``environment_reason`` says why)."""
    verdicts: dict[str, ExperimentVerdict] = {}
    values: dict[str, dict[str, list[float]]] = {}
    seeds: dict[str, dict[str, list[int]]] = {}
    for exp_id, maybe_runs in judgements.items():
        runs = [r for r in maybe_runs if r is not None]
        verdicts[exp_id] = judge_experiment(
            manifest.experiments[exp_id],
            tier,
            runs,
            environment_ok=environment_ok,
            environment_reason=environment_reason,
            experiment_id=exp_id,
            environment_substituted=environment_substituted,
            environment_not_judged=environment_not_judged,
        )
        # Claims use values of runs whose procedure passed only.
        values[exp_id] = claim_values(runs)
        ran = tier_seeds(manifest.experiments[exp_id], tier)
        seeds[exp_id] = claim_seeds(
            [(ran[k % len(ran)], r) for k, r in enumerate(maybe_runs) if r is not None]
        )
    claims: list[ClaimResult] = []
    for i, claim in enumerate(manifest.claims):
        absent = sorted({e for e, _ in references(claim.expr)} - set(judgements))
        reason = ""
        if tier not in claim.tiers:
            # A claim compares results of full runs; reduced settings say nothing about it.
            reason = (
                f"not applicable in tier {tier}: the claim describes tier(s) "
                f"{', '.join(claim.tiers)} (add {tier!r} to claims[{i}].tiers to judge it here)"
            )
        elif absent:
            # A partial audit cannot decide a comparison with experiments it did not run.
            reason = f"not evaluated: {', '.join(absent)} not in this audit"
        if reason:
            claims.append(ClaimResult(claim.expr, claim.provenance, None, "", reason, skipped=True))
            continue
        result = evaluate_claim(claim.expr, values, seeds)
        claims.append(
            ClaimResult(
                claim.expr,
                claim.provenance,
                # Held on the means but not shown by the runs: not a pass, not a refutation.
                None if result.outcome == "holds-not-significant" else result.holds,
                result.substituted,
                result.reason,
                skipped=False,
                outcome=result.outcome,
                test=result.test,
            )
        )
    outcome = overall_verdict(verdicts, claims)
    return {
        "tier": tier,
        "experiments": {exp_id: jsonable(v) for exp_id, v in verdicts.items()},
        "claims": [c.to_json() for c in claims],
        "verdict": outcome.verdict,
        "incomplete": outcome.incomplete,
        "passed": outcome.passed,
    }


# -- the overall verdict ---------------------------------------------------------------
#
# The overall verdict of an audit: PASS, FAIL, NOT JUDGED or INCOMPLETE, and what is missing.
#
# Contract (``docs/audit.md``, "Verdict levels"):
#
# * ``FAIL`` when any experiment failed at any level (environment, procedure, metric) or
#   an evaluated claim does not hold;
# * otherwise ``NOT JUDGED`` when a level of some experiment is ``not-judged``: this machine
#   could not judge it (Nix too old or offline for the pin, no GPU for a GPU experiment, a
#   driver older than the pinned CUDA, not the manifest's Python). It says nothing about the
#   paper; ``rb audit`` exits with the machine code (11). A failure found elsewhere in the
#   same audit is still a FAIL: it was judged;
# * otherwise ``INCOMPLETE`` when anything that should have been judged was not: an
#   experiment whose metric level is not ``pass`` (no metrics: ``not-applicable``; a metric
#   without a threshold, or a smoke tier without thresholds of its own: ``incomplete``;
#   nothing ran: ``skipped``), or a claim in scope that could not be decided (a missing
#   value) or that holds on the means without significance (``holds-not-significant``). Each gets one
#   line naming the experiment or claim, what is missing and the manifest key to add;
# * otherwise ``PASS``: every judged experiment had at least one metric compared with a
#   threshold, all of them held, and every claim in scope holds.
#
# Claims out of scope (over experiments a partial audit did not run, or describing another
# tier) are listed with their reason and neither pass nor block anything: the verdict is
# about what this audit was asked to judge. ``not-applicable`` is never a pass.
#
# The same function decides for ``rb audit`` and for ``rb verify``'s re-derivation.

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
