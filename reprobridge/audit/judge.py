"""Judging the evidence of runs: the procedure and metric levels of an audit.

Contract:

- Metric values are extracted and compared with thresholds by
  :mod:`reprobridge.artifacts.check` (:func:`~reprobridge.artifacts.check.extract_metric`,
  :func:`~reprobridge.artifacts.check.judge_metric`, ``tier_metrics``), the same file the
  flake's ``reproduce-<exp>`` apps run as ``repro/check.py``. Nothing here re-implements a
  rule of that file, so ``nix run .#reproduce-<exp>`` and ``rb audit`` cannot disagree on a
  single run. What this module adds is the *audit*: several runs, statistics, the manifest's
  stability policy, and the split into levels.
- Only evidence decides. ``Metric.claimed`` (a number someone claimed) is carried beside
  the measured values and the difference reported as ``claimed_vs_measured``; it never
  changes a status.
- Nothing here raises for bad evidence: a missing, invalid or ambiguous metric is a
  status. :class:`~reprobridge.errors.AuditError` is raised only for a caller's mistake
  (a tier the experiment does not have, statistics of no values).

Levels (``docs/audit.md``, "Verdict levels"): environment, procedure, metric (here, per
experiment) and conclusion (:mod:`reprobridge.audit.claims`). A level fails where it
fails; :attr:`ExperimentVerdict.failed_level` names the lowest failing one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from reprobridge.artifacts import check
from reprobridge.audit.collect import PARTLY_COPIED
from reprobridge.audit.datasets import tree_sha256
from reprobridge.errors import AuditError
from reprobridge.evidence.hashing import sha256_file
from reprobridge.manifest.schema import SPREAD_FACTOR, Experiment
from reprobridge.stats import summarize

MetricStatus = Literal["ok", "missing", "invalid", "ambiguous", "out-of-band"]
VerdictStatus = Literal["pass", "fail", "incomplete", "skipped", "not-applicable", "not-judged"]

#: How statuses read in reasons (reliability.md's vocabulary: ``metric-missing`` ...).
STATUS_LABEL: dict[str, str] = {
    "ok": "ok",
    "missing": "metric-missing",
    "invalid": "metric-invalid",
    "ambiguous": "metric-ambiguous",
    "out-of-band": "out-of-band",
}


#: check.py's failure kinds as statuses (an unknown kind is treated as invalid).
_FAILURE_STATUS: dict[str, MetricStatus] = {
    "missing": "missing",
    "invalid": "invalid",
    "ambiguous": "ambiguous",
}

# -- one run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricResult:
    """One metric of one run.

    ``status``: ``ok`` (extracted, finite, within its thresholds), ``missing``, ``invalid``,
    ``ambiguous`` (check.py's extraction failures) or ``out-of-band`` (extracted but outside
    the thresholds). ``value`` is set for ``ok`` and ``out-of-band`` only. ``threshold`` is
    the band as check.py states it (``target 0.79 ± 0.171``); ``source`` where the value
    was read (``regex '...'`` or ``file:key``). ``claimed`` is carried, never judged.
    """

    name: str
    value: float | None
    status: MetricStatus
    reason: str
    threshold: str
    source: str
    claimed: float | None


@dataclass(frozen=True)
class RunJudgement:
    """The procedure and metric evidence of one run.

    ``procedure_ok``: the run terminated normally (exit 0 within its timeout, as the caller
    says) and every declared output is in order. ``procedure_reason`` is the termination
    description when that failed, else the first output problem, else the description
    (``exit(0)``). ``outputs`` maps each declared path to ``{exists, sha256, size,
    expected_sha256, ok, reason}``. ``cells_raised``: one line per declared executed
    notebook naming each of its cells that raised unmarked (neither the ``raises-exception``
    tag nor the output's ``raises``: check.py's :func:`~reprobridge.artifacts.check.unexpected_raises`); such a run may
    pass its procedure (a notebook run past its errors exits 0) but the procedure level
    is then ``incomplete``, never ``pass``. ``cells_marked``: the same for the cells that
    raised as marked, named in the procedure's reason for the record. ``not_judged``: why
    this machine could not run it (no GPU for a GPU experiment, a driver older than the
    pinned CUDA; "" otherwise): such a run is evidence about the machine, never a failed
    procedure.
    """

    procedure_ok: bool
    procedure_reason: str
    metrics: dict[str, MetricResult]
    outputs: dict[str, dict[str, Any]]
    cells_raised: tuple[str, ...] = ()
    cells_marked: tuple[str, ...] = ()
    not_judged: str = ""


def _spec(exp: Experiment) -> dict[str, Any]:
    """The experiment as check.py reads it (the manifest table as JSON)."""
    dumped: dict[str, Any] = exp.model_dump(mode="json", exclude_none=True, by_alias=True)
    return dumped


def _check_tier(exp: Experiment, tier: str) -> None:
    # check.py's command line refuses an unknown tier the same way (exit 2).
    if tier != "full" and tier not in exp.tiers:
        known = ", ".join(["full", *sorted(t for t in exp.tiers if t != "full")])
        raise AuditError(f"the experiment has no tier {tier!r} (it has: {known})")


def _describe_source(source: Mapping[str, Any]) -> str:
    if source.get("regex") is not None:
        return f"regex {source['regex']!r}"
    return f"{source.get('file')}:{source.get('key')}"


def extract_run_metrics(
    exp: Experiment, tier: str, log_text: str, workdir: Path
) -> dict[str, MetricResult]:
    """Every metric of ``tier`` in one run, extracted and judged by check.py's functions.

    The tier's own ``metrics`` when it defines them, else the experiment's. In ``smoke``
    without tier metrics the values only have to exist and be finite (``threshold`` says
    so). ``log_text`` is the run's stdout and stderr; ``workdir`` holds its file sources
    and output copies (a declared ``.ipynb`` output's cell text is searched after the log).
    Raises :class:`AuditError` for a tier the experiment does not have.
    """
    _check_tier(exp, tier)
    metrics, judged = check.tier_metrics(_spec(exp), tier)
    # Regex sources also see the cell outputs of declared executed notebooks (check.py's
    # rule, so `nix run .#reproduce-<exp>` reads the same text).
    log_text = check.metric_log(_spec(exp), log_text, str(workdir))
    results: dict[str, MetricResult] = {}
    for name in sorted(metrics):
        mspec: Mapping[str, Any] = metrics[name] or {}
        source = mspec.get("source") or {}
        claimed = _declared_claim(exp, tier, name)
        applied = _thresholds_apply(mspec, judged)
        threshold = check.describe_thresholds(mspec) if applied else f"none ({_unjudged(judged)})"
        common = {"name": name, "threshold": threshold, "source": _describe_source(source)}
        try:
            value = check.extract_metric(source, log_text, str(workdir))
        except check.MetricError as exc:
            results[name] = MetricResult(
                value=None,
                status=_FAILURE_STATUS.get(exc.kind, "invalid"),
                reason=str(exc),
                claimed=claimed,
                **common,
            )
            continue
        if applied:
            ok, reason = check.judge_metric(mspec, value)
        else:
            ok, reason = True, _unjudged(judged)
        results[name] = MetricResult(
            value=value,
            status="ok" if ok else "out-of-band",
            reason=reason,
            claimed=claimed,
            **common,
        )
    return results


def _thresholds_apply(mspec: Mapping[str, Any], judged: bool) -> bool:
    """Whether a metric's value is compared with thresholds: the tier judges (not smoke
    without its own metrics) and the metric declares one (``target``, ``min`` or ``max``)."""
    return judged and check.has_thresholds(mspec)


def _unjudged(judged: bool) -> str:
    return check.NO_THRESHOLD if judged else check.SMOKE_UNJUDGED


def _output_record(
    workdir: Path, rel: str, expected: str | None, compare: bool, refused: str | None = None
) -> dict[str, Any]:
    full = workdir / rel
    record: dict[str, Any] = {
        "exists": False,
        "sha256": None,
        "size": None,
        "expected_sha256": expected,
        "ok": False,
        "reason": "missing",
    }
    if refused and not refused.startswith(PARTLY_COPIED):
        record["reason"] = refused  # the auditor would not copy it (a symlink, not a file)
        return record
    # The copies are the auditor's; a link among them was not made by it: never follow one.
    if full.is_symlink():
        record["reason"] = "refused: a symlink among the copies (never followed)"
        return record
    if full.is_dir():
        # A declared directory (plots/, checkpoints/): its files, by the datasets' tree hash.
        try:
            digest, files, size = tree_sha256(full)
        except OSError as exc:
            record.update(exists=True, reason=f"cannot be read ({exc.strerror or exc})")
            return record
        record.update(exists=True, kind="directory", files=files, sha256=digest, size=size)
        if refused:
            record["note"] = refused
        if not files:
            record["reason"] = "an empty directory"
            return record
    # is_file is false for FIFOs and devices, which must never be opened.
    elif not full.is_file():
        return record
    else:
        record["exists"] = True
        try:
            digest, size = sha256_file(full)
        except OSError as exc:
            record["reason"] = f"cannot be read ({exc.strerror or exc})"
            return record
        record.update(sha256=digest, size=size)
    if expected and compare and digest != expected:
        record["reason"] = f"sha256 {digest} (expected {expected})"
        return record
    record["ok"] = True
    record["reason"] = "sha256 matches" if expected and compare else "exists"
    return record


def _unbounded_note(exp: Experiment, tier: str) -> str:
    """What a timed-out smoke run must not hide: a smoke tier that shortens nothing (no
    ``params``, ``args`` or ``edits``) is the full command under the smoke time limit, not a
    bounded check that ran too long."""
    spec = exp.tiers.get(tier) if tier == "smoke" else None  # type: ignore[call-overload]
    if spec is None or spec.bounded:
        return ""
    return (
        f" [the smoke tier is unbounded: the full command, stopped after "
        f"{spec.timeout or exp.timeout}; no bound was found (REPRODUCE.md)]"
    )


def judge_run(
    exp: Experiment,
    tier: str,
    *,
    termination_ok: bool,
    termination_description: str,
    log_text: str,
    workdir: Path,
    refused: Mapping[str, str] | None = None,
    not_judged: str = "",
) -> RunJudgement:
    """Judge one run from its evidence.

    ``termination_ok`` is the caller's reading of how the process ended (exit 0, no
    timeout, no signal) and ``termination_description`` its words (``exit(1)``,
    ``timeout after 3600s (SIGKILL)``). Declared outputs are checked relative to
    ``workdir``: they must exist as regular files; a declared ``sha256`` is compared in
    tier ``full`` only (as check.py does). ``refused`` maps a declared path the auditor would
    not copy out of the workspace (a symlink on its path) to why; it is reported as the
    output's reason. Metrics are extracted whatever the procedure's
    outcome: a crashed run's numbers are evidence too, but :func:`judge_experiment` does not
    count them as passing. ``not_judged`` is why this machine could not run it (carried,
    see :class:`RunJudgement`).
    """
    metrics = extract_run_metrics(exp, tier, log_text, workdir)
    outputs: dict[str, dict[str, Any]] = {}
    for output in exp.outputs:
        outputs[output.path] = _output_record(
            workdir, output.path, output.sha256, tier == "full", (refused or {}).get(output.path)
        )
    bad = [(path, rec) for path, rec in outputs.items() if not rec["ok"]]
    if not termination_ok:
        ok, reason = False, termination_description
        if termination_description == "exit(124)" or termination_description.startswith("timeout"):
            reason += _unbounded_note(exp, tier)  # 124: the launcher's `timeout`
    elif bad:
        ok = False
        reason = "; ".join(f"output {path} {rec['reason']}" for path, rec in bad)
    else:
        ok, reason = True, termination_description
    raised = check.notebook_raises(_spec(exp), str(workdir))
    unmarked = {rel: [c for c in cells if not c.expected] for rel, cells in raised.items()}
    marked = {rel: [c for c in cells if c.expected] for rel, cells in raised.items()}
    return RunJudgement(
        procedure_ok=ok,
        procedure_reason=reason,
        metrics=metrics,
        outputs=outputs,
        cells_raised=tuple(check.describe_raises(r, c) for r, c in unmarked.items() if c),
        cells_marked=tuple(
            f"{r}: {'; '.join(cell.describe() for cell in c)}" for r, c in marked.items() if c
        ),
        not_judged=not_judged,
    )


# -- one experiment -----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One level's verdict: ``pass``, ``fail``, ``incomplete`` (nothing failed, but some
    values were compared with no threshold: never a pass), ``skipped`` (not reached: nothing
    ran), ``not-applicable`` (nothing to judge, e.g. no metrics declared: never a pass) or
    ``not-judged`` (this machine could not judge it: Nix too old or offline for the pin, no
    GPU, not the manifest's Python; never a pass, never a fail)."""

    status: VerdictStatus
    reason: str


