"""`rb audit` and `rb run`: run experiments in isolation and judge the evidence."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack, cast

import click

from reprobridge._log import sink
from reprobridge.cli.options import (
    backend_option,
    common_options,
    max_output_option,
    override_input_option,
    parse_overrides,
    print_json,
    repo_option,
    runs_option,
    sign_option,
    state,
    threads_option,
    tier_option,
)

if TYPE_CHECKING:  # the auditor loads only when a verb runs
    from reprobridge.audit.auditor import AuditOptions, AuditResult
    from reprobridge.evidence.records import MetricSummary


class _Progress:
    """Progress of an audit: one line per event, naming the phase each run is in
    (environment setup, run, checks); on a terminal also a live ticker with the phase's
    elapsed time, the time left by the estimate of a recorded run, and the run's latest
    CPU/RSS sample. ``verbose`` (``-v``) adds every library event with its fields."""

    def __init__(
        self, *, quiet: bool, verbose: bool = False, estimates: Mapping[str, float] | None = None
    ) -> None:
        self.quiet = quiet
        self.verbose = verbose and not quiet
        self.tty = sys.stderr.isatty() and not quiet
        self.total = 0
        self.done = 0
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._timeline: Path | None = None
        self._label = ""
        self._phase = ""
        self._t0 = 0.0
        #: Each run's label ("[2/6] main/1 (seed 1)"), for events about it by key.
        self._labels: dict[str, str] = {}
        #: Seconds a run of each experiment took before (``rb audit --plan``'s estimate).
        self._estimates = dict(estimates or {})
        self._estimate: float | None = None

    def say(self, text: str) -> None:
        if self._ticker is not None:
            sys.stderr.write("\r\033[K")  # the ticker's line, redrawn within a second
        click.echo(text, err=True)

    def __call__(self, event: str, fields: Mapping[str, object]) -> None:
        """Show one of the auditor's events (:func:`reprobridge._log.emit`: ``fields`` are
        JSON values, ``runs`` a count, ``run`` a run's key, ``timeline`` a path)."""
        if self.quiet:
            return
        if self.verbose:
            detail = " ".join(f"{k}={v}" for k, v in sorted(fields.items()))
            self.say(f"rb: {event} {detail}".rstrip())
        say = self.say
        if event == "skipped":
            for exp_id, why in cast("Mapping[str, str]", fields["experiments"]).items():
                say(f"skipped {exp_id}: {why} (name it, or --all, to run it)")
        elif event == "audit-start":
            self.total = cast(int, fields["runs"])
            say(f"rb audit {fields['audit_id']}: {self.total} run(s) -> {fields['path']}")
        elif event == "environment-start":
            self._label = f"environment ({fields['backend']})"
            say(f"{self._label}: setting up (Python, packages: may download and build)")
            self._start_ticker("setting up", None)
        elif event == "environment":
            self._stop_ticker()
            mark = "ok" if fields["ok"] else "NOT JUDGED" if fields.get("not_judged") else "FAILED"
            say(f"environment ({fields['backend']}): {mark}: {fields['reason']}")
        elif event in {"run-start", "run-reused"}:
            self.done += event == "run-reused"
            if event == "run-reused":
                say(
                    f"[{self.done}/{self.total}] {fields['run']}: sealed earlier, verified and reused"
                )
                return
            if fields.get("batched"):
                # Prepared now, submitted with the experiment's other runs: no live ticker.
                self._label = f"{fields['run']} (seed {fields['seed']})"
                self._labels[str(fields["run"])] = self._label
                say(f"{self._label}: prepared")
                return
            self._label = f"[{self.done + 1}/{self.total}] {fields['run']} (seed {fields['seed']})"
            self._labels[str(fields["run"])] = self._label
            self._estimate = self._estimates.get(str(fields.get("experiment")))
            say(f"{self._label}: preparing the workspace")
            self._start_ticker("preparing", cast("str | None", fields.get("timeline")))
        elif event == "setup-step":
            self._phase_line(fields, f"environment setup: {fields['what']}")
        elif event == "run-exec":
            eta = f" (a recorded run took {_duration(self._estimate)})" if self._estimate else ""
            self._phase_line(fields, "running", eta)
        elif event == "run-checks":
            self._phase_line(fields, "checks (outputs, packages, metrics)")
        elif event == "run-queued":
            say(f"{self._of(fields)}: submitted as Slurm job {fields['job_id']}")
        elif event == "run-job-state":
            why = f" ({fields['reason']})" if fields.get("reason") else ""
            where = f" on {fields['node']}" if fields.get("node") else ""
            say(f"{self._of(fields)}: job {fields['job_id']} {fields['state']}{where}{why}")
        elif event == "jobs-progress":
            say(
                f"slurm: {fields['queued']} queued, {fields['running']} running, "
                f"{fields['finished']} finished of {fields['total']}"
            )
        elif event == "run-attached":
            say(
                f"{self._of(fields)}: found Slurm job {fields['job_id']} from before; collecting it"
            )
        elif event == "run-resubmit":
            say(f"{self._of(fields)}: job {fields['job_id']} ended {fields['state']}; resubmitting")
        elif event == "run-done":
            self._stop_ticker()
            self.done += 1
            state = "ok" if fields["ok"] else "NOT JUDGED" if fields.get("not_judged") else "FAILED"
            say(f"[{self.done}/{self.total}] {fields['run']}: {state} ({fields['termination']})")

    def _phase_line(self, fields: Mapping[str, object], phase: str, extra: str = "") -> None:
        """A run entered ``phase``: one line, and the ticker counts from now."""
        self.say(f"{self._of(fields)}: {phase}{extra}")
        self._phase = phase
        self._t0 = time.monotonic()

    def _of(self, fields: Mapping[str, object]) -> str:
        """The label of the run an event is about."""
        run = fields.get("run")
        return self._labels.get(str(run), str(run)) if run else self._label

    def _start_ticker(self, phase: str, timeline: str | None) -> None:
        self._phase = phase
        self._t0 = time.monotonic()
        if not self.tty:
            return
        self._timeline = Path(timeline) if timeline else None
        self._stop.clear()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
            sys.stderr.write("\r\033[K")

    def _left(self, elapsed: float) -> str:
        """The time left of a running run by its recorded estimate ("" without one)."""
        if self._phase != "running" or not self._estimate:
            return ""
        left = self._estimate - elapsed
        if left >= 0:
            return f", about {_duration(left)} left"
        return f", {_duration(-left)} over the recorded {_duration(self._estimate)}"

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            res = ""
            if self._phase == "running" and self._timeline and self._timeline.is_file():
                try:
                    last = self._timeline.read_bytes().rstrip().rsplit(b"\n", 1)[-1]
                    sample: dict[str, float] = json.loads(last)  # a monitor sample
                    res = f"  cpu {sample.get('cpu_percent', 0):.0f}%  rss {sample.get('rss_bytes', 0) / 2**20:.0f} MiB"
                except (OSError, ValueError):
                    pass
            elapsed = time.monotonic() - self._t0
            sys.stderr.write(
                f"\r\033[K{self._label}: {self._phase}: {elapsed:.0f}s{self._left(elapsed)}{res}"
            )
            sys.stderr.flush()


