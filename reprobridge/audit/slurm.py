"""The Slurm executor: the runs of an experiment become one Slurm job array.

Each array task runs :mod:`reprobridge.audit.slurm_job` on the node, which executes the request with
the same :class:`~reprobridge.audit.executors.LocalExecutor` a local audit uses (bubblewrap
when the node has it, the same cleared environment, the same capped and redacted logs) and
writes ``result.json`` plus the node's fingerprint. This side submits, waits, cancels on a
stop, and copies the job's evidence into the run directory, so a Slurm run's evidence has
the layout of a local one plus ``node.json`` and ``scheduler.log``, and ``placement`` in the
run record (executor, job ids, node, Slurm state and reason). ``--jobs K`` caps how
many tasks run at once (``--array=0-N%K``); ``--detach`` submits and returns, and a later
``rb audit --attach ID`` finds every job by the id its ``job.json`` recorded.

Where things must be shared between the submitting host and the nodes: the job directory
(``<evidence>/.slurm/``), the run workspaces (``<evidence>/.slurm/work``), the
interpreter running rb, and the backend's environment (uv cache or Nix store).

State comes from ``squeue`` while the job is known to the controller and ``scontrol show
job`` after it (``sacct`` is not required: accounting is often off). The run's own status
comes from the job's ``result.json``, never from Slurm's exit code.

Scheduler outcomes are termination kinds of their own (``scheduler``), with Slurm's state in
the description: ``slurm NODE_FAIL``, ``slurm OUT_OF_MEMORY``, ``slurm: not scheduled: …``.
Jobs that ended for infrastructure reasons (node failure, preemption, boot failure) are
resubmitted up to ``max_resubmits`` times, each attempt recorded; a run that failed on its
own merits never is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from reprobridge._fs import write_atomic
from reprobridge._log import emit
from reprobridge._proc.monitored import Completed, StreamCapture, Termination
from reprobridge.audit.executors import (
    LocalExecutor,
    Placement,
    RunOutput,
    RunRequest,
    StepRequest,
)
from reprobridge.audit.monitor import Peaks
from reprobridge.errors import AuditError, MachineError
from reprobridge.sandbox import sandbox_unusable


class JobSpec(TypedDict):
    """A run's ``spec.json``: what the node side (:mod:`reprobridge.audit.slurm_job`) runs.
    Written by the executor into its own job directory (mode 0600), never by the run."""

    argv: list[str]
    workspace: str
    env: dict[str, str]
    out_dir: str
    timeout_s: float
    grace: float
    marker: str
    network: bool
    gpu: bool
    ro_binds: list[str]
    max_processes: int | None
    sample_interval: float
    sandbox: str


class JobResult(TypedDict):
    """A run's ``result.json``, written by the node side last (it marks the run's end):
    the node, the isolation, :func:`completed_to_json` and the peaks as their fields."""

    node: str
    isolation: str
    completed: dict[str, Any]
    peaks: dict[str, Any] | None


class _JobRecord(TypedDict):
    """A run's ``job.json``: the job it was submitted as, found again by a resume."""

    job_id: str | None
    log: str | None
    workspace: str
    attempts: list[dict[str, str]]


#: Slurm states after which the job is gone for infrastructure reasons: resubmitted.
INFRA_STATES = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})
#: Pending reasons that never clear by waiting: reported at once instead of waited on.
#: (Not ``ReqNodeNotAvail``: nodes down or drained for maintenance come back.)
NEVER_SCHEDULED = frozenset(
    {
        "BadConstraints",
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "InvalidAccount",
        "InvalidQOS",
        "QOSMaxGRESPerJob",
        "QOSMaxCpuPerJobLimit",
        "QOSMaxMemoryPerJob",
        "QOSMaxWallDurationPerJobLimit",
        "DependencyNeverSatisfied",
    }
)
#: Seconds past the run's own timeout and grace before Slurm's time limit: the node-side
#: executor stops the run itself; Slurm's limit is only the backstop.
TIME_MARGIN_S = 120.0