@dataclass(frozen=True)
class ExperimentVerdict:
    """The environment, procedure and metric levels of one experiment over its runs.

    ``per_metric[name]`` holds: ``values`` and ``statuses`` and ``reasons`` (one per run,
    in run order; ``values`` None where nothing was extracted), ``counted`` (per run: whether
    its procedure passed, i.e. whether it counts), ``stats`` (over the values of counted
    runs; None when there are none), ``threshold``, ``source``, ``claimed``,
    ``claimed_vs_measured`` (``{claimed, measured, difference}`` or None), ``policy``,
    ``outcome`` (``pass``/``fail``/``skipped``) and ``reason``.
    """

    experiment: str
    environment: Verdict
    procedure: Verdict
    metric: Verdict
    per_metric: dict[str, dict[str, Any]]
    runs: int

    @property
    def levels(self) -> dict[str, Verdict]:
        """The three levels by name, lowest first."""
        return {"environment": self.environment, "procedure": self.procedure, "metric": self.metric}

    @property
    def failed_level(self) -> str | None:
        """The lowest level that failed (``environment``, ``procedure``, ``metric``), or None."""
        return next((name for name, v in self.levels.items() if v.status == "fail"), None)


def _runs_list(numbers: Sequence[int]) -> str:
    return ", ".join(str(i + 1) for i in numbers)