def _duration(s: float) -> str:
    """``s`` seconds as a person reads a duration: 42s, 3m05s, 1h02m."""
    s = round(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


#: Terminal colour of each display state (reprobridge.report.states).
_COLOUR = {
    "pass": "green",
    "pass-not-hermetic": "yellow",
    "fail": "red",
    "incomplete": "yellow",
    "not-judged": "magenta",
}


def _state(state: str) -> str:
    """A display state, upper case, in its colour (plain when NO_COLOR or not a tty:
    click strips styles then)."""
    from reprobridge.report.states import label

    return click.style(label(state).upper(), fg=_COLOUR.get(state))


def _print_summary(result: AuditResult) -> None:
    """The verdicts of a judged audit, for a terminal (a detached one has none)."""
    from reprobridge.errors import AuditError
    from reprobridge.report.load import failure_excerpt, load_audit
    from reprobridge.report.numbers import fmt_ci, fmt_value, round_numbers
    from reprobridge.report.states import overall_state, shown_status

    s = result.record
    if s is None:
        return
    hermetic = s.hermetic
    click.echo(click.style(f"Audit {result.audit_id} ({s.backend}, tier {s.tier})", bold=True))
    try:
        runs = {e.id: e.runs for e in load_audit(result.path).experiments}
    except AuditError:  # the summary is printed whatever the bundle's state
        runs = {}
    for exp_id, v in s.experiments.items():
        states = {
            name: (shown_status(level.status, hermetic) if name == "environment" else None)
            or level.status
            for name, level in v.levels.items()
        }
        click.echo(f"  {exp_id}: " + "  ".join(f"{lvl} {_state(st)}" for lvl, st in states.items()))
        for name, level in v.levels.items():
            if level.status == "fail":  # gaps are listed once, as "not judged"
                click.echo(f"      {name}: {level.reason}")
        for run in runs.get(exp_id, []):
            excerpt = failure_excerpt(run)
            if excerpt:
                why = run.procedure_reason or run.termination
                click.echo(f"      {run.label} failed ({why}); the last lines of its stderr:")
                for line in excerpt:
                    click.echo(click.style(f"        | {line}", dim=True))
        for metric_name, m in v.per_metric.items():
            st = m.stats
            if st is not None:
                click.echo(
                    f"      {metric_name}: measured mean {fmt_value(st.mean)} ± "
                    f"{fmt_value(st.std, 2)} (n={st.n}, 95% CI {fmt_ci(st)})"
                    + (f"; claimed {fmt_value(m.claimed)}" if m.claimed is not None else "")
                )
                click.echo(f"        {_against(m)}")
    for c in s.claims:
        mark = (
            "SKIPPED" if c.skipped else {True: "HOLDS", False: "FAILS", None: "UNDECIDED"}[c.holds]
        )
        if c.outcome == "holds-not-significant":
            mark = "HOLDS ON THE MEANS, NOT SIGNIFICANT"
        shown = round_numbers(c.substituted or c.reason)
        click.echo(f"  claim {c.expr}: {mark} ({shown})")
        if c.test:
            click.echo(f"      {c.test}")
    for w in s.warnings:
        click.echo(f"  warning: {w}")
    for line in s.incomplete:
        click.echo(f"  not judged: {line}")
    verdict = _state(overall_state(result.passed, hermetic, s.verdict))
    # The runs did not include the changes: the verdict is the commit's, and says so.
    dirty = f" (dirty tree: {s.dirty_tree}; the runs used the commit)" if s.dirty_tree else ""
    click.echo(f"verdict: {verdict}{dirty}   evidence: {result.path}")


def _against(metric: MetricSummary) -> str:
    """What a metric was judged against and the outcome: ``against target 0.81 ± 0.0245
    (tolerance from: ...): PASS``."""
    band = metric.threshold or "no threshold"
    source = f" (tolerance from: {metric.tolerance_source})" if metric.tolerance_source else ""
    return f"against {band}{source}: {metric.outcome.upper()}"


def audit_doc(result: AuditResult) -> dict[str, Any]:
    """The `rb audit --json` document."""
    return {"audit_id": result.audit_id, "path": str(result.path), **result.summary}


def run_and_render(
    root: Path,
    opts: AuditOptions,
    *,
    as_json: bool,
    quiet: bool,
    verbose: bool = False,
    extra: dict[str, Any] | None = None,
) -> None:
    """Run the audit with progress on stderr, print the verdicts (``extra`` keys join the
    JSON document); exit with the overall verdict's status (0 PASS, 1 FAIL, 20 INCOMPLETE,
    11 NOT JUDGED: reprobridge.errors.VERDICT_EXIT)."""
    from reprobridge.audit.auditor import run_audit
    from reprobridge.audit.preview import recorded_wall_times
    from reprobridge.errors import VERDICT_EXIT

    quiet = quiet or as_json
    estimates = {} if quiet else recorded_wall_times(root.resolve(), opts.tier)
    progress = _Progress(
        quiet=quiet, verbose=verbose, estimates={k: e.seconds for k, e in estimates.items()}
    )
    with sink(progress):
        result = run_audit(root, opts)
    if result.record is None:
        # Submitted, not judged: exit 0 says the jobs are queued, not that anything passed.
        if as_json:
            print_json({**(extra or {}), **audit_doc(result)})
        else:
            click.echo(
                f"detached: {result.detached_runs} run(s) left to Slurm; "
                f"collect them with: rb audit --attach {result.audit_id}   "
                f"evidence: {result.path}"
            )
        return
    if as_json:
        print_json({**(extra or {}), **audit_doc(result)})
    else:
        _print_summary(result)
    code = VERDICT_EXIT.get(result.verdict, VERDICT_EXIT["FAIL"])
    if code:
        raise click.exceptions.Exit(code)


_common = [
    tier_option("full"),
    backend_option(),
    click.option(
        "--sandbox",
        type=click.Choice(["auto", "on", "off"]),
        default="auto",
        show_default=True,
        help="Run inside bubblewrap (auto: when it works here).",
    ),
    override_input_option(
        "Override a flake input for nix calls (an offline mirror); recorded as a warning."
    ),
    click.option(
        "--ro-bind",
        "ro_binds",
        multiple=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="A host directory every sandboxed run may read (tools outside /nix/store); recorded.",
    ),
    click.option(
        "--no-build",
        is_flag=True,
        help="Host backend: refuse packages that have no wheel (default: build them inside "
        "the run's sandbox when runs are sandboxed; never without a sandbox).",
    ),
    click.option(
        "--offline",
        is_flag=True,
        help="Install Python packages only from ./wheels (an unpacked `rb archive "
        "--supplement`) and never download; fails first, naming what is missing.",
    ),
    click.option(
        "--allow-dirty",
        is_flag=True,
        help="Audit the commit although the work tree has uncommitted changes (not rb's "
        "own files); the evidence records them and their hash, and that no run included them.",
    ),
    threads_option("RB_THREADS, else `threads` in the user config, else not set."),
    max_output_option(),
    click.option(
        "--python-mismatch-ok",
        is_flag=True,
        help="Judge the runs under this rb's Python when the host lacks the manifest's "
        "(the environment level is then incomplete and says so; without it such an audit "
        "is NOT JUDGED, exit 11).",
    ),
    click.option(
        "--allow-build",
        is_flag=True,
        hidden=True,
        help="Accepted for old scripts: building in the sandbox is now the default.",
    ),
    repo_option(),
    common_options,
]


_F = TypeVar("_F", bound=Callable[..., Any])


class _Shared(TypedDict):
    """The values of ``_common``'s options (but the repository and ``--json``), which
    both `rb audit` and `rb run` take; ``--allow-build`` is accepted and has no effect."""

    tier: str
    backend: str | None
    sandbox: str
    overrides: tuple[str, ...]
    ro_binds: tuple[Path, ...]
    no_build: bool
    offline: bool
    allow_dirty: bool
    threads: int | None
    max_output_mb: int | None
    python_mismatch_ok: bool
    allow_build: bool


def _apply(f: _F) -> _F:
    for opt in reversed(_common):
        f = opt(f)
    return f


#: Where `rb audit`'s runs execute, and the Slurm executor's settings (docs/audit.md), in
#: --help order: (declarations, click.option's keywords) each. All but --executor apply
#: with ``--executor slurm`` only; audit_command refuses --jobs, --detach and --attach
#: without it.
_EXECUTOR_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--executor",),
        {
            "type": click.Choice(["local", "slurm"]),
            "default": "local",
            "show_default": True,
            "help": "Where runs execute: this machine, or Slurm (one job array per experiment; docs/audit.md).",
        },
    ),
    (("--partition",), {"help": "Slurm partition (--executor slurm)."}),
    (("--account",), {"help": "Slurm account (--executor slurm)."}),
    (("--qos",), {"help": "Slurm QOS (--executor slurm)."}),
    (
        ("--slurm-opt", "slurm_opts"),
        {
            "multiple": True,
            "metavar": "KEY=VALUE",
            "help": "Any other sbatch option, written as '#SBATCH --KEY=VALUE' (repeatable).",
        },
    ),
    (
        ("--jobs",),
        {
            "type": click.IntRange(min=1),
            "metavar": "K",
            "help": "Slurm: at most K runs of an experiment's job array at once (--array=…%K).",
        },
    ),
    (
        ("--detach",),
        {
            "is_flag": True,
            "help": "Slurm: submit the jobs and return; collect them later with --attach.",
        },
    ),
    (
        ("--attach",),
        {
            "metavar": "AUDIT-ID",
            "help": "Collect a detached (or killed) Slurm audit: find its jobs by id, wait, judge, seal.",
        },
    ),
    (
        ("--pending-timeout",),
        {
            "type": click.FloatRange(min=1),
            "metavar": "SECONDS",
            "help": "Give up on a Slurm job still pending after this long (default: wait).",
        },
    ),
)