@dataclass(frozen=True)
class SlurmOptions:
    """The operator's Slurm settings (flags: --partition, --account, --qos, --slurm-opt).

    ``extra`` holds ``--slurm-opt KEY=VALUE`` pairs, written as ``#SBATCH --KEY=VALUE``.
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    #: Longest delay between two polls of the queue (seconds; polls start faster).
    poll_interval: float = 2.0
    max_resubmits: int = 2
    #: Seconds to wait for a job that Slurm keeps pending (None: as long as it takes).
    pending_timeout: float | None = None
    #: At most this many runs of an array at once (``--array=…%K``; None: Slurm decides).
    jobs: int | None = None
    #: Submit and return: the runs are left to ``rb audit --attach`` (``--detach``).
    detach: bool = False


@dataclass(frozen=True)
class JobResources:
    """What one run asks the scheduler for (the manifest's ``hardware`` and ``timeout``)."""

    gpus: int = 0
    cpus: int | None = None
    memory_gb: float | None = None
    time_s: float = 3600.0
    grace_s: float = 30.0


def parse_slurm_opts(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["KEY=VALUE", ...]`` -> pairs; raises AuditError naming a malformed one."""
    pairs: list[tuple[str, str]] = []
    for raw in values:
        key, sep, value = raw.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not key or any(c.isspace() for c in key) or "\n" in value:
            raise AuditError(
                f"--slurm-opt {raw!r}: expected KEY=VALUE (e.g. constraint=a100)",
                hint="each --slurm-opt becomes one '#SBATCH --KEY=VALUE' line",
            )
        pairs.append((key, value))
    return tuple(pairs)


def batch_header(
    job_name: str, resources: JobResources, opts: SlurmOptions, output: Path
) -> list[str]:
    """The ``#SBATCH`` lines of one run's job script (deterministic for the same inputs)."""
    minutes = max(1, math.ceil((resources.time_s + resources.grace_s + TIME_MARGIN_S) / 60))
    lines = [
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --output={output}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --time={minutes}",
        # TERM to the batch shell (our node-side executor) before the limit: it stops the
        # run with its own grace period and still writes result.json.
        f"#SBATCH --signal=B:TERM@{max(30, int(resources.grace_s) + 30)}",
        # The job's environment is the run's, from the spec; nothing of the submitter's.
        "#SBATCH --export=NONE",
        # A job the node lost is resubmitted by rb (bounded, each attempt recorded), never
        # requeued by Slurm under the same id, unbounded and unrecorded.
        "#SBATCH --no-requeue",
    ]
    if resources.cpus:
        lines.append(f"#SBATCH --cpus-per-task={resources.cpus}")
    if resources.memory_gb:
        lines.append(f"#SBATCH --mem={math.ceil(resources.memory_gb * 1024)}M")
    if resources.gpus:
        lines.append(f"#SBATCH --gres=gpu:{resources.gpus}")
    for flag, value in (
        ("partition", opts.partition),
        ("account", opts.account),
        ("qos", opts.qos),
    ):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    lines.extend(f"#SBATCH --{key}={value}" for key, value in opts.extra)
    return lines


def job_script(header: list[str], specs: Sequence[Path]) -> str:
    """The whole job script of an array: the header, then the node-side executor on the
    spec of task ``SLURM_ARRAY_TASK_ID`` (task ``i`` runs ``specs[i]``; a plain job, which
    has no task id, runs ``specs[0]``)."""
    package_parent = Path(__file__).resolve().parents[2]
    return "\n".join(
        [
            "#!/bin/bash",
            *header,
            "# Written by rb audit --executor slurm; each array task runs one audited run.",
            f"export PYTHONPATH={shlex.quote(str(package_parent))}",
            # Ignored (inherited through exec) until the node side installs its handler: an
            # early TERM (Slurm's --signal, a scancel) must not kill it before any result.
            "trap '' TERM",
            "specs=(",
            *(f"  {shlex.quote(str(spec))}" for spec in specs),
            ")",
            f"exec {shlex.quote(sys.executable)} -m reprobridge.audit.slurm_job "
            '"${specs[${SLURM_ARRAY_TASK_ID:-0}]}"',
            "",
        ]
    )


@dataclass
class _JobState:
    state: str
    reason: str = ""
    node: str = ""
    exit_code: str = ""


def _placement(
    job_id: str | None, node: str, final: _JobState, attempts: list[dict[str, str]]
) -> Placement:
    """The run record's ``placement``: the last job, where it ran, its end, every attempt."""
    return Placement(
        executor="slurm",
        job_id=job_id,
        node=node or None,
        state=final.state,
        reason=final.reason,
        attempts=tuple(dict(a) for a in attempts),
    )


Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """A Slurm client command; a hung or missing client is a failed call, never a crash."""
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 1, "", f"{argv[0]}: {exc}")


#: Slurm states of a job that has not ended yet.
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
    }
)
#: The pending reason of an array task held back by ``%K``: waiting on the audit's own
#: concurrency limit, not on the cluster, so it does not count towards --pending-timeout.
ARRAY_LIMIT_REASON = "JobArrayTaskLimit"
#: First delay between two polls of the queue (seconds); it grows by half each quiet poll
#: up to ``SlurmOptions.poll_interval`` and falls back here whenever a job changes state.
FIRST_POLL_S = 0.2
#: Between two polls, how often the runs' ``result.json`` files are looked for (seconds):
#: a run's end is noticed within this, not within the (longer) poll delay.
RESULT_WATCH_S = 0.05