def _policy_text(exp: Experiment) -> str:
    policy = exp.stability.policy
    return f"k_of_n (k={exp.stability.k})" if policy == "k_of_n" else policy


def _procedure_verdict(exp: Experiment, runs: Sequence[RunJudgement]) -> Verdict:
    failed = [i for i, r in enumerate(runs) if not r.procedure_ok]
    detail = "; ".join(f"run {i + 1}: {runs[i].procedure_reason}" for i in failed[:5])
    if len(failed) > 5:
        detail += f"; and {len(failed) - 5} more"
    n = len(runs)
    done = n - len(failed)
    if exp.stability.policy == "k_of_n":
        # More runs than were made cannot be asked of the procedure; the metric level says
        # "only n run(s) were made".
        k = min(exp.stability.k or n, n)
        extra = f" ({detail})" if failed else ""
        completed = f"{done} of {n} run(s) completed, k_of_n needs {k}{extra}"
        if done < k:
            return Verdict("fail", completed)
        return _raised_or_pass([r for r in runs if r.procedure_ok], completed)
    if failed:
        return Verdict("fail", f"{len(failed)} of {n} run(s) failed ({detail})")
    return _raised_or_pass(runs, f"all {n} run(s) completed")


#: What makes a run whose notebook cells raised judgeable (the gap line's hint).
RAISES_HINT = (
    "mark each cell meant to raise with the `raises-exception` cell tag in the notebook, or "
    'as `raises = [{cell = N, error = "ValueError"}]` on the executed notebook\'s entry of '
    "the experiment's `outputs` in reprobridge.toml; or fix what broke it"
)