def _executor_options(f: Any) -> Any:
    for decls, attrs in reversed(_EXECUTOR_OPTIONS):
        f = click.option(*decls, **attrs)(f)
    return f


@click.command("audit")
@click.argument("experiments", nargs=-1)
@runs_option(3, most=1000)
@click.option(
    "--resume",
    "resume",
    is_flag=False,
    flag_value="latest",
    default=None,
    metavar="[AUDIT-ID]",
    help="Continue an interrupted audit (default: the latest unfinished one).",
)
@click.option(
    "--plan",
    "show_plan",
    is_flag=True,
    help="Print what would run (experiments, tier, runs, seeds, timeouts, backend, an "
    "estimated time from recorded runs) and what would be refused; run nothing.",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="With no experiment named: every experiment (with the tier), not only the main "
    "ones rb expects to finish.",
)
@sign_option("the bundle")
@_executor_options
@_apply
def audit_command(
    experiments: tuple[str, ...],
    runs: int,
    show_plan: bool,
    everything: bool,
    resume: str | None,
    sign_key: Path | None,
    executor: str,
    partition: str | None,
    account: str | None,
    qos: str | None,
    slurm_opts: tuple[str, ...],
    jobs: int | None,
    detach: bool,
    attach: str | None,
    pending_timeout: float | None,
    root: Path,
    as_json: bool,
    **shared: Unpack[_Shared],
) -> None:
    """Run EXPERIMENTS (default: all; with --tier smoke, those marked `main`) RUNS times
    each in isolation, record evidence under repro/evidence/<audit-id>/ and judge it
    against reprobridge.toml.

    Exit 0 (PASS) only when every experiment had metrics with thresholds and all held; 1
    (FAIL) when a verdict fails; 20 (INCOMPLETE) when nothing failed but something was not
    judged (each gap is listed with the manifest key to add); 11 (NOT JUDGED) when this
    machine could not judge it (Nix too old or offline for the pin, no GPU, not the
    manifest's Python), which says nothing about the paper; 130/143 when interrupted;
    0 after --detach (submitted, nothing judged yet).
    """
    from reprobridge.audit.auditor import scheduler_jobs

    if show_plan:
        _print_plan(root, list(experiments) or None, runs, everything, shared, as_json=as_json)
        return
    if attach and resume:
        raise click.UsageError("--attach AUDIT-ID is --resume of that audit: give one of them")
    resume = attach or resume
    if resume and executor == "local" and scheduler_jobs(root, resume):
        # Its runs were submitted to Slurm: they are collected there, never run again here.
        executor = "slurm"
    if executor != "slurm":
        for flag, given in (("--jobs", jobs), ("--detach", detach), ("--attach", attach)):
            if given:
                # Local runs go one at a time: concurrent runs on one machine contend for
                # its cores and GPU, which distorts the timings and peaks that are evidence.
                raise click.UsageError(f"{flag} needs --executor slurm")
    st = state()
    opts = _audit_options(
        shared,
        experiments=list(experiments) or None,
        runs=runs,
        resume=resume,
        sign_key=st.operator.sign_key(sign_key),
    )
    opts.everything = everything
    if executor == "slurm":
        from reprobridge.audit.slurm import SlurmExecutor, SlurmOptions, parse_slurm_opts
        from reprobridge.constants import EVIDENCE_DIR

        opts.executor = SlurmExecutor(
            SlurmOptions(
                partition=partition,
                account=account,
                qos=qos,
                extra=parse_slurm_opts(slurm_opts),
                pending_timeout=pending_timeout,
                jobs=jobs,
                detach=detach,
            ),
            sandbox=shared["sandbox"],
        )
        # Nodes must see the workspace: beside the evidence, not in this host's TMPDIR.
        opts.work_root = root.resolve() / EVIDENCE_DIR / ".slurm" / "work"
        opts.work_root.mkdir(parents=True, exist_ok=True)
    run_and_render(root, opts, as_json=as_json, quiet=st.quiet, verbose=st.verbose)