@dataclass
class _Tracked:
    """One run of a batch while its job is submitted, waited for and collected."""

    request: RunRequest
    job_dir: Path
    attempts: list[dict[str, str]]
    job_id: str | None = None
    #: Slurm's output of the job (``--output``), copied as ``scheduler.log``.
    log: Path | None = None
    #: The killed auditor's workspace an attached job runs in.
    adopt: Path | None = None
    state: str = ""
    pending_since: float = field(default_factory=time.monotonic)
    output: RunOutput | None = None
    done: bool = False

    @property
    def key(self) -> str:
        return self.request.marker.partition(":")[2] or "run"


@dataclass
class SlurmExecutor:
    """Runs the runs of an experiment as one Slurm job array (see the module docstring)."""

    options: SlurmOptions = field(default_factory=SlurmOptions)
    #: ``"auto"``/``"on"``/``"off"``: whether the node-side run uses bubblewrap.
    sandbox: str = "auto"
    runner: Runner = _run
    name: str = "slurm"

    # -- the Executor protocol --------------------------------------------------------------

    def execute(self, request: RunRequest) -> RunOutput:
        (output,) = self.execute_batch([request])
        if output is None:
            raise AuditError("a detached run has no output yet; collect it with --attach")
        return output

    def execute_batch(self, requests: Sequence[RunRequest]) -> list[RunOutput | None]:
        """Submit every request not already submitted (one array per resource shape, ``%K``
        from ``options.jobs``), then wait for them all unless ``options.detach``."""
        runs = [self._track(request) for request in requests]
        self._submit([r for r in runs if r.job_id is None and not r.done])
        if not self.options.detach:
            self._wait_all(runs)
        return [r.output for r in runs]

    def run_step(self, request: StepRequest) -> Completed:
        """Setup and probe steps run on the submitting host, in the workspace the nodes
        share, with the isolation a local run gets (bubblewrap unless ``sandbox`` is off
        or it cannot work here): they are short, and their network (fetching packages)
        is the login host's."""
        unsandboxed = None
        if self.sandbox == "off":
            unsandboxed = "not sandboxed (--sandbox off)"
        else:
            reason = sandbox_unusable()
            if reason and self.sandbox == "on":
                raise MachineError(
                    f"bubblewrap cannot run setup steps on this host: {reason}",
                    hint="see `rb doctor`, or --sandbox off",
                )
            if reason:
                unsandboxed = f"not sandboxed: {reason}"
        return LocalExecutor(unsandboxed=unsandboxed).run_step(request)

    # -- submission -------------------------------------------------------------------------

    def _job_dir(self, request: RunRequest) -> Path:
        audit, _, run_key = request.marker.partition(":")
        evidence_root = request.run_dir.parents[2].parent
        return evidence_root / ".slurm" / audit / (run_key or "run")

    def _track(self, request: RunRequest) -> _Tracked:
        """The run's job directory; on a resume, the job submitted before is found by the
        id its ``job.json`` recorded and attached to when it is still useful."""
        job_dir = self._job_dir(request)
        job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        run = _Tracked(request, job_dir, [])
        record_path = job_dir / "job.json"
        if not record_path.is_file():
            return run
        previous: _JobRecord = json.loads(record_path.read_text())
        run.attempts = list(previous.get("attempts", []))
        job_id = previous.get("job_id")
        if job_id and self._still_useful(job_id, job_dir):
            emit("run-attached", run=run.key, job_id=job_id)
            run.job_id = job_id
            log = previous.get("log")
            run.log = Path(log) if log else None
            run.adopt = Path(previous.get("workspace", ""))
        return run

    def _submit(self, runs: list[_Tracked]) -> None:
        """One ``sbatch --array`` per resource shape among ``runs``."""
        shapes: dict[JobResources, list[_Tracked]] = {}
        for run in runs:
            req = run.request
            shape = JobResources(req.gpus, req.cpus, req.memory_gb, req.timeout_s, req.grace)
            shapes.setdefault(shape, []).append(run)
        for resources, group in shapes.items():
            self._submit_array(resources, group)

    def _submit_array(self, resources: JobResources, runs: list[_Tracked]) -> None:
        specs = [self._write_spec(run) for run in runs]
        where = Path(os.path.commonpath([str(run.job_dir.parent) for run in runs]))
        audit = runs[0].request.marker.partition(":")[0]
        name = f"rb-{audit[:12]}-{where.name}"[:64]
        # One run is a plain job: the controller starts a plain batch job when it is
        # submitted, an array only on its next scheduling cycle (seconds later;
        # benchmarks/slurm_overhead.py).
        plain = len(runs) == 1
        log = where / ("slurm-%j.out" if plain else "slurm-%A_%a.out")
        text = job_script(batch_header(name, resources, self.options, log), specs)
        script = where / f"job-{hashlib.sha256(text.encode()).hexdigest()[:12]}.sh"
        write_atomic(script, text.encode(), mode=0o700)
        array = f"0-{len(runs) - 1}" + (f"%{self.options.jobs}" if self.options.jobs else "")
        argv = ["sbatch", "--parsable", *([] if plain else [f"--array={array}"]), str(script)]
        proc = self.runner(argv)
        if proc.returncode != 0:
            message = (proc.stderr.strip().splitlines() or ["sbatch failed"])[-1]
            message = message.removeprefix("sbatch: error: ")
            for run in runs:
                run.attempts.append(
                    {"job_id": "", "state": "REJECTED", "reason": message, "node": ""}
                )
                self._save(run)
                final = _JobState("REJECTED", message)
                text = f"slurm: not scheduled: {message}"
                self._finish(
                    run, self._outcome(run, Termination("scheduler", None, None, text), final)
                )
            return
        submitted = proc.stdout.strip().split(";")[0]
        for index, run in enumerate(runs):
            run.job_id = submitted if plain else f"{submitted}_{index}"
            run.log = where / f"slurm-{run.job_id}.out"
            run.state = ""
            run.pending_since = time.monotonic()
            run.attempts.append(
                {"job_id": run.job_id, "state": "SUBMITTED", "reason": "", "node": ""}
            )
            self._save(run)
            emit("run-queued", run=run.key, job_id=run.job_id)

    def _write_spec(self, run: _Tracked) -> Path:
        request = run.request
        run_out = run.job_dir / "run"
        if run_out.exists():
            shutil.rmtree(run_out)
        run_out.mkdir(mode=0o700)
        spec = run.job_dir / "spec.json"
        # The run's environment is already cleared (allowlist + backend); it holds no secret
        # of the operator's. The file is private to the auditor's user all the same.
        fd = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        job: JobSpec = {
            "argv": list(request.argv),
            "workspace": str(request.workspace),
            "env": request.env,
            "out_dir": str(run_out),
            "timeout_s": request.timeout_s,
            "grace": request.grace,
            "marker": request.marker,
            "network": request.network,
            "gpu": request.gpu,
            "ro_binds": [str(p) for p in request.ro_binds],
            "max_processes": request.max_processes,
            "sample_interval": request.sample_interval,
            "sandbox": self.sandbox,
        }
        with os.fdopen(fd, "w") as fh:
            json.dump(job, fh, indent=1, sort_keys=True)
        return spec

    @staticmethod
    def _save(run: _Tracked) -> None:
        record: _JobRecord = {
            "job_id": run.job_id,
            "log": None if run.log is None else str(run.log),
            "workspace": str(run.request.workspace),
            "attempts": run.attempts,
        }
        write_atomic(
            run.job_dir / "job.json", (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()
        )

    # -- waiting ----------------------------------------------------------------------------

    def query(self, job_id: str) -> _JobState:
        """One job's state (see :meth:`query_many`)."""
        return self.query_many([job_id]).get(job_id) or _JobState(
            "UNKNOWN", "the controller no longer knows the job"
        )

    def query_many(self, job_ids: Sequence[str]) -> dict[str, _JobState]:
        """The states of ``job_ids`` (array tasks ``A_i`` or plain ids) in two calls at most:
        ``squeue`` for what the controller still queues, ``scontrol show job`` of the
        arrays for what ended. An id neither knows is missing from the result."""
        arrays = sorted({job_id.partition("_")[0] for job_id in job_ids})
        found: dict[str, _JobState] = {}
        proc = self.runner(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i|%T|%r|%N"])
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                job, state, reason, node = [*line.split("|", 3), "", "", ""][:4]
                found[job.strip()] = _JobState(state, "" if reason == "None" else reason, node)
        for array in sorted({j.partition("_")[0] for j in job_ids if j not in found}):
            proc = self.runner(["scontrol", "show", "job", "-o", array])
            if proc.returncode != 0:
                continue
            for line in proc.stdout.splitlines():
                fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
                if "JobState" not in fields:
                    continue
                job = fields.get("JobId", "")
                if fields.get("ArrayJobId") and fields.get("ArrayTaskId"):
                    job = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
                reason = fields.get("Reason", "")
                found.setdefault(
                    job,
                    _JobState(
                        fields["JobState"],
                        "" if reason == "None" else reason,
                        fields.get("NodeList", "").replace("(null)", ""),
                        fields.get("ExitCode", ""),
                    ),
                )
        return found

    def _wait_all(self, runs: list[_Tracked]) -> None:
        """Poll until every run's job has ended and its output is made; a stop cancels
        every job of the batch by id; progress goes out as ``jobs-progress`` events."""
        stop = runs[0].request.stop_event if runs else None
        grace = max((r.request.grace for r in runs), default=30.0)
        cancelled_at: float | None = None
        delay = FIRST_POLL_S
        shown: tuple[int, int, int] | None = None
        while active := [r for r in runs if not r.done]:
            states = self.query_many([r.job_id for r in active if r.job_id])
            changed = False
            resubmit: list[_Tracked] = []
            for run in active:
                assert run.job_id is not None
                st = states.get(run.job_id) or _JobState(
                    "UNKNOWN", "the controller no longer knows the job"
                )
                if st.state != run.state:
                    emit(
                        "run-job-state",
                        run=run.key,
                        job_id=run.job_id,
                        state=st.state,
                        reason=st.reason,
                        node=st.node,
                    )
                    run.state, changed = st.state, True
                if st.state not in ACTIVE_STATES:
                    self._ended(run, st, resubmit)
                elif st.state == "PENDING" and cancelled_at is None:
                    self._check_pending(run, st)
                if st.state != "PENDING" or st.reason == ARRAY_LIMIT_REASON:
                    run.pending_since = time.monotonic()
            if resubmit:
                self._submit(resubmit)
            live = [r for r in runs if not r.done and r.job_id]
            if stop is not None and stop.is_set() and live:
                if cancelled_at is None:
                    self._cancel(live)
                    cancelled_at = time.monotonic()
                elif time.monotonic() - cancelled_at > grace + 30:
                    self.runner(["scancel", *(r.job_id for r in live if r.job_id)])
            counts = (
                sum(1 for r in runs if not r.done and r.state in {"", "PENDING", "CONFIGURING"}),
                sum(
                    1 for r in runs if not r.done and r.state not in {"", "PENDING", "CONFIGURING"}
                ),
                sum(1 for r in runs if r.done),
            )
            if counts != shown:
                emit(
                    "jobs-progress",
                    queued=counts[0],
                    running=counts[1],
                    finished=counts[2],
                    total=len(runs),
                )
                shown = counts
            if all(r.done for r in runs):
                return
            # A run whose result is on disk is ending: poll fast until Slurm says it ended.
            ending = {id(r) for r in runs if not r.done and _has_result(r)}
            fast = changed or bool(ending)
            delay = FIRST_POLL_S if fast else min(delay * 1.5, self.options.poll_interval)
            self._sleep(delay, runs, ending)

    @staticmethod
    def _sleep(delay: float, runs: list[_Tracked], ending: set[int]) -> None:
        """Sleep ``delay`` seconds, or less: until a run writes its result (a stat of a
        shared file every 50 ms costs the controller nothing, unlike a poll)."""
        end = time.monotonic() + delay
        while (left := end - time.monotonic()) > 0:
            if any(not r.done and id(r) not in ending and _has_result(r) for r in runs):
                return
            time.sleep(min(RESULT_WATCH_S, left))

    def _cancel(self, live: list[_Tracked]) -> None:
        """Cancel by job id, never by name: a queued job outright; a running one gets TERM
        (the node side and the run), so the node side stops the run with its grace period
        and records it interrupted (the hard cancel follows when that does not end it)."""
        queued = [r.job_id for r in live if r.job_id and r.state in {"", "PENDING"}]
        running = [r.job_id for r in live if r.job_id and r.state not in {"", "PENDING"}]
        if queued:
            self.runner(["scancel", *queued])
        if running:
            # --full: the batch shell (the node side, which marks the run interrupted and
            # KILLs what is left after the grace period) as well as the run. --batch
            # alone signals only the shell's children: the run died, the node side never
            # knew, and a run whose script went on after its killed command sealed as ok.
            self.runner(["scancel", "--batch", "--full", "--signal=TERM", *running])

    def _check_pending(self, run: _Tracked, st: _JobState) -> None:
        """A pending reason that never clears, or pending past --pending-timeout: cancelled
        and reported now instead of waited on."""
        never = st.reason in NEVER_SCHEDULED
        waited = time.monotonic() - run.pending_since
        timeout = self.options.pending_timeout
        if not never and (timeout is None or waited <= timeout):
            return
        assert run.job_id is not None
        self.runner(["scancel", run.job_id])
        why = st.reason if never else f"still pending after {waited:.0f} s ({st.reason})"
        self._ended(run, _JobState("NOT_SCHEDULED", why), [])

    def _ended(self, run: _Tracked, final: _JobState, resubmit: list[_Tracked]) -> None:
        """The job ended: collect its result, or resubmit it (an infrastructure end, within
        the bound, never after a stop), or make the scheduler's outcome."""
        assert run.job_id is not None
        run.attempts[-1:] = [
            {
                **(run.attempts[-1] if run.attempts else {}),
                "job_id": run.job_id,
                "state": final.state,
                "reason": final.reason,
                "node": final.node,
            }
        ]
        self._save(run)
        if run.adopt is not None:
            # Only now that the job has ended: its files replace the fresh workspace.
            self._adopt_workspace(run.adopt, run.request.workspace)
            run.adopt = None
        stopped = run.request.stop_event.is_set()
        result = run.job_dir / "run" / "result.json"
        # A node that failed (or a preemption) stops the run through the node side, which
        # still writes its result: a run stopped so did not fail on its own merits.
        lost = final.state in INFRA_STATES and (
            not result.is_file() or _result_kind(result) == "interrupted"
        )
        if result.is_file() and not lost:
            self._finish(run, self._collect(run, final))
        elif lost and len(run.attempts) <= self.options.max_resubmits and not stopped:
            emit("run-resubmit", run=run.key, job_id=run.job_id, state=final.state)
            run.job_id = None
            resubmit.append(run)
        else:
            self._finish(run, self._scheduler_outcome(run, final))

    @staticmethod
    def _finish(run: _Tracked, output: RunOutput) -> None:
        run.output, run.done = output, True

    def _still_useful(self, job_id: str, job_dir: Path) -> bool:
        """A previous job is worth attaching to: still queued/running, or finished with a
        result on disk."""
        result = job_dir / "run" / "result.json"
        if result.is_file():
            # A run the interrupted auditor stopped is run again, not collected.
            return _result_kind(result) != "interrupted"
        return self.query(job_id).state in {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"}

    @staticmethod
    def _adopt_workspace(old: Path, new: Path) -> None:
        """The collected job ran in the killed auditor's workspace: its files (outputs the
        auditor copies next) replace the resumed run's fresh copy."""
        if not old.is_dir() or old == new:
            return
        if new.exists():
            shutil.rmtree(new)
        shutil.copytree(old, new, symlinks=True)
        if old.parent.name.startswith("rb-run-"):
            shutil.rmtree(old.parent, ignore_errors=True)

    # -- results ----------------------------------------------------------------------------

    def _collect(self, run: _Tracked, final: _JobState) -> RunOutput:
        request = run.request
        run_out = run.job_dir / "run"
        data: JobResult = json.loads((run_out / "result.json").read_text())
        # Every file the node side wrote is the run's evidence (logs, the combined stream,
        # timeline, node.json); result.json is this round trip's own.
        for src in sorted(run_out.iterdir()):
            if src.name != "result.json" and src.is_file() and not src.is_symlink():
                shutil.copyfile(src, request.run_dir / src.name)
        self._copy_scheduler_log(run)
        completed = completed_from_json(data["completed"], request.run_dir)
        termination = completed.termination
        if termination.kind == "interrupted" and not request.stop_event.is_set():
            # Not our cancel: Slurm signalled the job ahead of its time limit.
            completed = dataclasses.replace(
                completed,
                termination=Termination(
                    "timeout",
                    termination.returncode,
                    termination.signal,
                    f"slurm time limit: stopped before the job's limit ({final.state})",
                ),
            )
        stored = data.get("peaks")
        peaks = Peaks(**stored) if stored else None
        return RunOutput(
            completed,
            peaks,
            data["isolation"],
            _placement(run.job_id, data.get("node") or final.node, final, run.attempts),
        )

    @staticmethod
    def _copy_scheduler_log(run: _Tracked) -> None:
        log = run.log or run.job_dir / f"slurm-{run.job_id}.out"
        if log.is_file():
            shutil.copyfile(log, run.request.run_dir / "scheduler.log")

    def _scheduler_outcome(self, run: _Tracked, final: _JobState) -> RunOutput:
        """The job ended without the run's result: the scheduler's own verdict."""
        self._copy_scheduler_log(run)
        if run.request.stop_event.is_set():
            kind = "interrupted"
            text = f"interrupted: slurm {final.state}"
        elif final.state == "TIMEOUT":
            kind, text = "timeout", "slurm TIMEOUT: the job's time limit"
        elif final.state == "NOT_SCHEDULED":
            kind, text = "scheduler", f"slurm: not scheduled: {final.reason}"
        else:
            kind = "scheduler"
            text = f"slurm {final.state}" + (f": {final.reason}" if final.reason else "")
        return self._outcome(run, Termination(kind, None, None, text), final)  # type: ignore[arg-type]

    def _outcome(self, run: _Tracked, termination: Termination, final: _JobState) -> RunOutput:
        request = run.request
        empty = hashlib.sha256(b"").hexdigest()
        captures = []
        for stream in ("stdout", "stderr"):
            path = request.run_dir / f"{stream}.log"
            if not path.exists():
                path.write_bytes(b"")
            captures.append(StreamCapture(path, 0, 0, empty, False))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        completed = Completed(
            argv=tuple(request.argv),
            termination=termination,
            stdout=captures[0],
            stderr=captures[1],
            wall_s=0.0,
            cpu_user_s=0.0,
            cpu_sys_s=0.0,
            started_at=now,
            finished_at=now,
            pid=0,
            survivors_killed=0,
        )
        return RunOutput(
            completed, None, "slurm", _placement(run.job_id, final.node, final, run.attempts)
        )


def _has_result(run: _Tracked) -> bool:
    """Whether the run's node side has written its ``result.json`` (the run ended)."""
    return bool(run.job_id) and (run.job_dir / "run" / "result.json").is_file()


def _result_kind(result: Path) -> str:
    """The termination kind in a node's ``result.json``."""
    data: JobResult = json.loads(result.read_text())
    return str(data["completed"]["termination"]["kind"])


def completed_to_json(completed: Completed) -> dict[str, Any]:
    """The node side's half of the round trip: every field, each stream capture's path as
    its file name (the auditor's copy lives in another directory)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(completed):
        value = getattr(completed, f.name)
        if isinstance(value, StreamCapture):
            out[f.name] = {**dataclasses.asdict(value), "path": value.path.name}
        elif isinstance(value, Termination):
            out[f.name] = dataclasses.asdict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def completed_from_json(data: dict[str, Any], run_dir: Path) -> Completed:
    """:func:`completed_to_json` read back, with each capture's path in ``run_dir``."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Completed):
        if f.name not in data:
            continue  # a field the node's rb did not have keeps its default
        value = data[f.name]
        if isinstance(value, dict) and "sha256" in value and "path" in value:
            values[f.name] = StreamCapture(**{**value, "path": run_dir / Path(value["path"]).name})
        elif f.name == "termination":
            values[f.name] = Termination(**value)
        elif f.name == "argv":
            values[f.name] = tuple(value)
        else:
            values[f.name] = value
    return Completed(**values)


def slurm_available(runner: Runner = _run) -> tuple[bool, str]:
    """Whether the Slurm client commands work here, and what ``sinfo`` says (or why not)."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False, "sbatch/sinfo not on PATH"
    try:
        proc = runner(["sinfo", "-h", "-o", "%P %a %D %G"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"sinfo: {exc}"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["sinfo failed"])[-1]
    return True, proc.stdout.strip()