def _raised_or_pass(runs: Sequence[RunJudgement], completed: str) -> Verdict:
    """``pass`` with ``completed``; ``incomplete`` when some run's notebook cells raised
    unmarked (every such cell named): the run ended normally, but whether those cells
    were meant to raise only their authors can say."""
    raised = [(i, line) for i, r in enumerate(runs) for line in r.cells_raised]
    marked = [(i, line) for i, r in enumerate(runs) for line in r.cells_marked]
    if marked:
        # Named for the record: a pass that ran past cells raising says which, and what.
        shown = "; ".join(f"run {i + 1}: {line}" for i, line in marked)
        completed += f" (notebook cells raised as marked: {shown})"
    if not raised:
        return Verdict("pass", completed)
    shown = "; ".join(f"run {i + 1}: {line}" for i, line in raised)
    return Verdict("incomplete", f"{completed}, but notebook cells raised ({shown}); {RAISES_HINT}")


def _metric_issue(name: str, index: int, result: MetricResult) -> str:
    shown = "" if result.value is None else f"{result.value:g}; "
    return f"{name}: {STATUS_LABEL[result.status]} in run {index + 1} ({shown}{result.reason})"


def judge_experiment(
    exp: Experiment,
    tier: str,
    runs: Sequence[RunJudgement],
    *,
    environment_ok: bool,
    environment_reason: str,
    experiment_id: str = "",
    environment_substituted: bool = False,
    environment_not_judged: bool = False,
) -> ExperimentVerdict:
    """Judge one experiment's runs under its stability policy.

    Rules, level by level:

    - environment: ``pass`` or ``fail`` as the caller says (``environment_reason``);
      ``incomplete`` instead of ``pass`` when ``environment_substituted`` (the auditor
      overrode a locked input with other content, or ran another Python than the
      manifest's with the operator's leave: the runs are judged, but not in the pinned
      environment); ``not-judged`` when ``environment_not_judged`` (this machine could not
      make the environment: procedure and metric are then ``skipped``).
    - With no runs, procedure and metric are ``skipped`` (nothing ran).
    - A run this machine could not run (:attr:`RunJudgement.not_judged`) makes the
      procedure ``not-judged`` (with the first such reason) and the metric ``skipped``.
    - procedure: policies ``all`` and ``mean_within`` need every run to pass its procedure
      (exit 0 in time, declared outputs in order); ``k_of_n`` needs at least ``k``. Then
      ``incomplete`` instead of ``pass`` when a passing run's executed notebook has cells
      that raised unmarked (no ``raises-exception`` tag, not in the output's ``raises``;
      every one named): the run ended
      normally, but a cell may raise on purpose or be broken, and only a mark says which.
      Such a run still counts below: its metrics were read from cells that did not raise.
    - metric: ``not-applicable`` when the tier declares no metrics (never a pass), with a
      reason telling the user to declare some. Otherwise a run *counts* only when its
      procedure passed: a number printed by a run that then crashed is recorded but proves
      nothing. A run *passes* when it counts and every metric is ``ok``.

      - ``all``: every run passes. A failed procedure fails the metric level with reason
        ``procedure failed (...)``, before any metric finding.
      - ``k_of_n``: at least ``k`` runs pass; runs whose procedure failed are simply not
        among them (so ``procedure failed`` is reported only when it costs the quorum).
      - ``mean_within``: every run must count and have every metric extracted (``ok`` or
        ``out-of-band``); then each metric's mean over runs is judged against its band
        with check.py's :func:`~reprobridge.artifacts.check.judge_metric`. A single run
        outside the band is allowed when the mean is inside.

    - A ``paper-precision`` tolerance (the rounding of the paper's number) is widened by
      twice the sample standard deviation of the counted runs when there are two or more
      (:func:`_widen_by_run_spread`); ``per_metric[name]["tolerance_source"]`` says where
      every tolerance came from, and ``threshold`` states the band applied.
    - ``incomplete`` instead of ``pass`` when some metric was compared with no threshold:
      it declares none (no ``target``, ``min`` or ``max``), or the tier is ``smoke``
      without metrics of its own (the experiment's targets describe full runs). Such a
      metric's ``outcome`` is ``unjudged``; a missing or invalid value still fails.

    ``per_metric`` keeps every value, status and reason per run, the statistics over counted
    runs and ``claimed_vs_measured``. ``experiment_id`` names the experiment in the verdict
    (the manifest model does not know its own id).
    """
    _check_tier(exp, tier)
    n = len(runs)
    env_status: VerdictStatus = "pass"
    if environment_not_judged:
        env_status = "not-judged"
    elif not environment_ok:
        env_status = "fail"
    elif environment_substituted:
        env_status = "incomplete"
    environment = Verdict(env_status, environment_reason)
    metric_specs, judged = check.tier_metrics(_spec(exp), tier)
    names = sorted(metric_specs)
    sources: dict[str, str | None] = {}
    for name in names:
        runs, metric_specs[name], sources[name] = _widen_by_run_spread(
            runs, name, metric_specs[name] or {}, judged
        )
    policy = exp.stability.policy
    counted = [r.procedure_ok for r in runs]
    per_metric: dict[str, dict[str, Any]] = {}
    for name in names:
        results = [r.metrics.get(name) for r in runs]
        values = [res.value if res is not None else None for res in results]
        kept = [v for v, c in zip(values, counted, strict=True) if c and v is not None]
        st = summarize(kept, value_range=(metric_specs[name] or {}).get("range")) if kept else None
        claimed = next((res.claimed for res in results if res is not None), None)
        if claimed is None:
            claimed = _declared_claim(exp, tier, name)
        per_metric[name] = {
            "values": values,
            "statuses": [res.status if res is not None else "missing" for res in results],
            "reasons": [res.reason if res is not None else "not extracted" for res in results],
            "counted": counted,
            "stats": st.to_json() if st is not None else None,
            "threshold": next(
                (res.threshold for res in results if res is not None),
                check.describe_thresholds(metric_specs[name] or {})
                if _thresholds_apply(metric_specs[name] or {}, judged)
                else "none",
            ),
            "source": _describe_source((metric_specs[name] or {}).get("source") or {}),
            "tolerance_source": sources[name],
            "claimed": claimed,
            "claimed_vs_measured": (
                {"claimed": claimed, "measured": st.mean, "difference": st.mean - claimed}
                if claimed is not None and st is not None
                else None
            ),
            "policy": _policy_text(exp),
            "outcome": "skipped",
            "reason": "no runs",
        }

    if environment_not_judged:
        why = "not run: this machine could not make the environment"
        skipped = Verdict("skipped", why)
        return ExperimentVerdict(experiment_id, environment, skipped, skipped, per_metric, n)
    if n == 0:
        why = "not run" + ("" if environment_ok else ": the environment failed")
        procedure = Verdict("skipped", why)
        metric = _not_applicable(exp, tier) if not names else Verdict("skipped", why)
        return ExperimentVerdict(experiment_id, environment, procedure, metric, per_metric, 0)
    machine = next((r.not_judged for r in runs if r.not_judged), "")
    if machine:
        # Not the paper's failure: the runs did not start on this machine.
        procedure = Verdict("not-judged", machine)
        metric = Verdict("skipped", "not run: this machine could not run the experiment")
        return ExperimentVerdict(experiment_id, environment, procedure, metric, per_metric, n)

    procedure = _procedure_verdict(exp, runs)
    if not names:
        metric = _not_applicable(exp, tier)
    elif policy == "mean_within":
        metric = _mean_within(runs, names, metric_specs, judged, per_metric)
    else:
        metric = _all_or_k(exp, runs, names, per_metric)
    unjudged = [n for n in names if not _thresholds_apply(metric_specs[n] or {}, judged)]
    if unjudged and metric.status == "pass":
        # Extracted and finite is not a result: nothing failed, but not everything was judged.
        for name in unjudged:
            if per_metric[name]["outcome"] == "pass":
                per_metric[name]["outcome"] = "unjudged"
                per_metric[name]["reason"] = _unjudged(judged)
        metric = _incomplete(experiment_id, tier, judged, unjudged, len(names))
    return ExperimentVerdict(experiment_id, environment, procedure, metric, per_metric, n)