def _print_plan(
    root: Path,
    experiments: list[str] | None,
    runs: int,
    everything: bool,
    shared: _Shared,
    *,
    as_json: bool,
) -> None:
    """`rb audit --plan`: what the audit would run, and what would stop it; runs nothing."""
    from reprobridge.audit.auditor import Tier
    from reprobridge.audit.preview import preview_audit

    preview = preview_audit(
        root,
        experiments=experiments,
        runs=runs,
        tier=cast(Tier, shared["tier"]),
        backend=state().operator.backend(shared["backend"]),
        everything=everything,
    )
    if as_json:
        print_json(preview.to_json())
        return
    total = sum(len(e.seeds) for e in preview.experiments)
    click.echo(f"plan: tier {preview.tier}, backend {preview.backend}, {total} run(s)")
    for e in preview.experiments:
        seeds = ", ".join(str(x) for x in e.seeds)
        took = (
            f"estimated {_duration(e.estimate.seconds * len(e.seeds))} "
            f"({len(e.seeds)} x {_duration(e.estimate.seconds)}, as recorded in {e.estimate.source})"
            if e.estimate
            else "estimated time unknown (no recorded run)"
        )
        click.echo(
            f"  {e.id}: {len(e.seeds)} run(s), seed(s) {seeds}; timeout "
            f"{_duration(e.timeout_s)} each; {took}"
        )
    for exp_id, why in preview.skipped.items():
        click.echo(f"  skipped {exp_id}: {why}")
    estimate = preview.estimate_s
    click.echo(
        "estimated time: "
        + (f"{_duration(estimate)} of runs" if estimate is not None else "unknown")
        + " (environment setup not counted)"
    )
    for why in preview.refusals:
        click.echo(f"would refuse: {why}")