#: How each ``tolerance_source`` reads in verdicts.
_TOLERANCE_SOURCES = {
    "paper-spread": "3 x the spread the paper states",
    "paper-precision": "the rounding of the value the paper prints",
    "stated": "stated in the manifest",
}


def _widen_by_run_spread(
    runs: Sequence[RunJudgement], name: str, spec: Mapping[str, Any], judged: bool
) -> tuple[list[RunJudgement], dict[str, Any], str | None]:
    """The runs and ``name``'s spec as the experiment judges them, and where its tolerance
    comes from (None when it has none).

    A ``paper-precision`` tolerance is only the rounding of the paper's number: it says
    nothing of how much runs of the same code differ. With two or more counted runs it is
    widened by :data:`~reprobridge.manifest.schema.SPREAD_FACTOR` times their sample
    standard deviation, and each run's value is judged again against the widened band (one
    run alone is judged against the rounding, and the source says so). Any other spec is
    returned as it is.
    """
    origin = spec.get("tolerance_source")
    has_tolerance = spec.get("tolerance") is not None or spec.get("relative_tolerance") is not None
    if spec.get("target") is None or not has_tolerance:
        return list(runs), dict(spec), None
    described = _TOLERANCE_SOURCES.get(str(origin), "not stated (the manifest's value)")
    if origin != "paper-precision" or not judged:
        return list(runs), dict(spec), described
    counted = [
        res.value
        for r in runs
        if r.procedure_ok and (res := r.metrics.get(name)) is not None and res.value is not None
    ]
    if len(counted) < 2:
        return list(runs), dict(spec), f"{described} (one run: no run-to-run spread to add)"
    spread = summarize(counted).std
    rounding = float(spec["tolerance"])
    widened = {**spec, "tolerance": rounding + SPREAD_FACTOR * spread}
    described += f" ± {rounding:g} + {SPREAD_FACTOR:g} x the runs' standard deviation {spread:.3g}"
    threshold = check.describe_thresholds(widened)
    out: list[RunJudgement] = []
    for run in runs:
        res = run.metrics.get(name)
        if res is None or res.value is None:
            out.append(run)
            continue
        ok, reason = check.judge_metric(widened, res.value)
        rejudged = replace(
            res, status="ok" if ok else "out-of-band", reason=reason, threshold=threshold
        )
        out.append(replace(run, metrics={**run.metrics, name: rejudged}))
    return out, widened, described


def _declared_claim(exp: Experiment, tier: str, name: str) -> float | None:
    """``claimed`` of the metric as the tier declares it (its own metrics, else the experiment's)."""
    own = next((t for key, t in exp.tiers.items() if key == tier), None)
    if own is not None and own.metrics is not None:
        metric = own.metrics.get(name)
    else:
        metric = exp.metrics.get(name)
    return metric.claimed if metric is not None else None


def _not_applicable(exp: Experiment, tier: str) -> Verdict:
    return Verdict(
        "not-applicable",
        f"no metrics declared for tier {tier}: declare [experiments.<id>.metrics.<name>] "
        "with a `source` and a threshold (target/tolerance, min, max) in reprobridge.toml so "
        "the auditor can judge results",
    )


def _incomplete(
    experiment_id: str, tier: str, judged: bool, unjudged: Sequence[str], total: int
) -> Verdict:
    """The metric level when every value was extracted and finite but some (or all) had no
    threshold to meet: never a pass; the reason names the manifest key that would judge it."""
    exp = experiment_id or "<id>"
    shown = ", ".join(unjudged)
    if not judged:
        return Verdict(
            "incomplete",
            f"tier {tier} declares no thresholds: {shown} extracted and finite, not judged "
            f"(the experiment's targets describe full runs); to judge this tier declare "
            f"[experiments.{exp}.tiers.{tier}.metrics.<name>] with a source and a threshold",
        )
    return Verdict(
        "incomplete",
        f"{len(unjudged)} of {total} metric(s) have no threshold ({shown}): extracted and "
        f"finite, not judged; add `target` (with a tolerance), `min` or `max` under "
        f"[experiments.{exp}.metrics.{unjudged[0]}]",
    )