@click.command("run")
@click.argument("experiment")
@_apply
def run_command(
    experiment: str,
    root: Path,
    as_json: bool,
    **shared: Unpack[_Shared],
) -> None:
    """Run EXPERIMENT once with its output streamed live to the terminal (stdout and
    stderr as the experiment writes them), then judge it: an audit of one run. With --json
    the output is not streamed; the verdict is the JSON document."""
    opts = _audit_options(
        shared,
        experiments=[experiment],
        runs=1,
        echo=not as_json,
    )
    st = state()
    run_and_render(root, opts, as_json=as_json, quiet=st.quiet, verbose=st.verbose)


def _audit_options(
    shared: _Shared,
    *,
    experiments: list[str] | None,
    runs: int,
    resume: str | None = None,
    sign_key: Path | None = None,
    echo: bool = False,
) -> AuditOptions:
    """The AuditOptions of a verb: ``shared`` holds the values of the options both `rb audit`
    and `rb run` take, the keywords the verb's own."""
    from reprobridge.audit.auditor import AuditOptions, SandboxMode, Tier

    return AuditOptions(
        experiments=experiments,
        runs=runs,
        resume=resume,
        sign_key=sign_key,
        echo=echo,
        tier=cast(Tier, shared["tier"]),
        backend=state().operator.backend(shared["backend"]),
        nix_overrides=parse_overrides(shared["overrides"]),
        extra_ro_binds=tuple(p.resolve() for p in shared["ro_binds"]),
        sandbox=cast(SandboxMode, shared["sandbox"]),
        no_build=shared["no_build"],
        offline=shared["offline"],
        allow_dirty=shared["allow_dirty"],
        threads=state().operator.threads(shared["threads"]),
        max_output_mb=state().operator.max_output_mb(shared["max_output_mb"]),
        python_mismatch_ok=shared["python_mismatch_ok"],
    )