def _run_label(run: RunJudgement, name: str) -> str:
    """Why ``name`` does not count as ok in ``run``: its procedure first, then its status."""
    if not run.procedure_ok:
        return "procedure failed"
    res = run.metrics.get(name)
    return "metric-missing" if res is None else STATUS_LABEL[res.status]


def _procedure_failed_text(runs: Sequence[RunJudgement], failed: Sequence[int]) -> str:
    shown = "; ".join(f"run {i + 1}: {runs[i].procedure_reason}" for i in failed[:5])
    return f"procedure failed ({shown})"


def _all_or_k(
    exp: Experiment,
    runs: Sequence[RunJudgement],
    names: Sequence[str],
    per_metric: dict[str, dict[str, Any]],
) -> Verdict:
    n = len(runs)
    failed = [i for i, r in enumerate(runs) if not r.procedure_ok]
    issues: list[str] = []
    run_passes = []
    for i, run in enumerate(runs):
        good = run.procedure_ok
        for name in names:
            res = run.metrics.get(name)
            if res is None or res.status != "ok":
                good = False
                if res is not None:
                    issues.append(_metric_issue(name, i, res))
                else:
                    issues.append(f"{name}: metric-missing in run {i + 1} (not extracted)")
        run_passes.append(good)
    for name in names:
        bad = [
            i
            for i, run in enumerate(runs)
            if not run.procedure_ok or name not in run.metrics or run.metrics[name].status != "ok"
        ]
        entry = per_metric[name]
        why = "; ".join(f"run {i + 1}: {_run_label(runs[i], name)}" for i in bad[:5])
        if exp.stability.policy == "all":
            entry["outcome"] = "fail" if bad else "pass"
            entry["reason"] = why if bad else f"ok in all {n} run(s)"
        else:
            ok_runs = n - len(bad)
            entry["outcome"] = "pass" if ok_runs >= (exp.stability.k or n) else "fail"
            entry["reason"] = f"ok in {ok_runs} of {n} run(s)" + (f" ({why})" if bad else "")
    passes = sum(run_passes)
    k_needed = exp.stability.k or n
    if exp.stability.policy == "k_of_n" and passes < k_needed:
        # Each metric may meet the quorum in different runs while no k runs meet them all:
        # the level fails, and a metric must not read "pass" beside it.
        for name in names:
            entry = per_metric[name]
            if entry["outcome"] == "pass":
                entry["outcome"] = "fail"
                entry["reason"] += (
                    f", but only {passes} run(s) meet every metric; k_of_n needs {k_needed}"
                )
    if exp.stability.policy == "all":
        if all(run_passes):
            return Verdict("pass", f"every metric within its thresholds in all {n} run(s)")
        parts = [_procedure_failed_text(runs, failed)] if failed else []
        parts += issues[:6]
        if len(issues) > 6:
            parts.append(f"and {len(issues) - 6} more")
        return Verdict("fail", "; ".join(parts))
    k = exp.stability.k or n
    head = f"{passes} of {n} run(s) pass, k_of_n needs {k}"
    if passes >= k:
        return Verdict("pass", head)
    parts = [head]
    if failed:
        parts.append(_procedure_failed_text(runs, failed))
    parts += issues[:6]
    if k > n:
        parts.append(f"only {n} run(s) were made")
    return Verdict("fail", "; ".join(parts))


def _mean_within(
    runs: Sequence[RunJudgement],
    names: Sequence[str],
    metric_specs: Mapping[str, Any],
    judged: bool,
    per_metric: dict[str, dict[str, Any]],
) -> Verdict:
    failed = [i for i, r in enumerate(runs) if not r.procedure_ok]
    parts: list[str] = []
    if failed:
        parts.append(_procedure_failed_text(runs, failed))
    all_pass = not failed
    for name in names:
        entry = per_metric[name]
        unusable = [
            (i, run.metrics.get(name))
            for i, run in enumerate(runs)
            if name not in run.metrics or run.metrics[name].value is None
        ]
        if failed or unusable:
            all_pass = False
            entry["outcome"] = "fail"
            why = []
            if failed:
                why.append(f"procedure failed in run(s) {_runs_list(failed)}")
            for i, res in unusable:
                if res is None:
                    why.append(f"metric-missing in run {i + 1} (not extracted)")
                else:
                    why.append(f"{STATUS_LABEL[res.status]} in run {i + 1} ({res.reason})")
            entry["reason"] = "; ".join(why)
            parts += [f"{name}: {w}" for w in why if not w.startswith("procedure")]
            continue
        mean = entry["stats"]["mean"]
        if _thresholds_apply(metric_specs[name] or {}, judged):
            ok, reason = check.judge_metric(metric_specs[name] or {}, mean)
        else:
            ok, reason = True, _unjudged(judged)
        entry["outcome"] = "pass" if ok else "fail"
        entry["reason"] = f"mean {mean:g} over {len(runs)} run(s): {reason}"
        if not ok:
            all_pass = False
            parts.append(f"{name}: out-of-band mean {mean:g} over {len(runs)} run(s) ({reason})")
    if all_pass:
        return Verdict(
            "pass", f"the mean of every metric over {len(runs)} run(s) is within its thresholds"
        )
    return Verdict("fail", "; ".join(parts[:8]))


def claim_seeds(runs: Sequence[tuple[int, RunJudgement]]) -> dict[str, list[int]]:
    """The seed of each value :func:`claim_values` takes from ``(seed, run)`` pairs, per
    metric and in the same order (what pairs two experiments' runs by seed)."""
    out: dict[str, list[int]] = {}
    for seed, run in runs:
        if not run.procedure_ok:
            continue
        for name, res in run.metrics.items():
            if res.value is not None:
                out.setdefault(name, []).append(seed)
    return out


def claim_values(runs: Sequence[RunJudgement]) -> dict[str, list[float]]:
    """Values per metric for the conclusion level: from runs whose procedure passed only.

    What :func:`reprobridge.audit.claims.evaluate_claim` takes for one experiment.
    """
    out: dict[str, list[float]] = {}
    for run in runs:
        if not run.procedure_ok:
            continue
        for name, res in run.metrics.items():
            if res.value is not None:
                out.setdefault(name, []).append(res.value)
    return out
